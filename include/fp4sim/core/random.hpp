// Philox4x32-10 (Salmon et al., SC'11; Random123), keyed by (seed, stream, counter), so CPU and GPU
// draw the same random integer for any element and any element can be replayed alone.
// The mapping from element index to bits is contract v2 (docs/random-bits.md).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "fp4sim/core/host_device.hpp"

namespace fp4sim {

struct Philox4x32 {
  using Counter = std::array<std::uint32_t, 4>;
  using Key = std::array<std::uint32_t, 2>;

  FP4SIM_HOST_DEVICE static Counter generate(Counter ctr, Key key) {
    constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
    constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {
        key[0] += kWeyl0;
        key[1] += kWeyl1;
      }
      const std::uint64_t p0 = std::uint64_t{kMul0} * ctr[0];
      const std::uint64_t p1 = std::uint64_t{kMul1} * ctr[2];
      ctr = {static_cast<std::uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<std::uint32_t>(p1),
             static_cast<std::uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<std::uint32_t>(p0)};
    }
    return ctr;
  }

  // The block with counter {block (64-bit), stream (64-bit)} under key = seed (64-bit).
  FP4SIM_HOST_DEVICE static Counter block(std::uint64_t seed, std::uint64_t stream, std::uint64_t block) {
    return generate({static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
                     static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)},
                    {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
  }
};

// Width of the lane a `bits`-bit draw takes from the Philox output: 8 for bits <= 8 (four elements per
// 32-bit word, one block per 16 elements: the packing PTX cvt.rs and TransformerEngine use at k = 8),
// 16 for bits <= 16, 32 above (one word per element).
FP4SIM_HOST_DEVICE constexpr int random_lane_bits(int bits) { return bits <= 8 ? 8 : bits <= 16 ? 16 : 32; }

// The random integer of `bits` bits (1..32) for element `index` of stream `stream` under `seed`
// (contract v2): with L = random_lane_bits(bits) and n = 32 / L lanes per word, element i takes lane
// i % n (bits L*(i % n) + L-1 .. L*(i % n)) of word (i / n) % 4 of Philox block (i / n) / 4, and keeps
// the lane's low `bits` bits.
FP4SIM_HOST_DEVICE std::uint32_t random_bits(std::uint64_t seed, std::uint64_t stream, std::uint64_t index,
                                             int bits) {
  const int lane = random_lane_bits(bits);
  const int lanes_log2 = lane == 8 ? 2 : lane == 16 ? 1 : 0;
  const std::uint64_t word_index = index >> lanes_log2;
  const Philox4x32::Counter words = Philox4x32::block(seed, stream, word_index >> 2);
  // Selected, not indexed: a run-time index would put the block in a GPU thread's local memory.
  const std::uint32_t word = (word_index & 2) != 0 ? ((word_index & 1) != 0 ? words[3] : words[2])
                                                   : ((word_index & 1) != 0 ? words[1] : words[0]);
  const int shift = lane * static_cast<int>(index & ((std::uint64_t{1} << lanes_log2) - 1));
  const std::uint32_t value = word >> shift;
  return bits >= 32 ? value : value & ((std::uint32_t{1} << bits) - 1);
}

// random_bits(seed, stream, first + j, bits) into out[j] for every j, one Philox block per 16, 8 or 4
// elements (the same integers; the host's fast path).
inline void fill_random_bits(std::uint64_t seed, std::uint64_t stream, std::uint64_t first, int bits,
                             std::span<std::uint32_t> out) {
  const int lane = random_lane_bits(bits);
  const std::uint64_t per_block = 4 * static_cast<std::uint64_t>(32 / lane);
  const std::uint32_t lane_mask = lane == 32 ? 0xFFFFFFFFu : (std::uint32_t{1} << lane) - 1;
  const std::uint32_t mask = bits >= 32 ? 0xFFFFFFFFu : (std::uint32_t{1} << bits) - 1;
  std::size_t j = 0;
  while (j < out.size()) {
    const std::uint64_t index = first + j;
    const Philox4x32::Counter words = Philox4x32::block(seed, stream, index / per_block);
    for (std::uint64_t e = index % per_block; e < per_block && j < out.size(); ++e, ++j) {
      const std::uint64_t bit = e * static_cast<std::uint64_t>(lane);
      out[j] = (words[bit / 32] >> (bit % 32)) & lane_mask & mask;
    }
  }
}

// Which stream each caller draws (docs/random-bits.md). A tensor quantized or converted on its own draws
// stream 0; a GEMM's operands A and B streams 0 and 1; replay and sweep name a stream by a text (replay:
// "<step>/<layer>/<tensor>/<gemm>", e.g. "200/lm_head/dy/dgrad"; sweep: the distribution's name) and
// draw the stream stream_of(text).
namespace streams {
inline constexpr std::uint64_t single_tensor = 0;
inline constexpr std::uint64_t operand_a = 0;
inline constexpr std::uint64_t operand_b = 1;
}  // namespace streams

// FNV-1a (64-bit) of bytes.
constexpr std::uint64_t fnv1a(std::string_view bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// A stream's number: FNV-1a of its name.
constexpr std::uint64_t stream_of(std::string_view name) { return fnv1a(name); }

}  // namespace fp4sim
