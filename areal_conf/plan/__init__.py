"""The plan: the engines AReaL builds, their GPUs and placement, and its text output."""
