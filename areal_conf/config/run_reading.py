"""A config as one validation reads it: :class:`Reading`, the composed config beside its
typed reading, the AReaL rules and areal-conf's settings, and what follows from them once
(the model's shape)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Any

from areal_conf.areal.versions import RulesChoice
from areal_conf.config.edits import with_overrides
from areal_conf.config.run_config import RunConfig
from areal_conf.model.shape import ShapeSource, resolve_model
from areal_conf.settings import Settings


@dataclass(frozen=True)
class Reading:
    """A config as one validation reads it: the composed config, read once into ``run``
    under the AReaL rules ``choice``, with areal-conf's ``settings``. ``edits`` are the
    overrides ``run`` has that ``cfg`` has not (a sweep's layout set on the config as read)."""

    cfg: Any
    run: RunConfig
    choice: RulesChoice
    settings: Settings
    edits: tuple[str, ...] = ()
    #: What follows from the config and from no backend (the model's shape), found once
    #: and shared with the readings :meth:`with_backends` makes.
    shared: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def with_backends(self, run: RunConfig, edits: tuple[str, ...]) -> Reading:
        """This reading with ``run``, the config as read with ``edits`` applied, each of
        which sets an engine's backend (:func:`areal_conf.config.edits.edited_run`)."""
        return replace(self, run=run, edits=(*self.edits, *edits))  # ``shared`` too

    @functools.cached_property
    def config(self) -> Any:
        """The composed config ``run`` was read from: ``cfg`` with ``edits`` applied
        (made when first asked for, by a fix's check)."""
        return with_overrides(self.cfg, self.edits) if self.edits else self.cfg

    @property
    def model(self) -> ShapeSource:
        """The model's shape, found once: from the settings (``--model``,
        ``AREAL_CONF_MODEL``), the ``model`` section of areal-conf's configs, or
        ``actor.path`` (:func:`areal_conf.model.shape.resolve_model`)."""
        found = self.shared.get("model")
        if found is None:
            actor = self.run.actor
            found = self.shared["model"] = resolve_model(
                dict(self.run.model),
                actor.path if actor is not None else None,
                self.settings.model,
                self.settings.model_from,
            )
        return found
