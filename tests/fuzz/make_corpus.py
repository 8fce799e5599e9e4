#!/usr/bin/env python3
"""Writes the seed corpora of the fuzzers (tests/fuzz/corpus/<harness>/, docs/fuzzing.md), small valid
inputs that the fuzzer mutates: .npy files of every dtype the reader takes, traces cut from
traces/trace_a.h5 in each storage layout, format names, one argv per subcommand usage, and version-2
traces with quantized operands for capture.verify (written with fp4sim.capture's writer and the module).

Usage: PYTHONPATH=build/python python3 tests/fuzz/make_corpus.py     (rewrites those five corpus folders;
deterministic; py_args' seeds are inputs a fuzzing run kept, docs/fuzzing.md)
"""
import pathlib
import shutil

import h5py
import numpy as np

root = pathlib.Path(__file__).resolve().parents[2]
corpus = root / "tests" / "fuzz" / "corpus"


def fresh(name):
    """The seed folder emptied of what this script wrote; inputs a fuzzing run found (found_*) stay."""
    folder = corpus / name
    folder.mkdir(parents=True, exist_ok=True)
    for seed in folder.iterdir():
        if not seed.name.startswith("found_"):
            seed.unlink()
    return folder


def npy_seeds():
    out = fresh("npy_read")
    rng = np.random.default_rng(1)
    arrays = {
        "f4_1d": rng.standard_normal(7).astype("<f4"),
        "f4_2d": rng.standard_normal((3, 5)).astype("<f4"),
        "f8_2d": rng.standard_normal((2, 4)).astype("<f8"),
        "f8_binary32_values": rng.standard_normal(6).astype("<f4").astype("<f8"),
        "u1_2d": rng.integers(0, 256, (4, 4)).astype("|u1"),
        "u2_1d": rng.integers(0, 65536, 5).astype("<u2"),
        "u4_2d": rng.integers(0, 2**32, (2, 3)).astype("<u4"),
        "f4_empty": np.zeros(0, "<f4"),
        "f4_specials": np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 6.0, 1e-45], "<f4"),
        # Rejected ones, so the fuzzer starts from every rejection branch too.
        "f4_3d": np.zeros((2, 2, 2), "<f4"),
        "f4_scalar": np.zeros((), "<f4"),
        "f4_big_endian": np.zeros(3, ">f4"),
        "i4_1d": np.arange(4, dtype="<i4"),
    }
    for name, a in arrays.items():
        np.save(out / f"{name}.npy", a)
    np.save(out / "f4_fortran.npy", np.asfortranarray(rng.standard_normal((3, 2)).astype("<f4")))
    for version in ((2, 0), (3, 0)):
        with open(out / f"f4_v{version[0]}.npy", "wb") as f:
            np.lib.format.write_array(f, arrays["f4_2d"], version=version)
    shutil.copy(root / "traces" / "example.npy", out / "traces_example.npy")


def trace_seeds():
    out = fresh("trace_read")
    source = h5py.File(root / "traces" / "trace_a.h5", "r")
    layer = source["step_000001/lm_head"]
    x, w, dy = layer["x"][:3, :8], layer["w"][:4, :8], layer["dy"][:3, :4]

    def trace(name, libver="earliest", step_names=("step_000001",), **storage):
        with h5py.File(out / f"{name}.h5", "w", libver=libver) as f:
            f.attrs["schema"] = "fp4-trace"
            f.attrs["schema_version"] = np.int64(1)
            f.attrs["model"] = "cut from traces/trace_a.h5"
            for i, step_name in enumerate(step_names):
                step = f.create_group(step_name)
                step.attrs["step"] = np.int64(int(step_name[5:]))
                g = step.create_group("lm_head" if i == 0 else "model/layers/0/fc")
                for tensor_name, values in (("x", x), ("w", w), ("dy", dy)):
                    dtype = storage.get("dtype", "<f4")
                    d = g.create_dataset(tensor_name, data=values.astype(dtype),
                                         **{k: v for k, v in storage.items() if k != "dtype"})
                    d.attrs["orig_dtype"] = "bfloat16"

    trace("contiguous")
    trace("chunked_gzip_shuffle", chunks=(2, 4), compression="gzip", compression_opts=4, shuffle=True)
    trace("float64_big_endian", dtype=">f8")
    trace("two_steps_nested_latest", libver="latest", step_names=("step_000001", "step_000200"))
    # Roles from @role with other dataset names, and the optional tensors.
    with h5py.File(out / "roles_optional.h5", "w") as f:
        f.attrs["schema"] = "fp4-trace"
        f.attrs["schema_version"] = np.int64(1)
        step = f.create_group("step_000002")
        step.attrs["step"] = np.int64(2)
        g = step.create_group("proj")
        for name, values, role in (("input", x, "activation"), ("weight", w, "weight"),
                                   ("grad", dy, "grad_output"), ("dx", x, "grad_input")):
            g.create_dataset(name, data=values).attrs["role"] = role
        g.create_dataset("y", data=x[:, :4])


def format_seeds():
    out = fresh("format_parse")
    names = ["e2m1", "e2m3", "e3m2", "e4m3", "e5m2", "ue4m3", "ue5m3", "ue5m3fn", "e8m0", "bf16", "fp16",
             "fp32", "ue8m0", "e3m0fin", "e4m3b8fn", "ue4m3fin", "e5m10", "e8m23", "ue2m1b-3", "e6m9b40fin",
             "e1m2fin", "ue8m23"]
    for i, name in enumerate(names):
        (out / f"{i:02d}_{name}").write_text(name)


