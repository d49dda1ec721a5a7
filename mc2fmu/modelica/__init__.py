"""The reduced model as Modelica source (``mc2fmu export MODEL --format modelica``)."""
