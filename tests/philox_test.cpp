// Philox4x32-10 against Random123's published known-answer vectors, and the properties of
// random_bits() that the rest of fp4sim relies on (the documented counter/key mapping and packing of
// contract v2, masking, replay of any element alone, and the statistics of the stream).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <set>
#include <vector>

#include "fp4sim/core/random.hpp"

namespace fp4sim {
namespace {

std::string words(const Philox4x32::Counter& c) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%08x %08x %08x %08x", c[0], c[1], c[2], c[3]);
  return buf;
}

// Known-answer vectors of Random123 (D. E. Shaw Research, random123 `tests/kat_vectors`, the three
// "philox4x32 10" lines: name, rounds, CTR[4], KEY[2], EXPECTED[4], all hex uint32):
//   philox4x32 10 00000000 00000000 00000000 00000000 00000000 00000000   6627e8d5 e169c58d bc57ac4c 9b00dbd8
//   philox4x32 10 ffffffff ffffffff ffffffff ffffffff ffffffff ffffffff   408f276d 41c83b0e a20bc7c6 6d5451fd
//   philox4x32 10 243f6a88 85a308d3 13198a2e 03707344 a4093822 299f31d0   d16cfe09 94fdcceb 5001e420 24126ea1
// (the third uses the hex digits of pi). The same lines appear verbatim in several independent
// ports' test suites (e.g. a pure-Python philox port's TEST_CASES), which is where they were checked.
struct Kat {
  Philox4x32::Counter ctr;
  Philox4x32::Key key;
  Philox4x32::Counter expected;
};

const Kat kKats[] = {
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000}, {0x00000000, 0x00000000},
     {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

TEST(Philox4x32, Random123KnownAnswerVectors) {
  for (const Kat& k : kKats) {
    const auto got = Philox4x32::generate(k.ctr, k.key);
    EXPECT_EQ(got, k.expected) << "ctr " << words(k.ctr) << " key " << std::hex << k.key[0] << " " << k.key[1]
                               << ": got " << words(got) << ", expected " << words(k.expected);
  }
}

// An independent transcription of the Philox4x32 round from Salmon et al., SC'11 (Random123
// philox.h: mulhilo, then R = {hi1^c1^k0, lo1, hi0^c3^k1, lo0}, key bumped by the Weyl constants
// before every round after the first), written here without looking at random.hpp's loop.
Philox4x32::Counter philox_reference(Philox4x32::Counter c, Philox4x32::Key k) {
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t a = static_cast<std::uint64_t>(0xD2511F53u) * c[0];
    const std::uint64_t b = static_cast<std::uint64_t>(0xCD9E8D57u) * c[2];
    const Philox4x32::Counter next{static_cast<std::uint32_t>(b >> 32) ^ c[1] ^ k[0], static_cast<std::uint32_t>(b),
                                   static_cast<std::uint32_t>(a >> 32) ^ c[3] ^ k[1], static_cast<std::uint32_t>(a)};
    c = next;
    k[0] += 0x9E3779B9u;
    k[1] += 0xBB67AE85u;
  }
  return c;
}

TEST(Philox4x32, MatchesAnIndependentTranscriptionOnManyInputs) {
  std::uint32_t x = 12345;
  const auto next = [&] { return x = x * 1664525u + 1013904223u; };
  for (int i = 0; i < 10000; ++i) {
    const Philox4x32::Counter c{next(), next(), next(), next()};
    const Philox4x32::Key k{next(), next()};
    ASSERT_EQ(Philox4x32::generate(c, k), philox_reference(c, k)) << words(c);
  }
  // The transcription itself reproduces the known answers.
  for (const Kat& k : kKats) EXPECT_EQ(philox_reference(k.ctr, k.key), k.expected);
}

// Contract v2 (docs/random-bits.md), stated here from the document, not from random.hpp: for k <= 8
// element i is byte i % 4 (bits 8(i % 4) + 7 .. 8(i % 4)) of word (i / 4) % 4 of the block with counter
// {i / 16 (low, high), stream (low, high)} and key {seed (low, high)}; for 9 <= k <= 16 the 16-bit half
// i % 2 of word (i / 2) % 4 of block i / 8; above 16 word i % 4 of block i / 4. Each keeps its low k bits.
std::uint32_t documented_bits(std::uint64_t seed, std::uint64_t stream, std::uint64_t i, int k) {
  const std::uint64_t per_word = k <= 8 ? 4 : k <= 16 ? 2 : 1;
  const std::uint64_t block = i / (4 * per_word), word = (i / per_word) % 4;
  const Philox4x32::Counter c{static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
                              static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)};
  const Philox4x32::Key key{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
  const std::uint64_t lane_bits = 32 / per_word;
  const std::uint64_t lane = (philox_reference(c, key)[word] >> (lane_bits * (i % per_word))) &
                             ((std::uint64_t{1} << lane_bits) - 1);
  return static_cast<std::uint32_t>(lane & ((std::uint64_t{1} << k) - 1));
}

TEST(RandomBits, DocumentedCounterKeyAndPackingV2) {
  const std::uint64_t seeds[] = {0, 1, 0xDEADBEEFCAFEF00Dull, ~0ull};
  const std::uint64_t streams[] = {0, 7, 0x123456789ull, ~0ull};
  const std::uint64_t indices[] = {0,  1,  2,  3,  4,  5,  7,  8,  15, 16, 17, 1023, (1ull << 32) * 16 + 3,
                                   (1ull << 36) + 5, (1ull << 34) + 1, ~0ull - 16, ~0ull};
  for (const auto seed : seeds)
    for (const auto stream : streams)
      for (const auto i : indices)
        for (const int k : {1, 4, 7, 8, 9, 12, 16, 17, 24, 32})
          EXPECT_EQ(random_bits(seed, stream, i, k), documented_bits(seed, stream, i, k))
              << "seed " << seed << " stream " << stream << " index " << i << " k " << k;
}

TEST(RandomBits, FirstKnownAnswerBlockUnpackedByHand) {
  // Seed 0, stream 0: block 0 is the first KAT, words 6627e8d5 e169c58d bc57ac4c 9b00dbd8. At k = 8
  // elements 0..15 are its bytes, least significant first within each word (G4: element k <- bits
  // 8k+7..8k); at k = 16 elements 0..7 its 16-bit halves; at k = 32 elements 0..3 its words (v1's layout).
  const std::uint32_t bytes[16] = {0xd5, 0xe8, 0x27, 0x66, 0x8d, 0xc5, 0x69, 0xe1,
                                   0x4c, 0xac, 0x57, 0xbc, 0xd8, 0xdb, 0x00, 0x9b};
  for (std::uint64_t i = 0; i < 16; ++i) EXPECT_EQ(random_bits(0, 0, i, 8), bytes[i]) << i;
  const std::uint32_t halves[8] = {0xe8d5, 0x6627, 0xc58d, 0xe169, 0xac4c, 0xbc57, 0xdbd8, 0x9b00};
  for (std::uint64_t i = 0; i < 8; ++i) EXPECT_EQ(random_bits(0, 0, i, 16), halves[i]) << i;
  for (std::uint64_t i = 0; i < 4; ++i) EXPECT_EQ(random_bits(0, 0, i, 32), kKats[0].expected[i]) << i;
  // k < 8 keeps the low bits of the byte: element 1 is 0xe8, so 4 bits give 0x8 and 7 bits 0x68.
  EXPECT_EQ(random_bits(0, 0, 1, 4), 0x8u);
  EXPECT_EQ(random_bits(0, 0, 1, 7), 0x68u);
}

TEST(RandomBits, KeepsTheLowBitsOfTheLane) {
  for (std::uint64_t i = 0; i < 256; ++i) {
    for (int bits = 1; bits <= 32; ++bits) {
      const int lane = bits <= 8 ? 8 : bits <= 16 ? 16 : 32;
      const std::uint32_t whole = random_bits(42, 3, i, lane);
      const std::uint32_t mask = bits == 32 ? ~0u : (1u << bits) - 1;
      ASSERT_EQ(random_bits(42, 3, i, bits), whole & mask) << "index " << i << " bits " << bits;
    }
  }
}

TEST(RandomBits, FillEqualsElementwiseFromAnyOffset) {
  for (const int k : {3, 8, 11, 16, 20, 32}) {
    for (const std::uint64_t first : {0ull, 1ull, 5ull, 15ull, 16ull, 17ull, (1ull << 33) - 3}) {
      std::vector<std::uint32_t> got(77);
      fill_random_bits(0xABCDEF, 9, first, k, got);
      for (std::size_t j = 0; j < got.size(); ++j)
        ASSERT_EQ(got[j], random_bits(0xABCDEF, 9, first + j, k)) << "k " << k << " first " << first << " j " << j;
    }
  }
}

TEST(RandomBits, AnyElementReplaysAlone) {
  // Computing a stream in order and computing one element alone give the same integer.
  std::vector<std::uint32_t> in_order;
  for (std::uint64_t i = 0; i < 4096; ++i) in_order.push_back(random_bits(2024, 11, i, 8));
  for (const std::uint64_t i : {4095ull, 0ull, 17ull, 2048ull, 1ull, 3ull}) {
    EXPECT_EQ(random_bits(2024, 11, i, 8), in_order[i]) << i;
  }
}

TEST(RandomBits, SeedsAndStreamsGiveDifferentStreams) {
  // Two different (seed, stream) pairs agree on an 8-bit draw with probability 1/256: over 4096
  // elements the count of agreements is Binomial(4096, 1/256), mean 16, sd 4; 48 is 8 sd away.
  const auto agreements = [](std::uint64_t s1, std::uint64_t t1, std::uint64_t s2, std::uint64_t t2) {
    int same = 0;
    for (std::uint64_t i = 0; i < 4096; ++i) same += random_bits(s1, t1, i, 8) == random_bits(s2, t2, i, 8);
    return same;
  };
  EXPECT_LT(agreements(1, 0, 2, 0), 48);
  EXPECT_LT(agreements(1, 0, 1, 1), 48);
  EXPECT_LT(agreements(0, 1, 1, 0), 48);   // seed and stream are not interchangeable
  EXPECT_LT(agreements(1, 0, 1ull << 32, 0), 48);  // the high key word matters
  EXPECT_LT(agreements(0, 1, 0, 1ull << 32), 48);  // the high stream word matters
  // 32-bit words over 2^16 elements: no repeated word is expected (birthday bound ~0.5 pairs);
  // allow 4.
  std::set<std::uint32_t> seen;
  int repeats = 0;
  for (std::uint64_t i = 0; i < (1u << 16); ++i) repeats += !seen.insert(random_bits(9, 9, i, 32)).second;
  EXPECT_LE(repeats, 4);
}

TEST(RandomBits, UniformBytesAndBits) {
  // 2^20 8-bit draws. Chi-square over 256 bins has 255 degrees of freedom (mean 255, sd 22.6): the
  // bound 400 is 6.4 sd above the mean (p < 1e-9 for a uniform source). Each of the 8 bit positions
  // must be set in half the draws to within 6 sd (sd = sqrt(N)/2 = 512).
  constexpr std::uint64_t N = 1u << 20;
  std::array<std::uint64_t, 256> bins{};
  std::array<std::uint64_t, 8> ones{};
  for (std::uint64_t i = 0; i < N; ++i) {
    const std::uint32_t r = random_bits(0x5EED, 0, i, 8);
    ++bins[r];
    for (int b = 0; b < 8; ++b) ones[b] += (r >> b) & 1;
  }
  const double expected = static_cast<double>(N) / 256;
  double chi2 = 0;
  for (const auto count : bins) chi2 += (count - expected) * (count - expected) / expected;
  EXPECT_LT(chi2, 400.0) << "chi-square of 2^20 bytes over 256 bins";
  EXPECT_GT(chi2, 150.0) << "suspiciously uniform";
  for (int b = 0; b < 8; ++b) {
    EXPECT_LT(std::fabs(static_cast<double>(ones[b]) - N / 2.0), 6 * 512.0) << "bit " << b;
  }
  // The four words of one block are not equal to each other (a mapping bug would repeat them).
  int equal_words = 0;
  for (std::uint64_t block = 0; block < 1024; ++block) {
    equal_words += random_bits(1, 0, 4 * block, 32) == random_bits(1, 0, 4 * block + 1, 32);
  }
  EXPECT_EQ(equal_words, 0);
  // Neighbouring 8-bit draws share a word under v2: they must still agree only by chance. Over 2^16
  // neighbour pairs the agreements are Binomial(2^16, 1/256), mean 256, sd 16; 384 is 8 sd away.
  int equal_neighbours = 0;
  for (std::uint64_t i = 0; i < (1u << 16); ++i) equal_neighbours += random_bits(3, 1, i, 8) == random_bits(3, 1, i + 1, 8);
  EXPECT_LT(equal_neighbours, 384);
  EXPECT_GT(equal_neighbours, 128);
}

}  // namespace
}  // namespace fp4sim
