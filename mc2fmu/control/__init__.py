"""Reduced models for control design: linearization at an operating point (``mc2fmu linearize``)."""
