"""Hostile input, failing writes and signals through the CLI (docs/cli.md "Exit codes"), one test per class:

* outputs: never onto an input (symlinks followed), a device, a directory or another output; committed
  together, so an existing file survives a failed command, a rename failing part-way through included;
* exit codes: 2 usage (bad option values included), 3 data (a missing input file in every subcommand,
  a missing output directory);
* sizes: a .npy header is checked against the file before anything is allocated;
* numbers: every numeric option range-checked, recipe values validated with --rht/--no-rht;
* writes: a failed write on standard output is exit 3;
* signals: SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGPIPE stop the plot child, remove the temporaries and exit 128 + N;
* `replay --steps A-B` takes the captured steps inside the range;
* memory: replay's GEMM entries follow --slab-mib (peak resident memory measured), tiles or not.

The binary is $FP4SIM_BINARY (ctest sets it).
"""

import json
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cli_run import FP4SIM, TRACE, needs_binary, one_line_error, run
from events import PlotStandIn

pytestmark = needs_binary


def npy_bytes(descr, shape_text, payload=b""):
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + payload


@pytest.fixture
def x(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.linspace(-3, 3, 64, dtype=np.float32).reshape(2, 32))
    return path


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "t.h5"
    shutil.copy(TRACE, path)
    return path


QUICK = ["--steps", "1", "--layers", "lm_head", "--no-gemms", "-q"]


def leftovers(directory):
    return [p.name for p in Path(directory).iterdir() if ".tmp." in p.name]


# --- outputs: the output set ----------------------------------------------------------------------


def test_output_onto_an_input_is_refused_and_the_input_kept(tmp_path, x):
    before = x.read_bytes()
    r = run("convert", "--format", "e2m1", "--in", x, "--out", x)
    assert r.returncode == 2
    one_line_error(r, str(x), "is the input")
    (tmp_path / "link.npy").symlink_to(x)
    r = run("convert", "--format", "e2m1", "--in", x, "--out", "e4m3.npy", "--decoded", tmp_path / "link.npy",
            cwd=tmp_path)
    assert r.returncode == 2 and "is the input" in r.stderr
    assert x.read_bytes() == before and not (tmp_path / "e4m3.npy").exists()


def test_replay_output_onto_the_trace_is_refused(trace):
    size = trace.stat().st_size
    r = run("replay", trace, "--json", trace, *QUICK)
    assert r.returncode == 2
    one_line_error(r, "--json", "is the input")
    assert trace.stat().st_size == size


def test_non_regular_and_directory_outputs_are_refused(tmp_path, x):
    r = run("convert", "--format", "e2m1", "--in", x, "--out", "/dev/null")
    assert r.returncode == 2
    one_line_error(r, "/dev/null", "not a regular file")
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")
    r = run("convert", "--format", "e2m1", "--in", x, "--out", tmp_path)
    assert r.returncode == 2
    one_line_error(r, "is a directory")


def test_one_path_for_two_outputs_is_refused(tmp_path, x, trace):
    r = run("convert", "--format", "e2m1", "--in", x, "--out", tmp_path / "o.npy", "--decoded", tmp_path / "o.npy")
    assert r.returncode == 2 and "twice" in r.stderr
    (tmp_path / "same").write_text("old")
    r = run("replay", trace, "--json", tmp_path / "same", "--csv", tmp_path / "same", *QUICK)
    assert r.returncode == 2
    one_line_error(r, "--csv", "--json")
    assert (tmp_path / "same").read_text() == "old"


def test_a_failed_output_keeps_every_existing_file(tmp_path, x):
    (tmp_path / "o.npy").write_text("keep")
    r = run("convert", "--format", "e2m1", "--in", x, "--out", tmp_path / "o.npy", "--decoded", tmp_path / "nodir" / "d.npy")
    assert r.returncode == 3
    one_line_error(r, "nodir/d.npy", "No such file or directory")
    assert (tmp_path / "o.npy").read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.npy", "x.npy"]


BLOCKING_PLOT = """
import os
os.remove(os.environ["BLOCK"])
os.makedirs(os.path.join(os.environ["BLOCK"], "inside"))
"""


