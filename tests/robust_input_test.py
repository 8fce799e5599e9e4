"""Hostile input, round three, through the CLI (docs/cli.md "Exit codes"): what a trace holds is data of
any size, and every option value either means what it says or is refused.

* layer names: a 60,000-character name is matched by --layers without recursing once per character;
* steps: a 64-bit @step keeps its own held amax (periodic scaling);
* numbers: --slab-mib beyond what a size holds is a usage error, not a budget of nothing;
* empty values: --steps ',' and an empty recipe override name nothing and are refused;
* vectors: written case by case, a non-empty --out refused before any case, --out . and e/. are the directory;
* standard output: a mismatch report that cannot be written is exit 3; out of memory names the options.
* inputs that are not regular files (a FIFO, /dev/zero, a directory): exit 2 from a stat, never opened;
* a corrupted HDF5 global heap that HDF5 1.10 would walk forever: exit 3, not a hang.

The binary is $FP4SIM_BINARY (ctest sets it).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cli_run import FP4SIM, needs_binary, refused, run

pytestmark = needs_binary


def small_trace(path, steps, layer="layer", scales=None):
    """Captured steps of one small layer; x of step i scaled by scales[i]."""
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(11)
    with h5py.File(path, "w") as f:
        f.attrs["schema"] = "fp4-trace"
        f.attrs["schema_version"] = 1
        for i, step in enumerate(steps):
            g = f.create_group("step_%06d" % step)
            g.attrs["step"] = np.int64(step)
            group = g.create_group(layer)
            group["x"] = rng.standard_normal((16, 64), dtype=np.float32) * np.float32(scales[i] if scales else 1)
            group["w"] = rng.standard_normal((32, 64), dtype=np.float32)
            group["dy"] = rng.standard_normal((16, 32), dtype=np.float32)
    return path


# --- layer names of any length ---------------------------------------------------------------------


LONG_NAME = "a" * 60_000


@pytest.fixture
def long_name_trace(tmp_path):
    return small_trace(tmp_path / "long.h5", [1], layer=LONG_NAME)


@pytest.mark.parametrize("pattern,selected", [(".*", True), ("a+", True), ("a+b", False), ("^a{3}", True),
                                              ("(a|b)*c", False)])
def test_a_long_layer_name_is_matched_without_recursion(long_name_trace, pattern, selected):
    # std::regex's depth-first matcher recursed once per character: SIGSEGV on this name.
    r = run("replay", long_name_trace, "--layers", pattern, "--recipes", "nvfp4", "--no-gemms", "--json", "-", "-q")
    if selected:
        assert r.returncode == 0, r.stderr
        assert {e["layer"] for e in json.loads(r.stdout)["tensors"]} == {LONG_NAME}
    else:
        refused(r, 2, "--layers", "matches no layer")


def test_sweep_layers_takes_the_same_matcher(long_name_trace):
    r = run("sweep", long_name_trace, "--layers", "a+", "--blocks", "32", "--scale-formats", "ue4m3",
            "--tensor-scales", "none", "--json", "-", "-q")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tensors"]


@pytest.mark.parametrize("pattern", ["a)(b", "(", "\\1(a)", "a{2,1}"])
def test_a_bad_layers_pattern_is_one_line(tmp_path, pattern):
    # "a)(b" is valid once wrapped in (?:...): the pattern is checked on its own; back-references have no
    # linear-time matcher and are refused.
    r = run("replay", small_trace(tmp_path / "t.h5", [1]), "--layers", pattern, "--no-gemms", "-q")
    refused(r, 2, "--layers", "invalid regular expression")


# --- 64-bit steps ------------------------------------------------------------------------------------


def test_a_step_past_2_to_the_32_holds_its_own_amax(tmp_path):
    # 4294967306 = 2^32 + 10: cut to 32 bits its refresh step was 1, and step 1's amax held "exactly".
    trace = small_trace(tmp_path / "t.h5", [1, 4294967306], scales=[1, 8])
    r = run("replay", trace, "--recipes", "ue5m3", "--no-gemms", "--json", "-", "-q")
    assert r.returncode == 0, r.stderr
    late = [e for e in json.loads(r.stdout)["tensors"] if e["step"] == 4294967306]
    assert len(late) == 3
    for e in late:
        assert e["held_from_step"] == 4294967306 and e["held_exact"] is False, e
        assert e["held_amax"] == e["amax"] and e["rho"] == 1, e


# --- numbers and empty values ------------------------------------------------------------------------


@pytest.mark.parametrize("slab_mib", ["2e13", "1e300", str(2**64 - 1), "inf", "nan", "0", "-1"])
def test_slab_mib_beyond_a_size_is_a_usage_error(tmp_path, slab_mib):
    trace = small_trace(tmp_path / "t.h5", [1])
    for sub in (["replay", trace, "--no-gemms"], ["replay", trace], ["sweep", trace]):
        r = run(*sub, "--slab-mib", slab_mib, "-q")
        refused(r, 2, "--slab-mib")


def test_the_largest_slab_mib_is_taken(tmp_path):
    r = run("replay", small_trace(tmp_path / "t.h5", [1]), "--recipes", "nvfp4", "--slab-mib", "16777216",
            "--json", "-", "-q")
    assert r.returncode == 0, r.stderr
    assert all(g["rel_fro_err"] is not None for g in json.loads(r.stdout)["gemms"])


@pytest.mark.parametrize("steps", [",", " ", " , "])
def test_steps_naming_nothing_is_refused(tmp_path, steps):
    r = run("replay", small_trace(tmp_path / "t.h5", [1, 2]), "--steps", steps, "--no-gemms", "-q")
    refused(r, 2, "--steps", "names no step")


@pytest.mark.parametrize("option", ["--rht-signs", "--scale-format", "--element-format", "--tensor-scale"])
def test_an_empty_recipe_override_is_refused(tmp_path, option):
    x = tmp_path / "x.npy"
    np.save(x, np.ones((2, 32), np.float32))
    r = run("quantize", "--recipe", "nvfp4", option, "", "--in", x, "--codes", tmp_path / "c.npy",
            "--scales", tmp_path / "s.npy")
    refused(r, 2, option)
    assert not (tmp_path / "c.npy").exists()


# --- vectors: streamed, refused before work, every documented --out form ---------------------------


def peak_rss_mib(*args):
    """fp4sim's peak resident memory, measured in a fresh Python process whose only child it is."""
    probe = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True); "
             "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    r = subprocess.run([sys.executable, "-c", probe, FP4SIM, *map(str, args)], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, OMP_NUM_THREADS="1"))
    code, kib = map(int, r.stdout.split())
    assert code == 0, args
    return kib / 1024


