"""`fp4sim vectors` and tools/check_vectors.py, driven through the built binary.

* The three recipes export: every file the manifest names exists, with nothing else in the directory.
* The numpy-only checker passes on all cases (self-check, and a copy of the outputs as "your kernel"),
  and catches planted defects: a flipped code, a swapped nibble, a scale off by one, a dequantized value
  or a GEMM output one ulp away.
* Every edge category occurs, asserted from the data (inputs and the independent references'
  intermediate values), and each case's `covers` list is true of its data.
* The quantize records agree bit for bit with the independent Python references of tests/reference/
  (written from the recipes' sources, not from fp4sim's C++); the `exact` and `fp32-seq` GEMM outputs
  agree with an exact rational evaluation of the documented formulas (docs/datapaths.md §2).
* The same seed gives byte-identical directories; an existing non-empty --out is refused (exit 2).

The binary is $FP4SIM_BINARY (ctest sets it to $<TARGET_FILE:fp4sim>).
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from reference import fpref, mxfp4_ref, nvfp4_ref, ue5m3_ref  # noqa: E402
from reference.fpref import F32  # noqa: E402

FP4SIM = os.environ.get("FP4SIM_BINARY")
CHECKER = HERE.parent / "tools" / "check_vectors.py"
RECIPES = ["ue5m3", "nvfp4", "mxfp4"]                        # the three
PRESETS = RECIPES + ["ue5m3-b32", "ue5m3-te", "nvfp4-norht"]  # checked against the references too
E2M1_MIDPOINTS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], np.float32)

pytestmark = pytest.mark.skipif(
    not FP4SIM or not os.path.exists(FP4SIM), reason="FP4SIM_BINARY does not name a built fp4sim binary"
)


def run(*args):
    return subprocess.run([FP4SIM, *map(str, args)], capture_output=True, text=True, timeout=300)


def check(*args):
    return subprocess.run([sys.executable, str(CHECKER), *map(str, args)], capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def vectors(tmp_path_factory):
    """preset -> (directory, manifest), generated once with the default case count."""
    out = {}
    for recipe in PRESETS:
        d = tmp_path_factory.mktemp("vectors") / recipe
        r = run("vectors", "--recipe", recipe, "--seed", 7, "--out", d)
        assert r.returncode == 0, r.stderr
        out[recipe] = (d, json.loads((d / "manifest.json").read_text()))
    return out


def records(manifest):
    """Every quantize record: the quantize cases and both operands of every GEMM case."""
    for case in manifest["cases"]:
        if case["kind"] == "gemm":
            yield case["name"] + ".a", case["operands"]["a"]
            yield case["name"] + ".b", case["operands"]["b"]
        else:
            yield case["name"], case


def load(d, rec):
    return {k: np.load(d / v, allow_pickle=False) for k, v in rec["files"].items() if isinstance(v, str)}


def named_files(manifest):
    names = {"manifest.json"}
    for case in manifest["cases"]:
        for _, rec in records({"cases": [case]}):
            names |= set(rec["files"].values())
        if case["kind"] == "gemm":
            names |= {case["files"]["a"], case["files"]["b"], *case["files"]["c"].values()}
    return names


def as_f32(value, bits):
    """A manifest scalar: the number and its bit pattern must agree."""
    v = np.array([int(bits, 16)], np.uint32).view(np.float32)[0]
    if value is None:
        assert not np.isfinite(v)
    else:
        assert np.float32(value) == v or (np.isnan(v) and np.isnan(np.float32(value)))
    return v


# --- export -------------------------------------------------------------------------------------


@pytest.mark.parametrize("recipe", RECIPES)
def test_export_writes_every_named_file_and_nothing_else(vectors, recipe):
    d, m = vectors[recipe]
    assert m["recipe"]["name"] == recipe and m["seed"] == 7
    assert len(m["cases"]) >= 20
    names = [c["name"] for c in m["cases"]]
    assert len(set(names)) == len(names)
    assert set(os.listdir(d)) == named_files(m)
    for case in m["cases"]:
        if case["kind"] == "gemm":
            datapaths = set(case["files"]["c"])
            assert {m["recipe"]["default_datapath"], "exact"} <= datapaths
            assert set(case["alpha"]) == datapaths | {f"{p}_bits" for p in datapaths}
            assert case["operands"]["a"]["files"]["x"] == case["files"]["a"]
            assert case["operands"]["b"]["files"]["x"] == case["files"]["b"]
    roles = {rec["role"] for _, rec in records(m)}
    assert roles == {"activation", "weight", "grad_output"}
    assert {c["gemm"] for c in m["cases"] if c["kind"] == "gemm"} == {"fprop", "dgrad", "wgrad"}


def test_cases_flag_adds_random_cases_and_refuses_too_few(tmp_path):
    r = run("vectors", "--recipe", "mxfp4", "--cases", 30, "--out", tmp_path / "v")
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "v" / "manifest.json").read_text())
    assert len(m["cases"]) == 30 and m["cases"][-1]["name"].endswith("_random_fill")
    r = run("vectors", "--recipe", "mxfp4", "--cases", 3, "--out", tmp_path / "w")
    assert r.returncode == 2 and "--cases" in r.stderr and "edge cases" in r.stderr
    assert not (tmp_path / "w").exists()
    assert sorted(os.listdir(tmp_path)) == ["v"]


def test_same_seed_is_byte_identical_and_another_seed_is_not(tmp_path, vectors):
    d7, _ = vectors["nvfp4"]
    r = run("vectors", "--recipe", "nvfp4", "--seed", 7, "--out", tmp_path / "again")
    assert r.returncode == 0, r.stderr
    files = sorted(os.listdir(d7))
    assert sorted(os.listdir(tmp_path / "again")) == files
    match, mismatch, errors = filecmp.cmpfiles(d7, tmp_path / "again", files, shallow=False)
    assert mismatch == [] and errors == [] and len(match) == len(files)
    r = run("vectors", "--recipe", "nvfp4", "--seed", 8, "--out", tmp_path / "other")
    assert r.returncode == 0, r.stderr
    _, mismatch, _ = filecmp.cmpfiles(d7, tmp_path / "other", files, shallow=False)
    assert any(f.endswith(".x.npy") for f in mismatch)


def test_out_must_be_new_or_empty(tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    r = run("vectors", "--recipe", "ue5m3", "--out", full)
    assert r.returncode == 2
    assert r.stderr.startswith("fp4sim: error: ") and "exists and is not empty" in r.stderr
    assert os.listdir(full) == ["keep.txt"]
    afile = tmp_path / "afile"
    afile.write_text("x")
    r = run("vectors", "--recipe", "ue5m3", "--out", afile)
    assert r.returncode == 2 and "is not a directory" in r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run("vectors", "--recipe", "ue5m3", "--out", str(empty) + "/")  # a trailing slash is fine
    assert r.returncode == 0, r.stderr
    assert (empty / "manifest.json").is_file()
    r = run("vectors", "--recipe", "ue5m3", "--out", tmp_path / "no" / "parent")
    assert r.returncode == 3 and "cannot create directory" in r.stderr
    assert f"{tmp_path / 'no' / 'parent'}: cannot create directory" in r.stderr and ".tmp." not in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["afile", "empty", "full"]  # no temporary left anywhere


def test_unknown_recipe_is_a_usage_error(tmp_path):
    r = run("vectors", "--recipe", "fp8", "--out", tmp_path / "v")
    assert r.returncode == 2 and not (tmp_path / "v").exists()


# A stack profile is its preset and overrides (src/verify/profiles.cpp): nvfp4-rht-float32 writes the bytes of
# the spec that spells its overrides out, under the profile's name, and its overrides change the bytes (the
# float32 RHT differs from the BF16 one of the preset with the RHT on).
TE_REFERENCE_RHT = "nvfp4:rht=true,rht_precision=float32,element_specials=te-python,nan_amax=propagate"


def test_profile_is_its_preset_and_overrides(tmp_path):
    dirs = {}
    for name, args in (("profile", ("--profile", "nvfp4-rht-float32")), ("spec", ("--recipe", TE_REFERENCE_RHT)),
                       ("bf16", ("--recipe", "nvfp4:rht=true"))):
        r = run("vectors", *args, "--out", tmp_path / name)
        assert r.returncode == 0, r.stderr
        dirs[name] = tmp_path / name
    manifest = (dirs["profile"] / "manifest.json").read_text()
    assert json.loads(manifest)["recipe"]["name"] == "nvfp4-rht-float32"
    assert manifest.replace('"nvfp4-rht-float32"', json.dumps(TE_REFERENCE_RHT)) == (
        dirs["spec"] / "manifest.json").read_text()
    npy = sorted(f for f in os.listdir(dirs["profile"]) if f.endswith(".npy"))
    assert npy == sorted(f for f in os.listdir(dirs["spec"]) if f.endswith(".npy"))
    _, mismatch, errors = filecmp.cmpfiles(dirs["profile"], dirs["spec"], npy, shallow=False)
    assert not mismatch and not errors
    transformed = [f for f in npy if "transformed" in f]
    assert transformed and any(not np.array_equal(np.load(dirs["profile"] / f), np.load(dirs["bf16"] / f))
                               for f in transformed)
    # TE's reference on float32 (reference_nvfp4.py _apply_rht, d0067d0): x @ (S H16 / 4) per 16 elements, the
    # binary32 sum in ascending i (the order of torch's CPU SGEMM), not rounded to BF16.
    signs = np.array([1 if c == "+" else -1 for c in "+++-+------+-+--"], np.float32)
    h16 = np.array([[(-1) ** bin(i & j).count("1") for j in range(16)] for i in range(16)], np.float32)
    matrix = signs[:, None] * h16 * np.float32(0.25)
    quantized = [c["files"] for c in json.loads(manifest)["cases"] if "transformed" in c.get("files", {})]
    assert quantized
    for files in quantized:
        x, f = np.load(dirs["profile"] / files["x"]), files["transformed"]
        rows, cols = x.shape
        groups = np.pad(x, ((0, 0), (0, -cols % 16))).reshape(-1, 16)  # a partial group padded with +0
        want = np.zeros(groups.shape, np.float32)
        with np.errstate(invalid="ignore", over="ignore"):
            for i in range(16):
                want = (want + groups[:, i:i + 1] * matrix[i]).astype(np.float32)
        want = want.reshape(rows, -1)[:, :cols]
        assert np.array_equal(np.load(dirs["profile"] / f), want, equal_nan=True), f
    assert check(dirs["profile"], "--self-check").returncode == 0


def test_profiles_vectors_cannot_serve_are_one_line_exit_2(tmp_path):
    r = run("vectors", "--profile", "mxfp8-ceil", "--out", tmp_path / "v")
    assert r.returncode == 2 and not (tmp_path / "v").exists(), r.stderr
    assert r.stderr.count("\n") == 1 and "mxfp8-ceil" in r.stderr and "E2M1" in r.stderr, r.stderr
    for args, words in ((("--profile", "nvfp4-row", "--recipe", "nvfp4"), "drop --recipe"),
                        (("--profile", "no-such-stack"), "no-such-stack"), ((), "--profile NAME is required")):
        r = run("vectors", *args, "--out", tmp_path / "v")
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and words in r.stderr, r.stderr


# --- the numpy-only checker ---------------------------------------------------------------------


@pytest.mark.parametrize("recipe", RECIPES)
def test_checker_self_check_passes(vectors, recipe):
    d, m = vectors[recipe]
    r = check(d, "--self-check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{recipe}: " in r.stdout and " not provided" in r.stdout
    assert r.stdout.count("\nok   ") + r.stdout.startswith("ok   ") == len(m["cases"])


def kernel_outputs(d, m, dest, nibbles="unpacked"):
    """'Your kernel': a copy of every output file of the vectors (codes packed if asked)."""
    dest.mkdir()
    for case in m["cases"]:
        for _, rec in records({"cases": [case]}):
            for key in ("codes", "scales", "dequantized"):
                src = d / rec["files"][key]
                if key == "codes" and nibbles != "unpacked":
                    codes = np.load(src)
                    padded = np.zeros((codes.shape[0], codes.shape[1] + codes.shape[1] % 2), np.uint8)
                    padded[:, :codes.shape[1]] = codes
                    first, second = padded[:, 0::2], padded[:, 1::2]
                    if nibbles == "high-first":
                        first, second = second, first
                    np.save(dest / rec["files"][key], (first | (second << 4)).astype(np.uint8))
                else:
                    shutil.copy(src, dest / rec["files"][key])
        if case["kind"] == "gemm":
            for file in case["files"]["c"].values():
                shutil.copy(d / file, dest / file)
    return dest


@pytest.mark.parametrize("nibbles", ["unpacked", "low-first", "high-first"])
def test_checker_passes_a_correct_kernel(tmp_path, vectors, nibbles):
    d, m = vectors["nvfp4"]
    mine = kernel_outputs(d, m, tmp_path / "mine", nibbles)
    r = check(d, "--results", mine, "--nibbles", nibbles, "-q")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "; 0 not provided" in r.stdout


def test_checker_lists_what_is_not_provided(tmp_path, vectors):
    d, m = vectors["ue5m3"]
    mine = tmp_path / "mine"
    mine.mkdir()
    case = next(c for c in m["cases"] if c["kind"] == "quantize")
    shutil.copy(d / case["files"]["codes"], mine / case["files"]["codes"])
    r = check(d, "--results", mine)
    assert r.returncode == 0, r.stdout
    assert "ue5m3: 1 of 1 outputs identical" in r.stdout
    r = check(d, "--results", tmp_path / "mine", "--case", "no-such-case")
    assert r.returncode == 1 and "nothing compared" in r.stdout


def first_case(m, kind="quantize", where=lambda c: True):
    return next(c for c in m["cases"] if c["kind"] == kind and where(c))


def plant(tmp_path, d, m, defect):
    mine = kernel_outputs(d, m, tmp_path / "mine")
    if defect == "flipped code":
        case = first_case(m, where=lambda c: c["name"].endswith("activation_element_ties"))
        f = mine / case["files"]["codes"]
        codes = np.load(f)
        codes[1, 5] ^= 0x1
        np.save(f, codes)
    elif defect == "swapped nibble":
        case = first_case(m, where=lambda c: c["name"].endswith("weight_random"))
        f = mine / case["files"]["codes"]
        codes = np.load(f)
        j = int(np.argmax(codes[0, 0::2] != codes[0, 1::2]))
        codes[0, 2 * j], codes[0, 2 * j + 1] = codes[0, 2 * j + 1], codes[0, 2 * j]
        np.save(f, codes)
    elif defect == "scale off by one":
        case = first_case(m, where=lambda c: c["name"].endswith("scale_ties") or c["name"].endswith("scale_underflow"))
        f = mine / case["files"]["scales"]
        scales = np.load(f)
        scales[0, 3] += 1
        np.save(f, scales)
    elif defect == "dequantized one ulp":
        case = first_case(m, where=lambda c: c["role"] == "grad_output")
        f = mine / case["files"]["dequantized"]
        deq = np.load(f)
        i = tuple(np.argwhere(np.isfinite(deq) & (deq != 0))[0])
        deq[i] = np.nextafter(deq[i], np.float32(np.inf))
        np.save(f, deq)
    elif defect == "gemm output one ulp":
        case = first_case(m, "gemm")
        f = mine / case["files"]["c"]["exact"]
        c = np.load(f)
        c[2, 3] = np.nextafter(c[2, 3], np.float32(-np.inf))
        np.save(f, c)
    elif defect == "gemm operand code":
        case = first_case(m, "gemm", where=lambda c: c["gemm"] == "wgrad")
        f = mine / case["operands"]["a"]["files"]["codes"]
        codes = np.load(f)
        codes[0, 0] = (codes[0, 0] + 1) & 0xF
        np.save(f, codes)
    return case["name"], mine


DEFECTS = ["flipped code", "swapped nibble", "scale off by one", "dequantized one ulp", "gemm output one ulp",
           "gemm operand code"]


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("defect", DEFECTS)
def test_checker_catches_a_planted_defect(tmp_path, vectors, recipe, defect):
    d, m = vectors[recipe]
    name, mine = plant(tmp_path, d, m, defect)
    r = check(d, "--results", mine, "-q")
    assert r.returncode == 1, r.stdout
    failed = [line.split()[1] for line in r.stdout.splitlines() if line.startswith("FAIL ")]
    assert failed == [name], r.stdout
    assert " differ" in r.stdout and "expected " in r.stdout


def test_checker_ignores_codes_the_recipe_leaves_open_but_no_others(tmp_path, vectors):
    """MXFP4 blocks holding NaN/Inf: the finite elements' codes are implementation-defined (OCP MX)."""
    d, m = vectors["mxfp4"]
    case = first_case(m, where=lambda c: "defined" in c["files"])
    defined = np.load(d / case["files"]["defined"])
    x = np.load(d / case["files"]["x"])
    assert (defined == 0).any() and np.isfinite(x[defined == 0]).all()
    mine = kernel_outputs(d, m, tmp_path / "mine")
    f = mine / case["files"]["codes"]
    codes = np.load(f)
    codes[defined == 0] ^= 0x3
    np.save(f, codes)
    assert check(d, "--results", mine, "-q").returncode == 0
    codes[tuple(np.argwhere(defined == 1)[0])] ^= 0x1
    np.save(f, codes)
    assert check(d, "--results", mine, "-q").returncode == 1


