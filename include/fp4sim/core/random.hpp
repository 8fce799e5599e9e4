// Philox4x32-10 (Salmon et al., SC'11; Random123), keyed by (seed, stream, counter), so CPU and GPU
// draw the same random integer for any element and any element can be replayed alone.
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
};

// The random integer of `bits` bits (1..32) for element `index` of stream `stream` under `seed`:
// element i uses word i % 4 of the Philox block with counter {i / 4 (64-bit), stream (64-bit)} and
// key = seed (64-bit), keeping the word's low `bits` bits. Documented in docs/random-bits.md.
FP4SIM_HOST_DEVICE std::uint32_t random_bits(std::uint64_t seed, std::uint64_t stream, std::uint64_t index,
                                             int bits) {
  const std::uint64_t block = index >> 2;
  const Philox4x32::Counter ctr{static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
                                static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)};
  const Philox4x32::Key key{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
  const std::uint32_t word = Philox4x32::generate(ctr, key)[index & 3];
  return bits >= 32 ? word : word & ((std::uint32_t{1} << bits) - 1);
}

// random_bits(seed, stream, first + k, bits) for every k of `out`, one Philox block per four elements.
inline void fill_random_bits(std::uint64_t seed, std::uint64_t stream, std::uint64_t first, int bits,
                             std::span<std::uint32_t> out) {
  const std::uint32_t mask = bits >= 32 ? 0xFFFFFFFFu : (std::uint32_t{1} << bits) - 1;
  const Philox4x32::Key key{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
  std::size_t k = 0;
  while (k < out.size()) {
    const std::uint64_t index = first + k;
    const std::uint64_t block = index >> 2;
    const Philox4x32::Counter ctr{static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
                                  static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)};
    const Philox4x32::Counter words = Philox4x32::generate(ctr, key);
    for (std::uint64_t w = index & 3; w < 4 && k < out.size(); ++w, ++k) out[k] = words[w] & mask;
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

// FNV-1a (64-bit) of a stream's name.
constexpr std::uint64_t stream_of(std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace fp4sim
