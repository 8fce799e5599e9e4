#include "run.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>

#include "cli.hpp"
#include "interrupt.hpp"
#include "ranks.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/front/arguments.hpp"
#include "fp4sim/io/hdf5.hpp"
#include "fp4sim/io/output_file.hpp"

namespace {

// Whatever went to standard output reached it: a failed write (a full disk, a closed pipe) is an error.
void finish_standard_output() {
  std::cout.flush();
  // The errno of the write that failed, when it was the last call to set one.
  const bool failed = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (failed) {
    throw fp4sim::DataError(std::string("standard output: write failed") + (errno ? std::string(": ") + std::strerror(errno) : ""));
  }
}

// The first argument when it is neither a flag nor a subcommand: named, with the known ones.
void check_subcommand(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return;
  std::string known;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->get_name() == argv[1]) return;
    known += (known.empty() ? "" : ", ") + sub->get_name();
  }
  throw fp4sim::UsageError(std::string("unknown subcommand '") + argv[1] + "' (known: " + known + "; see 'fp4sim --help')");
}

// A library error's message with each argument it names spelled as its flag.
std::string flags_of(const fp4sim::KeyedError& e) {
  return fp4sim::front::render(e.keyed(), fp4sim::front::Spelling::cli);
}

}  // namespace

namespace fp4sim::cli {

int run(int argc, char** argv) {
  // HDF5 1.10's exit-time cleanup faults on a file whose close failed (a full disk) after the error was
  // reported; every file is closed explicitly before exit, so the cleanup has nothing left to do.
  H5dont_atexit();
  handle_interrupts();
  CLI::App app{"fp4sim: bit-exact emulator of FP4 (E2M1) block-scaled formats, recipes and GEMM datapaths"};
  build_app(app);
  try {
    // Every output of the command is renamed into place together, only when all of them and standard
    // output were written (src/io/output_file.hpp).
    fp4sim::OutputSet outputs;
    check_subcommand(app, argc, argv);
    app.parse(argc, argv);
    finish_standard_output();
    outputs.commit();
    return 0;
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    if (code != 0) return 2;
    try {
      finish_standard_output();  // --help, --version
    } catch (const std::exception& failed) {
      std::fprintf(stderr, "fp4sim: error: %s\n", failed.what());
      return 3;
    }
    return 0;
  } catch (const ReportedByRankZero&) {
    return 0;
  } catch (const fp4sim::UsageError& e) {
    std::fprintf(stderr, "fp4sim: error: %s\n", printable(flags_of(e)).c_str());
    return 2;
  } catch (const Mismatch& e) {
    // The report of the mismatches went to standard output: a report that did not arrive is exit 3.
    try {
      finish_standard_output();
    } catch (const std::exception& failed) {
      std::fprintf(stderr, "fp4sim: error: %s\n", failed.what());
      return 3;
    }
    std::fprintf(stderr, "fp4sim: %s\n", printable(e.what()).c_str());
    return 4;
  } catch (const fp4sim::DataError& e) {
    std::fprintf(stderr, "fp4sim: error: %s\n", printable(flags_of(e)).c_str());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fp4sim: error: %s\n", printable(e.what()).c_str());
    return 3;
  }
}

}  // namespace fp4sim::cli
