"""User-defined recipes on the command line (docs/cli.md "User-defined recipes"): a preset with overrides,
PRESET:KEY=VALUE,..., wherever a recipe is named. A spec gives the bytes of its preset with the same override
flags, and of the preset row that makes the same change (mxfp4-rceil is mxfp4 with scale_rule=rceil,
ue5m3-b32 is ue5m3 with block=32: written by hand in src/core/recipe.cpp's table, an independent path); a bad
spec is one line naming what is wrong, exit 2, no output. And sweep's scale-rule axis.

The binary is $FP4SIM_BINARY (ctest sets it to $<TARGET_FILE:fp4sim>).
"""

import csv
import json
import os

import numpy as np
import pytest

from cli_run import TRACE, needs_binary, run

pytestmark = needs_binary


def ok(*args, **kwargs):
    r = run(*args, **kwargs)
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture
def x(tmp_path):
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((48, 96)) * 3).astype(np.float32)
    a[0, :3] = [0.0, 1e-30, 5e3]
    path = tmp_path / "x.npy"
    np.save(path, a)
    return path


def quantized(tmp_path, x, name, *args):
    codes, scales = tmp_path / f"{name}_c.npy", tmp_path / f"{name}_s.npy"
    ok("quantize", "--in", x, "--codes", codes, "--scales", scales, *args)
    return np.load(codes), np.load(scales)


@pytest.mark.parametrize("spec,flags", [
    ("mxfp4:scale_rule=rceil,block=16", ["--scale-rule", "rceil", "--block", "16"]),
    ("nvfp4:two_d=true,rounding=sr-fast,target=256", ["--two-d", "--rounding", "sr-fast", "--target", "256"]),
    ("ue5m3:tensor_scale=current,zero_scale=keep,rht=true", ["--tensor-scale", "current", "--zero-scale", "keep",
                                                             "--rht"]),
])
def test_quantize_spec_gives_the_preset_with_the_same_flags(tmp_path, x, spec, flags):
    preset = spec.split(":")[0]
    for role in ["activation", "weight", "grad_output"]:
        c1, s1 = quantized(tmp_path, x, "spec", "--recipe", spec, "--role", role)
        c2, s2 = quantized(tmp_path, x, "flags", "--recipe", preset, "--role", role, *flags)
        c3, s3 = quantized(tmp_path, x, "preset", "--recipe", preset, "--role", role)
        assert np.array_equal(c1, c2) and np.array_equal(s1, s2), (spec, role)
        assert not (np.array_equal(c1, c3) and np.array_equal(s1, s3)), (spec, role, "the override changed nothing")


def test_verify_quantize_takes_the_spec_its_bytes_were_made_with(tmp_path, x):
    spec = "nvfp4:block=32,scale_format=ue5m3,zero_scale=one"
    quantized(tmp_path, x, "q", "--recipe", spec)
    args = ["verify", "quantize", "--in", x, "--codes", tmp_path / "q_c.npy", "--scales", tmp_path / "q_s.npy"]
    assert ok(*args, "--recipe", spec).stdout.rstrip().endswith("BIT-EXACT")
    assert run(*args, "--recipe", "nvfp4").returncode != 0  # the preset's own block reads other bytes


def test_a_spec_equals_the_preset_row_that_makes_the_same_change(tmp_path, x):
    for spec, row in [("mxfp4:scale_rule=rceil", "mxfp4-rceil"), ("ue5m3:block=32", "ue5m3-b32"),
                      ("nvfp4:rht=false", "nvfp4-norht")]:
        for role in ["activation", "weight"]:
            a = quantized(tmp_path, x, "a", "--recipe", spec, "--role", role)
            b = quantized(tmp_path, x, "b", "--recipe", row, "--role", role)
            assert all(np.array_equal(p, q) for p, q in zip(a, b)), (spec, row, role)


@pytest.mark.parametrize("profile,flags", [
    ("nvfp4-4over6-448", ["--recipe", "nvfp4-4over6", "--target", "448"]),
    ("nvfp4-4over6-mse-fast", ["--recipe", "nvfp4-4over6-mse", "--four-over-six-error", "fast-math"]),
    ("nvfp4-row", ["--recipe", "nvfp4-norht", "--amax-scope", "row", "--one-d"]),
])
def test_a_stack_profile_is_a_recipe_and_takes_overrides(tmp_path, x, profile, flags):
    """A profile's name (docs/recipes.md) is its preset and overrides wherever a recipe is named; a spec
    starting from it applies its overrides on top."""
    a = quantized(tmp_path, x, "a", "--recipe", profile)
    b = quantized(tmp_path, x, "b", *flags)
    assert all(np.array_equal(p, q) for p, q in zip(a, b)), profile
    c = quantized(tmp_path, x, "c", "--recipe", profile + ":block=32")
    d = quantized(tmp_path, x, "d", *flags, "--block", "32")
    assert all(np.array_equal(p, q) for p, q in zip(c, d)), profile
    assert not all(np.array_equal(p, q) for p, q in zip(a, c)), profile


