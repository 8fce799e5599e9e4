// libFuzzer harness: the fp4sim command line (fp4sim::cli::build_app, as run() builds it) parsing an
// arbitrary argv, one argument per line of the input, without running the command: the top-level app's
// parse-complete callback runs after CLI11 has matched every argument, run each option's callback and
// checked every requirement, and before any subcommand's callback (which runs the command), and stops
// there. Help and errors are formatted into a stream that is dropped. A CLI11 ParseError or an
// fp4sim::UsageError is a rejected argv; any other exception, a crash or a sanitizer report is a finding
// (docs/fuzzing.md).
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "fp4sim/core/error.hpp"

namespace {

struct ParsedOnly {};

// The arguments in CLI11's order for App::parse(std::vector<std::string>&&): last first.
std::vector<std::string> reversed_arguments(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args(1);
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      args.emplace_back();
    } else {
      args.back() += static_cast<char>(data[i]);
    }
  }
  return {args.rbegin(), args.rend()};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  CLI::App app{"fp4sim"};
  fp4sim::cli::build_app(app);
  app.parse_complete_callback([] { throw ParsedOnly{}; });
  try {
    app.parse(reversed_arguments(data, size));
  } catch (const ParsedOnly&) {
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    (void)app.exit(e, out, err);
  } catch (const fp4sim::UsageError&) {
  }
  return 0;
}
