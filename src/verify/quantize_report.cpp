// The verify quantize report for people (to_text) and machines (to_json).
#include "fp4sim/core/json.hpp"
#include "fp4sim/verify/verify.hpp"
#include "report.hpp"

namespace fp4sim {

using report::with_bits;

std::string to_text(const QuantizeVerifyReport& rep) {
  std::string out;
  const auto line = [&out](const std::string& s) { out += s + "\n"; };
  line("verify quantize: recipe " + rep.recipe + ", role " + rep.role + ", tensor [" + std::to_string(rep.rows) + ", " +
       std::to_string(rep.cols) + "], " + rep.element_format + " elements (" + rep.rounding + ") in " +
       std::to_string(rep.block_rows) + "x" + std::to_string(rep.block_cols) + " blocks, " + rep.scale_format +
       " scales (" + rep.scale_rule + ")" + (rep.rht ? ", RHT" : "") + "; layout " +
       std::string(name_of(rep.layout)) + ", nibbles " + std::string(name_of(rep.nibbles)));
  line("elements: " + std::to_string(rep.elements) + ", mismatched " + std::to_string(rep.mismatched_elements) +
       (rep.mismatched_scales > 0
            ? " (" + std::to_string(rep.elements_consistent_with_their_scale) + " of them follow from your block scale)"
            : ""));
  line("blocks: " + std::to_string(rep.blocks) + ", mismatched " + std::to_string(rep.mismatched_blocks) +
       " (scale mismatches: " + std::to_string(rep.mismatched_scales) + ")");
  std::string ts = "tensor scale: golden G = " + with_bits(rep.global_encode) + ", Gd = " + with_bits(rep.global_decode) +
                   ", tensor amax = " + with_bits(rep.tensor_amax);
  if (!rep.tensor_scaled) ts += " (no tensor scale in this recipe)";
  if (rep.tensor_scale_given) {
    ts += "; yours " + with_bits(*rep.tensor_scale_given) +
          (rep.tensor_scale_mismatch ? " MISMATCH" : " matches the golden " + rep.tensor_scale_matched + " value");
  }
  line(ts);
  if (rep.bit_exact()) {
    line("BIT-EXACT");
  } else {
    line("NOT BIT-EXACT: " + std::to_string(rep.mismatched_elements) + " element and " +
         std::to_string(rep.mismatched_scales) + " scale mismatch(es)" + (rep.tensor_scale_mismatch ? ", tensor scale differs" : ""));
  }
  for (const auto& h : rep.hints) line("hint: " + h);
  // The likeliest causes: the alternatives that leave fewer of your bytes different than the recipe as given.
  const std::uint64_t given = rep.as_given.mismatched_elements + rep.as_given.mismatched_scales;
  std::vector<const AlternativeFit*> better;
  for (const AlternativeFit& a : rep.alternatives) {
    if (a.mismatched_elements + a.mismatched_scales < given) better.push_back(&a);
  }
  if (!better.empty()) {
    line("likeliest causes (" + std::to_string(better.size()) + " of " + std::to_string(rep.alternatives.size()) +
         " alternatives fit your bytes better than the recipe as given, best first):");
    for (std::size_t i = 0; i < better.size() && i < 5; ++i) {
      const AlternativeFit& a = *better[i];
      line("  " + a.label + ": " +
           (a.exact() ? std::string("reproduces every byte")
                      : std::to_string(a.mismatched_elements) + " element and " + std::to_string(a.mismatched_scales) +
                            " stored scale mismatch(es) left"));
    }
  }
  const std::uint64_t total = rep.mismatched_elements + rep.mismatched_scales + (rep.tensor_scale_mismatch ? 1 : 0);
  if (!rep.explained.empty()) {
    line("");
    line("first " + std::to_string(rep.explained.size()) + " of " + std::to_string(total) + " mismatch(es), explained:");
  }
  for (std::size_t i = 0; i < rep.explained.size(); ++i) {
    const auto& n = rep.explained[i];
    std::string head = "[";  // (built step by step: GCC 12's -Wrestrict misfires on "[" + std::to_string())
    head += std::to_string(i + 1);
    head += "] ";
    line(head + n.summary);
    for (const auto& d : n.details) line("    " + d);
  }
  return out;
}

std::string to_json(const QuantizeVerifyReport& rep) {
  std::vector<JsonField> f = {
      report::text("command", "verify quantize"),
      report::text("recipe", rep.recipe),
      report::text("role", rep.role),
      report::text("element_format", rep.element_format),
      report::text("scale_format", rep.scale_format),
      report::text("rounding", rep.rounding),
      report::text("scale_rule", rep.scale_rule),
      report::integer("rows", rep.rows),
      report::integer("cols", rep.cols),
      report::integer("block_rows", static_cast<std::uint64_t>(rep.block_rows)),
      report::integer("block_cols", static_cast<std::uint64_t>(rep.block_cols)),
      report::boolean("rht", rep.rht),
      report::text("layout", name_of(rep.layout)),
      report::text("nibbles", name_of(rep.nibbles)),
      report::boolean("bit_exact", rep.bit_exact()),
      report::integer("elements", rep.elements),
      report::integer("blocks", rep.blocks),
      report::integer("mismatched_elements", rep.mismatched_elements),
      report::integer("mismatched_blocks", rep.mismatched_blocks),
      report::integer("mismatched_scales", rep.mismatched_scales),
      report::integer("elements_consistent_with_their_scale", rep.elements_consistent_with_their_scale),
      report::integer("swapped_nibble_pairs", rep.swapped_nibble_pairs),
      report::integer("nonzero_padding_nibbles", rep.nonzero_padding_nibbles),
      report::integer("model_disagreements", rep.model_disagreements),
      report::boolean("tensor_scaled", rep.tensor_scaled),
      report::number("tensor_amax", rep.tensor_amax),
      report::number("global_encode_scale", rep.global_encode),
      report::number("global_decode_scale", rep.global_decode),
  };
  if (rep.tensor_scale_given) {
    f.push_back(report::number("tensor_scale", *rep.tensor_scale_given));
    f.push_back(report::text("tensor_scale_kind", name_of(rep.tensor_scale_kind)));
    f.push_back(rep.tensor_scale_matched.empty()
                    ? JsonField{"tensor_scale_matched", "null", "equals no golden value"}
                    : report::text("tensor_scale_matched", rep.tensor_scale_matched));
  } else {
    f.push_back({"tensor_scale", "null", "not given"});
  }
  std::string out = "{" + report::fields_text(f, "  ");
  out += ",\n  \"hints\": [";
  for (std::size_t i = 0; i < rep.hints.size(); ++i) out += (i ? ", " : "") + json::string(rep.hints[i]);
  out += "],\n  \"alternatives\": ";
  std::vector<std::vector<JsonField>> fits;
  for (const AlternativeFit& a : rep.alternatives) {
    fits.push_back({report::text("rule", a.label), report::integer("mismatched_elements", a.mismatched_elements),
                    report::integer("mismatched_scales", a.mismatched_scales), report::boolean("exact", a.exact())});
  }
  out += report::objects_text(fits);
  out += ",\n  \"mismatches\": ";
  std::vector<std::vector<JsonField>> mismatches;
  for (const auto& n : rep.explained) mismatches.push_back(n.fields);
  return out + report::objects_text(mismatches) + "\n}\n";
}

}  // namespace fp4sim
