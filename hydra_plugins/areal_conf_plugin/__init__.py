"""Hydra plugins of areal-conf: the validating ``areal`` launcher and the
``areal_layouts`` sweeper. Public modules stay light; the work is in ``_core`` and
``_sweeper_core``, imported when a sweep runs."""
