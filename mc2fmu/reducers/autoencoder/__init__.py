"""The autoencoder reducer (seed 000).

* :mod:`.config`       its options (:class:`~.config.TrainConfig`), also its CLI options
* :mod:`.network`      torch MLPs with explicit value / J / H propagation
* :mod:`.torch_model`  decoder, encoders, the trainable model; conversion to the run-time model
* :mod:`.samples`      the training samples: windows, angle-type coordinates, the affine hull
* :mod:`.loss`         the loss: one object per term, their weighted sum
* :mod:`.trainer`      the model for a dataset, one training run (Adam, then L-BFGS)
* :mod:`.lbfgs`        the L-BFGS optimiser; :mod:`.schedule` its share of triplets and stopping
* :mod:`.checkpoints`  the checkpoint file and its checks on resume
* :mod:`.identify`     ``--identify``: sparse terms for forces the mechanism file lacks
* :mod:`.graphs`       the model's ONNX graphs (float64, checked against torch)
* :mod:`.reducer`      the registered reducer: dataset -> model artifact
"""
