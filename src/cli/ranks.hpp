// The processes of one run of `fp4sim replay` or `fp4sim sweep` (docs/replay.md "Many processes"): MPI's
// world when fp4sim is built with MPI and an MPI launcher started it (ranks_mpi.cpp), else this process
// alone (ranks_single.cpp, or ranks_mpi.cpp without starting MPI).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fp4sim/analysis/result_bytes.hpp"  // to_bytes, which run_on_ranks calls
#include "fp4sim/analysis/share.hpp"

namespace fp4sim::cli {

class Ranks {
 public:
  // Started (MPI_Init, under an MPI launcher) on first use, ended (MPI_Finalize) when the process ends
  // normally.
  static Ranks& world();

  int rank() const { return rank_; }
  int count() const { return count_; }

  // Collectives: every rank calls them, in the same order.
  // The lowest `position` over the ranks, and the lowest rank that holds it.
  std::pair<std::int64_t, int> lowest(std::int64_t position);
  // `text` as rank `root` has it, on every rank.
  std::string broadcast(std::string text, int root);
  // On rank 0 every rank's bytes in rank order; elsewhere nothing.
  std::vector<std::string> gather(std::string bytes);

  Ranks(const Ranks&) = delete;
  Ranks& operator=(const Ranks&) = delete;
  ~Ranks();

 private:
  Ranks();
  int rank_ = 0, count_ = 1;
};

// Thrown on the ranks other than 0 when the run failed: rank 0 reports the failure; the others end with
// exit code 0 and no message, so that mpirun does not end rank 0 before it has printed the message.
struct ReportedByRankZero {};

// Where this rank's work is, for the failure protocol of run_shares: -1 before its first work item.
using Starting = std::function<void(std::uint64_t item)>;

// Runs this rank's share of the work on every rank (`work` returns it as bytes; it must report each work
// item it starts through `starting`) and brings the shares to rank 0, which gets every share's bytes in
// rank order (the other ranks get nothing). When the work threw on any rank, every rank throws, after the
// same collectives, the failure one process would have met first (the lowest work item that threw; a
// failure before the first item counts as -1, the lowest rank's winning): rank 0 with that failure's kind
// (UsageError or DataError) and message, the others ReportedByRankZero.
std::optional<std::vector<std::string>> run_shares(
    Ranks& ranks, const std::function<std::string(const Share& share, const Starting& starting)>& work);

// run_shares for a result type with to_bytes/`from_bytes` and `merge` (replay, sweep); on one process, the
// work's own result (no bytes, no merge) and its own exceptions.
template <class Result, class Work, class FromBytes, class Merge>
std::optional<Result> run_on_ranks(Ranks& ranks, Work&& work, FromBytes&& from_bytes, Merge&& merge) {
  if (ranks.count() == 1) return work(Share{}, Starting{});
  const auto parts = run_shares(ranks, [&](const Share& share, const Starting& starting) {
    return to_bytes(work(share, starting));
  });
  if (!parts) return std::nullopt;
  std::vector<Result> shares;
  for (const std::string& bytes : *parts) shares.push_back(from_bytes(bytes));
  return merge(std::move(shares));
}

}  // namespace fp4sim::cli