def test_replay_takes_a_stack_profile(tmp_path):
    ok("replay", TRACE, "--recipes", "nvfp4-4over6-448,nvfp4-4over6:target=448", "--steps", "1", "--layers",
       "lm_head", "--json", tmp_path / "r.json", "-q")
    result = json.loads((tmp_path / "r.json").read_text())
    for kind in ["tensors", "gemms"]:
        by = entries_by_recipe(result, kind)
        assert by["nvfp4-4over6-448"] and by["nvfp4-4over6-448"] == by["nvfp4-4over6:target=448"], kind


def test_flags_override_the_spec_wherever_they_stand(tmp_path, x):
    _, before = quantized(tmp_path, x, "a", "--block", "32", "--recipe", "mxfp4:block=16")
    _, after = quantized(tmp_path, x, "b", "--recipe", "mxfp4:block=16", "--block", "32")
    assert before.shape == after.shape == (48, 3)


def test_the_spec_is_the_recipe_name_in_the_hdf5_file(tmp_path, x):
    h5py = pytest.importorskip("h5py")
    ok("quantize", "--recipe", "mxfp4:block=16", "--in", x, "--out", tmp_path / "q.h5")
    with h5py.File(tmp_path / "q.h5") as f:
        assert f.attrs["recipe"] == "mxfp4:block=16"
        assert f.attrs["block_cols"] == 16


def test_gemm_spec_gives_the_preset_with_the_same_flags(tmp_path, x):
    out1, out2 = tmp_path / "c1.npy", tmp_path / "c2.npy"
    ok("gemm", "--recipe", "nvfp4:block=32,two_d=false", "--a", x, "--b", x, "--out", out1)
    ok("gemm", "--recipe", "nvfp4", "--block", "32", "--one-d", "--a", x, "--b", x, "--out", out2)
    assert np.load(out1).tobytes() == np.load(out2).tobytes()



def test_wgrad_grad_target_moves_only_wgrads_dy(tmp_path, x):
    """The override row added last (issue 21's one-row example): dY's T as wgrad's operand alone."""
    def c(name, gemm, *recipe):
        out = tmp_path / f"{name}.npy"
        ok("gemm", "--gemm", gemm, "--datapath", "exact", *recipe, "--a", x, "--b", x, "--out", out)
        return np.load(out).tobytes()

    for spec, flags in [("ue5m3:wgrad_grad_target=2048", ["--recipe", "ue5m3", "--wgrad-grad-target", "2048"])]:
        assert c("spec", "wgrad", "--recipe", spec) == c("flags", "wgrad", *flags)
        assert c("spec", "wgrad", "--recipe", spec) != c("preset", "wgrad", "--recipe", "ue5m3")
        assert c("spec", "dgrad", "--recipe", spec) == c("preset", "dgrad", "--recipe", "ue5m3")
    # target sets every T, wgrad's dY included; wgrad_grad_target then sets that one alone.
    assert (c("both", "wgrad", "--recipe", "ue5m3:target=256,wgrad_grad_target=2048")
            == c("order", "wgrad", "--recipe", "ue5m3:wgrad_grad_target=2048,target=256"))

@pytest.mark.parametrize("spec,says", [
    ("mxfp4:blok=3", "unknown override 'blok' (keys: block, two_d,"),
    ("mxfp4:block=x", "block=x: not an integer"),
    ("mxfp4:two_d=yes", "two_d=yes: expected true or false"),
    ("mxfp4:scale_rule=bogus", "scale_rule=bogus: unknown name (known: two-level, floor"),
    ("mxfp4:block=16,block=32", "block is given twice"),
    ("mxfp4:", "'' is no override KEY=VALUE"),
    ("mxfp4:block", "'block' is no override KEY=VALUE"),
    ("mxfp4:target=inf", "target=inf: not a finite number"),
    ("nosuch:block=16", "unknown preset or profile 'nosuch' (known: ue5m3,"),
    ("nvfp4:scale_rule=floor", "invalid recipe: scale rules floor/"),
    ("mxfp4:block=1", "invalid recipe: block size must be between 2 and 256"),
    ("nvfp4/x", "holds no '/'"),
])
def test_a_bad_spec_is_one_line_naming_what_is_wrong(tmp_path, x, spec, says):
    r = run("quantize", "--recipe", spec, "--in", x, "--out", tmp_path / "q.h5")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"fp4sim: error: --recipe '{spec}': "), r.stderr
    assert says in lines[0], lines[0]
    assert not (tmp_path / "q.h5").exists()


