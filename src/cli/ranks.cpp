// run_shares (src/cli/ranks.hpp): the failure protocol and the gathering, the same over MPI or alone.
#include <cstdint>
#include <exception>
#include <limits>

#include "fp4sim/core/error.hpp"
#include "ranks.hpp"

namespace fp4sim::cli {

namespace {

constexpr std::int64_t kNoFailure = std::numeric_limits<std::int64_t>::max();

// A failure as text that another rank can throw again: 'u' (UsageError, exit 2) or 'd' (anything else,
// exit 3, as run() maps them), then the message.
std::string describe(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const UsageError& e) {
    return std::string("u") + e.keyed();
  } catch (const DataError& e) {
    return std::string("d") + e.keyed();
  } catch (const std::exception& e) {
    return std::string("d") + e.what();
  } catch (...) {
    return "dunknown failure";
  }
}

}  // namespace

std::optional<std::vector<std::string>> run_shares(
    Ranks& ranks, const std::function<std::string(const Share& share, const Starting& starting)>& work) {
  std::int64_t at = -1;
  std::string bytes;
  std::exception_ptr failure;
  try {
    bytes = work(Share{ranks.rank(), ranks.count()},
                 [&at](std::uint64_t item) { at = static_cast<std::int64_t>(item); });
  } catch (...) {
    failure = std::current_exception();
  }
  // Every rank reaches this point, failed or not: no rank waits in a collective for one that has left.
  const auto [first, owner] = ranks.lowest(failure ? at : kNoFailure);
  if (first != kNoFailure) {
    const std::string report = ranks.broadcast(owner == ranks.rank() ? describe(failure) : std::string(), owner);
    if (ranks.rank() != 0) throw ReportedByRankZero{};
    if (owner == 0) std::rethrow_exception(failure);
    if (report.front() == 'u') throw UsageError(report.substr(1));
    throw DataError(report.substr(1));
  }
  std::vector<std::string> parts = ranks.gather(std::move(bytes));
  if (ranks.rank() != 0) return std::nullopt;
  return parts;
}

}  // namespace fp4sim::cli
