"""mc2fmu: multibody simulation exports -> natural coordinates -> learned minimal
coordinates -> FMU.

Pipeline stages, one module each (data flows one way):

* :mod:`mc2fmu.mechanism`  the mechanism description (bodies, gravity, inputs)
* :mod:`mc2fmu.poses`      reading/writing pose exports (one run per file)
* :mod:`mc2fmu.natural`    natural coordinates: layout, mass matrix, generalized forces
* :mod:`mc2fmu.dataset`    ``ingest``: mechanism + runs -> NC dataset (.npz)
* :mod:`mc2fmu.adapters`   tool-specific readers (MuJoCo) -> mechanism + runs
* :mod:`mc2fmu.network`    MLPs with explicit value / Jacobian / Hessian propagation
* :mod:`mc2fmu.dynamics`   reduced dynamics (M_m, G_m, f_m) and the one-step maps
* :mod:`mc2fmu.model`      decoder, encoders and the reduced model
* :mod:`mc2fmu.train`      ``train``: dataset -> trained model artifact
* :mod:`mc2fmu.artifact`   the model directory (model.json + weights.npz)
* :mod:`mc2fmu.envelope`   the training envelope
* :mod:`mc2fmu.simulate`   ``simulate``: roll a model out on a run
* :mod:`mc2fmu.metrics`    accuracy metrics shared by simulate, validate and benchmarks
* :mod:`mc2fmu.onnx_export` the model's ONNX graphs (float64, checked against torch)
* :mod:`mc2fmu.fmu_description` the FMU's variable list and model descriptions (FMI 2, 3)
* :mod:`mc2fmu.export`     ``export``: model directory -> FMU (backend registry)
* :mod:`mc2fmu.native`     the native backend: generated C, compiled
* :mod:`mc2fmu.fmu_runner` running an FMU with fmpy in a fresh process
* :mod:`mc2fmu.validate`   ``validate``: FMU vs reference runs, JSON and HTML report
* :mod:`mc2fmu.pipeline`   ``convert`` and ``demo``: the stages chained
"""

__version__ = "0.1.0"

from .errors import Mc2fmuError  # noqa: E402

__all__ = ["Mc2fmuError", "__version__"]
