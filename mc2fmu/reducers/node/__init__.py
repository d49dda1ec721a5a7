"""The ``node`` reducer (seed 003, the MBD-NODE baseline): a neural ODE ``qdd = f(q, qd, u)``
on minimal coordinates, trained through one RK4 step (:mod:`.training`); the run-time model
is :class:`mc2fmu.models.node.NodeDynamics`."""
