// The arguments of `verify quantize` and `verify gemm` as the front ends receive them, and the one place
// they are checked and turned into the requests of verify.hpp. They extend the quantize and GEMM calls
// with what judging a user's output needs: how their bytes are stored, their tensor scale, how many
// mismatches to explain, and `--datapath auto`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "fp4sim/core/gemm_call.hpp"
#include "fp4sim/core/quantize_call.hpp"
#include "fp4sim/verify/profiles.hpp"
#include "fp4sim/verify/verify.hpp"

namespace fp4sim {

struct VerifyQuantizeCall {
  QuantizeCall quantize;
  std::string layout = "rowmajor";    // how their scales are stored (docs/layouts.md)
  std::string nibbles = "low-first";  // how their codes are packed
  // Their FP32 tensor scale: a number, as text (--tensor-scale-value; decimal or C99 hex float) or as a
  // value (the Python keyword). On the CLI, --tensor-scale carries either this (a number) or the
  // recipe's tensor-scale policy (none, current, periodic:D), told apart by the text;
  // --tensor-scale-policy names the policy unambiguously.
  std::string tensor_scale_text;
  std::optional<float> tensor_scale;
  std::string tensor_scale_policy;
  std::string tensor_scale_kind = "any";  // which golden value theirs is: any, encode, decode, amax
  std::size_t max_explained = 10;
  // A stack profile (profiles.hpp) instead of {recipe} and its overrides, or "auto": every profile ranked
  // by fit ("" = none: {recipe} is required).
  std::string profile;

  struct Resolved {
    Recipe recipe;  // auto: the first profile's, for the role and the stochastic-rounding bits' check
    VerifyQuantizeRequest request;
    TheirQuantized theirs;  // layout, nibbles and tensor scale; the arrays are the caller's to fill
    bool auto_profile = false;
    std::vector<ProfileCandidate> profiles;  // auto: every stack profile made for the call
  };
  Resolved resolve() const;  // UsageError
};

struct VerifyGemmCall {
  GemmCall gemm;  // gemm.datapath may also be "auto": every preset is tried
  std::size_t worst = 3;

  struct Resolved {
    Recipe recipe;
    VerifyGemmRequest request;
  };
  Resolved resolve() const;  // UsageError
};

// Their C [M, N] fits the operands (DataError naming it).
void check_output_shape(const ArrayShape& c, std::size_t m, std::size_t n);

}  // namespace fp4sim
