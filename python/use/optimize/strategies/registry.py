"""Strategies by name, so a new strategy plugs in without touching the planner or the config.

A strategy is a class with a pure `select(snapshot, config) -> Plan | None` method (None or an empty
plan = nothing to do), registered with `@register("Name", "Alias", ...)`. Names are what users write
in `use.optimization.type` / `use.optimization.strategies`; lookups ignore case and aliases map to the
canonical name, so `LeveledCompaction` (the guide's manual trigger) and `LeveledCompactionSelection`
(the guide's strategy name) are the same strategy. The built-in strategies register themselves when
`use.optimize.strategies` is imported; `get`/`canonical_name` make sure that has happened.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, runtime_checkable

from use.errors import InvalidArgumentError, UnknownStrategyError

if TYPE_CHECKING:
    from use.optimize.config import OptimizationConfig
    from use.optimize.plan import Plan


@runtime_checkable
class Strategy(Protocol):
    """What the planner needs from a strategy.

    `applies_to_qbeast` / `applies_to_delta` tell the planner's *default* chain where the strategy
    makes sense (an explicit chain runs whatever it is given; a strategy that does not apply returns
    None). `name` is set by `register`.
    """

    name: ClassVar[str]
    applies_to_qbeast: ClassVar[bool]
    applies_to_delta: ClassVar[bool]

    def select(self, snapshot: Any, config: OptimizationConfig) -> Plan | None: ...


# Any class with a `select` method registers; registering makes it a Strategy (it gains `name` and
# the `applies_to_*` defaults), so the decorator takes classes of any type.
_T = TypeVar("_T", bound=type[Any])
_CLASSES: dict[str, type[Strategy]] = {}  # canonical name -> class
_LOOKUP: dict[str, str] = {}  # lower-cased name or alias -> canonical name


def register(name: str, *aliases: str) -> Callable[[_T], _T]:
    """Class decorator: make the strategy available under `name` (and `aliases`)."""

    def deco(cls: _T) -> _T:
        if not callable(getattr(cls, "select", None)):
            raise InvalidArgumentError(f"strategy {name!r} ({cls.__name__}) has no select(snapshot, config) method")
        for n in (name, *aliases):
            owner = _LOOKUP.get(n.lower())
            if owner is not None and _CLASSES.get(owner) is not cls:
                raise InvalidArgumentError(f"strategy name {n!r} is already registered by {owner}")
        cls.name = name
        if not hasattr(cls, "applies_to_qbeast"):
            cls.applies_to_qbeast = True
        if not hasattr(cls, "applies_to_delta"):
            cls.applies_to_delta = True
        _CLASSES[name] = cls
        for n in (name, *aliases):
            _LOOKUP[n.lower()] = name
        return cls

    return deco


def unregister(name: str) -> None:
    """Remove a strategy and its aliases (tests that plug in a temporary strategy clean up with this)."""
    canon = _LOOKUP.get(name.lower())
    if canon is None:
        return
    _CLASSES.pop(canon, None)
    for alias in [a for a, c in _LOOKUP.items() if c == canon]:
        del _LOOKUP[alias]


def names() -> tuple[str, ...]:
    """Canonical names of every registered strategy, sorted."""
    return tuple(sorted(_CLASSES))


def canonical_name(name: str) -> str:
    """The canonical name for `name` or an alias (any case); UnknownStrategyError otherwise."""
    canon = _LOOKUP.get(str(name).lower())
    if canon is None:
        raise UnknownStrategyError(f"unknown optimization strategy {name!r}; known strategies: {', '.join(names())}")
    return canon


def get_class(name: str) -> type[Strategy]:
    return _CLASSES[canonical_name(name)]


def get(name: str) -> Strategy:
    """A ready instance of the strategy called `name` (strategies are stateless)."""
    return get_class(name)()
