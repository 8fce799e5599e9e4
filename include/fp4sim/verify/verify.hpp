// Judging someone else's kernel with the golden model (docs/cli.md `fp4sim verify`): TestFloat's ver step
// (`testfloat_ver`), where the vectors are the user's own tensors. The user's bytes are compared with
// the golden quantizer's, every mismatch is counted, and the first few are explained from the
// golden quantizer's report of what it used (QuantizeTrace): the block amax, its G, the 4over6
// candidates, the ideal scale before rounding, each element's y, where a value sat
// between its two neighbours (exact, tie, nearer one side), what the golden rule chose and why, and
// which alternative rule reproduces the user's byte.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fp4sim/core/gemm.hpp"
#include "fp4sim/core/layout.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/recipe.hpp"

namespace fp4sim {

// Which golden value a user's FP32 tensor scale is compared with.
enum class TensorScaleKind : std::uint8_t {
  any,     // the first of encode, decode, amax that it equals bit for bit
  encode,  // G = RN(RN(F*T) / amax): what multiplies amax/F before the block scale is rounded
  decode,  // Gd = RN(1/G): what multiplies the block scale on the way back
  amax,    // the tensor amax the scale was made from (TE stores this one)
};
std::span<const NameRow<TensorScaleKind>> names(TensorScaleKind);

// The user's quantized tensor, as their kernel stored it.
struct TheirQuantized {
  std::string codes_source = "codes", scales_source = "scales";  // name the arrays in messages
  std::span<const std::uint8_t> codes;
  std::vector<std::size_t> codes_shape;
  std::span<const std::uint8_t> scales;
  std::vector<std::size_t> scales_shape;
  ScaleLayout layout = ScaleLayout::rowmajor;
  NibbleOrder nibbles = NibbleOrder::low_first;
  std::optional<float> tensor_scale;
  TensorScaleKind tensor_scale_kind = TensorScaleKind::any;
};

// A value for a JSON object field, already rendered (number, string, bool or null).
struct JsonField {
  std::string key;
  std::string value;
  std::string note;  // printed as a sibling "<key>_note" when not empty (why a number is null)
};

// One mismatch, explained.
struct MismatchNote {
  enum class Kind : std::uint8_t { scale, element, tensor_scale };
  Kind kind = Kind::element;
  std::size_t row = 0, col = 0;  // element (row, col); for a scale, the block (block_row, block_col)
  std::size_t stored_row = 0;    // scale: the element row whose stored copy differs
  std::uint32_t golden = 0, theirs = 0;
  std::string summary;               // one line: where, golden, theirs
  std::vector<std::string> details;  // the explanation, one sentence a line
  std::vector<JsonField> fields;     // the same facts for --json
};

// The golden model with one rule changed, or the user's bytes read another way (nibble order, scale
// layout), and how many of the user's bytes it leaves different: verify's candidate causes.
struct AlternativeFit {
  std::string label;
  std::uint64_t mismatched_elements = 0, mismatched_scales = 0;
  bool exact() const { return mismatched_elements == 0 && mismatched_scales == 0; }
};

struct QuantizeVerifyReport {
  std::string recipe;
  std::string role;
  std::string element_format, scale_format, rounding, scale_rule;
  std::size_t rows = 0, cols = 0;
  int block_rows = 1, block_cols = 16;
  ScaleLayout layout = ScaleLayout::rowmajor;
  NibbleOrder nibbles = NibbleOrder::low_first;
  bool rht = false;

  std::uint64_t elements = 0, blocks = 0;
  std::uint64_t mismatched_elements = 0;
  std::uint64_t mismatched_scales = 0;  // blocks whose stored scale (any stored copy) differs
  std::uint64_t mismatched_blocks = 0;  // blocks with a scale or an element mismatch
  std::uint64_t elements_consistent_with_their_scale = 0;  // element mismatches that the golden rounding
                                                            // reproduces from the user's own block scale
  std::uint64_t swapped_nibble_pairs = 0;   // bytes whose two element codes are exchanged
  std::uint64_t nonzero_padding_nibbles = 0;  // odd column count: the unused high nibble (not a mismatch)
  std::uint64_t model_disagreements = 0;      // blocks whose golden bytes the quantizer's report, which the
                                              // explanations read, does not reproduce: its scale code, or an
                                              // element's y under the golden rounding (a bug; GoldenPasses
                                              // keeps it 0 under every preset and override)

  bool tensor_scaled = false;
  float tensor_amax = 0.0f, global_encode = 1.0f, global_decode = 1.0f;
  std::optional<float> tensor_scale_given;
  TensorScaleKind tensor_scale_kind = TensorScaleKind::any;
  std::string tensor_scale_matched;  // "encode" / "decode" / "amax", empty if it matched none
  bool tensor_scale_mismatch = false;

