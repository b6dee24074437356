"""``fast_init``: a frozen dataclass built per event on the hot path gets an ``__init__`` that stores its fields in the
instance's ``__dict__`` directly, instead of the generated one's ``object.__setattr__`` call per field (which frozen
dataclasses need to get past their own ``__setattr__``). The instances are the same: equal, hashed, compared and
``dataclasses.replace``-d as before, and still frozen. See docs/simulator.md, "The cost of an event"."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def fast_init(cls: type[T]) -> type[T]:
    """``cls`` (a frozen dataclass without slots, ``__post_init__`` or fields outside ``__init__``) with the faster
    ``__init__``; its parameters, their order and defaults unchanged."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or hasattr(cls, "__slots__") or hasattr(cls, "__post_init__"):
        raise TypeError(f"fast_init: {cls.__name__} is not a frozen dataclass without slots and __post_init__")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if any(not f.init or f.kw_only for f in fields):
        raise TypeError(f"fast_init: {cls.__name__} has fields outside the positional __init__")
    namespace: dict[str, Any] = {}
    params_src, body = [], []
    for f in fields:
        if f.default is not dataclasses.MISSING:
            namespace[f"_default_{f.name}"] = f.default
            params_src.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{f.name}"] = f.default_factory
            namespace["_MISSING"] = dataclasses.MISSING
            params_src.append(f"{f.name}=_MISSING")
            body.append(f"    if {f.name} is _MISSING:\n        {f.name} = _factory_{f.name}()")
        else:
            params_src.append(f.name)
        body.append(f"    d[{f.name!r}] = {f.name}")
    source = f"def __init__(self, {', '.join(params_src)}):\n    d = self.__dict__\n" + "\n".join(body or ["    pass"])
    exec(source, namespace)  # noqa: S102 - generated from the dataclass's own field names, as dataclasses does
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = dict(cls.__init__.__annotations__)  # as the generated one's, for introspection
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
