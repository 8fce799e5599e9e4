// fp4sim replay: the library (streaming equals whole, thread-count independence, hold rules,
// Proposition 1 headroom, NaN/Inf, GEMM entries) and the CLI (docs/cli.md fields, exit codes, no partial
// output on bad input, corruption never crashes).
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/analysis/replay.hpp"
#include "fp4sim/io/trace.hpp"
#include "json_mini.hpp"

namespace fs = std::filesystem;
using fp4sim::DataError;
using fp4sim::replay::HoldRule;
using fp4sim::trace::Writer;

namespace {

fs::path scratch_dir() {
  const fs::path dir = fs::temp_directory_path() / ("fp4sim_replay_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}
fs::path scratch(const std::string& name) { return scratch_dir() / name; }

std::vector<float> gaussian(std::size_t n, float sigma, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// A layer whose tensors scale with `gain` (so the amax moves between steps).
void write_layer(Writer& w, std::int64_t step, const std::string& layer, std::size_t tokens, std::size_t in,
                 std::size_t out, float gain, std::uint32_t seed) {
  w.write_tensor(step, layer, "x", tokens, in, gaussian(tokens * in, gain, seed));
  w.write_tensor(step, layer, "w", out, in, gaussian(out * in, 0.02f, seed + 1));
  w.write_tensor(step, layer, "dy", tokens, out, gaussian(tokens * out, 1e-5f * gain, seed + 2));
}

std::vector<fp4sim::Recipe> recipes(std::initializer_list<const char*> names) {
  std::vector<fp4sim::Recipe> out;
  for (const char* n : names) out.push_back(*fp4sim::find_recipe(n));
  return out;
}

void expect_same_stats(const fp4sim::stats::TensorStats& a, const fp4sim::stats::TensorStats& b, const std::string& what) {
  EXPECT_EQ(a.error.elements, b.error.elements) << what;
  EXPECT_EQ(a.error.nonzero, b.error.nonzero) << what;
  EXPECT_EQ(a.error.underflow, b.error.underflow) << what;
  EXPECT_EQ(a.error.sum_sq_err, b.error.sum_sq_err) << what;
  EXPECT_EQ(a.error.sum_sq_ref, b.error.sum_sq_ref) << what;
  EXPECT_EQ(a.error.max_abs_err, b.error.max_abs_err) << what;
  EXPECT_EQ(a.counts.saturated, b.counts.saturated) << what;
  EXPECT_EQ(a.counts.scale_saturated, b.counts.scale_saturated) << what;
  EXPECT_EQ(a.counts.scale_underflow, b.counts.scale_underflow) << what;
  EXPECT_EQ(a.blocks.blocks, b.blocks.blocks) << what;
  EXPECT_EQ(a.blocks.scale_codes, b.blocks.scale_codes) << what;
  EXPECT_EQ(a.blocks.sqnr_db, b.blocks.sqnr_db) << what;
  EXPECT_EQ(a.blocks.amax_log2, b.blocks.amax_log2) << what;
  EXPECT_EQ(a.blocks.worst_rel_mse, b.blocks.worst_rel_mse) << what;
}

struct CliRun {
  int status = -1;        // exit code, or -signal when killed
  std::string out, err;
};

CliRun run_cli(const std::string& args) {
  const fs::path out = scratch("cli.stdout"), err = scratch("cli.stderr");
  const std::string cmd = std::string(FP4SIM_BINARY) + " " + args + " >" + out.string() + " 2>" + err.string();
  const int raw = std::system(cmd.c_str());
  CliRun r;
  if (WIFEXITED(raw)) {
    r.status = WEXITSTATUS(raw);
  } else if (WIFSIGNALED(raw)) {
    r.status = -WTERMSIG(raw);
  }
  auto slurp = [](const fs::path& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const fs::path kTraceA = fs::path(FP4SIM_SOURCE_DIR) / "traces" / "trace_a.h5";

}  // namespace

// ---------------------------------------------------------------------------------------------
// Library

TEST(Replay, StreamedSlabsAndThreadCountsGiveIdenticalResults) {
  const fs::path path = scratch("stream.h5");
  {
    Writer w(path, {.model = "", .framework = "", .notes = "", .gzip = 1, .shuffle = true, .chunk_rows = 7});
    write_layer(w, 1, "big", 320, 160, 96, 1.0f, 11);
    w.commit();
  }
  fp4sim::replay::Options o;
  o.recipes = recipes({"ue5m3", "nvfp4", "mxfp4", "ue5m3-te", "ue5m3-b32"});
  o.gemms = false;
  o.seed = 5;
  const auto whole = fp4sim::replay::run(path, o);
  o.max_slab_bytes = 20 * 1024;  // forces several slabs for x (200 KiB) and dy
  const auto streamed = fp4sim::replay::run(path, o);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto single = fp4sim::replay::run(path, o);
  omp_set_num_threads(threads);
  ASSERT_EQ(whole.tensors.size(), 15u);
  ASSERT_EQ(streamed.tensors.size(), whole.tensors.size());
  for (std::size_t i = 0; i < whole.tensors.size(); ++i) {
    const std::string what = whole.tensors[i].recipe + " " + whole.tensors[i].tensor;
    expect_same_stats(whole.tensors[i].stats, streamed.tensors[i].stats, "slabs: " + what);
    expect_same_stats(whole.tensors[i].stats, single.tensors[i].stats, "1 thread: " + what);
    EXPECT_EQ(whole.tensors[i].global_encode_scale, streamed.tensors[i].global_encode_scale) << what;
  }
  for (std::size_t i = 0; i < whole.headroom.size(); ++i) {
    for (std::size_t f = 0; f < whole.headroom[i].formats.size(); ++f) {
      EXPECT_EQ(whole.headroom[i].formats[f].saturated, streamed.headroom[i].formats[f].saturated);
      EXPECT_EQ(whole.headroom[i].formats[f].underflow, streamed.headroom[i].formats[f].underflow);
    }
  }
}

// A tensor entry is the tensor quantized whole by quantize() as its first GEMM consumes it, with the
// documented random stream: the chunked, parallel replay must give the same codes, hence statistics.
TEST(Replay, EntryEqualsOneDirectQuantization) {
  // "tall" x has 2,100 rows of 48: replay sums it in chunks of 1,360 rows (stats::chunk_rows), not in the
  // 1,365-row groups one accumulate() over the whole tensor would use.
  const fs::path path = scratch("direct.h5");
  {
    Writer w(path);
    write_layer(w, 3, "fc", 96, 64, 48, 2.0f, 7);
    write_layer(w, 3, "tall", 2100, 48, 16, 1.0f, 8);
    w.commit();
  }
  fp4sim::replay::Options o;
  o.recipes = recipes({"ue5m3", "nvfp4", "mxfp4"});
  o.gemms = false;
  o.seed = 99;
  const auto result = fp4sim::replay::run(path, o);
  ASSERT_EQ(result.tensors.size(), 18u);
  fp4sim::trace::Reader reader(path);
  for (const auto& e : result.tensors) {
    const auto& layer = reader.info().steps[0].layers[e.layer == "fc" ? 0 : 1];
    const auto& t = e.tensor == "x" ? layer.x() : e.tensor == "w" ? layer.w() : layer.dy();
    const std::vector<float> x = reader.read_float(t);
    const fp4sim::Recipe r = *fp4sim::find_recipe(e.recipe);
    fp4sim::QuantizeRequest q;
    q.spec = fp4sim::operand_for_role(r, e.role);
    q.random.seed = 99;
    q.random.stream = fp4sim::replay::stream_id(3, e.layer, e.tensor, e.view);
    EXPECT_EQ(e.stream, q.random.stream);
    const fp4sim::QuantizedTensor qt = fp4sim::quantize(r, q, x, t.rows, t.cols);
    // The whole tensor at once (what fp4sim.stats does) against replay's chunk-by-chunk sums: every figure,
    // floats included, written the same.
    const fp4sim::stats::TensorStats s = fp4sim::stats::tensor_stats(qt, x, {}, fp4sim::dequantize(qt));
    std::ostringstream direct, replayed;
    fp4sim::stats::JsonWriter jd(direct), jr(replayed);
    jd.begin_object();
    fp4sim::stats::write_figures(jd, s, fp4sim::abs_max(x));
    fp4sim::stats::write_block_figures(jd, s.blocks);
    jd.end_object();
    jr.begin_object();
    fp4sim::stats::write_figures(jr, e.stats, e.amax);
    fp4sim::stats::write_block_figures(jr, e.stats.blocks);
    jr.end_object();
    EXPECT_EQ(direct.str(), replayed.str()) << e.layer << " " << e.recipe << " " << e.tensor;
    EXPECT_GT(e.stats.error.underflow + e.stats.blocks.rescalable_blocks, 0u) << e.layer << " " << e.tensor;
  }
}

TEST(Replay, StreamIdIsFnv1aOfTheDocumentedKey) {
  // FNV-1a 64 of "200/lm_head/dy/dgrad", computed here independently.
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : std::string("200/lm_head/dy/dgrad")) {
    h ^= c;
    h *= 1099511628211ull;
  }
  EXPECT_EQ(fp4sim::replay::stream_id(200, "lm_head", "dy", fp4sim::Gemm::dgrad), h);
  EXPECT_NE(fp4sim::replay::stream_id(200, "lm_head", "dy", fp4sim::Gemm::wgrad), h);
}

// Steps 1, 2, 51, 52, 120 with the tensors' amax growing: the periodic hold (D = 50) refreshes at
// 1, 51, 101 (docs/semantics.md P2).
TEST(Replay, PeriodicHoldRulesAcrossSteps) {
  const fs::path path = scratch("hold.h5");
  const std::vector<std::pair<std::int64_t, float>> gains = {{1, 1.0f}, {2, 3.0f}, {51, 0.5f}, {52, 80.0f}, {120, 4.0f}};
  {
    Writer w(path);
    for (const auto& [step, gain] : gains) write_layer(w, step, "fc", 64, 64, 32, gain, 100 + static_cast<int>(step));
    w.commit();
  }
  fp4sim::replay::Options o;
  o.recipes = recipes({"ue5m3", "nvfp4", "mxfp4"});
  o.gemms = false;
  auto find = [](const fp4sim::replay::Result& r, std::int64_t step, const char* recipe) {
    for (const auto& e : r.tensors) {
      if (e.step == step && e.recipe == recipe && e.tensor == "x") return e;
    }
    throw std::runtime_error("entry not found");
  };
  const auto window = fp4sim::replay::run(path, o);
  // step 1: its own refresh step.
  auto e = find(window, 1, "ue5m3");
  EXPECT_EQ(*e.hold.held_from_step, 1);
  EXPECT_TRUE(*e.hold.held_exact);
  EXPECT_EQ(*e.hold.rho.value, 1.0);
  // step 2: held from step 1 (captured).
  e = find(window, 2, "ue5m3");
  const float amax1 = find(window, 1, "ue5m3").amax;
  EXPECT_EQ(*e.hold.held_from_step, 1);
  EXPECT_TRUE(*e.hold.held_exact);
  EXPECT_EQ(*e.hold.held_amax, amax1);
  EXPECT_DOUBLE_EQ(*e.hold.rho.value, static_cast<double>(e.amax) / amax1);
  EXPECT_GT(*e.hold.rho.value, 2.0);
  // step 52: held from the refresh step 51.
  e = find(window, 52, "ue5m3");
  EXPECT_EQ(*e.hold.held_from_step, 51);
  EXPECT_GT(*e.hold.rho.value, 100.0);
  // step 120: refresh step 101 not captured -> own amax, held_exact false.
  e = find(window, 120, "ue5m3");
  EXPECT_EQ(*e.hold.held_from_step, 120);
  EXPECT_FALSE(*e.hold.held_exact);
  // nvfp4: current scaling; mxfp4: no tensor scale.
  e = find(window, 52, "nvfp4");
  EXPECT_EQ(*e.hold.held_from_step, 52);
  EXPECT_EQ(*e.hold.rho.value, 1.0);
  e = find(window, 52, "mxfp4");
  EXPECT_FALSE(e.hold.held_amax.has_value());
  EXPECT_FALSE(e.hold.rho.value.has_value());
  EXPECT_EQ(e.hold.rho.note, "recipe has no tensor scale");

  o.hold = HoldRule::previous;
  const auto previous = fp4sim::replay::run(path, o);
  e = find(previous, 120, "ue5m3");
  EXPECT_EQ(*e.hold.held_from_step, 52);
  EXPECT_FALSE(*e.hold.held_exact);
  e = find(previous, 51, "ue5m3");
  EXPECT_EQ(*e.hold.held_from_step, 2);  // stale on purpose, although 51 is a refresh step
  EXPECT_FALSE(*e.hold.held_exact);
  e = find(previous, 2, "ue5m3");
  EXPECT_EQ(*e.hold.held_from_step, 1);
  EXPECT_TRUE(*e.hold.held_exact);  // 1 is what training would have held
  e = find(previous, 1, "ue5m3");
  EXPECT_EQ(*e.hold.held_from_step, 1);

  // Proposition 1 at step 52 (rho ~ 160 for x): UE4M3 (U/T = 1) saturates many blocks, UE5M3
  // (U/T = 137) only those above its headroom; with rho < 137 none (step 2, rho ~ 3).
  for (const auto& h : window.headroom) {
    if (h.tensor != "x") continue;
    const double rho = *h.hold.rho.value;
    const auto& ue4m3 = h.formats[0];
    const auto& ue5m3 = h.formats[1];
    EXPECT_EQ(ue4m3.scale_name, "ue4m3");
    EXPECT_EQ(ue5m3.scale_name, "ue5m3");
    if (rho * 448.0 <= 61440.0) {
      EXPECT_EQ(ue5m3.saturated, 0u) << "step " << h.step << " rho " << rho;
    }
    if (rho > 2.0) {
      EXPECT_GT(ue4m3.saturated, ue4m3.blocks / 4) << "step " << h.step << " rho " << rho;
    }
  }
}

TEST(Replay, NanInfAreCountedAndAllZeroTensorsAreNotes) {
  const fs::path path = scratch("nan.h5");
  {
    Writer w(path);
    std::vector<float> x = gaussian(32 * 32, 1.0f, 3);
    x[5] = std::numeric_limits<float>::quiet_NaN();
    x[40] = std::numeric_limits<float>::infinity();
    x[41] = -std::numeric_limits<float>::infinity();
    w.write_tensor(1, "fc", "x", 32, 32, x);
    w.write_tensor(1, "fc", "w", 16, 32, gaussian(16 * 32, 0.1f, 4));
    w.write_tensor(1, "fc", "dy", 32, 16, std::vector<float>(32 * 16, 0.0f));
    w.commit();
  }
  fp4sim::replay::Options o;
  o.recipes = recipes({"ue5m3", "nvfp4", "mxfp4"});
  o.datapath = "f64";
  const auto r = fp4sim::replay::run(path, o);
  for (const auto& e : r.tensors) {
    if (e.tensor == "x") {
      EXPECT_EQ(e.stats.error.nan, 1u) << e.recipe;
      EXPECT_EQ(e.stats.error.inf, 2u) << e.recipe;
      if (e.recipe != "nvfp4") {
        EXPECT_TRUE(e.stats.error.sqnr_db().value.has_value()) << e.recipe << ": error over the finite elements";
      } else {
        // TE's dequantization multiplies by the tensor amax, here +Inf: every reconstruction is
        // non-finite, which the entry says instead of a number.
        EXPECT_EQ(e.stats.error.nonfinite_out, e.stats.error.elements - 3);
        EXPECT_NE(e.stats.error.sqnr_db().note.find("nonfinite_outputs"), std::string::npos);
      }
    }
    if (e.tensor == "dy") {
      EXPECT_FALSE(e.stats.error.rel_mse().value.has_value());
      EXPECT_NE(e.stats.error.rel_mse().note.find("all-zero"), std::string::npos);
      EXPECT_EQ(e.stats.blocks.zero_blocks, e.stats.blocks.blocks);
    }
  }
  std::ostringstream json;
  fp4sim::replay::write_json(r, json);
  const std::string text = json.str();
  EXPECT_EQ(text.find(":NaN"), std::string::npos);
  EXPECT_EQ(text.find(":Infinity"), std::string::npos);
  EXPECT_EQ(text.find(":-Infinity"), std::string::npos);
  const auto doc = jsonmini::parse(text);  // strict: would reject bare NaN/Infinity
  bool saw_note = false;
  for (const auto& t : doc["tensors"].arr()) {
    if (t["tensor"].str() == "dy") {
      EXPECT_TRUE(t["sqnr_db"].is_null());
      EXPECT_TRUE(t["sqnr_db_note"].is_string());
      saw_note = true;
    }
  }
  EXPECT_TRUE(saw_note);
  // GEMMs with Inf in x: non-finite products are a note, not a number.
  for (const auto& g : doc["gemms"].arr()) {
    if (g["rel_fro_err"].is_null()) {
      EXPECT_TRUE(g["rel_fro_err_note"].is_string());
    }
  }
}

// The f64 GEMM entry equals the product of the operands quantized per operands_for().
TEST(Replay, GemmEntriesMatchDirectComputation) {
  const fs::path path = scratch("gemm.h5");
  const std::size_t tokens = 64, in = 128, out = 64;
  {
    Writer w(path);
    write_layer(w, 1, "fc", tokens, in, out, 1.0f, 21);
    w.commit();
  }
  fp4sim::replay::Options o;
  o.recipes = recipes({"ue5m3", "nvfp4", "mxfp4"});
  o.datapath = "f64";
  o.seed = 3;
  const auto r = fp4sim::replay::run(path, o);
  ASSERT_EQ(r.gemms.size(), 9u);
  fp4sim::trace::Reader reader(path);
  const auto& layer = reader.info().steps[0].layers[0];
  const auto x = reader.read_float(layer.x()), w = reader.read_float(layer.w()), dy = reader.read_float(layer.dy());
  for (const auto& g : r.gemms) {
    if (g.gemm != fp4sim::Gemm::fprop) continue;
    const fp4sim::Recipe rec = *fp4sim::find_recipe(g.recipe);
    const auto ops = fp4sim::operands_for(rec, fp4sim::Gemm::fprop);
    fp4sim::QuantizeRequest qa, qb;
    qa.spec = ops.a;
    qb.spec = ops.b;
    qa.random = {3, fp4sim::replay::stream_id(1, "fc", "x", fp4sim::Gemm::fprop), {}};
    qb.random = {3, fp4sim::replay::stream_id(1, "fc", "w", fp4sim::Gemm::fprop), {}};
    const auto da = fp4sim::dequantize(fp4sim::quantize(rec, qa, x, tokens, in));
    const auto db = fp4sim::dequantize(fp4sim::quantize(rec, qb, w, out, in));
    double num = 0, den = 0;
    for (std::size_t i = 0; i < tokens; ++i) {
      for (std::size_t j = 0; j < out; ++j) {
        double c = 0, chat = 0;
        for (std::size_t k = 0; k < in; ++k) {
          c += static_cast<double>(x[i * in + k]) * w[j * in + k];
          chat += static_cast<double>(da[i * in + k]) * db[j * in + k];
        }
        num += (chat - c) * (chat - c);
        den += c * c;
      }
    }
    ASSERT_TRUE(g.rel_fro_err.value.has_value());
    EXPECT_NEAR(*g.rel_fro_err.value, std::sqrt(num / den), 1e-9) << g.recipe;
    EXPECT_GT(*g.rel_fro_err.value, 0.01);
    EXPECT_LT(*g.rel_fro_err.value, 0.5);
  }
  // The recipes' own datapaths (gemm.hpp) land close to the float64 product of the same operands.
  o.datapath = "recipe";
  const auto own = fp4sim::replay::run(path, o);
  ASSERT_EQ(own.gemms.size(), r.gemms.size());
  for (std::size_t i = 0; i < own.gemms.size(); ++i) {
    ASSERT_TRUE(own.gemms[i].rel_fro_err.value.has_value()) << own.gemms[i].rel_fro_err.note;
    EXPECT_NEAR(*own.gemms[i].rel_fro_err.value, *r.gemms[i].rel_fro_err.value, 0.01) << own.gemms[i].datapath;
  }
}

TEST(Replay, DatapathThatRejectsTheOperandsGivesANote) {
  const fs::path path = scratch("k48.h5");
  {
    Writer w(path);
    write_layer(w, 1, "fc", 48, 64, 64, 1.0f, 5);  // wgrad K = tokens = 48, not a multiple of 64
    w.commit();
  }
  fp4sim::replay::Options o;
  o.recipes = recipes({"ue5m3"});  // probe-matched needs K % 64 == 0
  const auto r = fp4sim::replay::run(path, o);
  bool wgrad_seen = false;
  for (const auto& g : r.gemms) {
    if (g.gemm == fp4sim::Gemm::wgrad) {
      wgrad_seen = true;
      EXPECT_FALSE(g.rel_fro_err.value.has_value());
      EXPECT_NE(g.rel_fro_err.note.find("probe-matched"), std::string::npos) << g.rel_fro_err.note;
    } else {
      EXPECT_TRUE(g.rel_fro_err.value.has_value()) << g.rel_fro_err.note;
    }
  }
  EXPECT_TRUE(wgrad_seen);
}

TEST(Replay, SelectionErrorsAreUsageErrors) {
  fp4sim::replay::Options o;
  o.steps = std::vector<std::int64_t>{7};
  EXPECT_THROW(fp4sim::replay::run(kTraceA, o), fp4sim::UsageError);
  o.steps.reset();
  o.layers = "no_such_layer";
  EXPECT_THROW(fp4sim::replay::run(kTraceA, o), fp4sim::UsageError);
  o.layers = "([";
  EXPECT_THROW(fp4sim::replay::run(kTraceA, o), fp4sim::UsageError);
  o.layers = "";
  o.datapath = "warp-drive";
  EXPECT_THROW(fp4sim::replay::run(kTraceA, o), fp4sim::UsageError);
}

// ---------------------------------------------------------------------------------------------
// CLI

TEST(ReplayCli, JsonFieldsMatchCliMd) {
  const fs::path json = scratch("fields.json");
  fs::remove(json);
  const CliRun r = run_cli("replay " + kTraceA.string() + " --steps 1,2000 --layers 'lm_head|layers.0.mlp' --json " +
                        json.string() + " --datapath f64");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = jsonmini::parse(slurp(json));
  const auto& tensors = doc["tensors"].arr();
  ASSERT_EQ(tensors.size(), 2u * 2u * 3u * 3u);  // steps x layers x tensors x recipes
  const char* fields[] = {"step", "layer", "tensor", "recipe", "elements", "nonzero", "mse", "rel_mse", "sqnr_db",
                          "max_abs_err", "underflow_fraction", "saturated_fraction", "blocks", "zero_blocks",
                          "scale_saturated", "scale_underflow", "nan", "inf"};
  for (const auto& t : tensors) {
    for (const char* f : fields) {
      ASSERT_TRUE(t.has(f)) << "tensors entry lacks " << f;
      if (t[f].is_null()) {
        EXPECT_TRUE(t.has(std::string(f) + "_note")) << f;
      }
    }
    for (const char* f : {"held_from_step", "held_exact", "rho", "block_stats", "stream"}) EXPECT_TRUE(t.has(f)) << f;
    const auto& b = t["block_stats"];
    for (const char* f : {"scale_codes", "block_amax_log2_hist", "block_sqnr_db_hist", "scale_log2_std",
                          "worst_block_sqnr_db"}) {
      EXPECT_TRUE(b.has(f)) << f;
    }
    // sqnr_db = -10 log10(rel_mse)
    EXPECT_NEAR(t["sqnr_db"].num(), -10.0 * std::log10(t["rel_mse"].num()), 1e-9);
    EXPECT_GE(t["underflow_fraction"].num(), 0.0);
    EXPECT_LE(t["underflow_fraction"].num(), 1.0);
  }
  const auto& gemms = doc["gemms"].arr();
  ASSERT_EQ(gemms.size(), 2u * 2u * 3u * 3u);
  for (const auto& g : gemms) {
    for (const char* f : {"step", "layer", "gemm", "recipe", "datapath", "rel_fro_err"}) ASSERT_TRUE(g.has(f)) << f;
    EXPECT_TRUE(g["rel_fro_err"].is_number());
  }
  EXPECT_EQ(doc["headroom"].arr().size(), 2u * 2u * 3u);
  // scale_code_values: every finite nonnegative code of each scale format in use, increasing, ending at
  // the format's largest scale (UE5M3 61440, UE4M3 448, E8M0 2^127: `fp4sim formats`).
  const auto& code_values = doc["scale_code_values"].obj();
  ASSERT_EQ(code_values.size(), 3u);
  const std::map<std::string, std::tuple<std::size_t, double, double>> expected = {
      {"ue5m3", {248, 0.0, 61440.0}}, {"ue4m3", {127, 0.0, 448.0}}, {"e8m0", {255, 0x1p-127, 0x1p127}}};
  for (const auto& [name, want] : expected) {
    const auto& values = code_values.at(name).arr();
    ASSERT_EQ(values.size(), std::get<0>(want)) << name;
    EXPECT_EQ(values.front().num(), std::get<1>(want)) << name;
    EXPECT_EQ(values.back().num(), std::get<2>(want)) << name;
    for (std::size_t c = 1; c < values.size(); ++c) EXPECT_LT(values[c - 1].num(), values[c].num()) << name << c;
  }
  for (const auto& t : tensors) EXPECT_TRUE(code_values.count(t["scale_format"].str())) << t["scale_format"].str();
  // README: the dy absmax of lm_head is 2^-13 in bf16.
  for (const auto& t : tensors) {
    if (t["layer"].str() == "lm_head" && t["tensor"].str() == "dy") {
      EXPECT_EQ(t["amax"].num(), 0x1p-13);
    }
  }
}

TEST(ReplayCli, SummaryCsvH5AndStdoutJson) {
  const fs::path dir = scratch_dir() / "outs";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const CliRun r = run_cli("replay " + kTraceA.string() + " --steps 200 --datapath f64 --csv " + (dir / "r.csv").string() +
                        " --h5 " + (dir / "r.h5").string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("Best recipe per tensor role"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Worst tensors per recipe"), std::string::npos);
  EXPECT_NE(r.out.find("Proposition 1"), std::string::npos);
  EXPECT_EQ(r.err.find("\r"), std::string::npos) << "no progress bar when stderr is not a terminal";
  EXPECT_FALSE(fs::exists(dir / "r.csv")) << "one CSV file per kind of entry";
  const std::string tensors = slurp(dir / "r_tensors.csv"), gemms = slurp(dir / "r_gemms.csv");
  EXPECT_EQ(tensors.rfind("step,layer,tensor,", 0), 0u);
  EXPECT_NE(tensors.find("\n200,lm_head,x,"), std::string::npos);
  EXPECT_EQ(gemms.rfind("step,layer,gemm,recipe,datapath,m,n,k,", 0), 0u);
  EXPECT_NE(gemms.find("\n200,"), std::string::npos);
  EXPECT_EQ(slurp(dir / "r_headroom.csv").rfind("step,layer,tensor,role,period,", 0), 0u);
  fp4sim::hdf5::File h5 = fp4sim::hdf5::File::open(dir / "r.h5");
  EXPECT_EQ(h5.open_dataset("tensors/sqnr_db").shape(), (std::vector<hsize_t>{90}));
  EXPECT_EQ(h5.open_dataset("tensors/scale_code_hist").shape(), (std::vector<hsize_t>{90, 256}));
  EXPECT_EQ(h5.open_dataset("gemms/rel_fro_err").shape(), (std::vector<hsize_t>{90}));
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  }

  const CliRun s = run_cli("replay " + kTraceA.string() + " --steps 1 --layers lm_head --no-gemms --json -");
  ASSERT_EQ(s.status, 0) << s.err;
  const auto doc = jsonmini::parse(s.out);
  EXPECT_EQ(doc["tensors"].arr().size(), 9u);
  EXPECT_NE(s.err.find("Best recipe per tensor role"), std::string::npos) << "summary moves to stderr";
}

TEST(ReplayCli, UsageErrorsExit2) {
  for (const std::string args : {"--recipes nope", "--steps 7", "--steps x1", "--layers '(['", "--layers zzz",
                                 "--hold sometimes", "--datapath warp-drive"}) {
    const CliRun r = run_cli("replay " + kTraceA.string() + " " + args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find("error"), std::string::npos) << args;
  }
  // A missing output directory is a file that cannot be written: data (docs/cli.md "Exit codes").
  const CliRun r = run_cli("replay " + kTraceA.string() + " --json /no/such/dir/x.json");
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
}

namespace {

// Bad traces, one per rule (trace_test.cpp checks the messages in detail), written with the writer
// and the HDF5 C API.
std::vector<std::pair<std::string, fs::path>> bad_traces() {
  std::vector<std::pair<std::string, fs::path>> out;
  auto valid = [](const fs::path& p, auto&& mutate) {
    Writer w(p);
    write_layer(w, 1, "fc", 32, 32, 16, 1.0f, 1);
    mutate(w);
    w.commit();
    return p;
  };
  out.emplace_back("@schema is missing", valid(scratch("b1.h5"), [](Writer& w) { H5Adelete(w.file().id(), "schema"); }));
  out.emplace_back("unknown @schema_version 3",
                   valid(scratch("b2.h5"), [](Writer& w) { w.file().write_attribute("schema_version", 3); }));
  out.emplace_back("must be 2-D", valid(scratch("b3.h5"), [](Writer& w) {
                     const hsize_t dims[3] = {2, 2, 2};
                     w.layer_group(2, "fc").create_dataset<float>("x", std::span<const hsize_t>(dims));
                   }));
  out.emplace_back("element type uint8", valid(scratch("b4.h5"), [](Writer& w) {
                     w.layer_group(2, "fc").write_dataset<std::uint8_t>("x", {2, 2}, std::vector<std::uint8_t>(4));
                   }));
  out.emplace_back("x.cols == w.cols", valid(scratch("b5.h5"), [](Writer& w) {
                     w.write_tensor(2, "fc", "x", 4, 8, std::vector<float>(32));
                     w.write_tensor(2, "fc", "w", 4, 9, std::vector<float>(36));
                     w.write_tensor(2, "fc", "dy", 4, 4, std::vector<float>(16));
                   }));
  out.emplace_back("no step groups", [] {
    const fs::path p = scratch("b6.h5");
    Writer w(p);
    w.commit();
    return p;
  }());
  const fs::path text = scratch("b7.h5");
  std::ofstream(text) << "not hdf5 at all\n";
  out.emplace_back("not an HDF5 file", text);
  const fs::path empty = scratch("b8.h5");
  std::ofstream(empty).close();
  out.emplace_back("empty file", empty);
  const fs::path cut = scratch("b9.h5");
  fs::copy_file(out[0].second, cut, fs::copy_options::overwrite_existing);
  fs::resize_file(cut, fs::file_size(cut) / 2);
  out.emplace_back("truncated", cut);
  out.emplace_back("no such file", scratch("b10_missing.h5"));
  // Corrupted compressed data: metadata intact, a chunk's deflate stream damaged; found while reading.
  const fs::path corrupt = scratch("b11.h5");
  {
    Writer w(corrupt, {.model = "", .framework = "", .notes = "", .gzip = 9, .shuffle = false, .chunk_rows = 0});
    std::vector<float> x(256 * 256);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 1000) * 0.001f;
    w.write_tensor(1, "fc", "x", 256, 256, x);
    w.write_tensor(1, "fc", "w", 16, 256, std::vector<float>(16 * 256, 0.5f));
    w.write_tensor(1, "fc", "dy", 256, 16, std::vector<float>(256 * 16, 0.25f));
    w.commit();
  }
  {
    // Overwrite a stretch in the middle of the file, where the compressed x chunks lie.
    std::fstream f(corrupt, std::ios::in | std::ios::out | std::ios::binary);
    const auto size = fs::file_size(corrupt);
    f.seekp(static_cast<std::streamoff>(size / 3));
    const std::string junk(512, '\x3C');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  out.emplace_back("", corrupt);  // any clear message naming the file
  return out;
}

}  // namespace

TEST(ReplayCli, BadInputExit3WithNoPartialOutput) {
  for (const auto& [needle, path] : bad_traces()) {
    const fs::path dir = scratch_dir() / ("bad_" + path.stem().string());
    fs::remove_all(dir);
    fs::create_directories(dir);
    const CliRun r = run_cli("replay " + path.string() + " --json " + (dir / "o.json").string() + " --csv " +
                          (dir / "o.csv").string() + " --h5 " + (dir / "o.h5").string() + " --plots " +
                          (dir / "plots").string());
    EXPECT_EQ(r.status, 3) << path << ": " << r.err;
    EXPECT_NE(r.err.find(path.string()), std::string::npos) << "message names the file: " << r.err;
    if (!needle.empty()) {
      EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "': " << r.err;
    }
    EXPECT_EQ(r.err.find("Segmentation"), std::string::npos);
    EXPECT_TRUE(fs::is_empty(dir)) << "partial output left in " << dir;
  }
}

// Every region of a small trace damaged in turn: the CLI ends with 0 or 3, never a signal or another
// code, and leaves no output when it fails.
TEST(ReplayCli, CorruptionFuzzNeverCrashes) {
  const fs::path valid = scratch("fuzz_src.h5");
  {
    Writer w(valid);
    write_layer(w, 1, "fc", 32, 32, 16, 1.0f, 1);
    write_layer(w, 2, "fc", 32, 32, 16, 2.0f, 2);
    w.commit();
  }
  std::ifstream in(valid, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t stride = std::max<std::size_t>(1, bytes.size() / 120);
  int failures = 0, successes = 0;
  for (std::size_t pos = 0; pos < bytes.size(); pos += stride) {
    std::string copy = bytes;
    for (std::size_t k = pos; k < std::min(copy.size(), pos + 24); ++k) copy[k] = static_cast<char>(copy[k] ^ 0xA7);
    const fs::path p = scratch("fuzz.h5");
    std::ofstream(p, std::ios::binary | std::ios::trunc).write(copy.data(), static_cast<std::streamsize>(copy.size()));
    const fs::path out = scratch("fuzz_out.json");
    fs::remove(out);
    const CliRun r = run_cli("replay " + p.string() + " --no-gemms -q --json " + out.string());
    ASSERT_TRUE(r.status == 0 || r.status == 3) << "offset " << pos << ": status " << r.status << " " << r.err;
    if (r.status == 3) {
      ++failures;
      EXPECT_FALSE(fs::exists(out)) << "offset " << pos;
      EXPECT_NE(r.err.find(p.string()), std::string::npos) << r.err;
    } else {
      ++successes;
    }
  }
  EXPECT_GT(failures, 0);
  std::printf("corruption fuzz: %d rejected with exit 3, %d replayed\n", failures, successes);
}

TEST(ReplayCli, PlotsWhenMatplotlibIsAvailable) {
  if (std::system("python3 -c 'import matplotlib, numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 with matplotlib not available";
  }
  const fs::path dir = scratch("plots");
  fs::remove_all(dir);
  const CliRun r = run_cli("replay " + kTraceA.string() + " --steps 1,200 --layers 'lm_head|q_proj' --datapath f64 "
                        "--hold previous -q --plots " + dir.string());
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* png : {"sqnr_per_layer.png", "scale_codes.png", "underflow_saturation.png", "headroom_rho.png",
                          "gemm_error.png", "block_sqnr.png"}) {
    EXPECT_TRUE(fs::exists(dir / png)) << png;
    EXPECT_GT(fs::file_size(dir / png), 10000u) << png;
  }
}

// accumulate_headroom's underflow test (ideal <= half the smallest subnormal) and saturation test
// (ideal > U) against the encoder itself, on blocks whose amax spans 2^-40 .. 2^20.
TEST(Replay, HeadroomCountsMatchTheScaleEncoder) {
  std::vector<float> x(64 * 16);
  std::mt19937 g(9);
  std::uniform_real_distribution<float> e(-40.0f, 20.0f);
  for (std::size_t b = 0; b < 64; ++b) {
    const float amax = std::exp2(e(g));
    for (std::size_t i = 0; i < 16; ++i) x[b * 16 + i] = amax * (i == 3 ? 1.0f : 0.25f);
  }
  x[5 * 16 + 3] = 0x1p-24f * 3.0f;  // some exact ties near the thresholds come from the grid below
  for (const float held : {1.0f, 1e-3f, 1e4f}) {
    std::vector<fp4sim::stats::HeadroomCounts> h(3);
    h[0].scale = fp4sim::formats::ue4m3;
    h[1].scale = fp4sim::formats::ue5m3;
    h[2].scale = fp4sim::formats::ue5m3fn;
    fp4sim::stats::accumulate_headroom(x, 64, 16, 1, 16, held, 448.0f, 6.0f, h);
    const fp4sim::GlobalScale gs = fp4sim::global_scale(held, 448.0f, 6.0f);
    const float mult = gs.encode * (1.0f / 6.0f);
    for (auto& c : h) {
      std::uint64_t sat = 0, under = 0;
      const float max = fp4sim::decode_to_float(c.scale, c.scale.max_finite_code());
      for (std::size_t b = 0; b < 64; ++b) {
        float amax = 0;
        for (std::size_t i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(x[b * 16 + i]));
        const float ideal = std::min(amax * mult, std::numeric_limits<float>::max());
        sat += ideal > max;
        const auto code = fp4sim::encode(c.scale, ideal, fp4sim::EncodeOptions{fp4sim::Rounding::rne, true}).code;
        under += ideal > 0 && fp4sim::decode_to_float(c.scale, code) == 0.0f;
      }
      EXPECT_EQ(c.blocks, 64u);
      EXPECT_EQ(c.saturated, sat) << fp4sim::format_name(c.scale) << " held " << held;
      EXPECT_EQ(c.underflow, under) << fp4sim::format_name(c.scale) << " held " << held;
    }
  }
}
