"""``quick_init``: a frozen dataclass built at the speed of a mutable one.

A frozen dataclass's ``__init__`` stores each field with ``object.__setattr__(self, name,
value)``, a generic call that makes an argument tuple and looks the attribute up again: a
15-field ``Case`` took 2.9 us that way against 0.5 us for the same class unfrozen. A 100,000-case
run makes about a million of these objects (raw cases, their assertions, cases, answers,
grades, measures, results): about 2.5 s of its one busy core.

The ``__init__`` made here stores each field through its slot's own setter, found once: what
``object.__setattr__`` ends up calling, without the lookup (1.35-1.5 us for that ``Case``). In a
class without slots it stores each into the instance's ``__dict__``, in field order, which is
where ``object.__setattr__`` puts it (a report's 23-field ``CaseRow``: 7.4 us, 3.5 us this way).
The signature (annotations included), the defaults and the default factories are the
dataclass's; the class stays frozen (its ``__setattr__`` still refuses), ``dataclasses.replace``
goes through it, and pickling is untouched (it restores the slots or the ``__dict__`` as
before). Only classes this can copy exactly are taken: frozen, no ``__post_init__``, every field
its own positional ``__init__`` parameter; slotted, each slot its own; without slots, no field
behind a data descriptor and no ``__getattribute__`` of its own.
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any, TypeVar

T = TypeVar("T")

class _Factory:
    """Stands for "not given" where a field's default is made by its factory, as in dataclasses (and shown the same)."""

    def __repr__(self) -> str:
        return "<factory>"


_FROM_FACTORY = _Factory()
# The instance's ``__dict__`` in an ``__init__`` made for a class without slots.
_DICT = "_quick_init_dict"


def quick_init(cls: type[T]) -> type[T]:
    """Give ``cls`` (a ``@dataclass(frozen=True)``) an ``__init__`` that stores through its slots' setters, or into its ``__dict__``."""
    refused = TypeError(f"quick_init takes a frozen dataclass whose fields are its own positional __init__ parameters, not {cls.__qualname__}")
    params_of = getattr(cls, "__dataclass_params__", None)
    made = vars(cls).get("__init__")
    if params_of is None or not params_of.frozen or hasattr(cls, "__post_init__") or made is None:
        raise refused
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]  # a dataclass: it has its parameters
    slotted = "__slots__" in vars(cls)
    if list(inspect.signature(made).parameters)[1:] != [f.name for f in fields] or any(f.kw_only or _made_name(f.name) for f in fields):
        raise refused  # keyword-only, not in __init__, or named as one of the made __init__'s own names
    if slotted and any(f.name not in vars(cls) for f in fields):
        raise refused  # a slot of a base class
    if not slotted and (cls.__getattribute__ is not object.__getattribute__ or any(_data_descriptor(getattr(cls, f.name, None)) for f in fields)):
        raise refused  # ``self.__dict__`` is not where ``object.__setattr__`` would store the field
    scope: dict[str, Any] = {"_FROM_FACTORY": _FROM_FACTORY}
    params, lines = [], [] if slotted else [f"    {_DICT} = self.__dict__"]
    for f in fields:
        if slotted:
            scope[f"_set_{f.name}"] = vars(cls)[f.name].__set__  # the slot's member descriptor
        if f.default is not dataclasses.MISSING:
            scope[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            scope[f"_factory_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_FROM_FACTORY")
            lines.append(f"    if {f.name} is _FROM_FACTORY:\n        {f.name} = _factory_{f.name}()")
        else:
            params.append(f.name)
        lines.append(f"    _set_{f.name}(self, {f.name})" if slotted else f"    {_DICT}[{f.name!r}] = {f.name}")
    source = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(lines or ["    pass"]) + "\n"
    exec(compile(source, f"<quick_init of {cls.__qualname__}>", "exec"), scope)  # noqa: S102 - field names are identifiers
    init = scope["__init__"]
    init.__qualname__, init.__module__ = f"{cls.__qualname__}.__init__", cls.__module__
    init.__doc__, init.__annotations__ = made.__doc__, dict(made.__annotations__)
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


def _data_descriptor(attribute: object) -> bool:
    """An attribute of the class that takes over setting it on an instance (a property, a slot)."""
    return hasattr(type(attribute), "__set__") or hasattr(type(attribute), "__delete__")


def _made_name(name: str) -> bool:
    """A name the made ``__init__`` gives a meaning of its own: a field of that name would clash with it."""
    return name in ("self", "_FROM_FACTORY", _DICT) or name.startswith(("_set_", "_default_", "_factory_"))