def test_vectors_memory_does_not_grow_with_the_cases(tmp_path):
    if os.environ.get("ASAN_OPTIONS") is not None:
        pytest.skip("a sanitizer build's resident memory is not the program's")
    few = peak_rss_mib("vectors", "--recipe", "mxfp4", "--cases", 100, "--out", tmp_path / "few")
    many = peak_rss_mib("vectors", "--recipe", "mxfp4", "--cases", 1000, "--out", tmp_path / "many")
    # held to the end, each case took ~26 KiB: 900 more cases were 23 MiB more
    assert many - few < 12, (few, many)


def test_vectors_into_a_non_empty_directory_is_refused_before_any_case(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep").write_text("mine")
    # 50,000 cases took minutes before the refusal came
    r = run("vectors", "--recipe", "mxfp4", "--cases", 50000, "--out", out)
    refused(r, 2, str(out), "not empty")
    assert os.listdir(out) == ["keep"] and sorted(os.listdir(tmp_path)) == ["out"]


@pytest.mark.parametrize("out,cwd", [(".", "e"), ("e/.", ""), ("e/", ""), ("e/../e", "")])
def test_vectors_out_names_the_directory_however_written(tmp_path, out, cwd):
    (tmp_path / "e").mkdir()
    r = run("vectors", "--recipe", "mxfp4", "--out", out, cwd=tmp_path / cwd)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "e" / "manifest.json").exists()
    assert sorted(os.listdir(tmp_path)) == ["e"], "no temporary left beside it"


def test_vectors_out_empty_is_refused(tmp_path):
    r = run("vectors", "--recipe", "mxfp4", "--out", "", cwd=tmp_path)
    refused(r, 2, "--out", "empty path")
    assert r.stdout == "" and os.listdir(tmp_path) == []


# --- standard output and memory messages -------------------------------------------------------------


