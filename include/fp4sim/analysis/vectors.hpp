// Conformance vectors for a recipe (`fp4sim vectors`): input tensors chosen to hit every edge of the
// recipe (element and scale ties, saturation, scale underflow, zero blocks, NaN/Inf, stale tensor
// references, every role, RHT, GEMMs), with the golden model's codes, scales, dequantized values and
// GEMM outputs, written as .npy files and a manifest.json that a kernel author checks with numpy alone
// (tools/check_vectors.py). The same recipe and seed give byte-identical files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/recipe.hpp"

namespace fp4sim::vectors {

// Where a case's stochastic-rounding integers came from: Philox (random.hpp) under this key, or chosen
// outright (edge values) when absent. Either way they are written out as the `rbits` file.
struct PhiloxKey {
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
  int bits = 8;
};

// One tensor quantized under one operand spec, with everything the golden model made of it.
struct QuantizeCase {
  std::string name;
  OperandSpec spec;
  std::optional<float> amax_ref;  // held reference; nullopt: the current amax
  std::size_t rows = 0, cols = 0;
  std::vector<float> x;              // the input, before any RHT
  std::vector<std::uint32_t> rbits;  // stochastic rounding only, shaped like x
  std::optional<PhiloxKey> philox;
  std::vector<std::uint8_t> defined;  // 1 where the recipe's source fixes the element code; empty: all
  std::vector<std::string> covers;    // the edge categories the case was built to hit (edge_category_names)
  QuantizedTensor q;
  std::vector<float> dequantized;
  std::vector<float> transformed;  // RHT(x), the tensor actually quantized (spec.rht only)
};

struct GemmOutput {
  std::string datapath;
  float alpha = 1.0f;
  std::vector<float> c;  // [M, N] row-major
};

// Discriminating cases: in how many outputs two of the named datapaths differ.
struct RowDifference {
  std::string a, b;
  std::size_t outputs = 0;
};

// C = A·Bᵀ with A [M, K] and B [N, K] quantized along K by the recipe's specs for one GEMM
// (operands_for), through the recipe's default datapath, `exact` and `fp32-seq` (discriminating cases:
// through the named datapaths).
struct GemmCase {
  std::string name;
  Gemm gemm = Gemm::fprop;
  QuantizeCase a, b;
  std::vector<GemmOutput> outputs;
  std::vector<RowDifference> differences;  // discriminating cases only: every pair of rows, each > 0
};

struct Case {
  std::optional<QuantizeCase> quantize;  // exactly one of the two is set
  std::optional<GemmCase> gemm;
  const std::string& name() const { return quantize ? quantize->name : gemm->name; }
};

struct VectorSet {
  Recipe recipe;
  std::uint64_t seed = 0;
  std::vector<Case> cases;
};

// The edge categories a case may cover, in the order the manifest documents them.
const std::vector<std::string>& edge_category_names();

// The number of built-in edge cases for the recipe: the least `cases` accepts.
std::size_t minimum_cases(const Recipe& recipe);
// The edge cases and four random ones (at least 20 for every preset).
std::size_t default_cases(const Recipe& recipe);

// The edge cases first, then random tensors (every role in turn) up to `cases` in all (UsageError when
// `cases` < minimum_cases). Deterministic in (recipe, seed, cases): a case's inputs depend only on the
// seed and its index.
VectorSet generate(const Recipe& recipe, std::uint64_t seed, std::size_t cases);
// The same cases handed to `sink` one at a time, as each is made.
void generate(const Recipe& recipe, std::uint64_t seed, std::size_t cases, const std::function<void(Case&&)>& sink);

// Generates the cases and writes `dir`/manifest.json and the .npy files it names, case by case (memory
// does not grow with `cases`), all renamed into place at once: the directory appears complete or not at
// all (OutputDirectory). `dir` must not exist or be an empty directory (UsageError otherwise, before any
// case is made). Returns the number of files written.
std::size_t write(const Recipe& recipe, std::uint64_t seed, std::size_t cases, const std::filesystem::path& dir);

// Discriminating inputs (`fp4sim vectors --discriminate`): `cases` fprop GEMMs, A [16, 128] and
// B [16, 128], on which every two of `rows` give different bits in at least one output, so that a
// kernel's output names the row it follows (`verify gemm --datapath auto`). Inputs are drawn where the
// rows part ways: blocks spread over many binades (alignment windows and truncation cut different
// bits), sub-block pairs that cancel exactly (what sets the alignment exponent), rows far below the
// tensor amax (output rounding, the 1/1024 snap). Each is kept only when running every row on it shows
// every pair differing, and no other setting of a row (row_settings, BF16 outputs) giving another row's
// C; `outputs` then holds each row's C. UsageError: fewer than two rows, a row named
// twice, `cases` outside 1..1000; DataError: no such input found within the attempts of one case (rows
// that tie on every input tried, or a row that cannot run the recipe's operands, with its reason).
void discriminate(const Recipe& recipe, const std::vector<const Datapath*>& rows, std::uint64_t seed, std::size_t cases,
                  const std::function<void(Case&&)>& sink);
// As write(), the cases of discriminate(); the manifest names the rows under "discriminate".
std::size_t write_discriminating(const Recipe& recipe, const std::vector<const Datapath*>& rows, std::uint64_t seed,
                                 std::size_t cases, const std::filesystem::path& dir);

}  // namespace fp4sim::vectors
