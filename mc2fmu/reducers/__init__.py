"""The reducers: natural-coordinate dataset -> reduced model (:mod:`.base`: the interface and
the registry; every reducer returns a :mod:`mc2fmu.models` artifact).

* :mod:`.autoencoder`  the physics-informed autoencoder (seed 000), learnt or known coordinates
* :mod:`.node`         the MBD-NODE neural ODE baseline (seed 003) on a chart's coordinates
* :mod:`.local_pca`    the local-PCA piecewise-linear ROM (seed 002) on a chart's coordinates
* :mod:`.chart`        the chart (minimal coordinates) the last two run on
"""