def test_a_mismatch_report_that_cannot_be_written_is_exit_3(tmp_path):
    h5py = pytest.importorskip("h5py")
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(0).standard_normal((4, 64), dtype=np.float32))
    assert run("quantize", "--recipe", "nvfp4", "--in", x, "--out", tmp_path / "q.h5").returncode == 0
    with h5py.File(tmp_path / "q.h5", "r") as f:
        codes, scales = f["codes"][...], f["scales"][...]
    codes[1, 3] ^= 1
    np.save(tmp_path / "c.npy", codes)
    np.save(tmp_path / "s.npy", scales)
    args = ["verify", "quantize", "--recipe", "nvfp4", "--in", x, "--codes", tmp_path / "c.npy", "--scales",
            tmp_path / "s.npy"]
    assert run(*args).returncode == 4
    with open("/dev/full", "w") as full:
        r = subprocess.run([FP4SIM, *map(str, args)], stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    refused(r, 3, "standard output", "write failed")


def test_out_of_memory_in_sweep_names_the_options():
    def limit_memory():
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    if subprocess.run([FP4SIM, "--version"], capture_output=True, preexec_fn=limit_memory).returncode != 0:
        pytest.skip("the binary does not start in 1 GiB of address space (a sanitizer build)")
    # 4 GiB a tensor, allowed by --slab-mib, refused by the machine
    r = run("sweep", "--rows", 1048576, "--cols", 1024, "--slab-mib", "1e6", "--synthetic", "normal", "-q",
            preexec_fn=limit_memory)
    refused(r, 3, "out of memory", "--rows x --cols")
    assert "bad_alloc" not in r.stderr


def test_a_figure_that_is_not_finite_has_a_documented_note():
    r = run("sweep", "--synthetic", "normal", "--rows", 16, "--cols", 64, "--blocks", 32, "--scale-formats", "ue4m3",
            "--tensor-scales", "periodic:50", "--rho", "1e-300", "--json", "-", "-q")
    assert r.returncode == 0, r.stderr
    entry = json.loads(r.stdout)["tensors"][0]
    assert entry["held_amax"] is None and entry["held_amax_note"] == "not finite: +Infinity", entry


# --- one rule each: what was still open ---------------------------------------------------------------


@pytest.fixture
def x_npy(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.linspace(-3, 3, 64, dtype=np.float32).reshape(2, 32))
    return path


def test_an_empty_output_path_is_exit_2_in_every_subcommand(tmp_path, x_npy):
    trace = small_trace(tmp_path / "t.h5", [1])
    commands = [
        ["convert", "--format", "e2m1", "--in", x_npy, "--out", ""],
        ["convert", "--format", "e2m1", "--in", x_npy, "--out", tmp_path / "c.npy", "--decoded", ""],
        ["quantize", "--recipe", "nvfp4", "--in", x_npy, "--out", ""],
        ["gemm", "--recipe", "nvfp4", "--a", x_npy, "--b", x_npy, "--out", ""],
        ["mma", "--datapath", "sm100-mxf4nvf4", "--input-format", "e2m1", "--a", x_npy, "--b", x_npy, "--out", ""],
        ["replay", trace, "--no-gemms", "-q", "--json", ""],
        ["replay", trace, "--no-gemms", "-q", "--csv", ""],
        ["replay", trace, "--no-gemms", "-q", "--h5", ""],
        ["sweep", trace, "-q", "--json", ""],
        ["vectors", "--recipe", "mxfp4", "--out", ""],
    ]
    for args in commands:
        r = run(*args, cwd=tmp_path)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert "empty path" in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    assert sorted(os.listdir(tmp_path)) == ["t.h5", "x.npy"]


def test_crosscheck_an_unknown_recipe_is_a_usage_error_on_any_machine():
    r = run("crosscheck", "--recipe", "bogus")
    refused(r, 2, "--recipe", "bogus")
    refused(run("crosscheck", "--recipe", "nvfp4:bogus=1"), 2, "--recipe 'nvfp4:bogus=1'", "unknown override 'bogus'")


def test_crosscheck_refuses_a_recipe_only_the_cpu_model_implements_on_any_machine():
    # a stack profile (TE's reference NaN rule) and a spec (division element scaling)
    refused(run("crosscheck", "--recipe", "nvfp4-te-reference"), 2, "nvfp4-te-reference", "nan_amax")
    refused(run("crosscheck", "--recipe", "nvfp4:element_scaling=division"), 2, "element_scaling")


def npy_with_header(path, header_dict_text, payload):
    header = header_dict_text + " " * ((64 - (10 + len(header_dict_text) + 1) % 64) % 64) + "\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + payload)
    return path


@pytest.mark.parametrize("header,words", [
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 32), 'shape': (2, 64), }", ["'shape' twice"]),
    ("{'descr': [('a', '<f4'), ('b', '<f4')], 'fortran_order': False, 'shape': (64,), }", ["structured dtype"]),
])
def test_an_npy_header_numpy_would_read_otherwise_is_refused(tmp_path, header, words):
    path = npy_with_header(tmp_path / "odd.npy", header, b"\0" * 512)
    r = run("convert", "--format", "e2m1", "--in", path, "--out", tmp_path / "o.npy")
    refused(r, 3, str(path), *words)
    assert not (tmp_path / "o.npy").exists()


