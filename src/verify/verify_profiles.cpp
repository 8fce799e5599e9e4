// verify quantize --profile auto: the user's bytes against every stack profile, ranked by fit, and the
// best profile's verify report (whose explanations name the first divergent block and its cause).
#include <algorithm>
#include <cstdio>
#include <numeric>

#include "fp4sim/core/error.hpp"
#include "fp4sim/core/json.hpp"
#include "fp4sim/core/primitives.hpp"
#include "fp4sim/verify/profiles.hpp"
#include "report.hpp"

namespace fp4sim {

namespace {

// The user's arrays as one profile reads them: 8-bit codes are a byte each whatever order was asked.
TheirQuantized as_read_by(const Recipe& recipe, const TheirQuantized& theirs) {
  TheirQuantized t = theirs;
  t.nibbles = stored_order(recipe.element, theirs.nibbles);
  return t;
}

// Blocks and elements of q that the user's bytes reproduce (every stored copy of a scale must match).
void count_matches(const QuantizedTensor& q, const TheirQuantized& theirs, ProfileFit& fit) {
  check_codes_shape(theirs.nibbles, q.rows, q.cols, theirs.codes_shape, theirs.codes_source);
  const ScaleStorage storage(theirs.layout, {q.rows, q.cols, q.block_rows, q.block_cols}, theirs.scales_shape,
                             theirs.scales_source);
  if (theirs.codes.size() != element_count(theirs.codes_shape) || theirs.scales.size() != storage.size()) {
    throw DataError("the arrays' sizes differ from their shapes");
  }
  fit.blocks = q.scale_rows * q.scale_cols;
  fit.elements = q.rows * q.cols;
  for (std::size_t sr = 0; sr < q.scale_rows; ++sr) {
    const std::size_t r0 = sr * q.block_rows, r1 = std::min(q.rows, r0 + q.block_rows);
    const std::size_t copies_end = storage.one_copy_per_block() ? r0 + 1 : r1;
    for (std::size_t sc = 0; sc < q.scale_cols; ++sc) {
      const std::size_t c0 = sc * q.block_cols, c1 = std::min(q.cols, c0 + q.block_cols);
      bool block_matches = true;
      for (std::size_t r = r0; r < copies_end; ++r) {
        block_matches &= theirs.scales[storage.offset(r, sc)] == q.scales[sr * q.scale_cols + sc];
      }
      fit.matching_scales += block_matches;
      for (std::size_t r = r0; r < r1; ++r) {
        for (std::size_t c = c0; c < c1; ++c) {
          const bool same = stored_code(theirs.codes, theirs.nibbles, q.cols, r, c) == q.code(r, c);
          fit.matching_elements += same;
          block_matches &= same;
        }
      }
      fit.matching_blocks += block_matches;
    }
  }
}

// a fits better than b: a larger share of matching blocks (compared exactly), then more matching elements.
bool fits_better(const ProfileFit& a, const ProfileFit& b) {
  if (a.error.empty() != b.error.empty()) return a.error.empty();
  const u128 left = static_cast<u128>(a.matching_blocks) * b.blocks;
  const u128 right = static_cast<u128>(b.matching_blocks) * a.blocks;
  if (left != right) return left > right;
  if (a.matching_elements != b.matching_elements) return a.matching_elements > b.matching_elements;
  return a.matching_scales > b.matching_scales;
}

std::string percent(std::uint64_t part, std::uint64_t whole) {
  if (whole == 0) return "-";
  const double p = 100.0 * static_cast<double>(part) / static_cast<double>(whole);
  char buf[32];
  std::snprintf(buf, sizeof buf, part == whole ? "%.0f%%" : "%.2f%%", part == whole ? 100.0 : std::min(p, 99.99));
  return buf;
}

}  // namespace

ProfileRanking rank_profiles(std::span<const ProfileCandidate> candidates, Role role, std::size_t max_explained,
                             std::span<const float> x, std::size_t rows, std::size_t cols,
                             const TheirQuantized& theirs) {
  ProfileRanking ranking;
  ranking.role = std::string(name_of(role));
  ranking.rows = rows;
  ranking.cols = cols;
  std::vector<ProfileFit> fits(candidates.size());
  std::vector<std::optional<QuantizedTensor>> golden(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const ProfileCandidate& c = candidates[i];
    ProfileFit& fit = fits[i];
    fit.name = c.name;
    fit.error = c.error;
    if (!fit.error.empty()) continue;
    try {
      golden[i] = quantize(c.recipe, c.request, x, rows, cols);
      count_matches(*golden[i], as_read_by(c.recipe, theirs), fit);
    } catch (const KeyedError& e) {  // UsageError or DataError: this profile cannot make or read these arrays
      fit = ProfileFit{c.name, 0, 0, 0, 0, 0, e.what(), std::nullopt};
    }
  }
  // Ties: profiles whose golden bytes (and block grid) are identical, grouped in table order.
  std::vector<bool> grouped(candidates.size(), false);
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (grouped[i] || !golden[i] || !fits[i].error.empty()) continue;
    std::vector<std::size_t> members{i};
    for (std::size_t j = i + 1; j < candidates.size(); ++j) {
      if (grouped[j] || !golden[j] || !fits[j].error.empty()) continue;
      const QuantizedTensor &a = *golden[i], &b = *golden[j];
      if (a.block_rows == b.block_rows && a.block_cols == b.block_cols && a.packed() == b.packed() &&
          a.codes == b.codes && a.scales == b.scales) {
        members.push_back(j);
      }
    }
    if (members.size() < 2) continue;
    std::vector<std::string> names;
    for (std::size_t m : members) {
      grouped[m] = true;
      fits[m].tie_group = ranking.ties.size();
      names.push_back(candidates[m].name);
    }
    ranking.ties.push_back(std::move(names));
  }
  std::vector<std::size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return fits_better(fits[a], fits[b]); });
  for (std::size_t i : order) ranking.fits.push_back(fits[i]);
  if (candidates.empty() || !fits[order.front()].error.empty()) {
    throw DataError("verify quantize, profile auto: no stack profile can read your arrays (" +
                    (candidates.empty() ? std::string("no profiles") : fits[order.front()].error) + ")");
  }
  const ProfileCandidate& best = candidates[order.front()];
  VerifyQuantizeRequest request;
  request.quantize = best.request;
  request.role = role;
  request.max_explained = max_explained;
  ranking.best = verify_quantize(best.recipe, request, x, rows, cols, as_read_by(best.recipe, theirs));
  return ranking;
}

