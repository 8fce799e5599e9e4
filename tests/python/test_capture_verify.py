"""``python3 -m fp4sim.capture.verify`` on hostile traces (docs/trace-format.md, "Quantized operands"):
a trace is data, so its recorded values never become options; what it cannot check is one line and exit
2/3 with nothing left; a corrupted output is a mismatch. Needs h5py and FP4SIM_BINARY, not PyTorch: the
fp4/ groups are written here as fp4sim.capture writes them, from fp4sim.quantize and fp4sim.gemm."""

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

h5py = pytest.importorskip("h5py", reason="capture.verify tests need h5py")

import fp4sim  # noqa: E402
from fp4sim.capture.verify import _override_flags, main as verify_main  # noqa: E402
from fp4sim import _fp4sim  # noqa: E402

RECIPE = "mxfp4"  # round-to-nearest, no tensor scale: no seed or held amax is needed to check it


def fp4sim_binary():
    exe = os.environ.get("FP4SIM_BINARY")
    if not exe or not os.path.exists(exe):
        pytest.skip("no fp4sim binary (set FP4SIM_BINARY)")
    return exe


def fprop_trace(path, overrides=""):
    """One fprop GEMM of an fp4sim.torch.Linear as capture.py records it: fp4/fprop with C, fp4/fprop.a
    and fp4/fprop.b with the inputs, codes and scales."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((8, 64), dtype=np.float32)
    b = rng.standard_normal((16, 64), dtype=np.float32)
    datapath = _fp4sim.operand_info(RECIPE, {}, "fprop.a")["datapath"]
    with h5py.File(path, "w") as f:
        fp4 = f.create_group("step_000001/fc/call_000001/fp4")
        g = fp4.create_group("fprop")
        g.attrs.update(recipe=RECIPE, overrides=overrides, datapath=datapath, seed=np.uint64(0))
        g["c"] = fp4sim.gemm(a, b, RECIPE, "fprop", datapath=datapath)
        for side, x in (("a", a), ("b", b)):
            q = fp4sim.quantize(x, RECIPE, "activation" if side == "a" else "weight")
            og = fp4.create_group("fprop." + side)
            og.attrs.update(recipe=RECIPE, overrides=overrides, operand="fprop." + side, seed=np.uint64(0))
            og["input"], og["codes"], og["scales"] = x, q.codes, q.scales
    return path


def verify(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "fp4sim.capture.verify", *map(str, args)], capture_output=True,
                          text=True, timeout=120, **kwargs)


def verify_in_process(capsys, *args):
    """main() as the shell runs it, without starting an interpreter: (exit status, stdout, stderr)."""
    code = verify_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


def one_line(r, code, *words):
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], (w, r.stderr)


def test_a_recorded_trace_verifies_and_a_corrupted_c_is_a_mismatch(tmp_path):
    exe = fp4sim_binary()
    path = fprop_trace(tmp_path / "t.h5", json.dumps({"block": 32}))
    r = verify(path, "--fp4sim", exe)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "3 of 3 checks bit-exact" in r.stdout
    with h5py.File(path, "r+") as f:
        f["step_000001/fc/call_000001/fp4/fprop/c"][2, 3] += 1.0
    r = verify(path, "--fp4sim", exe)
    assert r.returncode == 4, (r.stdout, r.stderr)
    assert "MISMATCH  step_000001/fc/call_000001 fprop\n" in r.stdout and "2 of 3 checks bit-exact" in r.stdout


@pytest.mark.parametrize("overrides,words", [
    ({"help": 1}, ["unknown recipe override 'help'"]),
    ({"block": "--help"}, ["block"]),
    ({"two_d": "yes"}, ["two_d", "not a bool"]),
    ({"block": [32]}, ["block", "not a string or number"]),
    ([1, 2], ["not a JSON object"]),
    ("{", ["not JSON"]),
])
def test_overrides_are_data_never_options(tmp_path, capsys, overrides, words):
    # The C is corrupted too: a trace whose overrides turned into --help used to report "3 of 3 bit-exact".
    exe = fp4sim_binary()
    path = fprop_trace(tmp_path / "t.h5", overrides if isinstance(overrides, str) else json.dumps(overrides))
    with h5py.File(path, "r+") as f:
        f["step_000001/fc/call_000001/fp4/fprop/c"][0, 0] += 1.0
    r = verify_in_process(capsys, path, "--fp4sim", exe, "--out", tmp_path / "npy")
    one_line(r, 3, "@overrides", *words)
    assert "bit-exact" not in r.stdout


def test_a_value_starting_with_a_dash_stays_a_value():
    assert _override_flags({"block_choice": "--help", "rht": False}) == [
        "--block-choice=--help", "--no-rht"]


@pytest.mark.parametrize("damage,code,words", [
    ("missing", 3, ["cannot read the trace"]),
    ("not_hdf5", 3, ["cannot read the trace"]),
    ("no_seed", 3, ["fprop", "seed"]),
    ("unknown_recipe", 3, ["@overrides", "bogus"]),
    ("code_shape", 3, ["fprop.a", "fp4sim refused the check"]),
    ("no_binary", 2, ["--fp4sim"]),
    ("empty", 3, ["no quantized operands"]),
])
def test_what_cannot_be_checked_is_one_line_and_leaves_nothing(tmp_path, capsys, monkeypatch, damage, code, words):
    exe = fp4sim_binary()
    path = tmp_path / "t.h5"
    if damage == "missing":
        pass
    elif damage == "not_hdf5":
        path.write_text("not a trace")
    elif damage == "empty":
        h5py.File(path, "w").close()
    else:
        fprop_trace(path)
        with h5py.File(path, "r+") as f:
            fp4 = f["step_000001/fc/call_000001/fp4"]
            if damage == "no_seed":
                del fp4["fprop"].attrs["seed"]
            elif damage == "unknown_recipe":
                fp4["fprop"].attrs["recipe"] = fp4["fprop.a"].attrs["recipe"] = "bogus"
            elif damage == "code_shape":
                del fp4["fprop.a/codes"]
                fp4["fprop.a/codes"] = np.zeros((8, 7), np.uint8)
    if damage == "no_binary":
        exe = str(tmp_path / "no-such-fp4sim")
    before = sorted(os.listdir(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the scratch folder goes
    r = verify_in_process(capsys, path, "--fp4sim", exe)
    one_line(r, code, *words)
    assert "Traceback" not in r.stderr and "MISMATCH" not in r.stdout
    assert sorted(os.listdir(tmp_path)) == before, "a scratch folder was left"


# A stand-in for the fp4sim binary that says it is running and then never finishes its check.
FAKE_FP4SIM = """#!/bin/sh
echo $$ > "$FAKE_FP4SIM_PID"
exec sleep 120
"""


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is gone for our purpose
        return f.read().split(") ")[1][0] != "Z"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_mid_check_stops_the_check_and_leaves_nothing(tmp_path, sig):
    fake = tmp_path / "fake_fp4sim"
    fake.write_text(FAKE_FP4SIM)
    fake.chmod(0o755)
    pid_file = tmp_path / "check.pid"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(os.environ, FAKE_FP4SIM_PID=str(pid_file), TMPDIR=str(scratch))
    p = subprocess.Popen([sys.executable, "-m", "fp4sim.capture.verify", str(fprop_trace(tmp_path / "t.h5")),
                          "--fp4sim", str(fake)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the event: the check's process has written its pid (the deadline only bounds a broken run)
    deadline = time.time() + 120
    while not (pid_file.exists() and pid_file.read_text().strip()) and p.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert pid_file.exists(), p.communicate()
    child = int(pid_file.read_text())
    assert os.listdir(scratch), "the scratch folder exists while the check runs"
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + sig, err
    assert not alive(child), "the check was left running"
    assert os.listdir(scratch) == []


def test_a_trace_whose_metadata_asks_for_gigabytes_is_refused_within_a_bound():
    # Found by tests/fuzz/capture_verify_fuzz.py: two mutated bytes of a 19 kB seed trace, after which HDF5
    # allocated and cleared 4 GB for one read (11 s, 4.2 GB resident) before it failed. While reading, the
    # command line's address space is bounded by what the file can hold: it fails at the allocation.
    exe = fp4sim_binary()
    path = os.path.join(os.path.dirname(__file__), "..", "fuzz", "corpus", "capture_verify",
                        "found_attribute_length_4gb.h5")
    r = verify(path, "--fp4sim", exe)
    one_line(r, 3, "cannot read the trace")
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the largest child so far: this one
    assert peak_kib < 1 << 20, "%d MiB resident" % (peak_kib >> 10)


def test_a_trace_hdf5_loops_on_is_refused_and_the_reader_stopped(tmp_path, monkeypatch):
    # Found by the same fuzzer: one mutated integer of a seed trace, on which HDF5 loops forever in native
    # code (SIGTERM could not stop the command line). The trace is read in a child killed after
    # --read-timeout; the input loops on every run, so the limit is always what ends it.
    exe = fp4sim_binary()
    path = os.path.join(os.path.dirname(__file__), "..", "fuzz", "corpus", "capture_verify", "found_hdf5_loop.h5")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    r = verify(path, "--fp4sim", exe, "--read-timeout", "1", env=dict(os.environ, TMPDIR=str(tmp_path)))
    one_line(r, 3, "cannot read the trace", "did not finish in 1 s")
    assert os.listdir(tmp_path) == [], "a scratch folder was left"