def test_a_signed_step_group_is_refused_not_skipped(tmp_path):
    h5py = pytest.importorskip("h5py")
    trace = small_trace(tmp_path / "t.h5", [1])
    with h5py.File(trace, "r+") as f:
        f.copy("step_000001", "step_-00001")
        f["step_-00001"].attrs["step"] = -1
    r = run("replay", trace, "--no-gemms", "-q")
    refused(r, 3, "step_-00001", "one-based")


def test_control_bytes_in_an_error_message_do_not_reach_the_terminal(tmp_path):
    # a library error quoting a value (here the --layers pattern) prints it escaped, as CLI11's own errors do
    trace = small_trace(tmp_path / "t.h5", [1], layer="evil\x1b[2Jname")
    r = run("replay", trace, "--layers", "zz\x1b[2J", "--no-gemms", "-q")
    refused(r, 2, "--layers", "zz\\x1B[2J")
    assert "\x1b" not in r.stderr


# --- inputs that are not regular files ----------------------------------------------------------------


# Every command family with an input position: IN stands for the input (.npy or trace), OUT for a file in
# an empty output directory.
INPUT_COMMANDS = [
    "convert --format e2m1 --in IN --out OUT",
    "quantize --recipe nvfp4 --in IN --codes OUT",
    "gemm --recipe nvfp4 --a IN --b IN --out OUT",
    "mma --datapath sm90-bf16 --input-format bf16 --a IN --b IN --out OUT",
    "verify quantize --recipe nvfp4 --in IN --codes IN --scales IN",
    "verify gemm --recipe nvfp4 --a IN --b IN --c IN",
    "replay IN --no-gemms -q --json OUT",
    "sweep IN -q --json OUT",
]


@pytest.mark.parametrize("command", INPUT_COMMANDS)
def test_a_fifo_as_input_is_refused_without_opening_it(tmp_path, command):
    # Opening a FIFO for reading blocks until a writer comes: the path is stat'ed and refused instead. The
    # timeout bounds a regression (the command would block forever); it synchronises nothing.
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    out.mkdir()
    names = {"IN": str(fifo), "OUT": str(out / "o.npy")}
    args = [names.get(word, word) for word in command.split()]
    r = subprocess.run([FP4SIM, *args], capture_output=True, text=True, timeout=60)
    refused(r, 2, str(fifo), "is a FIFO, not a regular file")
    assert os.listdir(out) == []


@pytest.mark.parametrize("path,kind", [("/dev/zero", "a character device"), (None, "a directory")])
def test_a_device_or_directory_as_input_is_a_usage_error(tmp_path, path, kind):
    path = path or tmp_path
    for args in (["convert", "--format", "e2m1", "--in", path, "--out", tmp_path / "o.npy"],
                 ["replay", path, "--no-gemms", "-q"]):
        r = subprocess.run([FP4SIM, *map(str, args)], capture_output=True, text=True, timeout=60)
        refused(r, 2, str(path), "is " + kind)
    assert not (tmp_path / "o.npy").exists()


# --- a corrupted global heap --------------------------------------------------------------------------


def test_a_global_heap_that_hdf5_would_walk_forever_is_refused(tmp_path):
    # HDF5 1.10 steps through a collection's objects by each one's size; a free-space object (index 0) of
    # size 0 never moves it, and H5Aread(@schema) looped forever (docs/fuzzing.md). The repro: the
    # contiguous.h5 seed with that size zeroed. The timeout bounds a regression; it synchronises nothing.
    seed = bytearray((Path(__file__).parent / "fuzz" / "corpus" / "trace_read" / "contiguous.h5").read_bytes())
    collection = seed.index(b"GCOL\x01")
    at = collection + 16
    while int.from_bytes(seed[at:at + 2], "little") != 0:  # objects 1, 2, ... then the free space, 0
        at += 16 + (int.from_bytes(seed[at + 8:at + 16], "little") + 7) // 8 * 8
    seed[at + 8:at + 16] = bytes(8)
    trace = tmp_path / "heap.h5"
    trace.write_bytes(seed)
    r = subprocess.run([FP4SIM, "replay", str(trace), "--no-gemms", "-q", "--json", str(tmp_path / "r.json")],
                       capture_output=True, text=True, timeout=60)
    refused(r, 3, str(trace), "global heap collection", "size 0")
    assert sorted(os.listdir(tmp_path)) == ["heap.h5"]
