// fp4sim sweep: synthetic distributions (seeded, moments), grid expansion and invalid combinations,
// periodic scaling on synthetic data (Proposition 1), sweeps over a trace, CLI exit codes and outputs.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fp4sim/core/error.hpp"
#include "fp4sim/analysis/sweep.hpp"
#include "json_mini.hpp"

namespace fs = std::filesystem;
using namespace fp4sim;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("fp4sim_sweep_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

int run_cli(const std::string& args, std::string* out = nullptr, std::string* err = nullptr) {
  const fs::path o = scratch("o.txt"), e = scratch("e.txt");
  const int raw = std::system((std::string(FP4SIM_BINARY) + " " + args + " >" + o.string() + " 2>" + e.string()).c_str());
  auto slurp = [](const fs::path& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  if (out) *out = slurp(o);
  if (err) *err = slurp(e);
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
}

struct Moments {
  double mean = 0, var = 0, kurtosis = 0, max_abs = 0;
};
Moments moments(const std::vector<float>& v) {
  Moments m;
  for (float x : v) m.mean += x;
  m.mean /= v.size();
  double m2 = 0, m4 = 0;
  for (float x : v) {
    const double d = x - m.mean;
    m2 += d * d;
    m4 += d * d * d * d;
    m.max_abs = std::max(m.max_abs, std::fabs(static_cast<double>(x)));
  }
  m.var = m2 / v.size();
  m.kurtosis = (m4 / v.size()) / (m.var * m.var);
  return m;
}

}  // namespace

TEST(SweepDistributions, ParseAndCanonicalNames) {
  EXPECT_EQ(sweep::parse_distribution("normal")->name, "normal");
  EXPECT_EQ(sweep::parse_distribution("student-t")->parameter, 3);
  EXPECT_EQ(sweep::parse_distribution("student-t:5")->name, "student-t:5");
  EXPECT_EQ(sweep::parse_distribution("lognormal:0.5")->name, "lognormal:0.5");
  const auto o = sweep::parse_distribution("laplace+outliers:0.01:50");
  ASSERT_TRUE(o);
  EXPECT_EQ(o->outlier_probability, 0.01);
  EXPECT_EQ(o->outlier_scale, 50);
  for (const char* bad : {"gauss", "normal:2", "student-t:0", "student-t:2.5", "lognormal:-1", "normal+outliers:2:3",
                          "normal+spikes:0.1:2", ""}) {
    EXPECT_FALSE(sweep::parse_distribution(bad)) << bad;
  }
}

// Sample moments of 2^18 draws against the distributions' known values (kurtosis: normal 3, Laplace 6).
TEST(SweepDistributions, MomentsAndSeeding) {
  const std::size_t rows = 256, cols = 1024;
  const auto n = sweep::generate(*sweep::parse_distribution("normal"), rows, cols, 1, 7);
  const Moments mn = moments(n);
  EXPECT_NEAR(mn.mean, 0.0, 0.01);
  EXPECT_NEAR(mn.var, 1.0, 0.01);
  EXPECT_NEAR(mn.kurtosis, 3.0, 0.05);
  const Moments ml = moments(sweep::generate(*sweep::parse_distribution("laplace"), rows, cols, 1, 7));
  EXPECT_NEAR(ml.var, 2.0, 0.03);  // Laplace(0, 1): variance 2
  EXPECT_NEAR(ml.kurtosis, 6.0, 0.3);
  const Moments mt = moments(sweep::generate(*sweep::parse_distribution("student-t:5"), rows, cols, 1, 7));
  EXPECT_NEAR(mt.var, 5.0 / 3.0, 0.05);  // nu / (nu - 2)
  const Moments mlog = moments(sweep::generate(*sweep::parse_distribution("lognormal:0.5"), rows, cols, 1, 7));
  EXPECT_NEAR(mlog.var, std::exp(2 * 0.25), 0.02);  // E[exp(2 sigma Z)] = exp(2 sigma^2)
  const auto out = sweep::generate(*sweep::parse_distribution("normal+outliers:0.01:100"), rows, cols, 1, 7);
  std::size_t big = 0;
  for (float x : out) big += std::fabs(x) > 20.0f;
  EXPECT_NEAR(static_cast<double>(big) / out.size(), 0.01 * 0.84, 0.002);  // P(|Z| > 0.2) = 0.84
  // Seeded: same seed and stream give the same tensor, another seed or stream another.
  EXPECT_EQ(n, sweep::generate(*sweep::parse_distribution("normal"), rows, cols, 1, 7));
  EXPECT_NE(n, sweep::generate(*sweep::parse_distribution("normal"), rows, cols, 2, 7));
  EXPECT_NE(n, sweep::generate(*sweep::parse_distribution("normal"), rows, cols, 1, 8));
}

TEST(SweepGrid, InvalidCombinationsAreSkippedWithAReason) {
  sweep::Grid g;
  std::string why;
  const auto ts_current = *parse_tensor_scale("current");
  EXPECT_FALSE(sweep::make_recipe(g, formats::e2m1, formats::e8m0, 32, ts_current, Rounding::rne, why));
  EXPECT_NE(why.find("tensor scale"), std::string::npos) << why;
  const auto r = sweep::make_recipe(g, formats::e2m1, formats::e8m0, 32, *parse_tensor_scale("none"),
                                    Rounding::rne, why);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->scale_rule, ScaleRule::pow2_floor);
  EXPECT_EQ(r->name, "e2m1/e8m0/b32/none/rne");
  EXPECT_FALSE(parse_tensor_scale("periodic:0"));
  EXPECT_EQ(parse_tensor_scale("periodic:10")->period, 10);
}