std::string to_text(const ProfileRanking& ranking) {
  std::string out;
  const auto line = [&out](const std::string& s) { out += s + "\n"; };
  line("verify quantize, profile auto: role " + ranking.role + ", tensor [" + std::to_string(ranking.rows) + ", " +
       std::to_string(ranking.cols) + "], " + std::to_string(ranking.fits.size()) + " stack profiles, best fit first");
  char head[128];
  std::snprintf(head, sizeof head, "  %-26s %20s %24s  %s", "profile", "matching blocks", "matching elements", "tie");
  line(head);
  for (const ProfileFit& f : ranking.fits) {
    if (!f.error.empty()) {
      line("  " + f.name + std::string(f.name.size() < 26 ? 26 - f.name.size() : 0, ' ') + " cannot: " + f.error);
      continue;
    }
    const std::string blocks = std::to_string(f.matching_blocks) + "/" + std::to_string(f.blocks) + " (" +
                               percent(f.matching_blocks, f.blocks) + ")";
    const std::string elements = std::to_string(f.matching_elements) + "/" + std::to_string(f.elements) + " (" +
                                 percent(f.matching_elements, f.elements) + ")";
    std::string tie;  // (built step by step: GCC 12's -Wrestrict misfires on "#" + std::to_string())
    if (f.tie_group) {
      tie = "#";
      tie += std::to_string(*f.tie_group + 1);
    }
    char row[256];
    std::snprintf(row, sizeof row, "  %-26s %20s %24s  %s", f.name.c_str(), blocks.c_str(), elements.c_str(),
                  tie.c_str());
    line(row);
  }
  for (std::size_t g = 0; g < ranking.ties.size(); ++g) {
    std::string names;
    for (const auto& n : ranking.ties[g]) names += (names.empty() ? "" : ", ") + n;
    line("tie #" + std::to_string(g + 1) + " (identical codes and scales on this tensor): " + names);
  }
  const ProfileFit& best = ranking.fits.front();
  std::string verdict = "best: " + best.name;
  if (best.tie_group) verdict += " (with its tie #" + std::to_string(*best.tie_group + 1) + ")";
  if (ranking.bit_exact()) {
    verdict += ", which reproduces every code and scale";
  } else {
    verdict += ", " + std::to_string(best.matching_blocks) + " of " + std::to_string(best.blocks) + " blocks match";
    if (!ranking.best.explained.empty()) verdict += "; first divergent: " + ranking.best.explained.front().summary;
  }
  line(verdict);
  line("");
  return out + to_text(ranking.best);
}

std::string to_json(const ProfileRanking& ranking) {
  std::vector<JsonField> head = {report::text("command", "verify quantize"), report::text("profile", "auto"),
                                 report::text("role", ranking.role),
                                 report::integer("rows", static_cast<long long>(ranking.rows)),
                                 report::integer("cols", static_cast<long long>(ranking.cols)),
                                 report::text("best", ranking.fits.front().name),
                                 report::boolean("bit_exact", ranking.bit_exact())};
  std::string out = "{";
  out += report::fields_text(head, "  ");
  out += ",\n  \"profiles\": ";
  std::vector<std::vector<JsonField>> rows;
  for (const ProfileFit& f : ranking.fits) {
    std::vector<JsonField> row = {report::text("profile", f.name),
                                  report::integer("blocks", static_cast<long long>(f.blocks)),
                                  report::integer("matching_blocks", static_cast<long long>(f.matching_blocks)),
                                  report::integer("elements", static_cast<long long>(f.elements)),
                                  report::integer("matching_elements", static_cast<long long>(f.matching_elements)),
                                  report::integer("matching_scales", static_cast<long long>(f.matching_scales))};
    row.push_back(f.tie_group ? report::integer("tie_group", static_cast<long long>(*f.tie_group))
                              : JsonField{"tie_group", "null", {}});
    row.push_back(f.error.empty() ? JsonField{"error", "null", {}} : report::text("error", f.error));
    rows.push_back(std::move(row));
  }
  out += report::objects_text(rows) + ",\n  \"ties\": [";
  for (std::size_t g = 0; g < ranking.ties.size(); ++g) {
    out += g ? ", [" : "[";
    for (std::size_t i = 0; i < ranking.ties[g].size(); ++i) out += (i ? ", " : "") + json::string(ranking.ties[g][i]);
    out += "]";
  }
  std::string best = to_json(ranking.best);
  while (!best.empty() && best.back() == '\n') best.pop_back();
  return out + "],\n  \"best_report\": " + best + "\n}\n";
}

}  // namespace fp4sim
