"""The data stage: simulation exports in, one natural-coordinate dataset out.

* :mod:`.poses`     pose exports (one run per file): reading, checking, writing
* :mod:`.dataset`   ``mc2fmu ingest``: mechanism + runs -> NC dataset (.npz), and its reader
* :mod:`.adapters`  tool-specific readers (MuJoCo) -> mechanism + pose exports
"""
