"""Library errors in Python's terms. The library's messages are shared with the CLI and name its flags
(``--rounding``, ``--no-saturate``); the Python functions take keywords, so each flag is rewritten as the
keyword that sets it (``rounding``, ``saturate=False``). The error's class (UsageError or DataError, both
ValueError) and the rest of the message, with its list of valid values, stay as they are.
"""

from __future__ import annotations

import functools
import re

from ._fp4sim import DataError, UsageError

_FLAG = re.compile(r"--[a-z][a-z0-9-]*")
# Flags that are not simply a keyword with underscores.
_KEYWORD_OF_FLAG = {"--saturate": "saturate=True", "--no-saturate": "saturate=False", "--rht": "rht=True",
                    "--no-rht": "rht=False", "--snap": "snap=True", "--no-snap": "snap=False"}


def python_terms(message: str) -> str:
    """A library message with every CLI flag replaced by the Python keyword."""
    return _FLAG.sub(lambda m: _KEYWORD_OF_FLAG.get(m.group(0), m.group(0)[2:].replace("-", "_")), message)


def in_python_terms(function):
    """Re-raises the library's UsageError/DataError from `function` with the message in Python's terms."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except (UsageError, DataError) as e:
            message = python_terms(str(e))
            if message == str(e):
                raise
            raise type(e)(message) from None

    return wrapper
