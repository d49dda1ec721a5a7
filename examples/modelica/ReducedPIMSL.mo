within;
model ReducedPIMSL "The exported reduced model with Modelica Standard Library connectors (for tools that have the MSL)"
  /* Not checked here: the MSL cannot be installed on the machine that builds mc2fmu.  A thin
     wrapper: the reduced model's input and outputs as RealInput / RealOutput connectors, to
     connect it in a block diagram.  Export the model as ReducedModel.mo beside this file. */
  Modelica.Blocks.Interfaces.RealInput tau "crank torque, N.m";
  Modelica.Blocks.Interfaces.RealOutput q "reduced coordinate q[1]";
  Modelica.Blocks.Interfaces.RealOutput qd "its rate qd[1]";
  Modelica.Blocks.Interfaces.RealOutput envelope "0 inside the training envelope";
  ReducedModel plant "the exported reduced model";
equation
  plant.tau = tau;
  q = plant.q[1];
  qd = plant.qd[1];
  envelope = plant.envelope;
end ReducedPIMSL;