@pytest.mark.parametrize("first_existed", [True, False])
def test_a_rename_failing_part_way_through_the_commit_loses_nothing(tmp_path, trace, first_existed):
    # --csv r.csv commits r_tensors.csv, r_gemms.csv, r_headroom.csv, then r.json. The plot step (run
    # before the commit) puts a non-empty directory where r_gemms.csv was: its rename fails second of four.
    out = tmp_path / "out"
    out.mkdir()
    old = {"r_gemms.csv": "old gemms", "r_headroom.csv": "old headroom", "r.json": "old json"}
    if first_existed:
        old["r_tensors.csv"] = "old tensors"
    for name, text in old.items():
        (out / name).write_text(text)
    script = tmp_path / "blocking_plot.py"
    script.write_text(BLOCKING_PLOT)
    env = dict(os.environ, FP4SIM_PLOT_SCRIPT=str(script), BLOCK=str(out / "r_gemms.csv"))
    r = run("replay", trace, *QUICK, "--csv", out / "r.csv", "--json", out / "r.json", "--plots", out / "plots",
            env=env)
    assert r.returncode == 3, (r.returncode, r.stderr)
    one_line_error(r, "r_gemms.csv", "cannot rename into place")
    del old["r_gemms.csv"]
    assert {p.name: p.read_text() for p in out.iterdir() if p.is_file()} == old
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["r_gemms.csv"]


def test_plots_onto_a_file_keeps_the_json(tmp_path, trace):
    (tmp_path / "r.json").write_text("old")
    (tmp_path / "afile").write_text("a file")
    r = run("replay", trace, "--json", tmp_path / "r.json", "--plots", tmp_path / "afile", *QUICK)
    assert r.returncode == 2
    one_line_error(r, "--plots", "not a directory")
    assert (tmp_path / "r.json").read_text() == "old" and (tmp_path / "afile").read_text() == "a file"
    assert leftovers(tmp_path) == []


# --- one exit-code rule ----------------------------------------------------------------------------


def test_a_missing_input_file_is_exit_3_in_every_subcommand(tmp_path, x):
    missing = tmp_path / "missing.npy"
    out = tmp_path / "out"
    out_h5 = tmp_path / "out.h5"  # quantize --out names an HDF5 file
    cases = [
        ["convert", "--format", "e2m1", "--in", missing, "--out", out],
        ["quantize", "--recipe", "nvfp4", "--in", missing, "--out", out_h5],
        ["quantize", "--recipe", "nvfp4", "--rounding", "sr-fast", "--rbits", missing, "--in", x, "--out", out_h5],
        ["gemm", "--recipe", "nvfp4", "--a", missing, "--b", x],
        ["mma", "--datapath", "sm90-bf16", "--input-format", "bf16", "--a", x, "--b", missing, "--out", out],
        ["verify", "gemm", "--recipe", "nvfp4", "--a", x, "--b", x, "--c", missing],
        ["verify", "quantize", "--recipe", "nvfp4", "--in", x, "--codes", missing, "--scales", missing],
        ["replay", tmp_path / "missing.h5", "-q"],
        ["sweep", tmp_path / "missing.h5", "-q"],
    ]
    for args in cases:
        r = run(*args)
        assert r.returncode == 3, (args, r.returncode, r.stderr)
        one_line_error(r, "missing")
        assert "no such file" in r.stderr.lower(), r.stderr  # the reason, not only "cannot open"
        assert not out.exists()


def test_a_missing_output_directory_is_exit_3(tmp_path, x, trace):
    r = run("convert", "--format", "e2m1", "--in", x, "--out", tmp_path / "no" / "o.npy")
    assert r.returncode == 3, r.stderr
    r = run("replay", trace, "--json", tmp_path / "no" / "r.json", *QUICK)
    assert r.returncode == 3, r.stderr
    one_line_error(r, "--json", "does not exist")


# --- sizes before allocation -------------------------------------------------------------------------


def limit_memory():
    # 512 MiB of address space: reading a header's claim of 1 GiB would fail with bad_alloc
    resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))


def memory_limit():
    """limit_memory, where the binary starts under it (a sanitizer build reserves terabytes of address space)."""
    r = subprocess.run([FP4SIM, "--version"], capture_output=True, preexec_fn=limit_memory)
    return limit_memory if r.returncode == 0 else None


@pytest.mark.parametrize(
    "shape,words",
    [
        ("(16384, 16384)", ["needs 1073741824 bytes", "holds 512"]),
        ("(4611686018427387904, 4611686018427387904)", ["overflows 64 bits"]),
        ("(-3, 4)", ["negative dimension -3"]),
        ("(99999999999999999999999,)", ["too large"]),
        ("(3, x)", ["malformed shape"]),
    ],
)
def test_npy_sizes_are_checked_before_allocating(tmp_path, shape, words):
    path = tmp_path / "claims.npy"
    path.write_bytes(npy_bytes("<f4", shape, b"\0" * 512))
    r = run("convert", "--format", "e2m1", "--in", path, "--out", tmp_path / "o.npy", preexec_fn=memory_limit())
    assert r.returncode == 3, (r.returncode, r.stderr)
    one_line_error(r, str(path), *words)
    assert "bad_alloc" not in r.stderr and not (tmp_path / "o.npy").exists()


