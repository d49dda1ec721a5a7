"""The ``local-pca`` reducer (seed 002): k-means clusters of the natural coordinates, a PCA
basis per cluster and a linear reduced model in each (:mod:`.fit`); the run-time model is
:class:`mc2fmu.models.local_linear.LocalLinearModel`."""
