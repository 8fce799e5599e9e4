// The verify gemm report for people (to_text) and machines (to_json).
#include <cstdio>

#include "fp4sim/core/json.hpp"
#include "fp4sim/verify/verify.hpp"
#include "report.hpp"

namespace fp4sim {

using report::with_bits;

std::string to_text(const GemmVerifyReport& rep) {
  std::string out;
  const auto line = [&out](const std::string& s) { out += s + "\n"; };
  std::string dp = rep.datapath + (rep.inner.empty() ? "" : " (inner " + rep.inner + (rep.snap ? ", snap)" : ", no snap)")) +
                   (rep.bf16_output ? ", bf16 output" : "");
  line("verify gemm: recipe " + rep.recipe + ", gemm " + rep.gemm + ", C [" + std::to_string(rep.m) + ", " +
       std::to_string(rep.n) + "] = A [" + std::to_string(rep.m) + ", " + std::to_string(rep.k) + "] · B [" +
       std::to_string(rep.n) + ", " + std::to_string(rep.k) + "]ᵀ, datapath " + dp + ", alpha " + with_bits(rep.alpha));
  if (rep.auto_mode) {
    if (rep.explained_by.empty()) {
      line("auto: no datapath preset explains your outputs bit for bit; the closest is compared below");
    } else {
      std::string all;
      for (const auto& e : rep.explained_by) all += (all.empty() ? "" : "; ") + e;
      // Every configuration that gives the user's outputs gives the same outputs: one tie group.
      std::string tie;
      for (const auto& c : rep.candidates) {
        if (c.name == rep.explained_by.front() && c.tie_group) tie = std::to_string(*c.tie_group + 1);
      }
      line("auto: your outputs equal, bit for bit, those of: " + all +
           (tie.empty() ? "" : " (tie " + tie + ": these inputs cannot tell them apart)"));
    }
    if (!rep.ties.empty()) {
      line("ties: these inputs cannot tell apart the members of each group (bit-identical outputs); "
           "vectors with discriminate (the datapaths of a group) writes inputs that can:");
      for (std::size_t g = 0; g < rep.ties.size(); ++g) {
        std::string members;
        for (const auto& name : rep.ties[g]) members += (members.empty() ? "" : "; ") + name;
        line("  tie " + std::to_string(g + 1) + ": " + members);
      }
    }
    for (const auto& c : rep.candidates) {
      if (c.error.empty()) {
        char pct[32];
        std::snprintf(pct, sizeof pct, "%.2f%%", rep.outputs ? 100.0 * static_cast<double>(c.exact_matches) / static_cast<double>(rep.outputs) : 100.0);
        line("  " + c.name + ": " + std::to_string(c.exact_matches) + " of " + std::to_string(rep.outputs) +
             " exact (" + pct + ")" + (c.tie_group ? ", tie " + std::to_string(*c.tie_group + 1) : std::string()));
      } else {
        line("  " + c.name + ": cannot run these operands (" + c.error + ")");
      }
    }
  }
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.2f%%", rep.outputs ? 100.0 * static_cast<double>(rep.exact_matches) / static_cast<double>(rep.outputs) : 100.0);
  line("outputs: " + std::to_string(rep.outputs) + ", exact matches " + std::to_string(rep.exact_matches) + " (" + pct +
       "), mismatches " + std::to_string(rep.mismatches) + " (yours above golden " + std::to_string(rep.theirs_above) +
       ", below " + std::to_string(rep.theirs_below) + ", non-finite " + std::to_string(rep.nonfinite_mismatches) + ")");
  if (!rep.histogram.empty()) {
    std::string h;
    for (const auto& [label, count] : rep.histogram) h += (h.empty() ? "" : ", ") + label + ": " + std::to_string(count);
    line("ulp differences (yours - golden): " + h + "; max |difference| " + std::to_string(rep.max_abs_ulps) + " ulp(s)");
  }
  line(rep.bit_exact() ? "BIT-EXACT" : "NOT BIT-EXACT: " + std::to_string(rep.mismatches) + " output(s) differ");
  if (!rep.worst.empty()) {
    line("");
    line("worst " + std::to_string(rep.worst.size()) + " output(s), traced through " + rep.datapath + ":");
  }
  for (std::size_t w = 0; w < rep.worst.size(); ++w) {
    line(std::to_string(w + 1).insert(0, 1, '[') + "] " + rep.worst[w].summary);
    for (const auto& d : rep.worst[w].details) line("    " + d);
  }
  return out;
}

std::string to_json(const GemmVerifyReport& rep) {
  std::vector<JsonField> f = {report::text("command", "verify gemm"),
                              report::text("recipe", rep.recipe),
                              report::text("gemm", rep.gemm),
                              report::text("datapath", rep.datapath),
                              rep.inner.empty() ? JsonField{"inner", "null", "not probe-matched"} : report::text("inner", rep.inner),
                              report::boolean("snap", rep.snap),
                              report::boolean("bf16_output", rep.bf16_output),
                              report::number("alpha", rep.alpha),
                              report::integer("m", static_cast<long long>(rep.m)),
                              report::integer("n", static_cast<long long>(rep.n)),
                              report::integer("k", static_cast<long long>(rep.k)),
                              report::boolean("bit_exact", rep.bit_exact()),
                              report::integer("outputs", static_cast<long long>(rep.outputs)),
                              report::integer("exact_matches", static_cast<long long>(rep.exact_matches)),
                              report::integer("mismatches", static_cast<long long>(rep.mismatches)),
                              report::integer("theirs_above", static_cast<long long>(rep.theirs_above)),
                              report::integer("theirs_below", static_cast<long long>(rep.theirs_below)),
                              report::integer("nonfinite_mismatches", static_cast<long long>(rep.nonfinite_mismatches)),
                              report::integer("max_abs_ulps", rep.max_abs_ulps),
                              report::boolean("auto", rep.auto_mode)};
  std::string out = "{" + report::fields_text(f, "  ");
  out += ",\n  \"ulp_histogram\": {";
  for (std::size_t i = 0; i < rep.histogram.size(); ++i) {
    out += (i ? ", " : "") + json::string(rep.histogram[i].first) + ": " + std::to_string(rep.histogram[i].second);
  }
  out += "},\n  \"explained_by\": [";
  for (std::size_t i = 0; i < rep.explained_by.size(); ++i) out += (i ? ", " : "") + json::string(rep.explained_by[i]);
  out += "],\n  \"ties\": [";
  for (std::size_t g = 0; g < rep.ties.size(); ++g) {
    out += g ? ", [" : "[";
    for (std::size_t i = 0; i < rep.ties[g].size(); ++i) out += (i ? ", " : "") + json::string(rep.ties[g][i]);
    out += "]";
  }
  out += "],\n  \"candidates\": [";
  for (std::size_t i = 0; i < rep.candidates.size(); ++i) {
    const auto& c = rep.candidates[i];
    out += std::string(i ? "," : "") + "\n    {\"name\": " + json::string(c.name) +
           ", \"exact_matches\": " + std::to_string(c.exact_matches) +
           (c.tie_group ? ", \"tie_group\": " + std::to_string(*c.tie_group) : std::string()) +
           (c.error.empty() ? std::string() : ", \"error\": " + json::string(c.error)) + "}";
  }
  out += rep.candidates.empty() ? "],\n  \"worst\": " : "\n  ],\n  \"worst\": ";
  std::vector<std::vector<JsonField>> worst;
  for (const auto& w : rep.worst) worst.push_back(w.fields);
  return out + report::objects_text(worst) + "\n}\n";
}

}  // namespace fp4sim
