// How a long library call reports how far it got, for a front end's progress display (the CLI's
// src/cli/progress.hpp): `done` of `total` units (tensor elements, GEMM tiles, checked cases) and what it
// is working on. Called only from the thread that made the call, so a reporter needs no locking.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace fp4sim {

using ProgressFn = std::function<void(std::uint64_t done, std::uint64_t total, const std::string& what)>;

}  // namespace fp4sim