def test_checker_usage_errors(tmp_path, vectors):
    d, _ = vectors["mxfp4"]
    assert check(tmp_path, "--self-check").returncode == 2
    assert check(d).returncode == 2
    assert check(d, "--self-check", "--results", d).returncode == 2


@pytest.mark.parametrize("manifest", ["{not json", "[1, 2]", '{"cases": [{"kind": "quantize"}]}'])
def test_checker_a_corrupt_manifest_is_one_line_exit_3(tmp_path, vectors, manifest):
    d, _ = vectors["mxfp4"]
    broken = tmp_path / "broken"
    shutil.copytree(d, broken)
    (broken / "manifest.json").write_text(manifest)
    r = check(broken, "--self-check")
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "manifest.json" in r.stderr and "Traceback" not in r.stderr


def test_checker_a_result_that_is_not_npy_is_exit_3_not_a_mismatch(tmp_path, vectors):
    d, m = vectors["mxfp4"]
    mine = tmp_path / "mine"
    mine.mkdir()
    codes = first_case(m)["files"]["codes"]
    (mine / codes).write_text("not an array")
    r = check(d, "--results", mine)
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and codes in r.stderr and "not a .npy array" in r.stderr


def test_checker_self_check_finds_a_broken_vector_directory(tmp_path, vectors):
    d, m = vectors["ue5m3"]
    broken = tmp_path / "broken"
    shutil.copytree(d, broken)
    case = first_case(m)
    (broken / case["files"]["scales"]).unlink()
    codes = np.load(broken / case["files"]["codes"])
    np.save(broken / case["files"]["codes"], codes.astype(np.uint16))
    r = check(broken, "--self-check")
    assert r.returncode == 1
    assert f"{case['files']['scales']}: missing" in r.stdout and "uint16" in r.stdout


