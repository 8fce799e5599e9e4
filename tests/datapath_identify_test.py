"""`fp4sim datapath identify`, driven through the built binary (docs/datapaths.md §8.1).

* The vendored H200 measurements (tests/data/tensorcore_corners) are identified as the Hopper rows, and
  the Ampere and Blackwell rows that take the same formats miss lines of them.
* Files made by a candidate row (`fp4sim mma` over the H200 corner inputs: A's rows and B's columns are
  corner vectors, so every output of the tile is a line) are reproduced by that row alone, except where
  two rows cannot differ on such inputs (listed, with the reason).
* Bad folders: a name that says no formats, a missing file, a malformed line: one line, exit 3, no report.

The binary is $FP4SIM_BINARY (ctest sets it to $<TARGET_FILE:fp4sim>).
"""

from __future__ import annotations

import gzip
import json
import shutil
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

FP4SIM = os.environ.get("FP4SIM_BINARY")
CORNERS = Path(__file__).resolve().parent / "data" / "tensorcore_corners" / "H200"

pytestmark = pytest.mark.skipif(not FP4SIM, reason="FP4SIM_BINARY not set")


def identify(*folders):
    out = subprocess.run([FP4SIM, "datapath", "identify", "--json", *map(str, folders)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def fits(report):
    return {r["row"] for r in report["rows"] if r["differ"] == 0}


# Folder -> the rows that reproduce every vendored line, and the other candidates with how many lines they
# miss (sm100 rows: the sign of an underflowing zero, O9, and F = 25 for FP8; sm80: G = 8, F = 24; the AMD
# CDNA3 rows: F = 24 with a second, floored window for C and RNE).
H200_EXPECTED = {
    "mma_sync_bf16_f32": ({"sm90-bf16"}, {"sm80": 442, "sm100-f16": 201, "cdna3-bf16": 880}),
    "mma_sync_f16_f16": ({"sm90-f16acc"}, {"sm100-f16acc": 287}),
    "mma_sync_tf32_f32": ({"sm90-tf32"}, {"sm80-tf32": 552, "sm100-tf32": 185, "cdna3-xf32": 1150}),
    "wgmma_e5m2_e4m3_f32": ({"sm90-fp8"}, {"sm100-f8f6f4": 1838}),
    "wgmma_e4m3_e5m2_f16": ({"sm90-fp8-f16acc"}, {"sm100-f8f6f4-f16acc": 326}),
}


@pytest.mark.parametrize("folder", sorted(H200_EXPECTED))
def test_h200_measurements_are_the_hopper_rows(folder):
    [report] = identify(CORNERS / folder)
    expected_fit, expected_miss = H200_EXPECTED[folder]
    assert fits(report) == expected_fit
    assert {r["row"]: r["differ"] for r in report["rows"] if r["differ"]} == expected_miss


def corner_tokens(folder, lines):
    rows = {}
    for name in "abc":
        with gzip.open(CORNERS / folder / f"{name}.txt.gz", "rt") as f:
            text = f.read().split("\n")
        rows[name] = [text[i] for i in lines]
    a = np.array([[int(t, 16) for t in line.split()] for line in rows["a"]], dtype=np.uint32)
    b = np.array([[int(t, 16) for t in line.split()] for line in rows["b"]], dtype=np.uint32)
    c = np.array([int(line, 2) for line in rows["c"]], dtype=np.uint32)
    return a, b, c


def families(folder):
    with open(CORNERS / folder / "families.tsv") as f:
        next(f)
        return [(name, int(first), int(n)) for name, first, n in (line.split("\t") for line in f if line.strip())]


def make_measurement(tmp_path, row, source, name, a_format, b_format):
    """A measurement folder made by `row`: A = 4 corner lines of each family, B the same lines' b vectors;
    every output of the tile is a line (a of its row, b of its column, C[i][j])."""
    picks = [first + i * max(1, n // 4) for _, first, n in families(source) for i in range(min(4, n))]
    a, b, c = corner_tokens(source, picks)
    m = len(picks)
    cmat = np.tile(c, (m, 1)).T.copy()  # C[i][j] = the c of line i
    d = tmp_path / "npy"
    d.mkdir(exist_ok=True)
    np.save(d / "a.npy", a.view(np.float32))
    np.save(d / "b.npy", b.T.copy().view(np.float32))
    np.save(d / "c.npy", cmat.view(np.float32))
    out = subprocess.run([FP4SIM, "mma", "--datapath", row, "--a-format", a_format, "--b-format", b_format,
                          "--a", d / "a.npy", "--b", d / "b.npy", "--c", d / "c.npy", "--out", d / "d.npy"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    dbits = np.load(d / "d.npy").view(np.uint32)
    folder = tmp_path / name
    folder.mkdir()
    with open(folder / "a.txt", "w") as fa, open(folder / "b.txt", "w") as fb, open(folder / "c.txt", "w") as fc, \
            open(folder / "d.txt", "w") as fd:
        for i in range(m):
            for j in range(m):
                fa.write(" ".join(f"{t:08x}" for t in a[i]) + "\n")
                fb.write(" ".join(f"{t:08x}" for t in b[j]) + "\n")
                fc.write(f"{cmat[i, j]:032b}\n")
                fd.write(f"{dbits[i, j]:032b}\n")
    return folder


# (row, corner source, folder name, A format, B format, rows that must fit too and why)
GENERATED = [
    ("sm80", "mma_sync_bf16_f32", "gen-mma_bf16_f32", "bf16", "bf16", set()),
    ("sm90-bf16", "mma_sync_bf16_f32", "gen-mma_bf16_f32", "bf16", "bf16", set()),
    ("sm100-f16", "mma_sync_bf16_f32", "gen-mma_bf16_f32", "bf16", "bf16", set()),
    # fp16 products are >= 2^-48: no nonzero sum rounds to an FP32 zero, so the O9 sign rule never acts.
    ("sm90-bf16", "mma_sync_f16_f32", "gen-mma_f16_f32", "fp16", "fp16", {"sm100-f16"}),
    ("sm70", "mma_sync_f16_f32", "gen-mma_f16_f32", "fp16", "fp16", set()),
    ("sm90-f16acc", "mma_sync_f16_f16", "gen-mma_f16_f16", "fp16", "fp16", set()),
    ("sm100-f16acc", "mma_sync_f16_f16", "gen-mma_f16_f16", "fp16", "fp16", set()),
    ("sm80-tf32", "mma_sync_tf32_f32", "gen-mma_tf32_f32", "fp32", "fp32", set()),
    ("sm90-tf32", "mma_sync_tf32_f32", "gen-mma_tf32_f32", "fp32", "fp32", set()),
    ("sm100-tf32", "mma_sync_tf32_f32", "gen-mma_tf32_f32", "fp32", "fp32", set()),
    ("cdna3-bf16", "mma_sync_bf16_f32", "gen-mma_bf16_f32", "bf16", "bf16", set()),
    ("cdna3-bf16", "mma_sync_f16_f32", "gen-mma_f16_f32", "fp16", "fp16", set()),
    ("cdna3-xf32", "mma_sync_tf32_f32", "gen-mma_tf32_f32", "fp32", "fp32", set()),
    ("sm90-fp8", "wgmma_e4m3_e5m2_f32", "gen-wgmma_e4m3_e5m2_f32", "e4m3", "e5m2", set()),
    ("sm100-f8f6f4", "wgmma_e4m3_e5m2_f32", "gen-wgmma_e4m3_e5m2_f32", "e4m3", "e5m2", set()),
    ("sm90-fp8-f16acc", "wgmma_e5m2_e5m2_f16", "gen-wgmma_e5m2_f16", "e5m2", "e5m2", set()),
    ("sm100-f8f6f4-f16acc", "wgmma_e5m2_e5m2_f16", "gen-wgmma_e5m2_f16", "e5m2", "e5m2", set()),
]


@pytest.mark.parametrize("row,source,name,a_format,b_format,also", GENERATED,
                         ids=[f"{g[0]}-{g[2]}" for g in GENERATED])
def test_a_file_made_by_a_row_is_identified_as_that_row(tmp_path, row, source, name, a_format, b_format, also):
    [report] = identify(make_measurement(tmp_path, row, source, name, a_format, b_format))
    assert report["lines"] > 100
    assert fits(report) == {row} | also
    assert len(report["rows"]) >= 1 + len(also)


def test_bad_folders_are_one_line_exit_3(tmp_path):
    good = tmp_path / "tiny_e4m3_f32"  # one line, 1 * 1 + 0 = 1
    good.mkdir()
    for name, text in {"a": "3f800000\n", "b": "3f800000\n", "c": "0" * 32 + "\n", "d": "0011111110" + "0" * 22 + "\n"}.items():
        (good / f"{name}.txt").write_text(text)
    assert fits(identify(good)[0]) == {"sm90-fp8", "sm100-f8f6f4"}
    nameless = tmp_path / "measured"
    nameless.mkdir()
    missing = tmp_path / "probe_bf16_f32"
    missing.mkdir()
    (missing / "a.txt").write_text("3f800000\n")
    malformed = tmp_path / "probe_e4m3_f32"
    malformed.mkdir()
    for name, text in {"a": "3f800000\n", "b": "3f80zz00\n", "c": "0" * 32 + "\n", "d": "0" * 32 + "\n"}.items():
        (malformed / f"{name}.txt").write_text(text)
    inexact = tmp_path / "probe2_e4m3_f32"
    inexact.mkdir()
    for name, text in {"a": "3f800001\n", "b": "3f800000\n", "c": "0" * 32 + "\n", "d": "0" * 32 + "\n"}.items():
        (inexact / f"{name}.txt").write_text(text)
    for bad, words in ((nameless, "must end in _f32 or _f16"), (missing, "cannot read b.txt"),
                       (malformed, "is not a hex word"), (inexact, "is not exact in e4m3")):
        out = subprocess.run([FP4SIM, "datapath", "identify", str(good), str(bad)], capture_output=True, text=True)
        assert out.returncode == 3, (bad, out.stderr)
        assert out.stdout == ""  # nothing printed for the good folder either
        assert words in out.stderr and out.stderr.count("\n") == 1, out.stderr


def write_block_scaled(folder, lines):
    """lines: (a values, b values, c bits, sa codes, sb codes, d bits), 64 elements per line."""
    folder.mkdir()
    f32 = lambda v: int(np.array(v, np.float32).view(np.uint32))
    files = {name: open(folder / f"{name}.txt", "w") for name in ("a", "b", "c", "sa", "sb", "d")}
    for a, b, c, sa, sb, d in lines:
        files["a"].write(" ".join(f"{f32(v):08x}" for v in a) + "\n")
        files["b"].write(" ".join(f"{f32(v):08x}" for v in b) + "\n")
        files["c"].write(f"{c:032b}\n")
        files["sa"].write(" ".join(f"{s:02x}" for s in sa) + "\n")
        files["sb"].write(" ".join(f"{s:02x}" for s in sb) + "\n")
        files["d"].write(f"{d:032b}\n")
    for f in files.values():
        f.close()
    return folder


def test_block_scaled_folders_are_read_with_their_scales(tmp_path):
    ones = [1.0] * 64
    # Issue 25 item 5's witness (UE8M0 per 16): sub-block 0 = 1*1 - 1*1 under 2^5 * 2^5, sub-block 1 = 1*1
    # under 2^-15 * 2^-15, the rest zero: the exact result 2^-30 (0x30800000) when the zero sub-block takes no
    # part in E_max; MMA-Sim's rule (its scale exponent 10 in E_max) would cut the 2^-30 term away.
    a = [1.0, 1.0] + [0.0] * 14 + [1.0] + [0.0] * 47
    b = [1.0, -1.0] + [0.0] * 14 + [1.0] + [0.0] * 47
    e8m0 = write_block_scaled(tmp_path / "probe_e2m1_ue8m0_block16_f32", [
        (ones, ones, 0, [127] * 4, [127] * 4, 0x42800000),              # 64 * 1 * 1 = 64
        (a, b, 0, [132, 112, 127, 127], [132, 112, 127, 127], 0x30800000),
        (ones, ones, 0, [0xFF, 127, 127, 127], [127] * 4, 0x7FFFFFFF),  # a NaN scale
    ])
    [report] = identify(e8m0)
    assert report["instruction"] == "e2m1 x e2m1, e8m0 scales per 16 -> f32"
    assert [(r["row"], r["differ"]) for r in report["rows"]] == [("sm100-mxf4nvf4", 0)]
    # UE4M3 per 16: a scale byte's sign bit is ignored (MMA-Sim's abs()); 0x38 is 1.0, 0x40 is 2.0.
    ue4m3 = write_block_scaled(tmp_path / "probe_e2m1_ue4m3_block16_f32", [
        (ones, ones, 0x3F800000, [0x40, 0x38, 0x38, 0x38], [0xB8, 0x38, 0x38, 0x38], 0x42A20000),  # 16*2 + 48 + 1 = 81
    ])
    assert fits(identify(ue4m3)[0]) == {"sm100-mxf4nvf4"}
    # UE4M3 per 32 is no PTX mode, but the row takes it (O7: the modes are not modelled per chip).
    block32 = write_block_scaled(tmp_path / "probe_e2m1_ue4m3_block32_f32", [(ones, ones, 0, [0x38] * 2, [0x38] * 2, 0x42800000)])
    assert fits(identify(block32)[0]) == {"sm100-mxf4nvf4"}
    # kind::mxf8f6f4: one UE8M0 pair per 32, the scale exponents in each product's exponent (32 * 2^3 = 256).
    fp8 = write_block_scaled(tmp_path / "probe_e4m3_ue8m0_block32_f32", [
        (ones[:32], ones[:32], 0, [127], [127], 0x42000000), (ones[:32], ones[:32], 0, [130], [127], 0x43800000)])
    assert [(r["row"], r["differ"]) for r in identify(fp8)[0]["rows"]] == [("sm100-mxf8f6f4", 0)]
    fp8_16 = tmp_path / "probe_e4m3_ue8m0_block16_f32"  # kind::mxf8f6f4 has one scale per 32: no row
    write_block_scaled(fp8_16, [(ones[:32], ones[:32], 0, [127] * 2, [127] * 2, 0x42000000)])
    out = subprocess.run([FP4SIM, "datapath", "identify", str(fp8_16)], capture_output=True, text=True)
    assert out.returncode == 0 and "no row takes these formats" in out.stdout, out.stdout + out.stderr
    short = write_block_scaled(tmp_path / "probe2_e2m1_ue8m0_block32_f32", [(ones, ones, 0, [127], [127], 0)])
    out = subprocess.run([FP4SIM, "datapath", "identify", str(short)], capture_output=True, text=True)
    assert out.returncode == 3 and "sa and sb must hold 2 scale codes" in out.stderr, out.stderr


def mma(tmp_path, *args, **arrays):
    for name, array in arrays.items():
        np.save(tmp_path / f"{name}.npy", array)
    files = [x for name in arrays for x in (f"--{name}", str(tmp_path / f"{name}.npy"))]
    return subprocess.run([FP4SIM, "mma", *args, *files, "--out", str(tmp_path / "d.npy")], capture_output=True,
                          text=True)


def test_mma_takes_block_scales_on_the_block_scaled_rows(tmp_path):
    # sm100-mxf4nvf4, UE8M0 per 32 (K = 64, all elements 1): 32 * 2^1 * 2^0 + 32 * 2^-1 * 2^0 = 80; row 1 of A
    # has a NaN scale. UE4M3 per 16 with the sign bit set (ignored): 16 * (2 + 1 + 1 + 1) = 80.
    a, b = np.ones((2, 64), np.float32), np.ones((64, 1), np.float32)
    sa, sb = np.array([[128, 126], [0xFF, 127]], np.uint8), np.array([[127], [127]], np.uint8)
    out = mma(tmp_path, "--datapath", "sm100-mxf4nvf4", "--input-format", "e2m1", "--scale-format", "e8m0",
              a=a, b=b, sa=sa, sb=sb)
    assert out.returncode == 0, out.stderr
    assert np.load(tmp_path / "d.npy").view(np.uint32).tolist() == [[0x42A00000], [0x7FFFFFFF]]
    out = mma(tmp_path, "--datapath", "sm100-mxf4nvf4", "--input-format", "e2m1", a=a[:1], b=b,
              sa=np.array([[0x40, 0x38, 0xB8, 0x38]], np.uint8), sb=np.full((4, 1), 0x38, np.uint8))
    assert out.returncode == 0, out.stderr
    assert np.load(tmp_path / "d.npy").tolist() == [[80.0]]
    # sm100-mxf8f6f4 (K = 32 per scale pair), A e4m3 and B e5m2: 32 * 2^3 + 32 * 2^-2 = 264, chained.
    out = mma(tmp_path, "--datapath", "sm100-mxf8f6f4", "--a-format", "e4m3", "--b-format", "e5m2",
              a=np.ones((1, 64), np.float32), b=np.ones((64, 1), np.float32), sa=np.array([[130, 125]], np.uint8),
              sb=np.array([[127], [127]], np.uint8))
    assert out.returncode == 0, out.stderr
    assert np.load(tmp_path / "d.npy").tolist() == [[264.0]]
    # Wrong uses: one line each, exit 2 (usage) or 3 (data), no output.
    for args, arrays, code, words in [
        (["--datapath", "sm100-mxf8f6f4", "--input-format", "e4m3"], {"a": a[:, :32], "b": b[:32]}, 2,
         "needs the scale codes of A and B"),
        (["--datapath", "sm90-fp8", "--input-format", "e4m3"], {"a": a[:, :32], "b": b[:32], "sa": sa, "sb": sb}, 2,
         "takes no block scales"),
        (["--datapath", "sm90-bf16", "--input-format", "bf16", "--scale-format", "e8m0"], {"a": a[:, :16], "b": b[:16]},
         2, "takes no block scales"),
        (["--datapath", "sm100-mxf4nvf4", "--input-format", "e2m1", "--scale-format", "ue5m3"],
         {"a": a, "b": b, "sa": sa, "sb": sb}, 2, "takes ue4m3, e8m0 scales"),
        (["--datapath", "sm100-mxf8f6f4", "--input-format", "e4m3"],
         {"a": a, "b": b, "sa": np.full((2, 1), 127, np.uint8), "sb": np.full((1, 1), 127, np.uint8)}, 3,
         "takes one scale per 32 elements"),
        (["--datapath", "sm100-mxf4nvf4", "--input-format", "e2m1"],
         {"a": a, "b": b, "sa": np.full((2, 8), 127, np.uint8), "sb": np.full((8, 1), 127, np.uint8)}, 3,
         "takes one scale per 16, 32 or 64 elements"),
        (["--datapath", "sm100-mxf4nvf4", "--input-format", "e2m1"],
         {"a": a, "b": b, "sa": sa, "sb": np.full((3, 1), 127, np.uint8)}, 3, "must be [M, K / block]"),
    ]:
        (tmp_path / "d.npy").unlink(missing_ok=True)
        for stale in ("sa", "sb"):
            (tmp_path / f"{stale}.npy").unlink(missing_ok=True)
        out = mma(tmp_path, *args, **arrays)
        assert out.returncode == code, (args, out.stderr)
        assert words in out.stderr and out.stderr.count("\n") == 1, out.stderr
        assert not (tmp_path / "d.npy").exists()


def build_generator(tmp_path, source):
    """A probe-kit case generator (tools/probes/*_cases.cpp) linked with the core library beside the binary, by
    that build's compiler (CMakeCache.txt beside it); a sanitizer or fuzzing build is left to the plain one."""
    build = Path(FP4SIM).resolve().parent
    core, cache = build / "libfp4sim_core.a", build / "CMakeCache.txt"
    if not core.exists() or not cache.exists():
        pytest.skip(f"no {core} and {cache} (an installed binary?) to build tools/probes/{source} against")
    settings = dict(line.split("=", 1) for line in cache.read_text().splitlines() if "=" in line and line[:1].isalpha())
    if "ON" in (settings.get("FP4SIM_SANITIZE:BOOL"), settings.get("FP4SIM_FUZZ:BOOL")):
        pytest.skip("a sanitizer build: the generators are built and checked against the plain build")
    compiler = settings.get("CMAKE_CXX_COMPILER:FILEPATH", "c++")
    root = Path(__file__).resolve().parent.parent
    exe = tmp_path / source.replace(".cpp", "")
    out = subprocess.run([compiler, "-O1", "-std=c++20", "-fopenmp", "-I", str(root / "include"),
                          str(root / "tools" / "probes" / source), str(core), "-o", str(exe)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    return exe


@pytest.mark.parametrize("source,row,models", [
    ("mxf8f6f4_cases.cpp", "sm100-mxf8f6f4", {"fp4sim": True, "mmasim": False, "rnesum": False}),
    ("blockscale_cases.cpp", "sm100-mxf4nvf4", {"mmasim": True, "ue5m3": False, "rz25": False}),
])
def test_probe_cases_tell_the_candidate_models_apart(tmp_path, source, row, models):
    # The probe kit's inputs: every folder's file made by the model fp4sim's row follows is reproduced by that
    # row, and the files of the competing models are not (a B200's d.txt then picks one).
    exe = build_generator(tmp_path, source)
    out = subprocess.run([str(exe), str(tmp_path / "cases"), "40"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    folders = sorted((tmp_path / "cases").iterdir())
    assert folders
    for folder in folders:
        for model, fits_row in models.items():
            shutil.copy(folder / f"d.{model}.txt", folder / "d.txt")
            [report] = identify(folder)
            [fit] = [r for r in report["rows"] if r["row"] == row]
            assert report["lines"] >= 20 and (fit["differ"] == 0) == fits_row, (folder.name, model, fit["differ"])