def cli_seeds():
    out = fresh("cli_args")
    lines = [
        "formats",
        "formats --json",
        "--version",
        "convert --format e2m1 --rounding rne --in x.npy --out codes.npy --decoded decoded.npy",
        "convert --format ue5m3 --rounding sr-fast --sr-bits 8 --seed 3 --in x.npy --out c.npy --saturate",
        "convert --format e4m3b8fn --rbits r.npy --specials te-python --in x.npy --out c.npy --no-saturate",
        "quantize --recipe nvfp4 --in t.npy --out q.h5",
        "quantize --recipe mxfp4 --role weight --block 32 --two-d --rht --seed 7 --in t.npy --out q.h5",
        "gemm --list-datapaths --json",
        "gemm --recipe ue5m3 --a x.npy --b w.npy --datapath exact --out c.npy",
        "gemm --recipe nvfp4 --a x.npy --b w.npy --gemm wgrad --inner 32 --no-snap --target-a 1 --out c.npy",
        "mma --datapath sm90-bf16 --input-format bf16 --a a.npy --b b.npy --c c.npy --out d.npy",
        "crosscheck --seed 11 --shape 1024x1024x4096",
        "crosscheck --recipe nvfp4 --paths quantize exact",
        "verify quantize --recipe nvfp4 --in x.npy --codes codes.npy --scales scales.npy --json --max-explained 1",
        "verify gemm --recipe ue5m3 --a a.npy --b b.npy --c c.npy --datapath auto --worst 2",
        "replay t.h5 --steps 200,2000 --layers mlp --recipes nvfp4,mxfp4 --json a.json --csv a.csv -q",
        "replay t.h5 --hold previous --no-gemms --slab-mib 64 --h5 a.h5 --plots plots",
        "sweep --rows 64 --cols 1024 --seed 0",
        "sweep t.h5 --steps 200 --element-formats e2m1 --scale-formats ue4m3,ue5m3,e8m0 --blocks 16,32 "
        "--tensor-scales current,periodic:50",
        "vectors --recipe mxfp4 --out vectors-mxfp4",
        "convert --help",
    ]
    for i, line in enumerate(lines):
        (out / f"{i:02d}_{line.split()[0].lstrip('-')}").write_text("\n".join(line.split()))


def capture_verify_seeds():
    """Version-2 traces as fp4sim.capture records an fp4sim.torch.Linear's GEMMs (capture.py, _write_call):
    x/w/dy, and fp4/<gemm> with C, fp4/<gemm>.a and .b with inputs, codes, scales and tensor scalars,
    written by the capture code's own writer, from fp4sim.quantize and fp4sim.gemm. Needs the built module
    (PYTHONPATH=build/python)."""
    import json

    import fp4sim
    from fp4sim.capture.trace_file import TraceFile

    out = fresh("capture_verify")
    rng = np.random.default_rng(4)
    cases = {  # name: recipe, overrides, gzip level, amax_ref
        "mxfp4_fprop": ("mxfp4", {}, 0, None),
        "nvfp4_fprop_held_amax": ("nvfp4", {}, 0, 3.0),
        "mxfp4_block32_gzip": ("mxfp4", {"block": 32}, 1, None),
        "nvfp4_stochastic_dgrad": ("nvfp4", {"rounding": "sr-fast"}, 0, None),
    }
    for name, (recipe, overrides, level, amax_ref) in cases.items():
        gemm = "dgrad" if "dgrad" in name else "fprop"
        a = rng.standard_normal((2, 32), dtype=np.float32)
        b = rng.standard_normal((2, 32), dtype=np.float32)
        datapath = fp4sim._fp4sim.operand_info(recipe, overrides, gemm + ".a")["datapath"]
        trace = TraceFile(str(out / (name + ".h5")), {"model": "fuzz seed"}, level)
        step = trace.step_group(1, {"lr": 0.1})
        call = step.create_group("fc").create_group("call_000001")
        for tensor, data, role in (("x", a, "activation"), ("w", b, "weight"), ("dy", a, "grad_output")):
            trace.array(call, tensor, data, role=role)
        fp4 = call.create_group("fp4")
        g = fp4.create_group(gemm)
        g.attrs.update(recipe=recipe, overrides=json.dumps(overrides), datapath=datapath, seed=np.uint64(7))
        trace.array(g, "c", fp4sim.gemm(a, b, recipe, gemm, datapath=datapath, seed=7, amax_ref_a=amax_ref,
                                        **overrides))
        for side, x in (("a", a), ("b", b)):
            q = fp4sim.quantize(x, recipe, gemm + "." + side, seed=7, amax_ref=amax_ref if side == "a" else None,
                                **overrides)
            og = fp4.create_group(gemm + "." + side)
            og.attrs.update(recipe=recipe, overrides=json.dumps(overrides), operand=gemm + "." + side,
                            seed=np.uint64(7), stream=np.int64(0 if side == "a" else 1),
                            tensor_amax=q.tensor_amax, global_encode_scale=q.global_encode_scale,
                            global_decode_scale=q.global_decode_scale)
            if amax_ref is not None and side == "a":
                og.attrs["amax_ref"] = np.float32(amax_ref)
            for dataset, data in (("input", x), ("codes", q.codes), ("scales", q.scales)):
                trace.array(og, dataset, data)
        trace.commit({"capture_steps": np.asarray([1], dtype=np.int64)})


if __name__ == "__main__":
    npy_seeds()
    trace_seeds()
    format_seeds()
    cli_seeds()
    capture_verify_seeds()