def test_a_directory_as_npy_input_is_named_as_such(tmp_path):
    r = run("convert", "--format", "e2m1", "--in", tmp_path, "--out", tmp_path / "o.npy")
    assert r.returncode == 2
    one_line_error(r, "is a directory")


# --- numbers ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", ["-1", "18446744073709551616", "", "1.5"])
def test_seed_must_be_an_unsigned_64_bit_integer(tmp_path, x, seed):
    r = run("convert", "--format", "e2m1", "--rounding", "sr-fast", "--seed", seed, "--in", x, "--out", tmp_path / "o.npy")
    assert r.returncode == 2, (seed, r.stderr)
    assert "--seed" in r.stderr and not (tmp_path / "o.npy").exists()


def test_largest_seed_is_taken(tmp_path, x):
    r = run("convert", "--format", "e2m1", "--rounding", "sr-fast", "--seed", str(2**64 - 1), "--in", x, "--out", tmp_path / "o.npy")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["verify", "gemm", "--recipe", "nvfp4", "--worst", "-1"],
        ["gemm", "--recipe", "nvfp4", "--target-b", "-5"],
        ["gemm", "--recipe", "nvfp4", "--target-a", "0"],
        ["quantize", "--recipe", "nvfp4", "--target", "1e-45"],
        ["quantize", "--recipe", "nvfp4", "--target", "inf"],
        ["quantize", "--recipe", "nvfp4", "--amax-ref", "nan"],
        ["quantize", "--recipe", "nvfp4", "--element-format", "ue2m1"],
        ["quantize", "--recipe", "nvfp4", "--element-format", "e8m0"],
        ["quantize", "--recipe", "ue5m3", "--rht", "--block", "7"],
        ["replay", "T", "--period", "-2"],
        ["crosscheck", "--shape", "axbxc"],
    ],
)
def test_numeric_and_recipe_values_are_usage_errors(tmp_path, x, args):
    files = {"verify": ["--a", x, "--b", x, "--c", x], "gemm": ["--a", x, "--b", x],
             "quantize": ["--in", x, "--out", tmp_path / "q.h5"]}
    args = [TRACE if a == "T" else a for a in args] + files.get(args[0], [])
    r = run(*args)
    assert r.returncode == 2, (args, r.returncode, r.stderr)
    assert not (tmp_path / "q.h5").exists()


def test_no_rht_takes_part_in_validation(tmp_path, x):
    r = run("quantize", "--recipe", "nvfp4", "--no-rht", "--block", "8", "--in", x, "--out", tmp_path / "q.h5")
    assert r.returncode == 0, r.stderr


# --- standard output --------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["formats"], ["formats", "--json"], ["gemm", "--list-datapaths"]])
def test_a_failed_write_on_standard_output_is_exit_3(args):
    with open("/dev/full", "w") as full:
        r = subprocess.run([FP4SIM, *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 3, r.stderr
    one_line_error(r, "standard output", "write failed")


# --- signals ----------------------------------------------------------------------------------------


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purpose
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ")[1][0] != "Z"


@pytest.mark.parametrize("group", [False, True], ids=["to_fp4sim", "to_the_process_group"])
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129),
                                      (signal.SIGQUIT, 131), (signal.SIGPIPE, 141)])
