"""The one exception type of areal-conf, rendered like a compiler diagnostic."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from areal_conf.hints import Fix, Hint, Sentence, as_hint


class AllocationError(ValueError):
    """A rejected allocation: what is wrong, where, and how to fix it.

    ``spec`` is the offending input, ``position`` the 0-based index of the first
    offending character (``None`` when the error concerns the whole input), ``length``
    how many characters the caret underlines, ``hint`` the fix as printed (``advice``:
    the same as data, a :class:`areal_conf.hints.Hint`, where it offers overrides),
    ``key`` the config key
    the input came from once :meth:`with_context` has named it, ``variable`` the
    environment variable it came from (see :func:`from_variable`), ``rule`` the id of
    the rule of a config that refused it (``colocation``; docs/rules.md lists them),
    printed as the message's last line, and ``fixes`` each fix of the hint that passes
    the whole check of that config, as the overrides to apply (``("++enable_offload=true",)``;
    empty where the hint's fixes were not checked).
    """

    key: str | None = None
    variable: str | None = None
    rule: str | None = None
    fixes: tuple[tuple[str, ...], ...] = ()
    advice: Hint | None = None

    def __init__(
        self,
        reason: str,
        spec: object = None,
        position: int | None = None,
        *,
        length: int = 1,
        hint: str | Hint | Fix | Sentence = "",
    ) -> None:
        self.reason = reason
        self.spec = spec
        self.position = position
        self.length = max(1, length)
        if isinstance(hint, str):
            self.advice, self.hint = None, hint
        else:
            self.advice = as_hint(hint)
            self.hint = self.advice.text()
        super().__init__(self._render())

    def _render(self) -> str:
        lines = [self.reason]
        if isinstance(self.spec, str) and len(self.spec) <= 200:
            # One printable character per input character keeps the caret aligned.
            lines.append("    " + "".join(c if c.isprintable() else "?" for c in self.spec))
            if self.position is not None:
                lines.append("    " + " " * self.position + "^" * self.length)
        elif isinstance(self.spec, str):
            near = self.position or 0
            window = self.spec[max(0, near - 30) : near + 30]
            lines.append(f"    {window!r} (near character {near} of {len(self.spec)})")
        elif self.spec is not None:
            try:
                shown = repr(self.spec)
            except Exception:  # a broken object's repr: its type still says what it was
                shown = f"<a {type(self.spec).__name__}>"
            if len(shown) > 80:
                shown = shown[:60] + f"... ({len(shown)} characters)"
            lines.append("    " + shown)
        if self.hint:
            lines.append("hint: " + self.hint)
        if self.rule:
            lines.append(f"rule: {self.rule}")
        return "\n".join(lines)

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from its fields, whatever its class's __init__ takes (an error crosses
        # processes in a launcher's results).
        return (_rebuilt, (type(self), dict(self.__dict__)))

    def _changed(self, **fields: object) -> AllocationError:
        """A copy of this error (of its own class) with ``fields`` changed."""
        return _rebuilt(type(self), {**self.__dict__, **fields})

    def with_hint(self, hint: str | Hint) -> AllocationError:
        """The same error with another hint (its fixes spelled for the config at hand)."""
        if isinstance(hint, str):
            return (
                self
                if hint == self.hint and self.advice is None
                else self._changed(hint=hint, advice=None)
            )
        if hint == self.advice:
            return self
        return self._changed(hint=hint.text(), advice=hint)

    def with_fixes(self, fixes: tuple[tuple[str, ...], ...]) -> AllocationError:
        """The same error with ``fixes``, the overrides of each fix that passes."""
        return self if fixes == self.fixes else self._changed(fixes=fixes)

    def with_rule(self, rule: str) -> AllocationError:
        """The same error, as refused by the rule with id ``rule`` (its last line says so)."""
        return self if rule == self.rule else self._changed(rule=rule)

    def with_context(self, key: str) -> AllocationError:
        """The same error, its first line prefixed with the config key it came from.

        An error that names its key already is returned as it is: the innermost caller
        knows the key best (e.g. an inherited backend), and one prefix is enough.
        """
        if self.key is not None:
            return self
        return self._changed(reason=f"{key}: {self.reason}", key=key)


def _rebuilt(kind: type[AllocationError], fields: dict[str, Any]) -> AllocationError:
    """An error of class ``kind`` with ``fields``, its message rendered from them."""
    err = kind.__new__(kind)
    err.__dict__.update(fields)
    err.args = (err._render(),)
    return err


class BackendSyntaxError(AllocationError):
    """An AllocationError in the text of one backend string: ``spec`` is the text and
    ``span`` the characters at fault (None: the string as a whole, e.g. a size too
    large). Raised by the parser; a config's check adds the key it came from."""

    def __init__(
        self,
        reason: str,
        spec: str = "",
        position: int | None = None,
        *,
        length: int = 1,
        hint: str | Hint | Fix | Sentence = "",
    ) -> None:
        super().__init__(reason, spec, position, length=length, hint=hint)

    @property
    def span(self) -> tuple[int, int] | None:
        """The characters at fault, as ``spec[start:end]``."""
        if self.position is None:
            return None
        return self.position, min(len(str(self.spec)), self.position + self.length)


class ConfigError(AllocationError):
    """An AllocationError about a config as a whole (no input text to point into): the
    reason, and the fix as ``hint``."""

    def __init__(self, reason: str, *, hint: str | Hint | Fix | Sentence = "") -> None:
        super().__init__(reason, hint=hint)


class ErrorAtKey(ConfigError):
    """A ConfigError at one key of a config (``key``), which an override may have
    written: :meth:`given_by` finds that override and :meth:`for_override` is the same
    error with its fix written for it."""

    def given_by(self, overrides: Sequence[str]) -> str | None:
        """The override of ``overrides`` that writes this error's key (or a key under
        it), if one does."""
        key = self.key or ""
        return next((o for o in overrides if "=" in o and within(override_key(o), key)), None)

    def for_override(self, override: str) -> ErrorAtKey:
        """The same error, its fix written for the override ``override`` that wrote the
        key."""
        return self


def container_said(value: object) -> str | None:
    """How a message names a value that is no plain value: ``null``, ``a section``, ``a
    list``; None for a plain value (the message shows it itself)."""
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "a section"
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return "a list"
    return None


def override_key(override: str) -> str:
    """The key an override writes (``++a.b=1``: ``a.b``)."""
    return override.partition("=")[0].lstrip("+~")


def within(key: str, section: str) -> bool:
    """Whether ``key`` is ``section`` or a key under it."""
    return key == section or key.startswith(section + ".")


@contextmanager
def from_variable(name: str) -> Iterator[None]:
    """Within the block, an AllocationError is about the value of the environment
    variable ``name``: entry points head it as a setting, not as a config."""
    try:
        yield
    except AllocationError as err:
        err.variable = err.variable or name
        raise