def entries_by_recipe(result, kind):
    by = {}
    for e in result[kind]:
        e = dict(e)
        by.setdefault(e.pop("recipe"), []).append(e)
    return by


def test_replay_runs_a_spec_beside_its_preset(tmp_path):
    specs = ["mxfp4", "mxfp4:block=32", "mxfp4-rceil", "mxfp4:scale_rule=rceil,two_d=false", "nvfp4-norht",
             "nvfp4:rht=false"]
    ok("replay", TRACE, "--recipes", ",".join(specs), "--steps", "1", "--layers", "lm_head", "--json",
       tmp_path / "r.json", "--csv", tmp_path / "r.csv", "-q")
    result = json.loads((tmp_path / "r.json").read_text())
    assert [r["name"] for r in result["recipes"]] == specs
    for kind in ["tensors", "gemms"]:
        by = entries_by_recipe(result, kind)
        assert by["mxfp4"], kind
        assert by["mxfp4:block=32"] == by["mxfp4"], kind  # an override of the preset's own value
        assert by["mxfp4:scale_rule=rceil,two_d=false"] == by["mxfp4-rceil"], kind
        assert by["nvfp4:rht=false"] == by["nvfp4-norht"], kind
        assert by["mxfp4-rceil"] != by["mxfp4"], kind
    with open(tmp_path / "r_tensors.csv", newline="") as f:
        assert {row["recipe"] for row in csv.DictReader(f)} == set(specs)


@pytest.mark.parametrize("recipes,says", [
    ("block=16,nvfp4", "'block=16' follows no recipe"),
    ("nvfp4,block=16", "'block=16' follows the preset nvfp4 without ':' (nvfp4:block=16)"),
    ("nvfp4,mxfp4,nvfp4", "'nvfp4' is named twice"),
    ("nvfp4,mxfp4:block=16,bogus=1", "--recipes 'mxfp4:block=16,bogus=1': unknown override 'bogus'"),
    (",", "--recipes: no recipe named"),
])
def test_replay_recipe_list_errors(tmp_path, recipes, says):
    r = run("replay", TRACE, "--recipes", recipes, "--json", tmp_path / "r.json")
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.splitlines()) == 1 and says in r.stderr, r.stderr
    assert os.listdir(tmp_path) == []


def test_vectors_take_a_spec(tmp_path):
    ok("vectors", "--recipe", "mxfp4:scale_rule=rceil,block=16", "--out", tmp_path / "v")
    manifest = json.loads((tmp_path / "v" / "manifest.json").read_text())
    assert manifest["recipe"]["name"] == "mxfp4:scale_rule=rceil,block=16"
    assert manifest["recipe"]["block"] == 16 and manifest["recipe"]["scale_rule"] == "rceil"
    assert "operand_two_d" not in manifest["recipe"]
    ok("vectors", "--recipe", "nvfp4:two_d=false", "--out", tmp_path / "w")
    manifest = json.loads((tmp_path / "w" / "manifest.json").read_text())
    assert manifest["recipe"]["operand_two_d"] is False


# --- sweep's scale-rule axis ------------------------------------------------------------------------