def test_a_signal_stops_the_plot_child_and_removes_the_temporaries(tmp_path, trace, sig, code, group):
    # Sent to the process group (Ctrl-C on a terminal; mpirun and batch systems signal a rank's group), the
    # signal also reaches the plot child, which may end before fp4sim's own handler runs: still one line.
    plot = PlotStandIn(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "r.json").write_text("old")
    p = subprocess.Popen([FP4SIM, "replay", str(trace), *QUICK, "--json", str(out / "r.json"), "--csv",
                          str(out / "r.csv"), "--h5", str(out / "r.h5"), "--plots", str(out / "plots")],
                         env=plot.env(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=group)
    child, _ = plot.wait_started(p)
    assert any(".tmp." in name for name in os.listdir(out)), "the temporaries exist while the plots are drawn"
    if group:
        os.killpg(p.pid, sig)
    else:
        p.send_signal(sig)
    _, err = p.communicate()
    assert p.returncode == code, err
    assert err.strip() == f"fp4sim: interrupted ({signal.Signals(sig).name}): no partial output left", err
    assert not alive(child), "the plot process was left running"
    assert sorted(os.listdir(out)) == ["r.json"] and (out / "r.json").read_text() == "old"


# --- replay --steps ranges ----------------------------------------------------------------------------


def test_steps_range_takes_the_captured_steps_inside(trace):
    r = run("replay", trace, "--json", "-", "--layers", "lm_head", "--no-gemms", "-q")
    captured = json.loads(r.stdout)["trace"]["steps"]
    assert len(captured) >= 2
    lo, hi = captured[0], captured[1]
    r = run("replay", trace, "--steps", f"{lo}-{hi + 1}", "--layers", "lm_head", "--no-gemms", "--json", "-", "-q")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["replayed_steps"] == [lo, hi]
    gap = [s for s in range(lo + 1, hi) if s not in captured]
    if gap:
        r = run("replay", trace, "--steps", f"{gap[0]}-{gap[-1]}", "--no-gemms", "-q")
        assert r.returncode == 2
        one_line_error(r, "--steps", "no captured step")


@pytest.mark.parametrize("steps", ["99999999999999999999999", "1-99999999999999999999999", "x-y", "5-2"])
def test_a_bad_steps_value_is_one_line_naming_the_option(trace, steps):
    r = run("replay", trace, "--steps", steps, "--layers", "lm_head", "--no-gemms", "-q")
    assert r.returncode == 2, (steps, r.returncode, r.stderr)
    one_line_error(r, "--steps", steps)
    assert "stoull" not in r.stderr and "stoll" not in r.stderr


# --- traces: declared but absent storage -----------------------------------------------------------


@pytest.mark.parametrize("written_rows", [0, 128])
def test_a_tensor_declared_but_not_written_is_a_data_error(trace, written_rows):
    h5py = pytest.importorskip("h5py")
    with h5py.File(trace, "r+") as f:
        del f["step_000001/lm_head/x"]
        rows = 2**40 if written_rows == 0 else 256
        d = f.create_dataset("step_000001/lm_head/x", shape=(rows, 384), dtype="f4", chunks=(128, 384))
        if written_rows:
            d[:written_rows] = 1.0
    for args in (["replay", trace, "--no-gemms", "-q"], ["sweep", trace, "-q"]):
        r = run(*args)
        assert r.returncode == 3, (args, r.returncode, r.stderr)
        one_line_error(r, "step_000001/lm_head/x", "declared but")


# --- replay memory: --slab-mib bounds the GEMM entries too ------------------------------------------


def layer_trace(path, tokens, d_in, d_out):
    """A one-step, one-layer trace of random x [tokens, d_in], w [d_out, d_in], dy [tokens, d_out]."""
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(7)
    with h5py.File(path, "w") as f:
        f.attrs["schema"] = "fp4-trace"
        f.attrs["schema_version"] = 1
        step = f.create_group("step_000001")
        step.attrs["step"] = 1
        layer = step.create_group("layer")
        layer["x"] = rng.standard_normal((tokens, d_in), dtype=np.float32)
        layer["w"] = rng.standard_normal((d_out, d_in), dtype=np.float32)
        layer["dy"] = rng.standard_normal((tokens, d_out), dtype=np.float32) * np.float32(1e-3)
    return path


def peak_rss_mib(*args):
    """fp4sim's peak resident memory, measured in a fresh Python process whose only child it is."""
    probe = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True); "
             "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    r = subprocess.run([sys.executable, "-c", probe, FP4SIM, *map(str, args)], capture_output=True, text=True,
                       timeout=300)
    code, kib = map(int, r.stdout.split())
    assert code == 0, args
    return kib / 1024


def test_replay_gemm_entries_follow_slab_mib(tmp_path):
    if memory_limit() is None:
        pytest.skip("a sanitizer build's resident memory is not the program's")
    # x 2 MiB, dy 4 MiB of float32: held whole, the three GEMMs take 70 MiB more than the tensor
    # statistics; in tiles (at 3 MiB the smallest wgrad tiles fit) about 6 x --slab-mib more.
    trace = layer_trace(tmp_path / "t.h5", 8192, 64, 128)
    common = ["replay", trace, "--recipes", "nvfp4", "--datapath", "f64", "-q", "--no-progress", "--slab-mib"]
    slab_mib = 3
    tensors_only = peak_rss_mib(*common, slab_mib, "--no-gemms")
    tiled = peak_rss_mib(*common, slab_mib, "--json", tmp_path / "tiled.json")
    whole = peak_rss_mib(*common, 256, "--json", tmp_path / "whole.json")
    assert whole - tensors_only > 16 * slab_mib, "the trace must be large enough for the bound to tell"
    assert tiled - tensors_only < 10 * slab_mib, (tiled, tensors_only, whole)
    gemms = json.loads((tmp_path / "tiled.json").read_text())["gemms"]
    assert [g["gemm"] for g in gemms] == ["fprop", "dgrad", "wgrad"]
    assert all(g["rel_fro_err"] is not None for g in gemms), gemms


