// The whole command: parse, run, and map every error to fp4sim's exit codes (0, 2 usage, 3 data,
// 4 mismatch) with one line on standard error. Its own header, without CLI11, so that main.cpp (a
// translation unit outside fp4sim_cli's unity build) does not parse CLI11 a third time.
#pragma once

namespace fp4sim::cli {

int run(int argc, char** argv);

}  // namespace fp4sim::cli
