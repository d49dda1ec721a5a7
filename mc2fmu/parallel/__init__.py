"""Independent work in parallel: seed ensembles (``train --seeds``) and batch conversions
(``mc2fmu batch``), on a process pool on this machine or on Ray (:mod:`.executors`)."""
