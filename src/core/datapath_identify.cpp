// Which rows reproduce a measurement file: every row that takes the instruction's formats, run on every
// line (tfdpa_dot / gst_dot), the lines it misses counted.
#include "fp4sim/core/datapath_identify.hpp"

#include <algorithm>
#include <array>

#include "fp4sim/core/error.hpp"

namespace fp4sim {

namespace {

struct ElementToken {
  std::string_view token, input;
};
// The element tokens of a folder name and the row input each names (tf32 files hold the registers).
constexpr std::array<ElementToken, 10> kElements{{{"bf16", "bf16"},
                                                  {"f16", "fp16"},
                                                  {"tf32", "fp32"},
                                                  {"e4m3", "e4m3"},
                                                  {"e5m2", "e5m2"},
                                                  {"e3m2", "e3m2"},
                                                  {"e2m3", "e2m3"},
                                                  {"e2m1", "e2m1"},
                                                  {"fp8", "fp8"},
                                                  {"bf8", "bf8"}}};

std::optional<std::string_view> element_input(std::string_view token) {
  for (const ElementToken& e : kElements)
    if (e.token == token) return e.input;
  return std::nullopt;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (std::size_t pos = 0;;) {
    const std::size_t end = s.find(sep, pos);
    parts.push_back(s.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos));
    if (end == std::string_view::npos) return parts;
    pos = end + 1;
  }
}

bool takes_formats(const Datapath& row, const MeasuredInstruction& ins) {
  if (!find_input(row, ins.a_input) || !find_input(row, ins.b_input)) return false;
  if ((row.fused.out == formats::fp16) != ins.f16_accumulator || !ins.scale_format != !block_scaled(row))
    return false;
  if (!ins.scale_format) return row.kind == DatapathKind::tfdpa;
  // A block-scaled T-FDPA row has one scale pair per instruction; a GST-FDPA row sub-blocks of 16.
  if (row.kind == DatapathKind::tfdpa && ins.scale_block != row.instruction_k) return false;
  return std::find(row.scale_formats.begin(), row.scale_formats.end(), *ins.scale_format) != row.scale_formats.end();
}

// A line's element tokens as codes of `input`; DataError naming the line when one is not exact.
std::vector<std::uint32_t> codes(const Format& input, std::string_view name, const std::vector<std::uint32_t>& tokens,
                                 std::size_t line, const char* operand) {
  std::vector<double> values;
  values.reserve(tokens.size());
  for (std::uint32_t t : tokens) values.push_back(widen_binary32(t));
  InputCodes ic = input_codes(input, values);
  if (ic.first_unrepresentable)
    throw DataError("line " + std::to_string(line + 1) + " of " + operand + ": token " +
                    std::to_string(*ic.first_unrepresentable + 1) + " is not exact in " + std::string(name));
  return std::move(ic.codes);
}

void check_shape(const Measurement& m) {
  const std::size_t n = m.d.size();
  const bool scaled = m.instruction.scale_format.has_value();
  if (m.a.size() != n || m.b.size() != n || m.c.size() != n ||
      (scaled && (m.scale_a.size() != n || m.scale_b.size() != n)))
    throw DataError("the files of a measurement must have one line per case each (d has " + std::to_string(n) + ")");
  for (std::size_t i = 0; i < n; ++i) {
    if (m.a[i].size() != m.b[i].size() || m.a[i].empty())
      throw DataError("line " + std::to_string(i + 1) + ": a and b must hold the same number (> 0) of elements");
    if (!scaled) continue;
    const std::size_t blocks = (m.a[i].size() + static_cast<std::size_t>(m.instruction.scale_block) - 1) /
                               static_cast<std::size_t>(m.instruction.scale_block);
    if (m.scale_a[i].size() != blocks || m.scale_b[i].size() != blocks)
      throw DataError("line " + std::to_string(i + 1) + ": sa and sb must hold " + std::to_string(blocks) +
                      " scale codes (one per " + std::to_string(m.instruction.scale_block) + " elements)");
    for (std::uint32_t s : m.scale_a[i])
      if (s > 0xFF) throw DataError("line " + std::to_string(i + 1) + ": a scale code is not a byte");
    for (std::uint32_t s : m.scale_b[i])
      if (s > 0xFF) throw DataError("line " + std::to_string(i + 1) + ": a scale code is not a byte");
  }
}

}  // namespace

MeasuredInstruction parse_instruction_name(std::string_view folder) {
  const std::string where = "measurement folder '" + std::string(folder) + "'";
  std::vector<std::string_view> t = split(folder, '_');
  MeasuredInstruction ins;
  if (t.size() < 2 || (t.back() != "f32" && t.back() != "f16"))
    throw DataError(where + ": the name must end in _f32 or _f16 (the accumulator)");
  ins.f16_accumulator = t.back() == "f16";
  t.pop_back();
  if (t.back().starts_with("block")) {
    const std::string_view n = t.back().substr(5);
    if (n != "16" && n != "32") throw DataError(where + ": the scale block must be block16 or block32");
    ins.scale_block = n == "16" ? 16 : 32;
    t.pop_back();
    if (t.size() < 2 || (t.back() != "ue4m3" && t.back() != "ue8m0"))
      throw DataError(where + ": a block size must follow the scale format (ue4m3 or ue8m0)");
    ins.scale_format = t.back() == "ue4m3" ? formats::ue4m3 : formats::e8m0;
    t.pop_back();
  }
  std::vector<std::string_view> elements;
  while (!t.empty() && elements.size() < 2 && element_input(t.back())) {
    elements.insert(elements.begin(), *element_input(t.back()));
    t.pop_back();
  }
  if (elements.empty() || t.empty())
    throw DataError(where + ": expected <instruction>_<a format>[_<b format>]_<accumulator>");
  ins.a_input = elements.front();
  ins.b_input = elements.back();
  return ins;
}

std::uint32_t predict(const Datapath& row, const Measurement& m, std::size_t line) {
  const MeasuredInstruction& ins = m.instruction;
  const Format fa = find_input(row, ins.a_input)->format, fb = find_input(row, ins.b_input)->format;
  const std::vector<std::uint32_t> a = codes(fa, ins.a_input, m.a[line], line, "a");
  const std::vector<std::uint32_t> b = codes(fb, ins.b_input, m.b[line], line, "b");
  if (!ins.scale_format) return tfdpa_dot(row, fa, a, fb, b, m.c[line]);
  const BlockScales scales{*ins.scale_format, m.scale_a[line], m.scale_b[line],
                           static_cast<std::size_t>(ins.scale_block)};
  return row.kind == DatapathKind::gst_fdpa ? gst_dot(row, fa, a, b, scales, m.c[line])
                                            : tfdpa_dot(row, fa, a, fb, b, scales, m.c[line]);
}

std::vector<RowFit> identify(const Measurement& m) {
  check_shape(m);
  std::vector<RowFit> fits;
  for (const Datapath* row : datapath_presets()) {
    if (!takes_formats(*row, m.instruction)) continue;
    RowFit fit{row, m.d.size(), {}};
    for (std::size_t i = 0; i < m.d.size(); ++i)
      if (predict(*row, m, i) != m.d[i]) fit.differing.push_back(i);
    fits.push_back(std::move(fit));
  }
  return fits;
}

}  // namespace fp4sim
