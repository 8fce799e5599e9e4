#include "arguments.hpp"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>

#include "fp4sim/core/names.hpp"
#include "fp4sim/front/analysis_arguments.hpp"
#include "fp4sim/io/npy.hpp"

namespace fp4sim::cli {

namespace {

// A text argument's value "" names nothing: it must not pass as "not given", the default taken silently.
const CLI::Validator kNotEmpty(
    [](const std::string& text) { return text.empty() ? std::string("an empty value names nothing") : std::string(); },
    "");

template <class T, class Call>
CLI::Option* add_value(CLI::App& app, const front::Argument<Call>& row, Call& call, const std::string& help) {
  return app.add_option_function<T>(
      front::cli_flag(row.key), [&row, &call](const T& value) { row.set(call, value); }, help);
}

}  // namespace

template <class Call>
void add_arguments(CLI::App& app, std::span<const front::Argument<Call>> rows, Call& call) {
  for (const front::Argument<Call>& row : rows) {
    std::string help = front::render(row.help, front::Spelling::cli);  // a row's help names others by {key}
    if (row.names && row.names_help) help += ":";
    if (row.names_help) help += row.names_help();
    CLI::Option* option = nullptr;
    switch (row.type) {
      case front::ArgType::switch_: {
        if (row.on_flag) {
          option = app.add_flag_function(front::cli_flag(row.key), [&row, &call](std::int64_t) { row.set(call, true); },
                                         help);
        }
        if (!row.off.empty()) {
          CLI::Option* off = app.add_flag_function(
              "--" + std::string(row.off), [&row, &call](std::int64_t) { row.set(call, false); }, std::string(row.off_help));
          if (option) off->excludes(option);
        }
        continue;
      }
      case front::ArgType::integer:
        option = add_value<std::int64_t>(app, row, call, help);
        if (row.min <= row.max) {
          CLI::Validator range = CLI::Range(row.min, row.max);
          // a range that only keeps the value within an int says nothing worth a line of --help
          if (row.min == INT_MIN && row.max == INT_MAX) range.description("");
          option->check(range);
        }
        break;
      case front::ArgType::count: option = add_value<std::uint64_t>(app, row, call, help); break;
      case front::ArgType::real: option = add_value<double>(app, row, call, help); break;
      case front::ArgType::text:
        option = add_value<std::string>(app, row, call, help);
        if (row.names) {
          CLI::Validator member = CLI::IsMember(row.names());
          member.description("");
          option->check(member);
        } else {
          option->check(kNotEmpty);
        }
        option->type_name(std::string(row.metavar));
        break;
    }
    if (!row.default_text.empty()) option->default_str(std::string(row.default_text));
  }
}

template void add_arguments(CLI::App&, std::span<const front::Argument<RecipeOverrides>>, RecipeOverrides&);
template void add_arguments(CLI::App&, std::span<const front::Argument<QuantizeCall>>, QuantizeCall&);
template void add_arguments(CLI::App&, std::span<const front::Argument<GemmCall>>, GemmCall&);
template void add_arguments(CLI::App&, std::span<const front::Argument<ConvertCall>>, ConvertCall&);
template void add_arguments(CLI::App&, std::span<const front::Argument<MmaCall>>, MmaCall&);
template void add_arguments(CLI::App&, std::span<const front::Argument<VerifyQuantizeCall>>, VerifyQuantizeCall&);
template void add_arguments(CLI::App&, std::span<const front::Argument<VerifyGemmCall>>, VerifyGemmCall&);
template void add_arguments(CLI::App&, std::span<const front::Argument<replay::Call>>, replay::Call&);
template void add_arguments(CLI::App&, std::span<const front::Argument<sweep::Call>>, sweep::Call&);
template void add_arguments(CLI::App&, std::span<const front::Argument<vectors::Call>>, vectors::Call&);

void add_recipe_options(CLI::App& app, RecipeOverrides& o) {
  add_arguments(app, front::recipe_arguments(), o);
  app.get_option("--recipe")->required();
}

void add_gemm_options(CLI::App& app, GemmCall& c, std::string& rbits_a, std::string& rbits_b) {
  add_arguments(app, front::gemm_arguments(), c);
  app.add_option("--rbits-a", rbits_a, "explicit stochastic-rounding integers for A (.npy uint8, shape of A)");
  app.add_option("--rbits-b", rbits_b, "explicit stochastic-rounding integers for B (.npy uint8, shape of B)");
}

CLI::Validator not_empty_path() {
  return CLI::Validator(
      [](const std::string& path) { return path.empty() ? std::string("an empty path names no file") : std::string(); }, "");
}

void add_example(CLI::App& app, const std::string& example) { app.footer("Example:\n  " + example); }

namespace {

std::string number_problem(const std::string& type, const std::string& text) {
  if (text.empty()) return "an empty value is not a number";
  errno = 0;
  char* end = nullptr;
  if (type == "FLOAT") {
    const double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) return "'" + text + "' is not a number";
    if (!std::isfinite(v)) return "'" + text + "' is not a finite number";
    return {};
  }
  if (type == "UINT" && text.find('-') != std::string::npos) return "'" + text + "' is negative (an unsigned number is expected)";
  if (type == "UINT") {
    std::strtoull(text.c_str(), &end, 0);
  } else {
    std::strtoll(text.c_str(), &end, 0);
  }
  if (end != text.c_str() + text.size()) return "'" + text + "' is not an integer";
  if (errno == ERANGE) return "'" + text + "' does not fit in 64 bits";
  return {};
}

}  // namespace

void check_numbers(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string type = option->get_type_name();
    for (const char* kind : {"UINT", "INT", "FLOAT"}) {
      if (type.rfind(kind, 0) == 0) {
        const std::string k = kind;
        option->check(CLI::Validator([k](std::string& text) { return number_problem(k, text); }, k));
        break;
      }
    }
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) check_numbers(*sub);
}

std::optional<RandomBitsArray> random_bits_file(const std::string& path) {
  if (path.empty()) return std::nullopt;
  return npy::read_random_bits(path);
}

}  // namespace fp4sim::cli
