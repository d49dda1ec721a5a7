"""The validation stage: reduced models and FMUs against reference runs.

* :mod:`.metrics`   position NRMSE, rotation error, error over time
* :mod:`.simulate`  ``mc2fmu simulate``: a model directory rolled out on a run
* :mod:`.validate`  ``mc2fmu validate``: an FMU run by fmpy on runs
* :mod:`.report`    plots, ``index.html`` and ``results.json``
"""
