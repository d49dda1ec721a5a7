"""Reference mechanisms for mc2fmu, simulated with Exudyn (exact index-3 constraints).

Four mechanisms (``four_bar``, ``slider_crank``, ``two_bar``, ``macpherson``), each run for
10 s at a 1 ms output under four excitations: ``train``, ``low`` (train at half amplitude),
``shape`` (another waveform whose motion stays inside train's range) and ``high`` (train
scaled 1.7x: the motion leaves train's range).  See :mod:`examples.mechanisms` for the
geometry of each and :mod:`examples.reference` for the API::

    from examples.reference import MECHANISMS, EXCITATIONS, mechanism_dict, simulate, write_example

Regenerate the mechanism files and runs (deterministic; runs/ is not committed)::

    python -m examples.generate [NAMES...] [--out DIR] [--jobs N]
"""
