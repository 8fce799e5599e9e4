// The two helpers src/cli/recipe_options.cpp needs, which the CLI defines in src/cli/main.cpp (a file the
// extension cannot link: it holds main()). Same bodies, so a recipe override rejected from Python reads
// exactly as on the command line; tests/python/test_module.py compares the two messages.
#include "../src/cli/cli.hpp"
#include "fp4sim/core/error.hpp"

namespace fp4sim::cli {

std::map<std::string, Rounding> rounding_map() {
  std::map<std::string, Rounding> map;
  for (const auto& mode : rounding_modes()) map.emplace(std::string(mode.name), mode.rounding);
  return map;
}

Format format_from_flag(const std::string& text, const std::string& flag) {
  if (auto f = parse_format(text)) return *f;
  std::string known;
  for (const auto& preset : format_presets()) known += std::string(known.empty() ? "" : " ") + std::string(preset.name);
  throw UsageError(flag + ": unknown format '" + text + "' (known: " + known + ", or eXmY / ueXmY[bN][fn|fin])");
}

}  // namespace fp4sim::cli
