// The arguments of the library's calls, one row each: the one place a front end learns what a call takes
// (CLIUtils/CLI11 examples/subcom_in_files, one level further). The command line (src/cli/arguments.cpp)
// and the Python module (python/operand.cpp) both iterate these rows, each spelling a key its own way:
// --amax-ref-a / amax_ref_a. The rows only carry a value into the call object; the call's resolve() is
// the one place the values are checked, and its errors name arguments by key (fp4sim/core/error.hpp),
// which render() spells for the front end. The core does not include this layer.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fp4sim/core/convert_call.hpp"
#include "fp4sim/core/gemm_call.hpp"
#include "fp4sim/core/mma_call.hpp"
#include "fp4sim/core/quantize_call.hpp"
#include "fp4sim/core/recipe_overrides.hpp"
#include "fp4sim/verify/verify_call.hpp"

namespace fp4sim::front {

// What an argument holds. A switch is a bool (the CLI's flag pair --rht / --no-rht); an integer and a
// count (unsigned: seeds) are whole numbers; a real number lands in binary32 where the call keeps one;
// text is a name, a format or a policy ("" is refused: leaving the argument out keeps the default).
enum class ArgType { switch_, integer, count, real, text };

using ArgValue = std::variant<bool, std::int64_t, std::uint64_t, double, std::string>;

template <class Call>
struct Argument {
  std::string_view key;   // the library's name of the argument: lower-case words joined by '_'
  ArgType type;
  std::string_view help;  // one line, in the words of docs/cli.md; other arguments named {key} (render())
  // Carries a value of `type` (ArgValue's alternative of that type) into the call; checks nothing, but for
  // the recipe's row, which parses a recipe spec (recipe_spec.hpp) into the overrides it names.
  void (*set)(Call& call, const ArgValue& value);
  std::string_view metavar = "";  // a text argument's placeholder in the CLI's --help (NAME, FORMAT, ...)
  std::int64_t min = 0, max = -1;  // an integer's accepted range, inclusive (min > max: any int)
  std::vector<std::string> (*names)() = nullptr;  // a name argument's accepted names (nullptr: any text)
  // Appended to `help` in --help: a name table's "\n  name: meaning" lines (after a ':' where `names`
  // is set), or facts computed from a table (the default RHT signs).
  std::string (*names_help)() = nullptr;
  std::string_view off = "";       // a switch's CLI flag for false without the "--" (no-rht, one-d)
  std::string_view off_help = "";  // and its help
  bool on_flag = true;             // a switch that the CLI spells only as `off` (--no-snap): false
  std::string_view default_text = "";  // the default as --help shows it ("" shows none)
};

// --recipe and its overrides (docs/cli.md "Recipe overrides"): quantize, gemm, verify and Python.
std::span<const Argument<RecipeOverrides>> recipe_arguments();
// The rest of a quantize call (role, seed, amax_ref); the recipe's rows apply to call.recipe.
std::span<const Argument<QuantizeCall>> quantize_arguments();
// The rest of a GEMM call (gemm, datapath, inner, snap, out_dtype, frac_bits, reference, seed, and
// amax_ref / target of each operand); the recipe's rows apply to call.recipe.
std::span<const Argument<GemmCall>> gemm_arguments();
// An element-wise conversion.
std::span<const Argument<ConvertCall>> convert_arguments();
// One tensor-core instruction's inputs (mma).
std::span<const Argument<MmaCall>> mma_arguments();
// The rest of a verify quantize call (how their bytes are stored, their tensor scale, how much to
// explain); the quantize call's rows apply to call.quantize.
std::span<const Argument<VerifyQuantizeCall>> verify_quantize_arguments();
// The rest of a verify gemm call; the GEMM call's rows apply to call.gemm.
std::span<const Argument<VerifyGemmCall>> verify_gemm_arguments();

// How a front end spells a key.
enum class Spelling {
  cli,     // --amax-ref-a, --no-snap, --one-d
  python,  // amax_ref_a, snap=False, two_d=False
};
// `keyed` (a KeyedError's message) with every {key} mark spelled for the front end.
std::string render(std::string_view keyed, Spelling spelling);
// The flag of `key` (--amax-ref-a), or of one side of a switch (value true / false: --rht, --no-snap).
std::string cli_flag(std::string_view key, std::string_view value = "");

// "\n  name: source" for every recipe preset, for a recipe argument's help.
std::string recipe_presets_help();
// "\n  name: summary" for every datapath preset, for a datapath argument's help.
std::string datapath_help();

}  // namespace fp4sim::front
