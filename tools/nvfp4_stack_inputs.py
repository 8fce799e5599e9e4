"""Adversarial NVFP4 inputs (1 x 16 blocks, E4M3 scales) for the stack oracles of torchao's and ModelOpt's NVFP4
quantizers (tools/torchao_oracle.py --nvfp4, tools/modelopt_oracle.py): seeded, never chosen by fp4sim.

Each tensor is [64, 256] float32: name -> array.
* normal: standard normal rows at 10^-9 .. 10^6, so block scales reach the E4M3 subnormals, the stacks' lower
  clamps (2^-6, 2^-9) and saturation at 448;
* scale-ties: blocks whose amax is 6 (or 6 times a power of two near the tensor amax's) times an E4M3 value or
  a midpoint between two, moved by 0, +-1 or +-2 binary32 ulps: the block scale's rounding ties, and the places
  where dividing by 6 and multiplying by RN(1/6) part;
* element-ties: blocks of E2M1 grid values, midpoints and their binary32 neighbours times 2^k, amax 6 * 2^k;
* zeros: a +0 block, a -0 block, blocks of tiny values that round to +-0, and blocks below 2^-126 (binary32
  subnormals);
* wide: every block a random binary32 exponent field 1..254 over a random mantissa (tensor amax near FLT_MAX).
nvfp4_infinities and nvfp4_nans add tensors with +-Inf or NaN elements where a stack's rule for them is modelled.
"""

from __future__ import annotations

import numpy as np

ROWS, COLS, BLOCK = 64, 256, 16
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def e4m3_values():
    """Every positive finite E4M3 value (bias 7, subnormals 2^-9 steps, max 448) and the midpoints between them."""
    vals = sorted({m / 8 * 2.0 ** -6 for m in range(1, 8)} |
                  {(1 + m / 8) * 2.0 ** e for e in range(-6, 9) for m in range(8) if (1 + m / 8) * 2.0 ** e <= 448})
    vals = np.array(vals)
    return np.concatenate([vals, (vals[:-1] + vals[1:]) / 2])


def _nudge(values, ulps):
    """values moved by ulps binary32 ulps (an integer array of the same shape)."""
    bits = values.astype(np.float32).view(np.int32).astype(np.int64) + ulps
    return bits.astype(np.int32).view(np.float32)


def nvfp4_inputs(seed: int):
    rng = np.random.default_rng(seed)
    f32 = np.float32
    blocks = ROWS * COLS // BLOCK
    shape3 = (ROWS, COLS // BLOCK, BLOCK)
    normal = (rng.standard_normal((ROWS, COLS)) * 10.0 ** rng.integers(-9, 7, (ROWS, 1))).astype(f32)

    def with_amax(amax):
        """Blocks of uniform elements under the given amax, one element (random place and sign) equal to it."""
        rest = rng.uniform(-1, 1, (blocks, BLOCK)).astype(f32) * amax[:, None]
        where = rng.integers(0, BLOCK, blocks)
        rest[np.arange(blocks), where] = amax * rng.choice([-1, 1], blocks).astype(f32)
        return rest.reshape(ROWS, COLS).astype(f32)

    # Scale ties: u = amax/6 (one-level) lands on E4M3 values and midpoints; one block per row holds the tensor
    # amax 448*6*2^k so that, two-level, P is a power of two and the same ties reach the scale rounding.
    power = np.exp2(rng.integers(-20, 20, (blocks,))).astype(np.float64)
    amax = _nudge(6 * rng.choice(e4m3_values(), blocks) * power, rng.choice([0, 0, -1, 1, -2, 2], blocks))
    scale_ties = with_amax(amax)
    scale_ties[rng.integers(0, ROWS), :BLOCK] = f32(2688.0 * 2.0 ** rng.integers(-10, 10))
    grid = np.concatenate([E2M1, (E2M1[:-1] + E2M1[1:]) / 2])
    pool = np.concatenate([grid, _nudge(grid, np.full(grid.shape, 1)), _nudge(grid[1:], np.full(grid.size - 1, -1))])
    picks = rng.choice(pool, (blocks, BLOCK)) * rng.choice([-1, 1], (blocks, BLOCK))
    picks[np.arange(blocks), rng.integers(0, BLOCK, blocks)] = 6.0
    element_ties = (picks * np.exp2(rng.integers(-30, 30, (blocks, 1)))).astype(f32).reshape(ROWS, COLS)
    zeros = normal.copy().reshape(shape3)
    zeros[0, 0] = 0.0
    zeros[1, 0] = -0.0
    zeros[2, :] = rng.uniform(-1e-30, 1e-30, (COLS // BLOCK, BLOCK))
    zeros[3, :] = (rng.uniform(-1, 1, (COLS // BLOCK, BLOCK)) * 2.0 ** -130)
    zeros[4, 1] = -(10.0 ** -12)
    zeros = zeros.reshape(ROWS, COLS).astype(f32)
    field = rng.integers(1, 255, blocks).astype(np.uint32)
    wide = with_amax(((field << 23) | rng.integers(0, 1 << 23, blocks).astype(np.uint32)).view(f32))
    return {"normal": normal, "scale-ties": scale_ties, "element-ties": element_ties, "zeros": zeros, "wide": wide}


def nvfp4_infinities(seed: int):
    """The normal tensor of nvfp4_inputs with +-Inf in some blocks (one or several per block), for the stacks whose
    rule for Inf is modelled (torchao one-level: the scale saturates to 448, Inf elements to +-6)."""
    rng = np.random.default_rng(seed + 1000)
    x = nvfp4_inputs(seed)["normal"].copy()
    flat = x.reshape(-1)
    where = rng.choice(flat.size, flat.size // 64, replace=False)
    flat[where] = rng.choice([-np.inf, np.inf], where.size)
    return x


def nvfp4_nans(seed: int):
    """The normal tensor of nvfp4_inputs with a few NaNs of either sign, for the stacks whose NaN rule is
    modelled (ModelOpt: a NaN anywhere makes the tensor amax NaN)."""
    rng = np.random.default_rng(seed + 2000)
    x = nvfp4_inputs(seed)["normal"].copy()
    flat = x.reshape(-1)
    where = rng.choice(flat.size, 3, replace=False)
    flat[where] = np.array([np.nan, -np.nan, np.nan], np.float32)
    return x


def pack_nibbles_unpacked(codes):
    """[rows, cols / 2] bytes, element 2j in the low nibble -> [rows, cols] codes."""
    return np.stack([codes & 15, codes >> 4], axis=-1).reshape(codes.shape[0], -1)
