"""An AReaL training command: read as AReaL reads it, checked, run and swept."""
