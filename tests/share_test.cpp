// Work split into shares (share.hpp) and joined again (docs/replay.md "Many processes"): for any number of
// shares, merged replay and sweep results write the same JSON (but for the run metadata), CSV and HDF5
// bytes as one process, and results survive their byte encoding (result_bytes.hpp). The shares run one
// after another in this process; tests/mpi_test.py runs them as MPI ranks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "fp4sim/analysis/replay.hpp"
#include "fp4sim/analysis/result_bytes.hpp"
#include "fp4sim/analysis/share.hpp"
#include "fp4sim/analysis/sweep.hpp"
#include "fp4sim/core/error.hpp"

namespace fs = std::filesystem;
using namespace fp4sim;

namespace {

const fs::path kTraceA = fs::path(FP4SIM_SOURCE_DIR) / "traces" / "trace_a.h5";

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("fp4sim_share_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The JSON without its run metadata ("seconds" and "shares"), which is all a run on many processes may
// change; the test also checks that both fields are there to remove.
template <class Result>
std::string json_without_run_metadata(const Result& r, void (*write)(const Result&, std::ostream&)) {
  std::ostringstream os;
  write(r, os);
  static const std::regex metadata(R"("seconds":[^,]*,"shares":[0-9]+,)");
  const std::string text = os.str();
  EXPECT_TRUE(std::regex_search(text, metadata)) << "run metadata missing";
  return std::regex_replace(text, metadata, "");
}

std::string csv(const replay::Result& r) {
  std::ostringstream os;
  for (const auto& row : names(replay::Records{})) replay::write_csv(r, row.value, os);
  return os.str();
}

std::string h5_bytes(const replay::Result& r, const std::string& name) {
  const fs::path path = scratch(name);
  replay::write_h5(r, path);
  return slurp(path);
}

// Every share of `count`, each through its bytes, merged in reverse share order (merge takes any order).
replay::Result replay_in_shares(const replay::Options& options, int count) {
  std::vector<replay::Result> parts;
  for (int i = count - 1; i >= 0; --i) {
    replay::Options o = options;
    o.share = Share{i, count};
    parts.push_back(replay_result_from_bytes(to_bytes(replay::run(kTraceA, o))));
  }
  return replay::merge(std::move(parts));
}

void expect_replay_shares_equal_one_process(const replay::Options& options) {
  const replay::Result one = replay::run(kTraceA, options);
  const std::string json = json_without_run_metadata(one, replay::write_json);
  const std::string h5 = h5_bytes(one, "one.h5");
  // Two shares run as two MPI ranks in tests/mpi_test.py; here an uneven split and one with an empty share
  // (trace_a has 10 layers: 11 shares leave one with nothing).
  for (const int count : {3, 11}) {
    SCOPED_TRACE("shares " + std::to_string(count));
    const replay::Result merged = replay_in_shares(options, count);
    EXPECT_EQ(merged.shares, count);
    EXPECT_EQ(merged.tensor_bytes, one.tensor_bytes);
    EXPECT_EQ(json_without_run_metadata(merged, replay::write_json), json);
    EXPECT_EQ(csv(merged), csv(one));
    EXPECT_EQ(h5_bytes(merged, "merged.h5"), h5);
  }
}

}  // namespace

TEST(AssignShares, LargestFirstToTheLeastLoaded) {
  const std::vector<std::uint64_t> costs{5, 3, 3, 2, 2, 1};
  // 5 -> 0; 3 -> 1; 3 -> 1 (3 < 5); 2 -> 0 (5 < 6); 2 -> 1 (6 < 7); 1 -> 0 (7 < 8): loads 8 and 8.
  EXPECT_EQ(assign_shares(costs, Share{0, 2}), (std::vector<int>{0, 1, 1, 0, 1, 0}));
  // Equal costs go round, in unit order; more shares than units leave the last ones empty.
  EXPECT_EQ(assign_shares(std::vector<std::uint64_t>(5, 7), Share{0, 3}), (std::vector<int>{0, 1, 2, 0, 1}));
  EXPECT_EQ(assign_shares(std::vector<std::uint64_t>{4, 9}, Share{3, 4}), (std::vector<int>{1, 0}));
  EXPECT_THROW(assign_shares(costs, Share{2, 2}), UsageError);
  EXPECT_THROW(assign_shares(costs, Share{0, 0}), UsageError);
}

TEST(ReplayShares, LayerUnitsWithGemmsGiveTheOneProcessBytes) {
  replay::Options o;
  o.datapath = "f64";
  o.steps = std::vector<std::int64_t>{1, 200};
  // Four of the ten layers (units), each through both steps: 3 shares split them unevenly, 11 leave seven
  // empty. All ten took 220 of the sanitized stage's CPU-seconds (three replays of 60 GEMMs per recipe).
  o.layers = "lm_head|layers\\.3\\.";
  expect_replay_shares_equal_one_process(o);
}

TEST(ReplayShares, TensorUnitsWithoutGemmsAndHeldAmaxesGiveTheOneProcessBytes) {
  replay::Options o;
  o.gemms = false;
  o.hold = replay::HoldRule::previous;  // every step holds the amax of the step before: state carried
  o.steps = std::vector<std::int64_t>{200, 2000};
  o.max_slab_bytes = 64 << 10;  // w of down_proj streams in slabs
  // Three of the ten layers: nine units of three sizes, so 3 shares split them by cost unevenly and 11
  // leave two empty. All ten took 88 s of the sanitized stage (every default recipe, three replays).
  o.layers = "layers\\.0\\.mlp\\.down_proj|layers\\.3\\.self_attn\\.q_proj|lm_head";
  expect_replay_shares_equal_one_process(o);
}

// Recipe maps: every share resolves the maps over the whole selection and labels its own entries.
TEST(ReplayShares, RecipeMapsGiveTheOneProcessBytes) {
  replay::Options o;
  o.datapath = "f64";
  o.steps = std::vector<std::int64_t>{200};
  o.layers = "layers\\.[05]\\.self_attn\\.q_proj|lm_head";  // three layers: the test's cost is the GEMMs'
  o.recipe_maps = replay::parse_recipe_maps("*=nvfp4; layers\\.5\\.=bf16,lm_head=bf16,*=mxfp4");
  expect_replay_shares_equal_one_process(o);
}

TEST(ReplayShares, AShareStartsItsOwnItemsInOrder) {
  replay::Options o;
  o.gemms = false;
  o.steps = std::vector<std::int64_t>{1};
  std::vector<std::uint64_t> all;
  for (int i = 0; i < 2; ++i) {
    o.share = Share{i, 2};
    std::vector<std::uint64_t> mine;
    o.starting = [&](std::uint64_t item) { mine.push_back(item); };
    const replay::Result r = replay::run(kTraceA, o);
    EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
    for (const auto& e : r.tensors) EXPECT_TRUE(std::count(mine.begin(), mine.end(), e.item)) << e.item;
    all.insert(all.end(), mine.begin(), mine.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<std::uint64_t> every(30);  // 10 layers x 3 tensors, each started by exactly one share
  for (std::size_t i = 0; i < every.size(); ++i) every[i] = i;
  EXPECT_EQ(all, every);
}

TEST(SweepShares, SyntheticAndTraceSweepsGiveTheOneProcessBytes) {
  sweep::Options synthetic;
  for (const char* d : {"normal", "laplace", "student-t:3", "lognormal:1", "normal+outliers:0.001:100"}) {
    synthetic.distributions.push_back(*sweep::parse_distribution(d));
  }
  synthetic.rows = 64;
  synthetic.cols = 256;
  sweep::Options traced;
  traced.trace = kTraceA;
  traced.steps = std::vector<std::int64_t>{200};
  traced.grid.blocks = {16};
  traced.grid.tensor_scales = {*parse_tensor_scale("periodic:50")};
  for (const sweep::Options& options : {synthetic, traced}) {
    const sweep::Result one = sweep::run(options);
    std::ostringstream one_csv;
    sweep::write_csv(one, one_csv);
    for (const int count : {2, 7}) {
      SCOPED_TRACE(options.trace.string() + " shares " + std::to_string(count));
      std::vector<sweep::Result> parts;
      for (int i = 0; i < count; ++i) {
        sweep::Options o = options;
        o.share = Share{i, count};
        parts.push_back(sweep_result_from_bytes(to_bytes(sweep::run(o))));
      }
      const sweep::Result merged = sweep::merge(std::move(parts));
      EXPECT_EQ(merged.shares, count);
      EXPECT_EQ(json_without_run_metadata(merged, sweep::write_json), json_without_run_metadata(one, sweep::write_json));
      std::ostringstream merged_csv;
      sweep::write_csv(merged, merged_csv);
      EXPECT_EQ(merged_csv.str(), one_csv.str());
    }
  }
}

TEST(ResultBytes, RoundTripAndTruncation) {
  replay::Options o;
  o.steps = std::vector<std::int64_t>{1};
  o.layers = "lm_head";
  o.datapath = "f64";
  const replay::Result r = replay::run(kTraceA, o);
  const std::string bytes = to_bytes(r);
  const replay::Result back = replay_result_from_bytes(bytes);
  std::ostringstream a, b;
  replay::write_json(r, a);
  replay::write_json(back, b);
  EXPECT_EQ(a.str(), b.str());  // the run metadata too
  EXPECT_EQ(to_bytes(back), bytes);
  EXPECT_THROW(replay_result_from_bytes(std::string_view(bytes).substr(0, bytes.size() / 2)), DataError);
  EXPECT_THROW(sweep_result_from_bytes(""), DataError);
}