  std::vector<MismatchNote> explained;  // the first max_explained mismatches, in block order
  std::vector<std::string> hints;       // e.g. "your scales match exactly under --layout swizzled-128x4"
  std::vector<AlternativeFit> alternatives;  // every alternative tried, best fit first (fewest mismatched
                                             // scales, then elements); empty when the bytes are golden
  AlternativeFit as_given;  // the recipe as given, counted as the alternatives are (every stored scale copy)

  bool bit_exact() const { return mismatched_elements == 0 && mismatched_scales == 0 && !tensor_scale_mismatch; }
};

struct VerifyQuantizeRequest {
  QuantizeRequest quantize;  // spec (role settings), amax_ref, random bits: as `quantize` takes them
  Role role = Role::activation;
  std::size_t max_explained = 10;
};

// Quantizes x [rows, cols] with the golden model and compares the user's bytes. Throws DataError when
// the user's arrays do not fit the tensor (shape, layout), as the CLI's exit 3.
QuantizeVerifyReport verify_quantize(const Recipe& recipe, const VerifyQuantizeRequest& request,
                                     std::span<const float> x, std::size_t rows, std::size_t cols,
                                     const TheirQuantized& theirs);

// The report for people (what `fp4sim verify quantize` prints) and for machines (--json): one JSON
// object, no bare Infinity/NaN (null with a sibling *_note).
std::string to_text(const QuantizeVerifyReport& report);
std::string to_json(const QuantizeVerifyReport& report);

// ---------------------------------------------------------------------------------------------------
// verify gemm

// One of the worst outputs, with the datapath's intermediate values.
struct GemmOutputNote {
  std::size_t row = 0, col = 0;
  float golden = 0.0f, theirs = 0.0f;
  std::int64_t ulps = 0;  // theirs - golden in units in the last place (signed, across binades)
  std::string summary;
  std::vector<std::string> details;
  std::vector<JsonField> fields;
};

// A datapath configuration tried by --datapath auto.
struct GemmCandidate {
  std::string name;  // "sm90-bf16", "probe-matched (inner sm90-bf16, snap)", ...
  std::uint64_t exact_matches = 0;
  std::string error;  // why the row cannot run these operands (then exact_matches is 0)
  std::optional<std::size_t> tie_group;  // index into GemmVerifyReport::ties when it ties with others
};

struct GemmVerifyReport {
  std::string recipe, gemm, datapath, inner;
  bool snap = false, bf16_output = false;
  float alpha = 1.0f;
  std::size_t m = 0, n = 0, k = 0;
  std::uint64_t outputs = 0, exact_matches = 0, mismatches = 0;
  std::uint64_t theirs_above = 0, theirs_below = 0;  // mismatches with theirs > / < golden (ordered)
  std::uint64_t nonfinite_mismatches = 0;            // either side NaN/Inf, or NaN payloads differing
  std::int64_t max_abs_ulps = 0;
  std::vector<std::pair<std::string, std::uint64_t>> histogram;  // signed ulp bins, nonzero bins only
  std::vector<GemmOutputNote> worst;
  bool auto_mode = false;
  std::vector<GemmCandidate> candidates;  // auto: every configuration tried, best first
  std::vector<std::string> explained_by;  // auto: the configurations that match bit for bit
  // auto: groups of two or more configurations whose outputs are bit-identical on these inputs (every
  // output, not only yours): these inputs cannot tell the members of a group apart. In the order of
  // each group's first member in the table; `fp4sim vectors --discriminate` writes inputs that can.
  std::vector<std::vector<std::string>> ties;

  bool bit_exact() const { return mismatches == 0; }
};

struct VerifyGemmRequest {
  Gemm gemm = Gemm::fprop;
  QuantizeRequest a, b;   // operand specs, held amaxes, random bits (A stream 0, B stream 1)
  GemmRequest datapath;   // datapath "" = the recipe's; inner, snap, bf16 output
  bool auto_datapath = false;
  std::size_t worst = 3;  // outputs explained with the datapath's intermediate values
  ProgressFn progress;    // optional: datapaths run (auto) and each run's GEMM progress
};

// Quantizes A [m, k] and B [n, k] as `gemm` does, runs the golden datapath and compares theirs [m, n]
// (float32). DataError for shapes that do not fit; UsageError for unknown names.
GemmVerifyReport verify_gemm(const Recipe& recipe, const VerifyGemmRequest& request, std::span<const float> a,
                             std::span<const float> b, std::size_t m, std::size_t n, std::size_t k,
                             std::span<const float> theirs);
std::string to_text(const GemmVerifyReport& report);
std::string to_json(const GemmVerifyReport& report);

}  // namespace fp4sim
