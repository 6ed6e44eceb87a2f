"""``frozen.quick_init``: the same object, the same signature and the same refusals as the dataclass's own ``__init__``."""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import pickle
from typing import Any

import pytest

from envelope_ci.frozen import quick_init

MODULES = ("envelope_ci.model", "envelope_ci.analysis.cases", "envelope_ci.analysis.channels", "envelope_ci.sources.parse",
           "envelope_ci.grading.assertions.base", "envelope_ci.grading.envelope", "envelope_ci.report.model")


def _quick_classes() -> list[type]:
    found = []
    for name in MODULES:
        for value in vars(importlib.import_module(name)).values():
            if isinstance(value, type) and value.__module__ == name and dataclasses.is_dataclass(value):
                code = getattr(value.__init__, "__code__", None)
                if code is not None and code.co_filename.startswith("<quick_init"):
                    found.append(value)
    return found


QUICK = _quick_classes()


def test_the_hot_classes_are_built_quickly() -> None:
    assert {c.__name__ for c in QUICK} >= {"Case", "Envelope", "Grade", "CaseResult", "Measure", "RawCase", "Answer", "Expectation", "Judgement",
                                          "CaseRow"}


def _plain_twin(cls: type) -> Any:
    """The same fields (types, defaults, factories) as a plain frozen dataclass: the ``__init__`` dataclasses made before ``quick_init``."""
    return dataclasses.make_dataclass(f"Plain{cls.__name__}", [(f.name, f.type, _copied(f)) for f in dataclasses.fields(cls)],
                                      frozen=True, slots="__slots__" in vars(cls))


def _copied(f: dataclasses.Field[Any]) -> dataclasses.Field[Any]:
    if f.default is not dataclasses.MISSING:
        return dataclasses.field(default=f.default)
    if f.default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=f.default_factory)
    return dataclasses.field()


@pytest.mark.parametrize("cls", QUICK, ids=lambda c: c.__name__)
def test_signature_and_values_are_the_dataclasses(cls: type) -> None:
    twin = _plain_twin(cls)
    ours, theirs = inspect.signature(cls.__init__).parameters, inspect.signature(twin.__init__).parameters
    assert list(ours) == list(theirs)
    for name, param in ours.items():
        assert param.kind == theirs[name].kind
        assert repr(param.default) == repr(theirs[name].default)
        if repr(theirs[name].default) != "<factory>":
            assert param.default is theirs[name].default
    assert cls.__init__.__annotations__ == twin.__init__.__annotations__ and cls.__init__.__module__ == cls.__module__
    fields = dataclasses.fields(cls)
    required = [f for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    given = {f.name: object() for f in required}
    made, reference = cls(**given), twin(**given)
    for f in fields:
        assert getattr(made, f.name) == getattr(reference, f.name)
    every = {f.name: object() for f in fields}
    positional = cls(*every.values())
    assert all(getattr(positional, name) is value for name, value in every.items())
    if "__slots__" not in vars(cls):  # kept where object.__setattr__ keeps it, in field order (report.json's rows read it so)
        assert list(vars(positional).items()) == list(vars(twin(*every.values())).items()) == list(every.items())


@pytest.mark.parametrize("cls", QUICK, ids=lambda c: c.__name__)
def test_it_stays_frozen_replaceable_and_picklable(cls: type) -> None:
    fields = dataclasses.fields(cls)
    made = cls(*(f"v{i}" for i in range(len(fields))))
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, fields[0].name, "other")
    changed = dataclasses.replace(made, **{fields[0].name: "other"})
    assert getattr(changed, fields[0].name) == "other" and getattr(made, fields[0].name) == "v0"
    assert pickle.loads(pickle.dumps(made)) == made


def test_default_factories_make_a_fresh_value_each_time() -> None:
    from envelope_ci.model import Case

    first, second = Case("a", None, (), "f", 1, "d"), Case("b", None, (), "f", 1, "d")
    assert first.request == {} and first.request is not second.request
    given = {"temperature": 0}
    assert Case("c", None, (), "f", 1, "d", request=given).request is given


_BASE = dataclasses.make_dataclass("Base", [("a", int)], frozen=True, slots=True)
REFUSED: dict[str, Any] = {
    "a field behind a property": dataclasses.make_dataclass("Property", [("a", int, dataclasses.field(default=property()))], frozen=True),
    "its own __getattribute__": dataclasses.make_dataclass("Getattribute", [("a", int)], frozen=True,
                                                           namespace={"__getattribute__": lambda self, name: object.__getattribute__(self, name)}),
    **{f"a field named {name}, as the made __init__ names its own": dataclasses.make_dataclass("Clash", [("a", int), (name, int)], frozen=True)
       for name in ("self", "_quick_init_dict", "_set_a", "_FROM_FACTORY")},
    "not frozen": dataclasses.make_dataclass("NotFrozen", [("a", int)], slots=True),
    "a __post_init__": dataclasses.make_dataclass("AfterInit", [("a", int)], namespace={"__post_init__": lambda self: None},
                                                  frozen=True, slots=True),
    "keyword-only": dataclasses.make_dataclass("KeywordsOnly", [("a", int)], frozen=True, slots=True, kw_only=True),
    "a field not in __init__": dataclasses.make_dataclass("NotInInit", [("a", int), ("b", int, dataclasses.field(default=0, init=False))],
                                                          frozen=True, slots=True),
    "a base class's slot": dataclasses.make_dataclass("Inherits", [("b", int)], bases=(_BASE,), frozen=True, slots=True),
    "not a dataclass": int,
}


@pytest.mark.parametrize("why", list(REFUSED))
def test_it_refuses_what_it_cannot_copy_exactly(why: str) -> None:
    with pytest.raises(TypeError, match="quick_init takes"):
        quick_init(REFUSED[why])
