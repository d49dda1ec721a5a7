"""mc2fmu: multibody simulation exports -> natural coordinates -> learned minimal
coordinates -> FMU.

Pipeline stages, one module each (data flows one way):

* :mod:`mc2fmu.mechanism`  the mechanism description (bodies, gravity, inputs)
* :mod:`mc2fmu.poses`      reading/writing pose exports (one run per file)
* :mod:`mc2fmu.natural`    natural coordinates: layout, mass matrix, generalized forces
* :mod:`mc2fmu.dataset`    ``ingest``: mechanism + runs -> NC dataset (.npz)
"""

__version__ = "0.1.0"

from .errors import Mc2fmuError  # noqa: E402

__all__ = ["Mc2fmuError", "__version__"]
