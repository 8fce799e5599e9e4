#!/usr/bin/env python3
"""Check a kernel's outputs against fp4sim conformance vectors, with numpy alone.

`fp4sim vectors --recipe R --out VECTORS` writes VECTORS/manifest.json and .npy files (the manifest's
"conventions" say what each file holds). Run your kernel on every case's inputs (`x`, and `rbits` for
stochastic rounding; `a` and `b` for GEMM cases) and save each output under the file name the manifest
gives for it (for example `03_activation_element_ties.codes.npy`, `22_gemm_fprop.c.exact.npy`) in a
directory of your own, then:

    python3 tools/check_vectors.py VECTORS --results MINE

Every output file found in MINE is compared bit for bit with the vector (codes and scales as integers,
float32 arrays by their bit patterns, any NaN matching any NaN; codes only where the case's `defined`
mask is 1); outputs you do not produce are listed as not provided. `--nibbles low-first|high-first`
reads codes packed two to a byte. `--self-check` checks the vectors themselves: every file the
manifest names exists with the shape and dtype it should have, and the vectors compared with
themselves pass.

This file derives nothing: it does not quantize, decode or multiply; it only loads and compares.
Exit status: 0 everything compared is identical, 1 a mismatch (or nothing to compare), 2 usage error,
3 a file that cannot be read as what it should be (a manifest that is not the vectors' JSON, a result
that is not a .npy array): one line on stderr naming it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

SHOWN = 5  # mismatching elements listed per file


class DataError(Exception):
    """A file that is not what it should be: exit 3, not a mismatch."""


def load_npy(path):
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise DataError(f"{path}: not a .npy array ({e})") from None


def records(case):
    """The quantize records of a case: itself, or a GEMM's two operands."""
    if case["kind"] == "gemm":
        return [(case["name"] + ".a", case["operands"]["a"]), (case["name"] + ".b", case["operands"]["b"])]
    return [(case["name"], case)]


def outputs(case):
    """(label, vector file, kind, quantize record or None) for every output a kernel may produce."""
    out = []
    for name, rec in records(case):
        files = rec["files"]
        out.append((f"{name} codes", files["codes"], "codes", rec))
        out.append((f"{name} scales", files["scales"], "u8", rec))
        out.append((f"{name} dequantized", files["dequantized"], "f32", rec))
    if case["kind"] == "gemm":
        for datapath, file in case["files"]["c"].items():
            out.append((f"{case['name']} c[{datapath}]", file, "f32", None))
    return out


def unpack(packed, cols, order):
    lo, hi = packed & 0x0F, packed >> 4
    first, second = (lo, hi) if order == "low-first" else (hi, lo)
    codes = np.empty((packed.shape[0], packed.shape[1] * 2), np.uint8)
    codes[:, 0::2], codes[:, 1::2] = first, second
    return codes[:, :cols]


def same_f32(want, got):
    """Elementwise: identical binary32 bit patterns, or both NaN."""
    w, g = want.view(np.uint32), got.view(np.uint32)
    return (w == g) | (np.isnan(want) & np.isnan(got))


def describe(kind, value):
    if kind == "f32":
        return f"{str(np.float32(value))} ({np.float32(value).view(np.uint32):#010x})"
    return f"{int(value):#04x}"


def compare(label, kind, want, got, mask, x):
    """Problems found comparing one output (an empty list when identical)."""
    if got.shape != want.shape:
        return [f"{label}: shape {got.shape}, expected {want.shape}"]
    if kind == "f32":
        if got.dtype != np.float32:
            return [f"{label}: dtype {got.dtype}, expected float32"]
        ok = same_f32(want, got)
    else:
        if got.dtype.kind not in "ui":
            return [f"{label}: dtype {got.dtype}, expected an unsigned integer type"]
        ok = want.astype(np.int64) == got.astype(np.int64)
    if mask is not None:
        ok |= mask == 0
    if ok.all():
        return []
    bad = np.argwhere(~ok)
    lines = [f"{label}: {len(bad)} of {ok.size} differ"]
    for idx in bad[:SHOWN]:
        at = tuple(int(i) for i in idx)
        where = f" (x = {describe('f32', x[at])})" if x is not None and x.shape == want.shape else ""
        lines.append(f"    [{', '.join(map(str, at))}] expected {describe(kind, want[at])}, "
                     f"got {describe(kind, got[at])}{where}")
    return lines


