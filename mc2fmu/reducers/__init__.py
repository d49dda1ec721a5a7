"""The reducers: natural-coordinate dataset -> reduced model (:mod:`.base`: the interface and
the registry).

* :mod:`.autoencoder`  the physics-informed autoencoder (seed 000), learnt or known coordinates
"""