def test_checker_uses_numpy_alone():
    imports = {line.split()[1].split(".")[0] for line in CHECKER.read_text().splitlines()
               if line.startswith(("import ", "from "))}
    assert imports <= {"__future__", "argparse", "json", "sys", "pathlib", "numpy"}, imports


# --- the vectors against the independent references ---------------------------------------------


def reference(recipe, rec, x, rbits):
    """The independent reference's result for one quantize record (`recipe`: the manifest's recipe
    object), the elements it leaves out, and the tensor amax the record should hold."""
    block, target = rec["block_cols"], as_f32(rec["target"], rec["target_bits"])
    kw = dict(block=block, two_d=rec["two_d"], rounding=rec["rounding"], rbits=rbits)
    amax_ref = None if rec["amax_ref"] is None else as_f32(rec["amax_ref"], rec["amax_ref_bits"])
    skip = np.zeros(x.shape, bool)
    if recipe["scale_format"] == "ue4m3":
        ref = nvfp4_ref.quantize(x, target=target, amax_ref=amax_ref, rht_on=rec["rht"], **kw)
        return ref, skip, ref.tensor_amax
    if recipe["scale_format"] == "e8m0":
        return mxfp4_ref.quantize(x, block=block, rounding=rec["rounding"], rbits=rbits), skip, None
    assert recipe["scale_format"] == "ue5m3" and recipe["dequantize_order"] == "portable"
    transformed = nvfp4_ref.rht(x) if rec["rht"] else x     # TE's RHT, as the ue5m3-te recipe takes it
    x = transformed
    # The paper's reference rejects non-finite input. fp4sim's ue5m3 rule for it (docs/recipes.md): the
    # amax ignores NaN, G = 1 when RN(F*T)/amax is 0 (an infinite amax), and the element codes follow E2M1's
    # saturating conversion (NaN -> 0x7, +-Inf -> +-6). The reference is run with amax F*T (which gives
    # G = 1) in that case, and the non-finite elements are compared with the E2M1 rule instead.
    amax = fpref.tensor_amax(x) if amax_ref is None else amax_ref
    skip = ~np.isfinite(x)
    ref = ue5m3_ref.quantize(x, target=target, amax_ref=amax if np.isfinite(amax) else F32(6.0 * target),
                             scale_format="ue5m3", dequantize_order="portable", **kw)
    ref.transformed = transformed
    # Every preset clamps the element multiplier, min(RN(1/RN(s*Gd)), FLT_MAX), as TE's kernel does; the
    # paper's code has none and its multiplier is +Inf when RN(s*Gd) < 2^-128 (docs/recipes.md), which
    # its reference then rejects. Those elements are redone here with the clamp, from the reference's own
    # decoded scale ds: y = RN(x * min(RN(1/ds), FLT_MAX)), and dequantized RN(q * ds) as before.
    unbounded = np.isfinite(x) & ~np.isfinite(ref.payload_input)
    if unbounded.any():
        with fpref.errstate():
            ds = ref.decoded_scale[unbounded]
            mult = np.minimum((F32(1.0) / ds).astype(np.float32), fpref.FLT_MAX).astype(np.float32)
            y = (x[unbounded] * mult).astype(np.float32)
            codes = fpref.e2m1_quantize(y, rec["rounding"], None if rbits is None else rbits[unbounded])
            ref.nibbles[unbounded] = codes
            ref.payload_input[unbounded] = y
            ref.dequantized[unbounded] = (fpref.e2m1_value_of_code(codes) * ds).astype(np.float32)
    return ref, skip, amax


