#include <cstdio>
#include <exception>

#include "cli.hpp"
#include "ranks.hpp"
#include "fp4sim/core/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"fp4sim: bit-exact emulator of FP4 (E2M1) block-scaled formats, recipes and GEMM datapaths"};
  fp4sim::cli::build_app(app);
  try {
    app.parse(argc, argv);
    return 0;
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const fp4sim::cli::ReportedByRankZero&) {
    return 0;
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
