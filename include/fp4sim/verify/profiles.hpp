// Stack profiles (docs/recipes.md "Stack profiles"): each training or inference stack's quantizer as
// fp4sim models it, a preset and the overrides that make it, and `verify quantize --profile auto`, which
// quantizes a tensor under every profile, ranks them by how much of a kernel's bytes each reproduces and
// explains the first divergent block of the best with verify quantize's own explanations.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/recipe_overrides.hpp"
#include "fp4sim/verify/verify.hpp"

namespace fp4sim {

struct StackProfile {
  std::string name;         // what --profile names it: a preset's own name, or the preset's with a suffix
  RecipeOverrides recipe;   // the preset and the overrides that make the stack's quantizer
  std::string follows;      // the stack's file and commit ("" where the preset's source says it all)
};

// Every preset as it is, then the stack variants that are a preset plus overrides, in table order.
std::span<const StackProfile> stack_profiles();
const StackProfile* find_profile(std::string_view name);
std::vector<std::string> profile_names();  // "auto" first, then the table's names

// One profile made for the call's role (its recipe and request, as `verify quantize --recipe` would make
// them), or why it cannot quantize that operand (a 2-D-only setting on a row-scaled profile, ...).
struct ProfileCandidate {
  std::string name;
  Recipe recipe;
  QuantizeRequest request;
  std::string error;
};

// How much of the user's bytes one profile reproduces.
struct ProfileFit {
  std::string name;
  std::uint64_t blocks = 0, matching_blocks = 0;  // blocks whose scale (every stored copy) and codes all match
  std::uint64_t elements = 0, matching_elements = 0;
  std::uint64_t matching_scales = 0;      // blocks whose scale (every stored copy) matches
  std::string error;                      // why it cannot make or read these arrays (nothing then matches)
  std::optional<std::size_t> tie_group;   // index into ProfileRanking::ties
};

struct ProfileRanking {
  std::string role;
  std::size_t rows = 0, cols = 0;
  // Best first: the larger share of matching blocks, then more matching elements, then more matching
  // scales, then table order; profiles with an error last.
  std::vector<ProfileFit> fits;
  // Groups of two or more profiles whose golden codes and scales are identical on this tensor: these
  // inputs cannot tell them apart (in the order of each group's first member in the table).
  std::vector<std::vector<std::string>> ties;
  QuantizeVerifyReport best;  // verify quantize under the best profile: its first divergent block explained

  bool bit_exact() const { return best.bit_exact(); }
};

// Ranks the candidates against the user's bytes (theirs.nibbles as asked: 8-bit profiles read their codes
// unpacked) and verifies under the best. DataError when no candidate can read the user's arrays.
ProfileRanking rank_profiles(std::span<const ProfileCandidate> candidates, Role role, std::size_t max_explained,
                             std::span<const float> x, std::size_t rows, std::size_t cols,
                             const TheirQuantized& theirs);

std::string to_text(const ProfileRanking& ranking);
std::string to_json(const ProfileRanking& ranking);

}  // namespace fp4sim