@pytest.mark.parametrize("preset", PRESETS)
def test_quantize_records_match_the_independent_references(vectors, preset):
    d, m = vectors[preset]
    compared = 0
    for name, rec in records(m):
        f = load(d, rec)
        x = f["x"]
        ref, skip, amax = reference(m["recipe"], rec, x, f.get("rbits"))
        defined = f.get("defined", np.ones(x.shape, np.uint8)) == 1
        keep = defined & ~skip
        want_codes = ref.nibbles
        assert np.array_equal(f["codes"][keep], want_codes[keep]), name
        if amax is None:
            # Blocks with NaN/Inf: scale 0xFF, NaN dequantized, NaN/Inf elements by E2M1's rule (M5).
            nonfinite = ~np.isfinite(x)
            assert np.array_equal(f["codes"][nonfinite], fpref.e2m1_quantize(x[nonfinite])), name
        assert np.array_equal(f["scales"], ref.scales), name
        if skip.any():
            assert np.array_equal(f["codes"][skip], fpref.e2m1_quantize(x[skip])), name
        assert fpref.same_bits_f32(f["dequantized"][~skip], ref.dequantized[~skip]).all(), name
        if rec["rht"]:
            assert fpref.same_bits_f32(f["transformed"], ref.transformed).all(), name
        if amax is not None:
            for key, want in (("tensor_amax", amax), ("global_encode_scale", ref.global_encode_scale),
                              ("global_decode_scale", ref.global_decode_scale)):
                got = as_f32(rec[key], rec[key + "_bits"])
                assert got.view(np.uint32) == np.float32(want).view(np.uint32), (name, key)
        compared += 1
    assert compared == sum(1 for _ in records(m))


