"""FMU backends, registered in :data:`mc2fmu.fmu.export.BACKENDS` and imported when used."""