def replay_entries(trace, *args):
    r = run("replay", trace, "-q", "--no-progress", "--json", "-", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("recipes,slab_mib", [("nvfp4,ue5m3,mxfp4", "0.6"), ("nvfp4", "0.1")])
def test_replay_gemm_tiles_give_the_whole_gemms_results(tmp_path, recipes, slab_mib):
    # 0.6 MiB over three recipes: A in several tiles, wgrad's B too, the tensors held in memory; 0.1 MiB
    # for one: dy streamed, so the tiles (wgrad's transposed ones too) are read from the trace, and fprop's
    # B split. Per element the product is the same, so the largest error is equal; sums change order only.
    trace = layer_trace(tmp_path / "t.h5", 256, 64, 128)
    whole = replay_entries(trace, "--recipes", recipes, "--seed", "5")
    tiled = replay_entries(trace, "--recipes", recipes, "--seed", "5", "--slab-mib", slab_mib)
    assert tiled["tensors"] == whole["tensors"] and tiled["headroom"] == whole["headroom"]
    assert len(tiled["gemms"]) == len(whole["gemms"]) == 3 * len(recipes.split(","))
    for t, w in zip(tiled["gemms"], whole["gemms"]):
        assert t["max_abs_err"] == w["max_abs_err"], (t, w)
        assert t["rel_fro_err"] == pytest.approx(w["rel_fro_err"], rel=1e-12), (t, w)
        assert t["ref_fro_norm"] == pytest.approx(w["ref_fro_norm"], rel=1e-12), (t, w)


def test_a_gemm_too_large_for_slab_mib_says_what_it_needs(tmp_path):
    trace = layer_trace(tmp_path / "t.h5", 4096, 16, 16)
    gemms = replay_entries(trace, "--recipes", "nvfp4", "--slab-mib", "0.2")["gemms"]
    fprop, dgrad, wgrad = gemms
    assert fprop["rel_fro_err"] is not None and dgrad["rel_fro_err"] is not None
    assert wgrad["rel_fro_err"] is None
    assert "slab_mib 2 or more" in wgrad["rel_fro_err_note"], wgrad


# --- messages --------------------------------------------------------------------------------------


def test_an_unknown_subcommand_is_named_with_the_known_ones():
    r = run("frobnicate")
    assert r.returncode == 2
    one_line_error(r, "frobnicate", "convert", "replay")


def test_a_bad_name_is_one_line_with_every_valid_name_and_no_control_bytes(tmp_path, x):
    r = run("convert", "--format", "e2m1", "--rounding", "ab\x01c", "--in", x, "--out", tmp_path / "o.npy")
    assert r.returncode == 2
    one_line_error(r, "--rounding", "\\x01", "sr-fastest")
    assert "\x01" not in r.stderr


# --- a full disk ----------------------------------------------------------------------------------


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB tmpfs (needs root; skipped elsewhere)."""
    mount = tmp_path / "full"
    mount.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        # leave less room than any of the outputs needs
        (mount / "filler").write_bytes(b"\0" * (60 << 10))
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


# --csv r.csv writes one table per record kind (r_tensors.csv first), and the error names the file it was writing.
@pytest.mark.parametrize("flag,name,written", [("--h5", "r.h5", "r.h5"), ("--json", "r.json", "r.json"),
                                               ("--csv", "r.csv", "r_tensors.csv")])
def test_a_full_disk_is_one_line_exit_3_and_leaves_nothing(trace, full_disk, flag, name, written):
    r = run("replay", trace, "--steps", "1", "--no-gemms", "-q", flag, full_disk / name)
    assert r.returncode == 3, (r.returncode, r.stderr)
    one_line_error(r, written, "No space left on device")
    assert os.listdir(full_disk) == ["filler"]


def test_synthetic_sweep_size_and_vector_cases_are_bounded(tmp_path):
    for rows, cols in (("4294967296", "4294967296"), ("100000", "100000000")):
        r = run("sweep", "--rows", rows, "--cols", cols, "--synthetic", "normal", "-q")
        assert r.returncode == 2, r.stderr
        one_line_error(r, "--slab-mib")
    r = run("vectors", "--recipe", "nvfp4", "--cases", str(2**64 - 1), "--out", tmp_path / "v")
    assert r.returncode == 2
    one_line_error(r, "--cases", "at most")
    assert not (tmp_path / "v").exists()
