"""The built fp4sim command as the CLI tests drive it: its path ($FP4SIM_BINARY, ctest sets it), the sample
trace, running it, and the one-line diagnostic every refused input gets (docs/cli.md "Exit codes")."""

import os
import subprocess
from pathlib import Path

import pytest

FP4SIM = os.environ.get("FP4SIM_BINARY")
TRACE = Path(__file__).resolve().parent.parent / "traces" / "trace_a.h5"

needs_binary = pytest.mark.skipif(
    not FP4SIM or not os.path.exists(FP4SIM), reason="FP4SIM_BINARY does not name a built fp4sim binary"
)


def run(*args, **kwargs):
    return subprocess.run([FP4SIM, *map(str, args)], capture_output=True, text=True, timeout=300, **kwargs)


def one_line_error(r, *words):
    """Standard error is one line naming every word."""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], (w, r.stderr)


def refused(r, code, *words):
    """Exit `code` (2 usage, 3 data) with one line naming every word."""
    assert r.returncode == code, (r.returncode, r.stderr)
    one_line_error(r, *words)
