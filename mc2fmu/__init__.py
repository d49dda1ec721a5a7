"""mc2fmu: multibody simulation exports -> natural coordinates -> learned minimal
coordinates -> FMU.

Subpackages by pipeline stage; data flows one way, top to bottom:

* :mod:`mc2fmu.mechanics`   mechanism file, natural coordinates, rotations
* :mod:`mc2fmu.data`        pose exports, the NC dataset (``ingest``), tool adapters (MuJoCo)
* :mod:`mc2fmu.models`      trained reduced models at run time (numpy): the model protocol and
                            kinds, step maps, envelope, the versioned artifact, ``simulate``
* :mod:`mc2fmu.reducers`    dataset -> reduced model: the reducer interface and registry,
                            ``autoencoder`` (torch), ``node`` (torch), ``local_pca`` (numpy)
* :mod:`mc2fmu.fmu`         model directory -> FMU: variables, model descriptions, backends
                            ``python`` and ``native``, templates, the fmpy runner
* :mod:`mc2fmu.validation`  ``simulate`` and ``validate`` against reference runs, report
* :mod:`mc2fmu.control`     ``linearize`` (exact A, B, C, D) and the CasADi export
* :mod:`mc2fmu.pipeline`    the stages chained: ``train``, ``convert``, ``demo``
* :mod:`mc2fmu.cli`         the ``mc2fmu`` command (thin)
* :mod:`mc2fmu.errors`      the one error hierarchy; :mod:`mc2fmu.files` shared file helpers

Nothing after training imports torch or onnx: those stages read a model directory only.
"""

__version__ = "0.2.0"

from .errors import Mc2fmuError  # noqa: E402

__all__ = ["Mc2fmuError", "__version__"]
