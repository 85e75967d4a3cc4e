"""Hydra plugins of areal-conf: the validating ``areal`` launcher."""