def test_sweep_crosses_scale_rules_with_blocks_and_a_rule_equals_its_preset(tmp_path):
    ok("sweep", TRACE, "--steps", "1", "--layers", "lm_head", "--scale-formats", "e8m0", "--tensor-scales", "none",
       "--scale-rules", "floor,rceil", "--blocks", "16,32", "--base", "mxfp4", "--json", tmp_path / "s.json", "-q")
    sweep = json.loads((tmp_path / "s.json").read_text())
    names = ["e2m1/e8m0/b16/none/rne/floor", "e2m1/e8m0/b16/none/rne/rceil", "e2m1/e8m0/b32/none/rne/floor",
             "e2m1/e8m0/b32/none/rne/rceil"]
    assert sorted(sweep["configs"]) == names
    ok("replay", TRACE, "--steps", "1", "--layers", "lm_head", "--no-gemms", "--recipes", "mxfp4,mxfp4-rceil",
       "--json", tmp_path / "r.json", "-q")
    replayed = entries_by_recipe(json.loads((tmp_path / "r.json").read_text()), "tensors")
    swept = entries_by_recipe(sweep, "tensors")
    # The e8m0 grid points of base mxfp4 at its block are mxfp4 with their rule; the two rules differ.
    for point, preset in [("e2m1/e8m0/b32/none/rne/floor", "mxfp4"), ("e2m1/e8m0/b32/none/rne/rceil", "mxfp4-rceil")]:
        figures = [{k: e[k] for k in ("layer", "tensor", "mse", "scale_saturated", "scale_underflow")}
                   for e in swept[point]]
        assert figures == [{k: e[k] for k in figures[0]} for e in replayed[preset]], point
    assert swept["e2m1/e8m0/b32/none/rne/floor"] != swept["e2m1/e8m0/b32/none/rne/rceil"]


def test_sweep_crosses_4over6_block_choices_and_a_choice_equals_its_preset(tmp_path):
    ok("sweep", TRACE, "--steps", "1", "--layers", "lm_head", "--scale-formats", "ue4m3", "--tensor-scales",
       "none,current", "--blocks", "16", "--block-choices", "single,4over6-mae", "--base", "nvfp4:target=256",
       "--json", tmp_path / "s.json", "-q")
    sweep = json.loads((tmp_path / "s.json").read_text())
    assert sorted(sweep["configs"]) == ["e2m1/ue4m3/b16/current/rne/4over6-mae", "e2m1/ue4m3/b16/current/rne/single",
                                        "e2m1/ue4m3/b16/none/rne/single"]
    assert [s["config"] for s in sweep["skipped"]] == ["e2m1/ue4m3/b16/none/rne/4over6-mae"]
    ok("replay", TRACE, "--steps", "1", "--layers", "lm_head", "--no-gemms", "--recipes", "nvfp4-4over6", "--json",
       tmp_path / "r.json", "-q")
    replayed = entries_by_recipe(json.loads((tmp_path / "r.json").read_text()), "tensors")["nvfp4-4over6"]
    swept = entries_by_recipe(sweep, "tensors")
    keys = ("layer", "tensor", "mse", "scale_saturated", "scale_underflow", "amax")
    figures = [{k: e[k] for k in keys} for e in swept["e2m1/ue4m3/b16/current/rne/4over6-mae"]]
    assert figures == [{k: e[k] for k in keys} for e in replayed]
    assert figures != [{k: e[k] for k in keys} for e in swept["e2m1/ue4m3/b16/current/rne/single"]]


@pytest.mark.parametrize("args,says", [
    (["--block-choices", "4over7"], "--block-choices"),
    (["--scale-rules", "rceil", "--scale-formats", "ue4m3"],
     "--scale-rules rceil with --scale-formats ue4m3: scale rules floor/"),
    (["--scale-rules", "two-level,floor"], "--scale-rules two-level with --scale-formats e8m0: a power-of-two"),
    (["--scale-rules", "round"], "--scale-rules"),
    (["--base", "ue5m3:block=7,rht=true"], "--base 'ue5m3:block=7,rht=true': invalid recipe: RHT needs a block"),
])
def test_sweep_refuses_a_rule_a_scale_format_cannot_take_before_any_work(tmp_path, args, says):
    r = run("sweep", "--rows", "16", "--cols", "64", *args, "--json", tmp_path / "s.json")
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.splitlines()) == 1 and says in r.stderr, r.stderr
    assert os.listdir(tmp_path) == []


def test_sweep_base_takes_a_spec(tmp_path):
    common = ["--rows", "16", "--cols", "64", "--scale-formats", "ue5m3", "--tensor-scales", "current", "--blocks",
              "16", "--synthetic", "normal", "--json"]
    ok("sweep", *common, tmp_path / "a.json", "--base", "ue5m3:target=6", "-q")
    ok("sweep", *common, tmp_path / "b.json", "-q")
    a, b = (json.loads((tmp_path / n).read_text())["tensors"] for n in ["a.json", "b.json"])
    assert len(a) == len(b) == 1
    assert a[0]["recipe"] == b[0]["recipe"]  # the grid point's name
    assert a[0]["mse"] != b[0]["mse"]  # T = 6 instead of 448: other block scales
