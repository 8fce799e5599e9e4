"""The command line as a person meets it (docs/cli.md): --help with every choice and its meaning and one
example per subcommand, CLI11's own errors under the one `fp4sim: error:` prefix, the outputs holding what
their names say, and the progress reporter.

The binary is $FP4SIM_BINARY (ctest sets it to $<TARGET_FILE:fp4sim>).
"""

import csv
import os
import pty
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

FP4SIM = os.environ.get("FP4SIM_BINARY")
ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "traces" / "trace_a.h5"

pytestmark = pytest.mark.skipif(
    not FP4SIM or not os.path.exists(FP4SIM), reason="FP4SIM_BINARY does not name a built fp4sim binary"
)

SUBCOMMANDS = ["formats", "convert", "quantize", "gemm", "mma", "crosscheck", "verify", "verify quantize",
               "verify gemm", "replay", "sweep", "vectors", "datapath", "datapath identify"]


def run(*args, **kwargs):
    return subprocess.run([FP4SIM, *map(str, args)], capture_output=True, text=True, timeout=300, **kwargs)


def run_on_terminal(*args):
    """Runs fp4sim with stderr on a pseudo-terminal (stdout a pipe); returns (exit code, what the terminal got)."""
    leader, follower = pty.openpty()
    p = subprocess.Popen([FP4SIM, *map(str, args)], stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    p.stdout.read()
    return p.wait(timeout=300), seen.decode(errors="replace")


# --- help -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_every_subcommand_shows_an_example_that_uses_its_own_flags(sub):
    r = run(*sub.split(), "--help")
    assert r.returncode == 0, r.stderr
    m = re.search(r"^Example:\n  (fp4sim .*)$", r.stdout, re.M)
    assert m, r.stdout
    example = m.group(1).split()
    words = [w for w in example[1:] if not w.startswith("-")][:len(sub.split()) + 1]
    command = [w for w in words if w in SUBCOMMANDS or " ".join(words[:2]) in SUBCOMMANDS][:2]
    assert " ".join(command).startswith(sub), example
    # Every flag of the example is one the (sub)subcommand it runs lists.
    helped = run(*command, "--help").stdout if command != sub.split() else r.stdout
    for flag in (w for w in example if w.startswith("--")):
        assert re.search(rf"^\s+(-\w, )?{re.escape(flag)}\b", helped, re.M), (flag, helped)


@pytest.mark.parametrize("sub,flag,rows", [
    ("quantize", "--rounding", {"rne": "round to nearest, ties to even", "sr-fastest": "TransformerEngine"}),
    ("quantize", "--scale-rule", {"two-level": "tensor multiplier G", "floor": "OCP MX", "rceil": "cuBLAS"}),
    ("quantize", "--role", {"activation": "fprop's A", "grad_output": "dgrad's A"}),
    ("quantize", "--layout", {"rowmajor": "fp4sim's own", "swizzled-128x4": "128 x 4 tiles"}),
    ("quantize", "--nibbles", {"low-first": "low nibble", "unpacked": "one code per byte"}),
    ("quantize", "--zero-scale", {"keep": "FLT_MAX", "one": "1.0"}),
    ("quantize", "--dequantize-order", {"portable": "RN(q * RN(s * Gd))", "te_kernel": "TE"}),
    ("quantize", "--tensor-scale", {"periodic": "held in between", "current": "amax of the tensor"}),
    ("gemm", "--gemm", {"fprop": "A = x, B = w", "wgrad": "A = dy^T"}),
    ("gemm", "--datapath", {"exact": "", "fp32-seq": "", "probe-matched": ""}),
    ("replay", "--hold", {"window": "refresh step", "previous": "previous captured step"}),
    ("convert", "--specials", {"hardware": "satfinite", "te-python": "become +0"}),
    ("verify gemm", "--datapath", {"sm90-bf16": ""}),
])
def test_choices_are_listed_with_their_meanings(sub, flag, rows):
    r = run(*sub.split(), "--help")
    assert r.returncode == 0, r.stderr
    assert "ENUM" not in r.stdout and not re.search(r"\{[\w-]+->", r.stdout), r.stdout
    # The option's block: its own line and the indented lines under it, up to the next option.
    m = re.search(rf"^  {re.escape(flag)} .*?(?=^  -|^\S|\Z)", r.stdout, re.M | re.S)
    assert m, r.stdout
    block = m.group(0)
    for name, meaning in rows.items():
        line = re.search(rf"^\s+{re.escape(name)}:?\s+(.*)$", block, re.M)
        assert line, (name, block)
        assert meaning in line.group(1), (name, line.group(0))


def test_recipe_help_names_every_preset_with_its_source():
    r = run("quantize", "--help")
    for name in ["ue5m3", "ue5m3-b32", "ue5m3-te", "nvfp4", "nvfp4-norht", "mxfp4"]:
        assert re.search(rf"^\s+{name}: \S", r.stdout, re.M), name


# --- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("args,where", [
    (["quantize", "--recipe", "nvfp4", "--in", "x.npy", "--out", "q.h5", "--rounding", "bogus"], "quantize"),
    (["quantize", "--recipe", "nvfp4", "--in", "x.npy", "--out", "q.h5", "--no-such-flag"], "quantize"),
    (["quantize", "--in", "x.npy", "--out", "q.h5"], "quantize"),
    (["verify", "gemm", "--recipe", "nvfp4", "--a", "nothere.npy"], "verify gemm"),
    (["replay", str(TRACE), "--hold", "later"], "replay"),
    (["no-such-subcommand"], None),
    ([], None),
])
def test_cli11_errors_carry_the_one_prefix(tmp_path, args, where):
    r = run(*args, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fp4sim: error: "), r.stderr
    assert f"'fp4sim {where} --help'" in lines[0] if where else "'fp4sim --help'" in lines[0], lines[0]
    assert os.listdir(tmp_path) == []


# --- quantize outputs -----------------------------------------------------------------------------


@pytest.fixture
def tensor(tmp_path):
    x = np.random.default_rng(3).standard_normal((130, 96)).astype(np.float32)
    x[5, :16] = 0.0
    np.save(tmp_path / "x.npy", x)
    return tmp_path / "x.npy"


@pytest.mark.parametrize("args,says", [
    (["--out", "q.npy"], "--out q.npy: --out writes one HDF5 file (.h5 or .hdf5)"),
    (["--out", "q"], "--out q: --out writes one HDF5 file"),
    (["--codes", "c.h5"], "--codes c.h5: writes a NumPy array; name a .npy file"),
    (["--dequantized", "d.txt"], "--dequantized d.txt: writes a NumPy array"),
    ([], "name an output"),
])
def test_quantize_refuses_an_output_its_name_does_not_fit(tmp_path, tensor, args, says):
    r = run("quantize", "--recipe", "nvfp4", "--in", tensor, *args, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("fp4sim: error: ") and says in r.stderr, r.stderr
    assert os.listdir(tmp_path) == ["x.npy"]


@pytest.mark.parametrize("recipe,role", [("nvfp4", "weight"), ("mxfp4", "activation"), ("ue5m3", "grad_output")])
@pytest.mark.parametrize("layout", ["rowmajor", "te-rowrep", "swizzled-128x4"])
@pytest.mark.parametrize("nibbles", ["low-first", "high-first", "unpacked"])
def test_quantize_npy_outputs_in_every_layout_verify_bit_exact(tmp_path, tensor, recipe, role, layout, nibbles):
    c, s, d, q = (tmp_path / n for n in ("c.npy", "s.npy", "d.npy", "q.h5"))
    common = ["--recipe", recipe, "--role", role, "--in", tensor, "--layout", layout, "--nibbles", nibbles]
    r = run("quantize", *common, "--codes", c, "--scales", s, "--dequantized", d, "--out", q)
    assert r.returncode == 0, r.stderr
    codes, scales, deq = np.load(c), np.load(s), np.load(d)
    assert codes.dtype == np.uint8 and scales.dtype == np.uint8 and deq.dtype == np.float32
    assert codes.shape == ((130, 96) if nibbles == "unpacked" else (130, 48))
    assert deq.shape == (130, 96)
    if layout == "swizzled-128x4":
        assert scales.shape[0] % 128 == 0 and scales.shape[1] % 4 == 0
    import h5py
    with h5py.File(q) as f:
        assert np.array_equal(f["codes"][:], codes) and np.array_equal(f["scales"][:], scales)
        assert np.array_equal(f["dequantized"][:], deq)
        assert f.attrs["layout"] == layout and f.attrs["nibbles"] == nibbles
    # The independent judge: verify quantize reads them back in the same layout and finds every byte equal.
    v = run("verify", "quantize", *common, "--codes", c, "--scales", s)
    assert v.returncode == 0, v.stdout + v.stderr


def nvfp4_kernel_dividing_by_the_scale(x):
    """An NVFP4 activation quantizer written in numpy as a kernel author would, with the defect TE PRs
    #2615/#2639 fixed: each element divided by RN(s * Gd) instead of multiplied by RN(1 / RN(s * Gd))."""
    import ml_dtypes
    f32 = np.float32
    g = f32(f32(6.0) * f32(448.0)) / np.abs(x).max()
    gd = f32(1.0) / g
    blocks = x.reshape(x.shape[0], -1, 16)
    ideal = np.abs(blocks).max(axis=2) * (g * (f32(1.0) / f32(6.0)))
    s = ideal.astype(ml_dtypes.float8_e4m3fn)
    y = blocks / (s.astype(f32) * gd)[:, :, None]
    codes = y.reshape(x.shape).astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8), s.view(np.uint8)


def test_verify_names_a_kernel_that_divides_by_the_scale(tmp_path):
    import ml_dtypes
    x = np.random.default_rng(15).standard_normal((512, 256)).astype(ml_dtypes.bfloat16).astype(np.float32)
    codes, scales = nvfp4_kernel_dividing_by_the_scale(x)
    for name, a in (("x", x), ("codes", codes), ("scales", scales)):
        np.save(tmp_path / f"{name}.npy", a)
    v = run("verify", "quantize", "--recipe", "nvfp4", "--in", tmp_path / "x.npy", "--codes", tmp_path / "codes.npy",
            "--scales", tmp_path / "scales.npy")
    assert v.returncode == 4, v.stdout + v.stderr
    assert "0 scale mismatch" in v.stdout, v.stdout
    assert ("your codes and scales match the golden model exactly with one rule changed: the element scaling "
            "computed by division") in v.stdout, v.stdout
    assert "yours matches y rounded" not in v.stdout, v.stdout


def test_quantize_default_storage_is_packed_low_first_and_rowmajor(tmp_path, tensor):
    r = run("quantize", "--recipe", "nvfp4", "--in", tensor, "--codes", tmp_path / "c.npy",
            "--scales", tmp_path / "s.npy", "--dequantized", tmp_path / "d.npy")
    assert r.returncode == 0, r.stderr
    codes, scales = np.load(tmp_path / "c.npy"), np.load(tmp_path / "s.npy")
    assert codes.shape == (130, 48) and scales.shape == (130, 6)
    lo = codes & 0xF
    assert np.all(lo[5, :8] == 0)  # the zero block's codes are +0


# --- replay / sweep outputs -------------------------------------------------------------------------


INTEGER_COLUMNS = {
    "tensors": ["step", "rows", "cols", "block_rows", "block_cols", "elements", "nonzero", "blocks", "zero_blocks",
                "scale_saturated", "scale_underflow", "nan", "inf", "held_from_step"],
    "gemms": ["step", "m", "n", "k", "a_held_from_step", "b_held_from_step"],
    "headroom": ["step", "period", "blocks", "ue4m3_saturated_blocks", "ue5m3_underflow_blocks", "held_from_step"],
}
BOOLEAN_COLUMNS = {"tensors": ["held_exact"], "gemms": ["a_held_exact", "b_held_exact"], "headroom": ["held_exact"]}


def test_replay_csv_is_one_table_per_kind_with_integers_as_integers(tmp_path):
    (tmp_path / "out").mkdir()
    r = run("replay", TRACE, "--steps", "200", "--layers", "lm_head", "--datapath", "f64", "-q",
            "--csv", tmp_path / "out" / "a.csv")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path / "out")) == ["a_gemms.csv", "a_headroom.csv", "a_tensors.csv"]
    for kind in ("tensors", "gemms", "headroom"):
        with open(tmp_path / "out" / f"a_{kind}.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        assert rows, kind
        assert "kind" not in rows[0]
        for row in rows:
            assert all(v != "" for k, v in row.items() if k in ("step", "layer", "recipe")), row
            for col in INTEGER_COLUMNS[kind]:
                assert re.fullmatch(r"-?\d*", row[col]), (kind, col, row[col])
            for col in BOOLEAN_COLUMNS[kind]:
                assert row[col] in ("true", "false", ""), (kind, col, row[col])
        assert any(row[BOOLEAN_COLUMNS[kind][0]] in ("true", "false") for row in rows), kind
    # Every tensor entry of the JSON is one row of a_tensors.csv, and no column is padding for another kind.
    with open(tmp_path / "out" / "a_tensors.csv", newline="") as f:
        header = next(csv.reader(f))
    assert "rel_fro_err" not in header and "period" not in header


def test_plots_take_a_trailing_slash_and_hold_only_plots(tmp_path):
    r = run("replay", TRACE, "--steps", "200", "--layers", "lm_head", "--datapath", "f64", "-q",
            "--plots", "plots/", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    names = os.listdir(tmp_path / "plots")
    assert names and all(n.endswith(".png") for n in names), names
    assert os.listdir(tmp_path) == ["plots"]
    s = run("sweep", "--rows", "16", "--cols", "64", "--synthetic", "normal", "-q", "--plots", "sp/", cwd=tmp_path)
    assert s.returncode == 0, s.stderr
    assert sorted(os.listdir(tmp_path / "sp")) == ["sqnr_sweep.png"]
    assert sorted(os.listdir(tmp_path)) == ["plots", "sp"]


def test_a_missing_plots_parent_is_exit_3(tmp_path):
    # A missing output directory is a file that cannot be written: exit 3 (docs/cli.md's rule).
    r = run("replay", TRACE, "--steps", "200", "-q", "--plots", "no/such/dir/", cwd=tmp_path)
    assert r.returncode == 3 and "does not exist" in r.stderr, r.stderr


# --- progress -------------------------------------------------------------------------------------

PLAIN = re.compile(r"^fp4sim: (\d+)% of [\d.]+( [kMGTP])? (\w+), ([\d.]+( [kMGTP])?|-) \3/s, ETA (?:\d+:\d\d|-:--), "
                   r"\d+:\d\d elapsed: .*$", re.M)


@pytest.mark.parametrize("args,unit", [
    (["replay", TRACE, "--steps", "200", "--layers", "lm_head", "--no-gemms", "-q"], "elements"),
    (["sweep", "--rows", "16", "--cols", "64", "--synthetic", "normal", "-q"], "elements"),
])
def test_forced_progress_prints_plain_lines_with_rate_and_eta(args, unit):
    quiet = run(*args)
    assert quiet.returncode == 0 and "ETA" not in quiet.stderr, "no progress off a terminal by default"
    r = run(*args, "--progress")
    assert r.returncode == 0, r.stderr
    lines = PLAIN.findall(r.stderr)
    assert lines and lines[-1][0] == "100" and lines[-1][2] == unit, r.stderr
    assert "\r" not in r.stderr and "\033" not in r.stderr


def test_gemm_and_verify_gemm_report_progress(tmp_path):
    rng = np.random.default_rng(1)
    np.save(tmp_path / "a.npy", rng.standard_normal((256, 512)).astype(np.float32))
    np.save(tmp_path / "b.npy", rng.standard_normal((384, 512)).astype(np.float32))
    g = run("gemm", "--recipe", "nvfp4", "--a", tmp_path / "a.npy", "--b", tmp_path / "b.npy",
            "--out", tmp_path / "c.npy", "--progress")
    assert g.returncode == 0, g.stderr
    assert PLAIN.findall(g.stderr)[-1][0] == "100" and "tiles/s" in g.stderr, g.stderr
    v = run("verify", "gemm", "--recipe", "nvfp4", "--a", tmp_path / "a.npy", "--b", tmp_path / "b.npy",
            "--c", tmp_path / "c.npy", "--datapath", "auto", "--progress")
    assert v.returncode == 0, v.stdout + v.stderr
    assert PLAIN.findall(v.stderr)[-1][0] == "100" and "datapaths/s" in v.stderr, v.stderr


def test_progress_draws_on_a_terminal_by_default_and_clears_its_line():
    code, seen = run_on_terminal("replay", TRACE, "--steps", "200", "--layers", "lm_head", "--no-gemms", "-q")
    assert code == 0, seen
    assert re.search(r"\r\x1b\[K\[[# ]{20}\] +\d+%  .* elements/s  ETA \d+:\d\d", seen), repr(seen)
    assert seen.endswith("\r\x1b[K"), repr(seen[-80:])
    code, seen = run_on_terminal("replay", TRACE, "--steps", "200", "--layers", "lm_head", "--no-gemms", "-q",
                                 "--no-progress")
    assert code == 0 and seen == "", repr(seen)


def test_progress_and_no_progress_exclude_each_other():
    r = run("sweep", "--rows", "16", "--cols", "64", "--progress", "--no-progress")
    assert r.returncode == 2 and r.stderr.startswith("fp4sim: error: "), r.stderr
