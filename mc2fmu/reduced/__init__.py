"""What every reduced model shares at run time (numpy; no torch, no onnx).

* :mod:`.model`      the :class:`~.model.ReducedModel` protocol and the run-time model kinds
* :mod:`.manifold`   the decoder-manifold dynamics (numpy and torch alike) and its run-time model
* :mod:`.step_maps`  the one-step maps (registry)
* :mod:`.envelope`   the training envelope
* :mod:`.artifact`   the model directory: schema, writer and the checking reader
* :mod:`.simulate`   rolling a model out on a run's inputs
"""
