"""The FMU stage: model directory -> FMU (no torch, no onnx at import).

* :mod:`.description`  the FMU's variables (the public contract) and model descriptions
* :mod:`.common`       what both backends share: templates (package data), identifiers
* :mod:`.export`       ``mc2fmu export`` and the backend registry
* :mod:`.backends`     ``python`` (pythonfmu + ONNX graphs) and ``native`` (generated C)
* :mod:`.runner`       running an FMU with fmpy in a fresh process
"""
