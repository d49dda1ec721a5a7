"""Tool-specific readers: turn one multibody tool's model and trajectories into mc2fmu's
tool-neutral inputs (a mechanism description and pose exports).

* :mod:`mc2fmu.data.adapters.mujoco`  MuJoCo (MJCF model + ``qpos``/``ctrl`` trajectories)

Each adapter imports its engine lazily and reports what it cannot convert as an
:class:`mc2fmu.errors.AdapterError` that names the offending item and says what to do.
"""
