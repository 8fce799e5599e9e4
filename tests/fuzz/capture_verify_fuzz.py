"""Fuzzes the version-2 capture reader (docs/fuzzing.md): atheris (libFuzzer for Python) mutates small v2
traces (tests/fuzz/corpus/capture_verify/, written by tests/fuzz/make_corpus.py with fp4sim.capture's
writer) and runs ``python3 -m fp4sim.capture.verify TRACE --fp4sim FP4SIM --read-timeout 3`` on each, in this process
(its main(), as the shell runs it, with the release-built fp4sim as the checker). Accepted: exit 0 or 4
(checks run: bit-exact or mismatches), or exit 2/3 with exactly one line on stderr. A finding: any
exception out of main() (a traceback), another exit status, more or fewer lines, a file left in the
scratch folder or beside the trace, a value from the trace read as an option (each fp4sim command line
is checked before it runs: every word starting with "-" is an option verify.py writes, every value of a
separate-value option is not an option), a crash, or an input past libFuzzer's -timeout.

Run by tools/fuzz.sh with the release build's module on PYTHONPATH and FP4SIM_BINARY its fp4sim:
python3 capture_verify_fuzz.py [libFuzzer options] CORPUS...
"""

import atexit
import contextlib
import importlib
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile

import atheris

with atheris.instrument_imports(include=["fp4sim"]):
    # the module (fp4sim.capture's attribute `verify` is the function of that name)
    verify = importlib.import_module("fp4sim.capture.verify")

FP4SIM = os.environ.get("FP4SIM_BINARY", "")

# The options verify.py writes, by how each takes its value.
VALUE_OPTIONS = {"--seed", "--in", "--codes", "--scales", "--amax-ref", "--rbits", "--tensor-scale-value",
                 "--tensor-scale-kind", "--a", "--b", "--c", "--amax-ref-a", "--amax-ref-b", "--rbits-a", "--rbits-b"}
# --recipe, --role, --gemm, --datapath and the recipe overrides (_fp4sim.operand_info's known keys)
JOINED_OPTIONS = {"--recipe", "--role", "--gemm", "--datapath"} | {"--" + key.replace("_", "-") for key in (
    "block", "two_d", "scale_format", "element_format", "target", "tensor_scale", "scale_rule", "zero_scale",
    "element_scaling", "block_choice", "four_over_six_error", "element_specials", "amax_scope", "nan_amax",
    "dequantize_order", "rounding", "sr_bits", "rht", "alpha", "rht_signs")}
FLAG_OPTIONS = {"--no-progress", "--two-d", "--one-d", "--rht", "--no-rht"}
NUMBER = re.compile(r"-?(\d+\.?\d*(e[-+]?\d+)?|inf|nan)$", re.IGNORECASE)

# FUZZ_WORK: a folder of tools/fuzz.sh's build tree, which removes it afterwards (libFuzzer exits past atexit)
scratch = tempfile.mkdtemp(prefix="capture-verify.", dir=os.environ.get("FUZZ_WORK"))
atexit.register(shutil.rmtree, scratch, True)
trace_dir = os.path.join(scratch, "trace")
temp_dir = os.path.join(scratch, "tmp")


class Finding(AssertionError):
    pass


def check_argv(argv):
    """An fp4sim command line verify.py built: the trace's values are values, never options."""
    if argv[0] != FP4SIM or argv[1] != "verify" or argv[2] not in ("quantize", "gemm"):
        raise Finding("not an fp4sim verify command: %r" % argv[:3])
    words = iter(argv[3:])
    for word in words:
        name = word.split("=", 1)[0]
        if word in FLAG_OPTIONS or ("=" in word and name in JOINED_OPTIONS):
            continue
        if word in VALUE_OPTIONS:
            value = next(words, None)
            if value is None or (value.startswith("-") and not NUMBER.match(value)):
                raise Finding("option %s takes %r as its value: %r" % (word, value, argv))
            continue
        raise Finding("a word that is no option verify.py writes: %r in %r" % (word, argv))


real_run = subprocess.run


def checked_run(argv, *args, **kwargs):
    check_argv(argv)
    return real_run(argv, *args, **kwargs)


verify.subprocess.run = checked_run


def test_one_input(data):
    os.makedirs(trace_dir, exist_ok=True)
    os.makedirs(temp_dir, exist_ok=True)
    trace = os.path.join(trace_dir, "t.h5")
    with open(trace, "wb") as f:
        f.write(data)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        # 3 s: a trace reads in milliseconds; one HDF5 loops on is refused (exit 3) within libFuzzer's -timeout
        code = verify.main([trace, "--fp4sim", FP4SIM, "--read-timeout", "3"])
    lines = err.getvalue().splitlines()
    if code in (2, 3):
        if len(lines) != 1 or not lines[0].startswith("python3 -m fp4sim.capture.verify: error: "):
            raise Finding("exit %d with stderr %r" % (code, err.getvalue()))
    elif code in (0, 4):
        if lines:
            raise Finding("exit %d with stderr %r" % (code, err.getvalue()))
    else:
        raise Finding("exit %r, stdout %r, stderr %r" % (code, out.getvalue()[-2000:], err.getvalue()[-2000:]))
    left = os.listdir(temp_dir) + [n for n in os.listdir(trace_dir) if n != "t.h5"]
    if left:
        raise Finding("left behind: %r" % left)


if __name__ == "__main__":
    if not FP4SIM or shutil.which(FP4SIM) is None:
        sys.exit("capture_verify_fuzz.py: set FP4SIM_BINARY to the fp4sim executable")
    tempfile.tempdir = temp_dir  # where verify's scratch folder goes, checked after every input
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
