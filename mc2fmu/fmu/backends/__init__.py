"""FMU backends, registered in :data:`mc2fmu.capabilities.BACKENDS` and imported when used."""
