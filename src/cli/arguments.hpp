// The flags of the library's calls, one per row of their argument tables (fp4sim/front/arguments.hpp),
// bound to the fields of the call objects, which check them: the recipe overrides of `quantize`, `gemm`
// and `verify` (docs/cli.md), the rest of a quantize, GEMM or convert call. And the random-bits files
// those flags name.
#pragma once

#include <optional>
#include <string>

#include "cli.hpp"
#include "fp4sim/core/gemm_call.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/core/recipe_overrides.hpp"
#include "fp4sim/front/arguments.hpp"

namespace fp4sim::cli {

// An option that takes one name of E's table (fp4sim/core/names.hpp): CLI11 checks the value against
// the table, and --help lists every name with its meaning under the option's own description.
template <class E>
CLI::Option* names_of(CLI::Option* option) {
  CLI::Validator member = CLI::IsMember(name_strings<E>());
  member.description("");
  return option->check(member)->type_name("NAME")->description(option->get_description() + ":" + name_help<E>());
}

// An output path option's check: '' is exit 2 in every subcommand (it names nothing to write).
CLI::Validator not_empty_path();

// An example command line closing a subcommand's --help.
void add_example(CLI::App& app, const std::string& example);

// One flag per row of `rows` (a switch: its flag pair), bound to `call`; a name argument accepts exactly
// its table's names, a text argument no empty value (that would pass as "not given"), an integer its range.
template <class Call>
void add_arguments(CLI::App& app, std::span<const front::Argument<Call>> rows, Call& call);

// --recipe (required) and every recipe override.
void add_recipe_options(CLI::App& app, RecipeOverrides& overrides);

// The rows of a GEMM call (--gemm, --datapath, --inner, --no-snap, ..., --seed) and the per-operand
// --rbits-a/-b (file paths into rbits_a, rbits_b); the caller words --datapath's help for its choices.
void add_gemm_options(CLI::App& app, GemmCall& call, std::string& rbits_a, std::string& rbits_b);

using front::datapath_help;

// Every numeric option of `app` and its subcommands checked as its type demands, before CLI11 converts it:
// unsigned (UINT): digits only, no sign, within 64 bits; signed (INT): within 64 bits; FLOAT: a finite
// number. An empty value is refused too. (CLI11 would wrap "-1" and 2^64 into an unsigned and take "".)
void check_numbers(CLI::App& app);

// The explicit random bits a --rbits flag names (nothing for an empty path).
std::optional<RandomBitsArray> random_bits_file(const std::string& path);

}  // namespace fp4sim::cli
