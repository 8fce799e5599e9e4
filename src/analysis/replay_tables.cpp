// replay's tabular reports, from one table of columns per entry kind: CSV (one table per kind, one row
// per entry) and HDF5 (one group per kind, one column dataset per field).
#include <cmath>
#include <functional>
#include <variant>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "fp4sim/analysis/replay.hpp"
#include "fp4sim/core/json.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/io/hdf5.hpp"

namespace fp4sim::replay {

namespace {

struct Cell {
  enum Kind { number, integer, boolean, text, missing } kind = missing;
  double d = 0.0;
  std::int64_t i = 0;
  std::string s;
  static Cell num(const stats::Figure& f) { return f.value ? Cell{number, *f.value, 0, {}} : Cell{}; }
  static Cell num(double v) { return std::isfinite(v) ? Cell{number, v, 0, {}} : Cell{}; }
  static Cell integ(std::int64_t v) { return Cell{integer, 0.0, v, {}}; }
  static Cell flag(bool v) { return Cell{boolean, 0.0, v ? 1 : 0, {}}; }
  static Cell str(std::string v) { return Cell{text, 0.0, 0, std::move(v)}; }
};

template <class E>
using Columns = std::vector<std::pair<std::string, std::function<Cell(const E&)>>>;

template <class E, class Get>
void hold_columns_into(Columns<E>& cols, Get get, const std::string& p) {
  cols.emplace_back(p + "held_amax", [get](const E& e) {
    const Hold& h = get(e);
    return h.held_amax ? Cell::num(*h.held_amax) : Cell{};
  });
  cols.emplace_back(p + "held_from_step", [get](const E& e) {
    const Hold& h = get(e);
    return h.held_from_step ? Cell::integ(*h.held_from_step) : Cell{};
  });
  cols.emplace_back(p + "held_exact", [get](const E& e) {
    const Hold& h = get(e);
    return h.held_exact ? Cell::flag(*h.held_exact) : Cell{};
  });
  cols.emplace_back(p + "rho", [get](const E& e) { return Cell::num(get(e).rho); });
}

Columns<TensorEntry> tensor_columns() {
  using E = TensorEntry;
  Columns<E> c;
  c.emplace_back("step", [](const E& e) { return Cell::integ(e.step); });
  c.emplace_back("layer", [](const E& e) { return Cell::str(e.layer); });
  c.emplace_back("tensor", [](const E& e) { return Cell::str(e.tensor); });
  c.emplace_back("distribution", [](const E& e) { return Cell::str(e.distribution); });
  c.emplace_back("role", [](const E& e) { return Cell::str(std::string(name_of(e.role))); });
  c.emplace_back("gemm", [](const E& e) { return Cell::str(std::string(name_of(e.view))); });
  c.emplace_back("recipe", [](const E& e) { return Cell::str(e.recipe); });
  c.emplace_back("rows", [](const E& e) { return Cell::integ(static_cast<std::int64_t>(e.rows)); });
  c.emplace_back("cols", [](const E& e) { return Cell::integ(static_cast<std::int64_t>(e.cols)); });
  c.emplace_back("element_format", [](const E& e) { return Cell::str(e.element_format); });
  c.emplace_back("scale_format", [](const E& e) { return Cell::str(e.scale_format); });
  c.emplace_back("block_rows", [](const E& e) { return Cell::integ(e.block_rows); });
  c.emplace_back("block_cols", [](const E& e) { return Cell::integ(e.block_cols); });
  c.emplace_back("rounding", [](const E& e) { return Cell::str(e.rounding); });
  c.emplace_back("tensor_scale", [](const E& e) { return Cell::str(e.tensor_scale); });
  c.emplace_back("elements", [](const E& e) { return Cell::integ(static_cast<std::int64_t>(e.stats.error.elements)); });
  c.emplace_back("nonzero", [](const E& e) { return Cell::integ(static_cast<std::int64_t>(e.stats.error.nonzero)); });
  c.emplace_back("mse", [](const E& e) { return Cell::num(e.stats.error.mse()); });
  c.emplace_back("rel_mse", [](const E& e) { return Cell::num(e.stats.error.rel_mse()); });
  c.emplace_back("sqnr_db", [](const E& e) { return Cell::num(e.stats.error.sqnr_db()); });
  c.emplace_back("max_abs_err", [](const E& e) { return Cell::num(e.stats.error.max_abs_err); });
  c.emplace_back("underflow_fraction", [](const E& e) { return Cell::num(e.stats.error.underflow_fraction()); });
  c.emplace_back("saturated_fraction", [](const E& e) { return Cell::num(e.stats.saturated_fraction()); });
  c.emplace_back("blocks", [](const E& e) { return Cell::integ(static_cast<std::int64_t>(e.stats.blocks.blocks)); });
  c.emplace_back("zero_blocks", [](const E& e) { return Cell::integ(static_cast<std::int64_t>(e.stats.blocks.zero_blocks)); });
  c.emplace_back("scale_saturated",
                 [](const E& e) { return Cell::integ(static_cast<std::int64_t>(e.stats.counts.scale_saturated)); });
  c.emplace_back("scale_underflow",
                 [](const E& e) { return Cell::integ(static_cast<std::int64_t>(e.stats.counts.scale_underflow)); });
  c.emplace_back("nan", [](const E& e) { return Cell::integ(static_cast<std::int64_t>(e.stats.error.nan)); });
  c.emplace_back("inf", [](const E& e) { return Cell::integ(static_cast<std::int64_t>(e.stats.error.inf)); });
  c.emplace_back("amax", [](const E& e) { return Cell::num(e.amax); });
  hold_columns_into(c, [](const E& e) -> const Hold& { return e.hold; }, "");
  c.emplace_back("scale_log2_std", [](const E& e) { return Cell::num(e.stats.blocks.scale_log2_std()); });
  c.emplace_back("block_sqnr_db_p01", [](const E& e) { return Cell::num(e.stats.blocks.block_sqnr_db_quantile(0.01)); });
  c.emplace_back("worst_block_sqnr_db", [](const E& e) { return Cell::num(e.stats.blocks.worst_block_sqnr_db()); });
  c.emplace_back("stream", [](const E& e) { return Cell::str(std::to_string(e.stream)); });
  // The error decomposition (docs/replay.md), after the columns that were there before it.
  c.emplace_back("bias", [](const E& e) { return Cell::num(e.stats.error.bias()); });
  c.emplace_back("shrinkage", [](const E& e) { return Cell::num(e.stats.error.shrinkage()); });
  c.emplace_back("dead_zone_energy_fraction",
                 [](const E& e) { return Cell::num(e.stats.error.dead_zone_energy_fraction()); });
  c.emplace_back("grid_noise", [](const E& e) { return Cell::num(e.stats.grid_noise()); });
  c.emplace_back("scale_choice_loss", [](const E& e) { return Cell::num(e.stats.scale_choice_loss()); });
  c.emplace_back("rescalable_blocks",
                 [](const E& e) { return Cell::integ(static_cast<std::int64_t>(e.stats.blocks.rescalable_blocks)); });
  c.emplace_back("policy", [](const E& e) { return Cell::str(e.policy); });  // recipe maps ("" without)
  return c;
}

Columns<GemmEntry> gemm_columns() {
  using E = GemmEntry;
  Columns<E> c;
  c.emplace_back("step", [](const E& e) { return Cell::integ(e.step); });
  c.emplace_back("layer", [](const E& e) { return Cell::str(e.layer); });
  c.emplace_back("gemm", [](const E& e) { return Cell::str(std::string(name_of(e.gemm))); });
  c.emplace_back("recipe", [](const E& e) { return Cell::str(e.recipe); });
  c.emplace_back("datapath", [](const E& e) { return Cell::str(e.datapath); });
  c.emplace_back("m", [](const E& e) { return Cell::integ(static_cast<std::int64_t>(e.m)); });
  c.emplace_back("n", [](const E& e) { return Cell::integ(static_cast<std::int64_t>(e.n)); });
  c.emplace_back("k", [](const E& e) { return Cell::integ(static_cast<std::int64_t>(e.k)); });
  c.emplace_back("rel_fro_err", [](const E& e) { return Cell::num(e.rel_fro_err); });
  c.emplace_back("max_abs_err", [](const E& e) { return Cell::num(e.max_abs_err); });
  c.emplace_back("ref_fro_norm", [](const E& e) { return Cell::num(e.ref_fro_norm); });
  hold_columns_into(c, [](const E& e) -> const Hold& { return e.hold_a; }, "a_");
  hold_columns_into(c, [](const E& e) -> const Hold& { return e.hold_b; }, "b_");
  c.emplace_back("policy", [](const E& e) { return Cell::str(e.policy); });
  return c;
}

Columns<HeadroomEntry> headroom_columns() {
  using E = HeadroomEntry;
  Columns<E> c;
  c.emplace_back("step", [](const E& e) { return Cell::integ(e.step); });
  c.emplace_back("layer", [](const E& e) { return Cell::str(e.layer); });
  c.emplace_back("tensor", [](const E& e) { return Cell::str(e.tensor); });
  c.emplace_back("role", [](const E& e) { return Cell::str(std::string(name_of(e.role))); });
  c.emplace_back("period", [](const E& e) { return Cell::integ(e.period); });
  c.emplace_back("target", [](const E& e) { return Cell::num(e.target); });
  c.emplace_back("amax", [](const E& e) { return Cell::num(e.amax); });
  hold_columns_into(c, [](const E& e) -> const Hold& { return e.hold; }, "");
  c.emplace_back("blocks", [](const E& e) {
    return Cell::integ(e.formats.empty() ? 0 : static_cast<std::int64_t>(e.formats[0].blocks));
  });
  for (std::size_t f = 0; f < 3; ++f) {
    const std::string name = f == 0 ? "ue4m3" : f == 1 ? "ue5m3" : "ue5m3fn";
    c.emplace_back(name + "_saturated_blocks", [f](const E& e) {
      return f < e.formats.size() ? Cell::integ(static_cast<std::int64_t>(e.formats[f].saturated)) : Cell{};
    });
    c.emplace_back(name + "_underflow_blocks", [f](const E& e) {
      return f < e.formats.size() ? Cell::integ(static_cast<std::int64_t>(e.formats[f].underflow)) : Cell{};
    });
  }
  return c;
}

std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string cell_text(const Cell& c) {
  switch (c.kind) {
    case Cell::number: return json::number(c.d);
    case Cell::integer: return std::to_string(c.i);
    case Cell::boolean: return c.i ? "true" : "false";
    case Cell::text: return csv_escape(c.s);
    case Cell::missing: return "";
  }
  return "";
}

}  // namespace

namespace {

constexpr NameRow<Records> kRecords[] = {{"tensors", Records::tensors, "one row per quantized tensor and recipe"},
                                         {"gemms", Records::gemms, "one row per GEMM and recipe"},
                                         {"headroom", Records::headroom, "one row per tensor of the headroom analysis"}};

template <class E>
void write_table(const Columns<E>& cols, const std::vector<E>& entries, std::ostream& os) {
  bool first = true;
  for (const auto& [name, get] : cols) {
    os << (first ? "" : ",") << name;
    first = false;
  }
  os << '\n';
  for (const E& e : entries) {
    first = true;
    for (const auto& [name, get] : cols) {
      os << (first ? "" : ",") << cell_text(get(e));
      first = false;
    }
    os << '\n';
  }
}

}  // namespace

std::span<const NameRow<Records>> names(Records) { return kRecords; }

void write_tensors_csv(const std::vector<TensorEntry>& entries, std::ostream& os) {
  write_table(tensor_columns(), entries, os);
}

void write_csv(const Result& r, Records records, std::ostream& os) {
  switch (records) {
    case Records::tensors: write_table(tensor_columns(), r.tensors, os); return;
    case Records::gemms: write_table(gemm_columns(), r.gemms, os); return;
    case Records::headroom: write_table(headroom_columns(), r.headroom, os); return;
  }
}

// ---------------------------------------------------------------------------------------------
// Output: HDF5

namespace {

template <class E>
void write_columns(const hdf5::Group& g, const Columns<E>& cols, const std::vector<E>& entries) {
  for (const auto& [name, get] : cols) {
    std::vector<Cell> cells;
    cells.reserve(entries.size());
    Cell::Kind kind = Cell::missing;
    for (const E& e : entries) {
      cells.push_back(get(e));
      if (cells.back().kind != Cell::missing) kind = cells.back().kind;
    }
    if (kind == Cell::text) {
      std::vector<std::string> v;
      for (const Cell& c : cells) v.push_back(c.s);
      g.write_strings(name, v);
    } else if (kind == Cell::integer || kind == Cell::boolean) {
      // Integers that may be missing (held_from_step) use -1 for "none"; booleans are 0 or 1.
      std::vector<std::int64_t> v;
      for (const Cell& c : cells) v.push_back(c.kind == Cell::missing ? -1 : c.i);
      g.write_dataset<std::int64_t>(name, {v.size()}, v).write_attribute("missing", std::int64_t{-1});
    } else {
      std::vector<double> v;
      for (const Cell& c : cells) v.push_back(c.kind == Cell::number ? c.d : std::nan(""));
      auto d = g.write_dataset<double>(name, {v.size()}, v);
      d.write_attribute("missing", "NaN (the JSON output has null with a *_note)");
    }
  }
}

}  // namespace

void write_h5(const Result& r, const std::filesystem::path& path) {
  hdf5::File f = hdf5::File::create(path);
  f.write_attribute("fp4sim", FP4SIM_VERSION);
  f.write_attribute("trace", r.trace.path);
  std::string recipes;
  for (const auto& n : r.recipe_names) recipes += (recipes.empty() ? "" : ",") + n;
  f.write_attribute("recipes", recipes);
  f.write_attribute("datapath", r.datapath);
  f.write_attribute("hold", name_of(r.hold));
  f.write_attribute("seed", static_cast<std::int64_t>(r.seed));
  const hdf5::Group t = f.create_group("tensors");
  write_columns(t, tensor_columns(), r.tensors);
  {
    const std::size_t n = r.tensors.size();
    std::vector<std::uint64_t> codes(n * 256), amax(n * stats::BlockAccumulator::kAmaxBins),
        sqnr(n * stats::BlockAccumulator::kSqnrBins);
    for (std::size_t i = 0; i < n; ++i) {
      const auto& b = r.tensors[i].stats.blocks;
      std::copy(b.scale_codes.begin(), b.scale_codes.end(), codes.begin() + i * 256);
      std::copy(b.amax_log2.begin(), b.amax_log2.end(), amax.begin() + i * b.amax_log2.size());
      std::copy(b.sqnr_db.begin(), b.sqnr_db.end(), sqnr.begin() + i * b.sqnr_db.size());
    }
    t.write_dataset<std::uint64_t>("scale_code_hist", {n, 256}, codes);
    t.write_dataset<std::uint64_t>("block_amax_log2_hist", {n, stats::BlockAccumulator::kAmaxBins}, amax)
        .write_attribute("first_bin_log2", stats::BlockAccumulator::kAmaxLog2Min);
    t.write_dataset<std::uint64_t>("block_sqnr_db_hist", {n, stats::BlockAccumulator::kSqnrBins}, sqnr)
        .write_attribute("first_bin_db", stats::BlockAccumulator::kSqnrMinDb);
  }
  write_columns(f.create_group("gemms"), gemm_columns(), r.gemms);
  write_columns(f.create_group("headroom"), headroom_columns(), r.headroom);
  f.commit();
}

}  // namespace fp4sim::replay
