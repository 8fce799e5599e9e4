"""Checking recorded quantized operands with ``fp4sim verify`` (docs/trace-format.md, "Quantized operands").

For every ``fp4/`` group of a version-2 trace (written for fp4sim.torch.Linear layers) this writes the
recorded arrays as .npy files and builds the command lines that judge them against the golden model of
the recorded inputs:

* ``fp4sim verify quantize`` per operand (``fp4/<gemm>.<a|b>``): the recorded codes and scales against
  the quantization of the recorded input with the operand's own spec (its blocks, rounding, RHT and
  target, given as overrides), its held amax and its Philox seed or recorded random integers, and the
  recorded tensor scale G. Operand B rounded stochastically from Philox draws stream 1, which
  ``verify quantize`` does not select: such an operand is checked through its GEMM only.
* ``fp4sim verify gemm`` per GEMM (``fp4/<gemm>``): the recorded output C against the golden GEMM of the
  recorded inputs (quantized as the layer did, A on stream 0 and B on stream 1 of the seed) through the
  recorded datapath.

From a shell: ``python3 -m fp4sim.capture.verify trace.h5 [--fp4sim PATH] [--out DIR]`` prints one line
per check and the report of each that failed; exit 0 when every check is bit-exact, 4 otherwise; a trace
it cannot read or whose recorded values are not what fp4sim verify takes (unknown overrides among them),
or a check fp4sim refuses, is one line on stderr and exit 3 (2 for a bad command line), with no file left.
The trace is read in a child process, its address space bounded by what the file can hold, killed when it
has not finished in ``--read-timeout`` seconds (default 60 plus 1 per 20 MB): HDF5 loops forever or
allocates gigabytes on some corrupted files (docs/fuzzing.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback
from typing import List, NamedTuple, Optional, Tuple

import h5py
import numpy as np

from .. import _fp4sim


class VerifyCommand(NamedTuple):
    what: str         # "step 2 fc1/call_000001 fprop.a" (the trace path of what is checked)
    argv: List[str]


# The role whose preset spec is the starting point of each GEMM operand (its own spec is then given).
_ROLE = {"fprop.a": "activation", "fprop.b": "weight", "dgrad.a": "grad_output", "dgrad.b": "weight",
         "wgrad.a": "grad_output", "wgrad.b": "activation"}


# The recipe overrides whose value is a switch: each is its own pair of options.
_SWITCHES = {"two_d": ("--two-d", "--one-d"), "rht": ("--rht", "--no-rht")}


def _overrides(group, recipe: str, operand: str) -> dict:
    """A group's recorded @overrides, validated as data: a JSON object whose keys are recipe overrides
    (fp4sim.quantize's keywords; _fp4sim.operand_info rejects any other) and whose values are a bool for a
    switch, else a string or number. A trace is data, so nothing in it may reach the command line as
    anything but the value of the option its key names."""
    where = "@overrides of " + group.name
    try:
        overrides = json.loads(_attr(group, "overrides") or "{}")
    except ValueError as e:
        raise _fp4sim.DataError("%s: not JSON (%s)" % (where, e)) from None
    if not isinstance(overrides, dict):
        raise _fp4sim.DataError("%s: not a JSON object" % where)
    for key, value in overrides.items():
        switch = key in _SWITCHES
        if (switch and not isinstance(value, bool)) or (
                not switch and (isinstance(value, bool) or not isinstance(value, (str, int, float)))):
            raise _fp4sim.DataError("%s: %s = %s is not a %s" % (where, key, json.dumps(value),
                                                                "bool" if switch else "string or number"))
    try:
        _fp4sim.operand_info(recipe, overrides, operand)
    except (_fp4sim.UsageError, ValueError, TypeError) as e:
        raise _fp4sim.DataError("%s: %s" % (where, e)) from None
    return overrides


def _override_flags(overrides: dict) -> List[str]:
    """Validated overrides (_overrides) as options; each value joined to its option by "=", so that no
    value, whatever it starts with, is read as an option of its own."""
    flags = []
    for key, value in overrides.items():
        if key in _SWITCHES:
            flags.append(_SWITCHES[key][0 if value else 1])
        else:
            flags.append("--%s=%s" % (key.replace("_", "-"), value))
    return flags


def _number(v) -> str:
    """A float32 value as decimal text that reads back to the same float32."""
    return repr(float(np.float32(v)))


def _attr(group, name: str) -> str:
    v = group.attrs[name]
    return v.decode() if isinstance(v, bytes) else str(v)


class _Files:
    def __init__(self, outdir: str):
        self.outdir = outdir
        self.count = 0

    def save(self, array: np.ndarray, what: str) -> str:
        self.count += 1
        path = os.path.join(self.outdir, "%05d_%s.npy" % (self.count, what))
        try:
            np.save(path, np.ascontiguousarray(array))
        except OSError as e:
            raise _OutputError(str(e)) from None
        return path


class _OutputError(Exception):
    """The output folder refused a file: told apart from the OSErrors h5py raises on a corrupted trace."""


def _quantize_command(fp4sim: str, og, files: _Files) -> Optional[List[str]]:
    operand = _attr(og, "operand")
    recipe = _attr(og, "recipe")
    overrides = _overrides(og, recipe, operand)
    info = dict(_fp4sim.operand_info(recipe, overrides, operand))
    has_rbits = "rbits" in og
    if operand.endswith(".b") and info["rounding"] != "rne" and not has_rbits:
        return None  # Philox stream 1: checked through the GEMM
    spec = dict(overrides, rounding=info["rounding"], two_d=info["block_rows"] > 1, rht=bool(info["rht"]),
                target=_number(info["target"]))
    argv = [fp4sim, "verify", "quantize", "--recipe=" + recipe, *_override_flags(spec), "--role=" + _ROLE[operand],
            "--in", files.save(og["input"][...], "in"), "--codes", files.save(og["codes"][...], "codes"),
            "--scales", files.save(og["scales"][...], "scales")]
    if "amax_ref" in og.attrs:
        argv += ["--amax-ref", _number(og.attrs["amax_ref"])]
    if has_rbits:
        argv += ["--rbits", files.save(og["rbits"][...], "rbits")]
    elif info["rounding"] != "rne":
        argv += ["--seed", str(int(og.attrs["seed"]))]
    if info["tensor_scaled"]:
        argv += ["--tensor-scale-value", _number(og.attrs["global_encode_scale"]), "--tensor-scale-kind", "encode"]
    return argv


def _gemm_command(fp4sim: str, fp4, gemm: str, files: _Files) -> List[str]:
    g = fp4[gemm]
    a, b = fp4[gemm + ".a"], fp4[gemm + ".b"]
    recipe = _attr(g, "recipe")
    overrides = _overrides(g, recipe, gemm + ".a")
    argv = [fp4sim, "verify", "gemm", "--recipe=" + recipe, *_override_flags(overrides), "--gemm=" + gemm,
            "--datapath=" + _attr(g, "datapath"), "--seed", str(int(g.attrs["seed"])), "--no-progress",
            "--a", files.save(a["input"][...], "a"), "--b", files.save(b["input"][...], "b"),
            "--c", files.save(g["c"][...], "c")]
    for side, og in (("a", a), ("b", b)):
        if "amax_ref" in og.attrs:
            argv += ["--amax-ref-" + side, _number(og.attrs["amax_ref"])]
        if "rbits" in og:
            argv += ["--rbits-" + side, files.save(og["rbits"][...].astype(np.uint8), "rbits_" + side)]
    return argv


def verify_commands(trace: str, outdir: str, fp4sim: str = "fp4sim") -> List[VerifyCommand]:
    """The ``fp4sim verify`` command lines that check every quantized operand and GEMM output recorded in
    `trace`, their .npy inputs written under `outdir` (created). A trace that cannot be read, or whose
    ``fp4/`` groups lack what a check needs, raises fp4sim.DataError naming what is wrong."""
    os.makedirs(outdir, exist_ok=True)
    files = _Files(outdir)
    commands: List[VerifyCommand] = []
    try:
        f = h5py.File(trace, "r")
    except OSError as e:
        raise _fp4sim.DataError("%s: cannot read the trace (%s)" % (trace, e)) from None
    with f:
        try:
            groups: List[Tuple[str, h5py.Group]] = []
            f.visititems(lambda name, obj: groups.append((name, obj))
                         if isinstance(obj, h5py.Group) and name.rsplit("/", 1)[-1] == "fp4" else None)
            for name, fp4 in groups:
                where = name[: -len("/fp4")]
                for key in sorted(fp4):
                    try:
                        if "." in key:
                            argv = _quantize_command(fp4sim, fp4[key], files)
                        else:
                            argv = _gemm_command(fp4sim, fp4, key, files)
                    except (KeyError, ValueError, TypeError) as e:
                        # a missing attribute or dataset, an unknown operand name, a value of the wrong kind
                        raise _fp4sim.DataError("%s: %s/%s: %s" % (trace, name, key, e)) from None
                    if argv is not None:
                        commands.append(VerifyCommand("%s %s" % (where, key), argv))
        except _fp4sim.DataError:
            raise
        except (RuntimeError, OSError, KeyError, ValueError, TypeError) as e:  # what h5py raises on corrupted
            # HDF5 metadata or chunks, walking the file or opening an object (KeyError) or reading it
            raise _fp4sim.DataError("%s: cannot read the trace (%s)" % (trace, e)) from None
    return commands


def verify(trace: str, outdir: str, fp4sim: str = "fp4sim") -> List[Tuple[VerifyCommand, subprocess.CompletedProcess]]:
    """Runs :func:`verify_commands`; each result's returncode is 0 when bit-exact, 4 on mismatches (its
    stdout explains them), 2 or 3 when fp4sim refused the check (its stderr says why)."""
    return [(c, subprocess.run(c.argv, capture_output=True, text=True)) for c in verify_commands(trace, outdir, fp4sim)]


# A trace's HDF5 metadata sizes the buffers HDF5 allocates: a corrupted length in a 19 kB trace had HDF5
# allocate and clear 4 GB for one attribute (10 s) before it failed. While the command line reads a trace,
# its address space is bounded by what the trace can hold: READ_BOUND_BYTES plus READ_BOUND_RATIO times the
# file's size (room for gzip, which packs captured float tensors by about 10%, all-zero ones far more).
READ_BOUND_BYTES = 1 << 30
READ_BOUND_RATIO = 4


@contextlib.contextmanager
def _reading_memory_bounded(trace: str):
    """The soft address-space limit lowered while reading `trace` (then restored: the checks run
    unbounded); a refused allocation is a MemoryError or an HDF5 error, each a DataError."""
    try:
        size = os.stat(trace).st_size
        with open("/proc/self/status") as f:
            now = next(int(line.split()[1]) for line in f if line.startswith("VmSize:")) * 1024
    except (OSError, StopIteration, ValueError):  # no trace (verify_commands says so), no /proc
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    bound = now + READ_BOUND_BYTES + READ_BOUND_RATIO * size
    if soft != resource.RLIM_INFINITY and soft <= bound:
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (bound, hard))
    try:
        yield
    except MemoryError:
        raise _fp4sim.DataError("%s: cannot read the trace (it asks for more memory than a file of %d bytes "
                                "can hold: corrupted)" % (trace, size)) from None
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _read_in_child(pipe, trace: str, outdir: str, fp4sim: str) -> None:
    try:
        with _reading_memory_bounded(trace):
            pipe.send(("ok", [(c.what, c.argv) for c in verify_commands(trace, outdir, fp4sim)]))
    except _fp4sim.DataError as e:
        pipe.send(("data", str(e)))
    except (OSError, _OutputError) as e:
        pipe.send(("output", str(e)))
    except BaseException:  # noqa: BLE001 - a bug of this reader: its traceback, in the parent
        pipe.send(("bug", traceback.format_exc()))


def _commands_in_child(trace: str, outdir: str, fp4sim: str, seconds: Optional[float]) -> List[VerifyCommand]:
    """verify_commands, run in a forked child that is killed when it has not finished in `seconds`: HDF5
    loops forever on some corrupted files (docs/fuzzing.md: a fuzzed 19 kB trace held the command line,
    SIGTERM included, in native code), and a read cannot be interrupted from Python."""
    if seconds is None:
        try:
            seconds = 60 + os.stat(trace).st_size / 20e6
        except OSError:
            seconds = 60  # no trace: verify_commands says so
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_read_in_child, args=(send, trace, outdir, fp4sim), daemon=True)
    child.start()
    send.close()
    try:
        if not receive.poll(seconds):
            raise _fp4sim.DataError("%s: cannot read the trace (reading did not finish in %g s: HDF5 loops on some "
                                    "corrupted files; --read-timeout gives a larger limit)" % (trace, seconds))
        try:
            kind, value = receive.recv()
        except EOFError:  # the child died without a word (killed, out of memory in native code)
            raise _fp4sim.DataError("%s: cannot read the trace (the reader exited with %s)"
                                    % (trace, child.exitcode)) from None
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receive.close()
    if kind == "data":
        raise _fp4sim.DataError(value)
    if kind == "output":
        raise _OutputError(value)
    if kind == "bug":
        raise RuntimeError("reading the trace failed:\n" + value)
    return [VerifyCommand(what, argv) for what, argv in value]


def _stop_on(signum, frame):
    # unwinds like an exception: subprocess.run kills the running check, the scratch folder is removed
    raise SystemExit(128 + signum)


def _error(text: str, code: int) -> int:
    print("python3 -m fp4sim.capture.verify: error: " + " ".join(text.split()), file=sys.stderr)
    return code


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m fp4sim.capture.verify",
                                description="Check a trace's recorded quantized operands with fp4sim verify.")
    p.add_argument("trace")
    p.add_argument("--fp4sim", default=os.environ.get("FP4SIM_BINARY", "fp4sim"), help="the fp4sim executable")
    p.add_argument("--out", default=None, help="keep the .npy files and commands here (default: a temporary folder)")
    p.add_argument("--read-timeout", type=float, default=None, metavar="SECONDS",
                   help="give up reading the trace after this long (default: 60 s plus 1 s per 20 MB)")
    a = p.parse_args(argv)
    if shutil.which(a.fp4sim) is None:
        return _error("--fp4sim: %s is not an executable" % a.fp4sim, 2)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            commands = _commands_in_child(a.trace, a.out or scratch, a.fp4sim, a.read_timeout)
            results = [(c, subprocess.run(c.argv, capture_output=True, text=True)) for c in commands]
    except _fp4sim.DataError as e:
        return _error(str(e), 3)
    except (OSError, _OutputError) as e:  # --out not writable, the executable gone meanwhile
        return _error(str(e), 3)
    refused = [(c, r) for c, r in results if r.returncode not in (0, 4)]
    if refused:
        c, r = refused[0]
        lines = r.stderr.strip().splitlines() or ["exit %d" % r.returncode]
        return _error("%s: fp4sim refused the check: %s" % (c.what, lines[-1]), 2 if r.returncode == 2 else 3)
    failed = 0
    for c, r in results:
        print("%-9s %s" % ("ok" if r.returncode == 0 else "MISMATCH", c.what))
        if r.returncode != 0:
            failed += 1
            print("  " + " ".join(c.argv) + "\n" + r.stdout + r.stderr)
    print("%d of %d checks bit-exact" % (len(results) - failed, len(results)))
    if not results:
        return _error("no quantized operands in %s (recorded for fp4sim.torch.Linear layers)" % a.trace, 3)
    return 0 if failed == 0 else 4


if __name__ == "__main__":
    for _signal in (signal.SIGTERM, signal.SIGHUP):  # the process's own: not installed by main() in a caller's
        signal.signal(_signal, _stop_on)
    sys.exit(main())
