within;
model ReducedPI "PI position loop with velocity damping around an mc2fmu reduced model of the four-bar"
  /* Export the model beside this file first:
         mc2fmu export out/demo/four_bar.model --format modelica -o examples/modelica/ReducedModel.mo
     The loop drives the first input (the crank torque tau) so that plant.q[1] follows q_ref:
         tau = input_per_acceleration * (wn^2 e + ki integral(e) - 2 zeta wn qd[1]),  e = q_ref - q[1],
     a pole placement for the reduced coordinate's acceleration; input_per_acceleration is
     1 / (d der(qd[1]) / d tau), the inverse of `mc2fmu linearize`'s B entry (its sign matters:
     a learnt coordinate may turn either way).  The integral action takes the static load
     (gravity) and leaves no steady-state error.  Standard Modelica, no library. */
  parameter Real q_ref = 0.0 "setpoint of plant.q[1]";
  parameter Real input_per_acceleration = 1.0 "tau per unit of der(qd[1]) (1 / B of mc2fmu linearize)";
  parameter Real wn(unit = "1/s") = 15.0 "closed-loop bandwidth";
  parameter Real zeta = 1.0 "damping ratio of the velocity feedback";
  parameter Real ki(unit = "1/s3") = 675.0 "integral gain (wn^3 / 5)";
  ReducedModel plant "the exported reduced model";
  Real e "control error q_ref - plant.q[1]";
  Real ie(start = 0.0, fixed = true) "its integral";
equation
  e = q_ref - plant.q[1];
  der(ie) = e;
  plant.tau = input_per_acceleration * (wn^2 * e + ki * ie - 2.0 * zeta * wn * plant.qd[1]);
end ReducedPI;