def check_structure(vectors, manifest):
    """Self-check: every file exists with the shape and dtype the manifest implies."""
    problems = []

    def load(file):
        path = vectors / file
        if not path.is_file():
            problems.append(f"{file}: missing")
            return None
        return load_npy(path)

    def expect(file, dtype, shape):
        arr = load(file)
        if arr is not None and (arr.dtype != dtype or arr.shape != tuple(shape)):
            problems.append(f"{file}: {arr.dtype} {arr.shape}, expected {np.dtype(dtype)} {tuple(shape)}")
        return arr

    for case in manifest["cases"]:
        for _, rec in records(case):
            files, shape = rec["files"], rec["shape"]
            expect(files["x"], np.float32, shape)
            codes = expect(files["codes"], np.uint8, shape)
            if codes is not None and (codes > 0x0F).any():
                problems.append(f"{files['codes']}: a code above 0x0F")
            expect(files["scales"], np.uint8, rec["scale_shape"])
            expect(files["dequantized"], np.float32, shape)
            stochastic = rec["rounding"].startswith("sr")
            if stochastic != ("rbits" in files):
                problems.append(f"{rec.get('name', case['name'])}: rounding {rec['rounding']} but rbits "
                                f"{'absent' if stochastic else 'present'}")
            if "rbits" in files:
                bits = manifest["recipe"]["sr_bits"]
                r = expect(files["rbits"], np.uint8 if bits <= 8 else np.uint16, shape)
                if r is not None and (r.astype(np.int64) >> bits).any():
                    problems.append(f"{files['rbits']}: a value does not fit in {bits} bits")
            if rec["rht"] != ("transformed" in files):
                problems.append(f"{case['name']}: rht {rec['rht']} but transformed "
                                f"{'absent' if rec['rht'] else 'present'}")
            if "transformed" in files:
                expect(files["transformed"], np.float32, shape)
            if "defined" in files:
                expect(files["defined"], np.uint8, shape)
        if case["kind"] == "gemm":
            expect(case["files"]["a"], np.float32, [case["m"], case["k"]])
            expect(case["files"]["b"], np.float32, [case["n"], case["k"]])
            for file in case["files"]["c"].values():
                expect(file, np.float32, [case["m"], case["n"]])
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vectors", type=Path, help="directory written by `fp4sim vectors`")
    parser.add_argument("--results", type=Path, help="directory holding your kernel's outputs, named as the vectors'")
    parser.add_argument("--self-check", action="store_true",
                        help="check the vectors' files and compare them with themselves")
    parser.add_argument("--nibbles", choices=["unpacked", "low-first", "high-first"], default="unpacked",
                        help="how your codes files hold the codes (default: one per byte, shaped like x)")
    parser.add_argument("--case", action="append", default=[],
                        help="check only cases whose name contains this (repeatable)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only failures and the summary")
    args = parser.parse_args(argv)

    manifest_path = args.vectors / "manifest.json"
    if not manifest_path.is_file():
        print(f"check_vectors: error: {manifest_path}: no such file", file=sys.stderr)
        return 2
    if args.self_check == (args.results is not None):
        print("check_vectors: error: give exactly one of --results DIR and --self-check", file=sys.stderr)
        return 2
    if args.self_check and args.nibbles != "unpacked":
        print("check_vectors: error: --self-check compares the vectors' own (unpacked) codes", file=sys.stderr)
        return 2
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as e:
        print(f"check_vectors: error: {manifest_path}: not the vectors' JSON ({e})", file=sys.stderr)
        return 3
    results = args.vectors if args.self_check else args.results
    if not results.is_dir():
        print(f"check_vectors: error: {results}: not a directory", file=sys.stderr)
        return 2

    try:
        return check(args, manifest, results)
    except DataError as e:
        print(f"check_vectors: error: {e}", file=sys.stderr)
        return 3
    except (KeyError, TypeError, AttributeError) as e:
        # a manifest that parses but lacks what fp4sim vectors writes
        print(f"check_vectors: error: {manifest_path}: not a manifest of fp4sim vectors (at {e!r})", file=sys.stderr)
        return 3


def check(args, manifest, results):
    failures = []
    if args.self_check:
        failures += check_structure(args.vectors, manifest)

    compared = passed = 0
    missing = []
    for case in manifest["cases"]:
        if args.case and not any(s in case["name"] for s in args.case):
            continue
        case_failures = []
        for label, file, kind, rec in outputs(case):
            path = results / file
            if not path.is_file():
                missing.append(file)
                continue
            want = load_npy(args.vectors / file)
            got = load_npy(path)
            mask = x = None
            if rec is not None:
                x = load_npy(args.vectors / rec["files"]["x"])
                if kind == "codes" and "defined" in rec["files"]:
                    mask = load_npy(args.vectors / rec["files"]["defined"])
            if kind == "codes" and args.nibbles != "unpacked":
                if got.ndim != 2 or got.shape[0] != want.shape[0] or got.shape[1] != (want.shape[1] + 1) // 2:
                    case_failures.append(f"{label}: packed shape {got.shape}, expected "
                                         f"({want.shape[0]}, {(want.shape[1] + 1) // 2})")
                    continue
                got = unpack(got, want.shape[1], args.nibbles)
            compared += 1
            problems = compare(label, "f32" if kind == "f32" else "u8", want, got, mask, x)
            if problems:
                case_failures += problems
            else:
                passed += 1
        if case_failures:
            failures += case_failures
            print(f"FAIL {case['name']}")
            for line in case_failures:
                print(f"  {line}")
        elif not args.quiet:
            print(f"ok   {case['name']}")

    recipe = manifest["recipe"]["name"]
    print(f"{recipe}: {passed} of {compared} outputs identical; {len(missing)} not provided")
    if args.self_check and failures:
        print("the vectors themselves are inconsistent:", *failures[:20], sep="\n  ")
    if compared == 0:
        print("check_vectors: nothing compared: no output file of the manifest was found in", results)
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
