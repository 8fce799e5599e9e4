// Splitting a replay or sweep across processes (MPI ranks, docs/replay.md "Many processes") and joining
// the parts: which process does which unit of work, and the order the parts' entries merge in.
//
// A unit of work carries its own state through the selected steps in order (a layer's held amaxes, or a
// synthetic distribution), so a process needs nothing from the others while it works. Every process
// computes the same assignment from the trace's metadata alone and reads only its own units' tensors.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "fp4sim/core/error.hpp"

namespace fp4sim {

// This process's part of the work: share `index` of `count`.
struct Share {
  int index = 0;
  int count = 1;
};

// The share index of each unit, for `share.count` shares: largest estimated cost first, each to the least
// loaded share (the lowest index among equals), so shares end near equal cost. Deterministic: ties keep the
// units' order. UsageError when `share` is not one of its count.
std::vector<int> assign_shares(std::span<const std::uint64_t> unit_costs, const Share& share);

// Entries of the shares of one run, each share's in one-process order and each tagged with `item` (the
// position of its work item in the one-process order), concatenated into one-process order. A work item
// belongs to one share, so a stable sort by item restores the order one process writes.
template <class Entry>
void merge_in_item_order(std::vector<Entry>& into, std::vector<Entry>&& part) {
  into.insert(into.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  std::stable_sort(into.begin(), into.end(), [](const Entry& a, const Entry& b) { return a.item < b.item; });
}

// The result of a run on many processes from its shares' results: the first share's, every other share
// joined into it in share order by `join(into, std::move(part))`, and the number of shares. UsageError
// without a share.
template <class Result, class Join>
Result join_shares(std::vector<Result> shares, Join join) {
  if (shares.empty()) throw UsageError("merge: no share");
  Result out = std::move(shares.front());
  for (std::size_t i = 1; i < shares.size(); ++i) join(out, std::move(shares[i]));
  out.shares = static_cast<int>(shares.size());
  return out;
}

}  // namespace fp4sim
