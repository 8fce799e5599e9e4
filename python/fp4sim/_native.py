"""The extension's functions as fp4sim's Python layer calls them: an argument that the extension's typed
parameters refuse (a number where a name is wanted, an int beyond the C++ integer it becomes, a list
where a bool is) raises UsageError naming the parameter and what it takes, as the keyword checks of the
argument tables do (python/operand.cpp), instead of nanobind's dump of every overload's signature.

Only the refusal is translated: nanobind decides what converts (no rule is repeated here); the
parameter is found afterwards, from the signatures nanobind publishes (``__nb_signature__``)."""

from __future__ import annotations

import functools
import numbers
import operator
from typing import Any, List, Optional, Tuple

import numpy as np

from . import _fp4sim

# Where fp4sim's Python function calls a native parameter by another name than its own keyword.
_KEYWORD = {"multiple": "chunk_multiple", "rhos": "rho"}

_WANTED = {"str": "a string", "int": "an integer", "float": "a number", "bool": "a bool (True or False)"}


def _parameters(signature: str) -> List[Tuple[str, str]]:
    """(name, type) of each parameter of a nanobind signature "def f(a: T, b: U | None) -> R"."""
    text = signature[signature.index("(") + 1: signature.rindex(") ->")]
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "[(" and 1 or ch in "])" and -1 or 0
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [tuple(s.strip() for s in p.split(":", 1)) for p in parts if ":" in p]


def _refused(value: Any, declared: str) -> Optional[str]:
    """Why nanobind cannot have taken `value` for a parameter of type `declared`, if this is the one."""
    optional = declared.endswith(" | None")
    base = declared[: -len(" | None")] if optional else declared
    if value is None:
        return None if optional else "expected %s, got None" % _WANTED.get(base, base)
    if base == "str" and not isinstance(value, str):
        return "expected a string, got " + type(value).__name__
    if base == "str":
        try:
            value.encode()
        except UnicodeEncodeError:
            return "not text UTF-8 can encode (a lone surrogate)"
    if base == "bool" and not isinstance(value, bool):
        return "expected a bool (True or False), got " + type(value).__name__
    if base == "int" and (isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral)):
        return "expected an integer, got " + type(value).__name__
    if base == "float" and (isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real)):
        return "expected a number, got " + type(value).__name__
    if base == "float" and isinstance(value, numbers.Integral) and abs(operator.index(value)) >= 2**1024:
        return "%d is beyond the range of a double" % value
    return None


class _Function:
    def __init__(self, function):
        self.function = function
        self.overloads = [_parameters(s[0]) for s in function.__nb_signature__]
        # NumPy's bools are bools, as the argument tables take them; nanobind's bool parameters refuse them
        self.bools = [i for i, (_, declared) in enumerate(self.overloads[0]) if declared.split(" |")[0] == "bool"]
        functools.update_wrapper(self, function)

    def __call__(self, *args):
        if any(i < len(args) and isinstance(args[i], np.bool_) for i in self.bools):
            args = tuple(bool(a) if i in self.bools and isinstance(a, np.bool_) else a for i, a in enumerate(args))
        try:
            return self.function(*args)
        except TypeError as e:
            if "incompatible function arguments" not in str(e):
                raise
            # Every overload refused. A value of the wrong type names the fault; else an int beyond the C++
            # integer it becomes (unsigned, or 32 bits): a negative one or one past 2^63 first, then past 2^31.
            params = [(name, declared, value) for (name, declared), value in zip(self.overloads[0], args)]
            for name, declared, value in params:
                why = _refused(value, declared)
                if why is not None:
                    raise _fp4sim.UsageError("%s: %s" % (_KEYWORD.get(name, name), why)) from None
            ints = [(name, operator.index(value)) for name, declared, value in params
                    if declared.split(" |")[0] == "int" and isinstance(value, numbers.Integral)]
            for limit in (2**63, 2**31):
                for name, value in ints:
                    if not 0 <= value < limit:
                        raise _fp4sim.UsageError("%s: %d is out of range" % (_KEYWORD.get(name, name), value)) from None
            raise


class _Module:
    """_fp4sim with each function wrapped (classes and exceptions as they are), looked up on every call, so
    that what replaces a function of _fp4sim (a test's monkeypatch) is what is called."""

    def __init__(self):
        self._wrapped = {}  # name: (the function of _fp4sim, its wrapper)

    def __getattr__(self, name):
        value = getattr(_fp4sim, name)
        if type(value).__name__ != "nb_func":
            return value
        cached = self._wrapped.get(name)
        if cached is None or cached[0] is not value:
            cached = self._wrapped[name] = (value, _Function(value))
        return cached[1]


native = _Module()