def decode_scales(recipe, codes):
    if recipe["scale_format"] == "e8m0":
        return [Fraction(2) ** (int(c) - 127) for c in codes.ravel()]
    return [Fraction(float(v)) for v in fpref.unsigned_value_of_code(codes.ravel(), recipe["scale_format"])]


def encoded_operand(recipe, rec, f):
    """q·s per element as exact fractions, [rows][cols] (s the decoded block scale, no tensor scale)."""
    q = fpref.e2m1_value_of_code(f["codes"])
    s = decode_scales(recipe, f["scales"])
    br, bc = rec["block_rows"], rec["block_cols"]
    sc = rec["scale_shape"][1]
    return [[Fraction(float(q[r, c])) * s[(r // br) * sc + c // bc] for c in range(q.shape[1])]
            for r in range(q.shape[0])]


def round_f32(v: Fraction) -> np.float32:
    """RNE of an exact rational to binary32 (overflow to Inf)."""
    if v == 0:
        return np.float32(0.0)
    sign, v = (-1 if v < 0 else 1), abs(v)
    e = v.numerator.bit_length() - v.denominator.bit_length()
    if Fraction(2) ** e > v:
        e -= 1
    e = max(e, -126)                        # subnormals share the exponent of 2^-126
    ulp = Fraction(2) ** (e - 23)
    n, rem = divmod(v, ulp)
    n = int(n)
    if rem > ulp / 2 or (rem == ulp / 2 and n % 2):
        n += 1
    value = float(n * ulp) if n * ulp < Fraction(2) ** 128 else float("inf")
    return np.float32(sign * value)


def alpha_for(recipe, datapath, a, b):
    """docs/datapaths.md §2: 1 without a tensor scale; fp32-seq divides, probe-matched multiplies by the
    reciprocal, every other datapath follows the recipe's alpha rule."""
    if recipe["tensor_scale"] == "none":
        return np.float32(1.0)
    Aa, Ab = as_f32(a["tensor_amax"], a["tensor_amax_bits"]), as_f32(b["tensor_amax"], b["tensor_amax_bits"])
    Ta, Tb = as_f32(a["target"], a["target_bits"]), as_f32(b["target"], b["target_bits"])
    num = np.float32(Aa * Ab)
    den = np.float32(np.float32(F32(6) * Ta) * np.float32(F32(6) * Tb))
    division = datapath == "fp32-seq" or (datapath == "exact" and recipe["alpha_rule"] == "division")
    return np.float32(num / den) if division else np.float32(num * np.float32(F32(1) / den))


@pytest.mark.parametrize("preset", PRESETS)
def test_gemm_exact_and_fp32_seq_outputs_match_the_documented_formulas(vectors, preset):
    d, m = vectors[preset]
    recipe = m["recipe"]
    for case in (c for c in m["cases"] if c["kind"] == "gemm"):
        a, b = case["operands"]["a"], case["operands"]["b"]
        qa, qb = encoded_operand(recipe, a, load(d, a)), encoded_operand(recipe, b, load(d, b))
        bk = a["block_cols"]
        for datapath in ("exact", "fp32-seq"):
            alpha = alpha_for(recipe, datapath, a, b)
            recorded = as_f32(case["alpha"][datapath], case["alpha"][datapath + "_bits"])
            assert alpha.view(np.uint32) == recorded.view(np.uint32), (case["name"], datapath)
            c = np.load(d / case["files"]["c"][datapath])
            want = np.empty_like(c)
            for i in range(case["m"]):
                for j in range(case["n"]):
                    terms = [sum(qa[i][k] * qb[j][k] for k in range(k0, k0 + bk)) for k0 in range(0, case["k"], bk)]
                    if datapath == "exact":
                        want[i, j] = round_f32(Fraction(float(alpha)) * sum(terms))
                    else:
                        y = np.float32(0.0)
                        for t in terms:
                            assert round_f32(t) == t           # block terms are exact binary32 here
                            y = np.float32(y + round_f32(t))
                        want[i, j] = np.float32(y * alpha)
            assert fpref.same_bits_f32(c, want).all(), (case["name"], datapath)


# --- every edge category occurs, from the data ----------------------------------------------------


def facts(recipe, rec, f, sr_bits):
    """The edge categories one record's data shows, found from the inputs and the reference's
    intermediate values (never from fp4sim's own counts)."""
    x = f["x"]
    ref, skip, _ = reference(recipe, rec, x, f.get("rbits"))
    got = set()
    y = np.where(skip, np.float32(0), ref.payload_input)
    finite_y = np.isfinite(y)
    if np.isin(np.abs(y[finite_y]), E2M1_MIDPOINTS).any():
        got.add("element_tie")
    if (np.abs(y[finite_y]) > 6).any() or np.isinf(x).any():
        got.add("element_saturation")
    amax_b = ref.block_amax
    if recipe["scale_format"] == "e8m0":
        exponent = (amax_b.view(np.uint32).astype(np.int64) >> 23) - 127
        if ((amax_b > 0) & (exponent - 2 < -127)).any():
            got.add("scale_underflow")
        if ((amax_b.view(np.uint32) & 0x7FFFFF) == 0x7FFFFF).any():   # just below a power of two
            got.add("scale_binade_edge")
    else:
        fmt = recipe["scale_format"]
        smax = fpref.SCALE_FORMATS[fmt][3]
        grid = fpref.unsigned_value_of_code(np.arange(256), fmt).astype(np.float64)
        grid = np.unique(grid[grid <= smax])
        mids = (grid[:-1] + grid[1:]) / 2
        if np.isin(ref.ideal.astype(np.float64), mids).any():
            got.add("scale_tie")
        if (ref.ideal > smax).any():
            got.add("scale_saturation")
        if ref.scale_underflow > 0:
            got.add("scale_underflow")
    rb, cb = rec["block_rows"], rec["block_cols"]
    if (~fpref.block_any(fpref.pad_to(x != 0, rb, cb), rb, cb)).any():   # padding is +0; NaN != 0
        got.add("zero_block")
    if (x == 0).all():
        got.add("all_zero_tensor")
    if np.isnan(x).any():
        got.add("nan")
    if np.isinf(x).any():
        got.add("inf")
    if rec["amax_ref"] is not None:
        current = fpref.tensor_amax(ref.transformed)
        held = as_f32(rec["amax_ref"], rec["amax_ref_bits"])
        got.add("stale_amax_smaller" if held < current else "stale_amax_larger" if held > current else "held_equal")
    if "rbits" in f:
        got.add("stochastic_rounding")
        top = (1 << sr_bits) - 1
        if rec["philox"] is None and (f["rbits"] == 0).any() and (f["rbits"] == top).any():
            got.add("sr_edge_bits")
    if rec["rht"]:
        got.add("rht")
    if rec["two_d"]:
        got.add("two_d")
    if x.shape[0] % rb or x.shape[1] % cb:
        got.add("partial_block")
    tiny = np.abs(x[np.isfinite(x)])
    if ((tiny > 0) & (tiny < np.finfo(np.float32).tiny)).any():
        got.add("subnormal_input")
    return got


@pytest.mark.parametrize("preset", PRESETS)
def test_every_edge_category_occurs_and_covers_lists_are_true(vectors, preset):
    d, m = vectors[preset]
    recipe = m["recipe"]
    seen = set()
    for name, rec in records(m):
        shown = facts(recipe, rec, load(d, rec), recipe["sr_bits"])
        assert set(rec["covers"]) <= shown, (name, set(rec["covers"]) - shown)
        seen |= shown
    # Every category, less those the recipe cannot show: without a tensor scale no held amax to be
    # stale; under the power-of-two floor rule no scale ties and no scale saturation (E8M0 reaches
    # 2^127, above any binary32 amax / 4), and binade edges only there; no stochastic rounding, RHT or
    # 2-D tiles where it has none.
    expected = set(m["categories"])
    if recipe["tensor_scale"] == "none":
        expected -= {"stale_amax_smaller", "stale_amax_larger"}
    if recipe["scale_rule"] != "two-level":
        expected -= {"scale_tie", "scale_saturation"}
    else:
        expected -= {"scale_binade_edge"}
    if not recipe["grad_rounding"].startswith("sr"):
        expected -= {"stochastic_rounding", "sr_edge_bits"}
    if not recipe["rht_wgrad"]:
        expected -= {"rht"}
    if not recipe["weight_two_d"]:
        expected -= {"two_d"}
    assert len(expected) >= 9
    assert expected <= seen, expected - seen
    assert {c for rec in (r for _, r in records(m)) for c in rec["covers"]} == expected


# --- the README's `### vectors` section runs as written and prints what it shows -----------------


def readme_blocks():
    text = (HERE.parent / "README.md").read_text()
    start = text.index("\n### vectors\n")
    end = min(i for i in (text.find("\n## ", start + 1), text.find("\n### ", start + 1)) if i > 0)
    section = text[start:end]
    blocks, rest = [], section
    while "```" in rest:
        head, rest = rest.split("```", 1)
        lang, rest = rest.split("\n", 1)
        body, rest = rest.split("```", 1)
        blocks.append((lang.strip(), body))
    return blocks


def test_readme_manifest_excerpt_is_what_vectors_writes(tmp_path):
    # The README's commands run as written in tests/readme_test.py; here its manifest excerpt is the nvfp4
    # case it names, as `fp4sim vectors --recipe nvfp4` writes it.
    excerpt = json.loads(next(body for lang, body in readme_blocks() if lang == "json"))
    r = run("vectors", "--recipe", "nvfp4", "--out", tmp_path / "vectors-nvfp4")
    assert r.returncode == 0, r.stderr
    manifest = json.loads((tmp_path / "vectors-nvfp4" / "manifest.json").read_text())
    case = next(c for c in manifest["cases"] if c["name"] == excerpt["name"])
    assert {k: case[k] for k in excerpt} == excerpt
