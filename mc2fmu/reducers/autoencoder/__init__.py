"""The autoencoder reducer (seed 000).

* :mod:`.config`       its options (:class:`~.config.TrainConfig`), also its CLI options
* :mod:`.network`      torch MLPs with explicit value / J / H propagation
* :mod:`.torch_model`  decoder, encoders, the trainable model; conversion to the run-time model
* :mod:`.training`     the loss, Adam + L-BFGS, checkpoints
* :mod:`.graphs`       the model's ONNX graphs (float64, checked against torch)
* :mod:`.reducer`      the registered reducer: dataset -> model artifact
"""