// The MXFP4 preset is a grid point: the sweep's e2m1/e8m0/b32/none/rne equals preset mxfp4 on the
// same data (same fields, same figures).
TEST(SweepSynthetic, GridPointEqualsPreset) {
  sweep::Options o;
  o.grid.scale_formats = {formats::e8m0};
  o.grid.blocks = {32};
  o.grid.tensor_scales = {*parse_tensor_scale("none")};
  o.distributions = {*sweep::parse_distribution("laplace")};
  o.rows = 64;
  o.cols = 512;
  o.seed = 4;
  const auto r = sweep::run(o);
  ASSERT_EQ(r.tensors.size(), 1u);
  const auto x = sweep::generate(o.distributions[0], 64, 512, 4, r.tensors[0].stream);
  QuantizeRequest q;
  const Recipe mx = *find_recipe("mxfp4");
  q.spec = operand_for_role(mx, Role::activation);
  const auto qt = quantize(mx, q, x, 64, 512);
  stats::TensorStats s;
  stats::accumulate(qt, x, {}, dequantize(qt), s);
  EXPECT_EQ(s.error.sum_sq_err, r.tensors[0].stats.error.sum_sq_err);
  EXPECT_EQ(s.blocks.scale_codes, r.tensors[0].stats.blocks.scale_codes);
}

// Proposition 1 on synthetic data: with held amax = amax / rho and T = 448, UE4M3 (U = 448) saturates
// as soon as rho > 1 while UE5M3 (U = 61,440) has none up to rho = 137.
TEST(SweepSynthetic, PeriodicRhoShowsTheHeadroom) {
  sweep::Options o;
  o.grid.scale_formats = {formats::ue4m3, formats::ue5m3};
  o.grid.blocks = {16};
  o.grid.tensor_scales = {*parse_tensor_scale("periodic:50")};
  o.grid.rhos = {1, 4, 100, 300};
  o.distributions = {*sweep::parse_distribution("normal")};
  o.rows = 64;
  o.cols = 1024;
  const auto r = sweep::run(o);
  ASSERT_EQ(r.tensors.size(), 8u);
  for (const auto& e : r.tensors) {
    const double rho = *e.hold.rho.value;
    const std::uint64_t sat = e.stats.counts.scale_saturated;
    if (e.scale_format == "ue4m3" && rho > 2) {
      EXPECT_GT(sat, 0u) << e.recipe;
    }
    if (e.scale_format == "ue5m3") {
      if (rho * 448 <= 61440) {
        EXPECT_EQ(sat, 0u) << e.recipe;
      } else {
        EXPECT_GT(sat, 0u) << e.recipe;
      }
    }
  }
}

TEST(SweepTrace, SweepsTheTraceTensorsWithReplayFields) {
  sweep::Options o;
  o.trace = fs::path(FP4SIM_SOURCE_DIR) / "traces" / "trace_a.h5";
  o.steps = std::vector<std::int64_t>{200};
  o.layers = "lm_head";
  o.grid.scale_formats = {formats::ue4m3, formats::ue5m3};
  o.grid.blocks = {16, 32};
  o.grid.tensor_scales = {*parse_tensor_scale("current")};
  const auto r = sweep::run(o);
  EXPECT_EQ(r.configs.size(), 4u);
  EXPECT_EQ(r.tensors.size(), 4u * 3u);
  std::ostringstream os;
  sweep::write_json(r, os);
  const auto doc = jsonmini::parse(os.str());
  EXPECT_EQ(doc["kind"].str(), "sweep");
  for (const auto& t : doc["tensors"].arr()) {
    for (const char* f : {"step", "layer", "tensor", "recipe", "elements", "nonzero", "mse", "rel_mse", "sqnr_db",
                          "max_abs_err", "underflow_fraction", "saturated_fraction", "blocks", "zero_blocks",
                          "scale_saturated", "scale_underflow", "nan", "inf"}) {
      EXPECT_TRUE(t.has(f)) << f;
    }
  }
}

TEST(SweepCli, OutputsAndExitCodes) {
  const fs::path json = scratch("s.json"), csv = scratch("s.csv");
  std::string out, err;
  ASSERT_EQ(run_cli("sweep --rows 32 --cols 256 --synthetic normal,student-t:3 --blocks 16 --json " + json.string() +
                        " --csv " + csv.string(),
                    &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("Best configuration per input"), std::string::npos) << out;
  const auto doc = jsonmini::parse([&] {
    std::ifstream f(json);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }());
  EXPECT_EQ(doc["tensors"].arr().size(), 2u * 5u);  // 2 distributions x (ue4m3, ue5m3 x 2 policies + e8m0 none)
  EXPECT_EQ(doc["skipped"].arr().size(), 1u);       // e8m0 with current scaling
  EXPECT_TRUE(fs::exists(csv));
  EXPECT_EQ(run_cli("sweep --synthetic gauss", nullptr, &err), 2) << err;
  EXPECT_EQ(run_cli("sweep --scale-formats q9", nullptr, &err), 2) << err;
  EXPECT_EQ(run_cli("sweep --blocks 1", nullptr, &err), 2) << err;
  EXPECT_EQ(run_cli("sweep --tensor-scales sometimes", nullptr, &err), 2) << err;
  const fs::path bad = scratch("bad.h5");
  std::ofstream(bad) << "nope";
  const fs::path j2 = scratch("bad.json");
  EXPECT_EQ(run_cli("sweep " + bad.string() + " --json " + j2.string(), nullptr, &err), 3) << err;
  EXPECT_NE(err.find("not an HDF5 file"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(j2));
}
