// Stand-alone `fp4sim crosscheck` (the same subcommand as the fp4sim binary, src/cli/crosscheck.cpp), built
// as fp4sim_crosscheck so the GPU session can run it while other subcommands are mid-change.
#include <cstdio>
#include <exception>

#include "../../src/cli/cli.hpp"
#include "fp4sim/core/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"fp4sim crosscheck: CUDA kernels vs the golden model"};
  app.require_subcommand(1);
  fp4sim::cli::setup_crosscheck(*app.add_subcommand("crosscheck", "run the CUDA kernels and the golden model on the same cases"));
  try {
    app.parse(argc, argv);
    return 0;
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const fp4sim::UsageError& e) {
    std::fprintf(stderr, "fp4sim: error: %s\n", e.what());
    return 2;
  } catch (const fp4sim::cli::Mismatch& e) {
    std::fprintf(stderr, "fp4sim: %s\n", e.what());
    return 4;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fp4sim: error: %s\n", e.what());
    return 3;
  }
}
