"""Trained reduced models at run time (numpy; no torch, no onnx).

The reducers (:mod:`mc2fmu.reducers`) turn a dataset into one of these models; everything
after training (``simulate``, the FMU backends, validation, control) runs them from here.

* :mod:`.model`        the :class:`~.model.ReducedModel` protocol and the run-time model kinds
* :mod:`.manifold`     the decoder-manifold dynamics (numpy and torch alike) and its run-time model
* :mod:`.mlp`          multilayer perceptrons with explicit Jacobian and Hessian propagation
* :mod:`.array_ops`    the few functions that differ between numpy and torch
* :mod:`.charted`      models on a manifold model's coordinates: the neural ODE and the local-PCA ROM
* :mod:`.node`         the MBD-NODE network and its RK4 step
* :mod:`.local_linear` the local-PCA piecewise-linear dynamics
* :mod:`.terms`        identified force terms (``train --identify``)
* :mod:`.spring_laws`  learned laws of recorded force elements (``law = "recorded"``)
* :mod:`.step_maps`    the one-step maps (registry)
* :mod:`.envelope`     the training envelope
* :mod:`.artifact`     the model directory: schema, writer and the checking reader
* :mod:`.simulate`     rolling a model out on a run's inputs
"""
