"""Hydra plugins of areal-conf: the validating ``areal`` launcher, the ``areal_layouts``
sweeper, and ``areal_configs``, which gives every Hydra app the ``areal_schema`` config and
the ``areal.`` resolvers. Hydra finds them by scanning this namespace package and, from 1.4
on, through the ``hydra.plugins`` entry points. Public modules stay light; the work is in
``_core`` and ``_sweeper_core``, imported when a sweep runs."""
