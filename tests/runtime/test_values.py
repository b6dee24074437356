"""``fast_init`` gives a frozen dataclass a faster ``__init__`` and changes nothing else about its instances."""

import dataclasses
import inspect

import pytest

from barriersim.runtime.events import Buffer
from barriersim.runtime.values import fast_init


@dataclasses.dataclass(frozen=True)
class _Plain:
    a: int
    b: tuple = ()
    c: list = dataclasses.field(default_factory=list)


@fast_init
@dataclasses.dataclass(frozen=True)
class _Value:
    a: int
    b: tuple = ()
    c: list = dataclasses.field(default_factory=list)


def test_instances_equal_hash_compare_and_replace_as_the_generated_init_makes_them():
    fast, plain = _Value(1, (2,)), _Plain(1, (2,))
    assert (fast.a, fast.b, fast.c) == (plain.a, plain.b, plain.c) == (1, (2,), [])
    assert fast == _Value(1, (2,), []) and fast != _Value(1, (3,))
    assert _Value(1, c=[5]).c == [5] and _Value(1).c is not _Value(1).c  # a fresh default per instance
    assert dataclasses.replace(fast, a=7) == _Value(7, (2,))
    assert repr(fast) == "_Value(a=1, b=(2,), c=[])"
    assert hash(Buffer((), 3, 1)) == hash(Buffer((), 3, 1)) and Buffer((), 3) == Buffer((), 3, 0)
    fast_params, plain_params = inspect.signature(_Value).parameters, inspect.signature(_Plain).parameters
    assert list(fast_params) == list(plain_params) == ["a", "b", "c"]
    assert fast_params["b"].default == plain_params["b"].default == ()


def test_instances_stay_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        _Value(1).a = 2  # type: ignore[misc]


def test_refuses_classes_it_would_change():
    @dataclasses.dataclass(frozen=True)
    class WithPostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass
    class Mutable:
        a: int

    for cls in (WithPostInit, Mutable):
        with pytest.raises(TypeError, match="fast_init"):
            fast_init(cls)
