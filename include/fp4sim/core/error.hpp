// Errors are values at the boundary (docs/design.md): parsing and I/O throw these with a message naming the
// file and the rule broken; the CLI maps them to the exit codes of docs/cli.md.
#pragma once

#include <stdexcept>
#include <string>

namespace fp4sim {

// A bad flag, unknown name or invalid combination: exit 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Unreadable or malformed input, shape mismatch, a value a format cannot hold: exit 3.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace fp4sim
