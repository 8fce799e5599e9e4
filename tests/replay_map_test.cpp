// Recipe maps (docs/replay.md "Recipe maps"): policies per layer and step in replay. The first matching
// rule decides; a map's FP4 entries are the entries `--recipes` gives; its bf16 entries are the tensors
// rounded to BF16, checked against a rounding written here from the bit layout; map errors are usage
// errors (exit 2, one line); `--recipe-map '*=nvfp4'` gives `--recipes nvfp4`'s figures byte for byte.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "fp4sim/analysis/calls.hpp"
#include "fp4sim/analysis/replay.hpp"
#include "fp4sim/analysis/sweep.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/io/trace.hpp"

namespace fs = std::filesystem;
using fp4sim::UsageError;
using fp4sim::replay::Options;
using fp4sim::replay::parse_recipe_maps;
using fp4sim::trace::Writer;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("fp4sim_replay_map_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

std::vector<float> gaussian(std::size_t n, float sigma, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);  // float32 values with 23 fraction bits: BF16 rounding changes them
  return v;
}

constexpr std::size_t kTokens = 32, kIn = 64, kOut = 48;

// Steps 1 and 2, layers "layers.0.fc", "layers.1.fc" and "head" (gains differ per step and layer).
fs::path small_trace() {
  const fs::path path = scratch("map.h5");
  if (fs::exists(path)) return path;
  Writer w(path);
  std::uint32_t seed = 1;
  for (std::int64_t step : {1, 2}) {
    for (const char* layer : {"layers.0.fc", "layers.1.fc", "head"}) {
      w.write_tensor(step, layer, "x", kTokens, kIn, gaussian(kTokens * kIn, 1.0f + step, seed++));
      w.write_tensor(step, layer, "w", kOut, kIn, gaussian(kOut * kIn, 0.02f, seed++));
      w.write_tensor(step, layer, "dy", kTokens, kOut, gaussian(kTokens * kOut, 1e-5f, seed++));
    }
  }
  w.commit();
  return path;
}

// RNE to BF16 from the bit layout (finite inputs): add half an ulp of BF16 less one, plus the kept LSB
// (ties to even), then clear the 16 low bits.
float bf16_of(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  return std::bit_cast<float>((u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u);
}

Options map_options(const std::string& maps) {
  Options o;
  o.recipe_maps = parse_recipe_maps(maps);
  o.datapath = "f64";
  return o;
}

std::string usage_error(const std::string& maps, const Options& base = {}) {
  try {
    Options o = base;
    o.recipe_maps = parse_recipe_maps(maps);
    fp4sim::replay::run(small_trace(), o);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

struct CliRun {
  int status = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

CliRun run_cli(const std::string& args) {
  const fs::path out = scratch("cli.stdout"), err = scratch("cli.stderr");
  const std::string cmd = std::string(FP4SIM_BINARY) + " " + args + " >" + out.string() + " 2>" + err.string();
  const int raw = std::system(cmd.c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(out), slurp(err)};
}

const fs::path kTraceA = fs::path(FP4SIM_SOURCE_DIR) / "traces" / "trace_a.h5";

}  // namespace

TEST(RecipeMap, ParsesRulesStepsAndMaps) {
  const auto maps = parse_recipe_maps(" layers\\.[0-9]{1,2}\\.fc@2-=bf16 , head@1=mxfp4,*@5-9=ue5m3, *=nvfp4 ;*=nvfp4");
  ASSERT_EQ(maps.size(), 2u);
  ASSERT_EQ(maps[0].rules.size(), 4u);
  EXPECT_EQ(maps[0].rules[0].pattern, "layers\\.[0-9]{1,2}\\.fc");  // the count's comma is the regex's
  EXPECT_FALSE(maps[0].rules[0].recipe.has_value());                // bf16
  EXPECT_EQ(maps[0].rules[0].steps->first, 2);
  EXPECT_EQ(maps[0].rules[0].steps->second, INT64_MAX);
  EXPECT_EQ(maps[0].rules[1].steps->first, 1);
  EXPECT_EQ(maps[0].rules[1].steps->second, 1);
  EXPECT_EQ(maps[0].rules[1].recipe->name, "mxfp4");
  EXPECT_EQ(maps[0].rules[2].pattern, "");  // `*`: every layer
  EXPECT_EQ(maps[0].rules[2].steps->second, 9);
  EXPECT_EQ(maps[0].rules[3].text, "*=nvfp4");
  EXPECT_EQ(maps[1].name, "*=nvfp4");
  for (const std::string bad : {"", " ; ", "head", "=nvfp4", "head=nvfp5", "head@x=bf16", "head@9-3=bf16",
                                "(=bf16", "*=nvfp4;*=nvfp4"}) {
    EXPECT_THROW(parse_recipe_maps(bad), UsageError) << bad;
  }
}

// Each map takes, per (step, layer), the entries of the recipe of its first matching rule, one entry per
// map in map order; those entries equal a replay of that recipe alone.
TEST(RecipeMap, FirstMatchingRuleDecidesAndEntriesEqualThoseOfTheRecipe) {
  const std::string first = "head=bf16,layers\\.1\\.@2=nvfp4,layers\\.0\\.=nvfp4,*=mxfp4";
  const std::string second = "*=nvfp4";
  const auto r = fp4sim::replay::run(small_trace(), map_options(first + ";" + second));
  ASSERT_EQ(r.policies, (std::vector<std::string>{first, second}));
  EXPECT_EQ(r.recipe_names, (std::vector<std::string>{"nvfp4", "mxfp4", "bf16"}));  // as first named
  ASSERT_EQ(r.tensors.size(), 2u * 3 * 3 * 2);  // maps x steps x layers x tensors
  ASSERT_EQ(r.gemms.size(), 2u * 3 * 3 * 2);
  const std::map<std::pair<std::int64_t, std::string>, std::string> expected = {
      {{1, "layers.0.fc"}, "nvfp4"}, {{1, "layers.1.fc"}, "mxfp4"}, {{1, "head"}, "bf16"},
      {{2, "layers.0.fc"}, "nvfp4"}, {{2, "layers.1.fc"}, "nvfp4"}, {{2, "head"}, "bf16"}};
  Options alone;
  alone.datapath = "f64";
  alone.recipes = {*fp4sim::find_recipe("nvfp4"), *fp4sim::find_recipe("mxfp4")};
  const auto reference = fp4sim::replay::run(small_trace(), alone);
  for (std::size_t i = 0; i < r.tensors.size(); ++i) {
    const auto& e = r.tensors[i];
    EXPECT_EQ(e.policy, i % 2 == 0 ? first : second) << i;  // map order within each tensor
    const std::string want = e.policy == first ? expected.at({e.step, e.layer}) : "nvfp4";
    EXPECT_EQ(e.recipe, want) << e.step << " " << e.layer;
    if (e.recipe == "bf16") continue;
    const auto& ref = reference.tensors[(i / 2) * 2 + (e.recipe == "nvfp4" ? 0 : 1)];
    ASSERT_EQ(ref.recipe, e.recipe);
    ASSERT_EQ(ref.layer, e.layer);
    EXPECT_EQ(ref.stats.error.sum_sq_err, e.stats.error.sum_sq_err) << e.layer << " " << e.tensor;
    EXPECT_EQ(ref.stats.blocks.scale_codes, e.stats.blocks.scale_codes);
  }
  for (const auto& g : r.gemms) {
    const std::string want = g.policy == first ? expected.at({g.step, g.layer}) : "nvfp4";
    EXPECT_EQ(g.recipe, want) << g.step << " " << g.layer;
  }
}

// bf16: the stored values rounded RNE to BF16 and not block-scaled; GEMMs of the rounded operands in float64.
TEST(RecipeMap, Bf16EntriesAreTheBf16RoundingOfTheTensor) {
  const auto r = fp4sim::replay::run(small_trace(), map_options("*=bf16"));
  ASSERT_EQ(r.tensors.size(), 18u);
  fp4sim::trace::Reader reader(small_trace());
  for (const auto& e : r.tensors) {
    ASSERT_EQ(e.recipe, "bf16");
    EXPECT_EQ(e.element_format, "bf16");
    EXPECT_EQ(e.stats.blocks.blocks, 0u);
    EXPECT_FALSE(e.hold.held_amax.has_value());
    const auto* step = reader.info().find_step(e.step);
    const fp4sim::trace::TensorInfo* t = nullptr;
    for (const auto& l : step->layers) {
      for (const auto& candidate : {&l.x(), &l.w(), &l.dy()}) {
        if (l.name == e.layer && candidate->name == e.tensor) t = candidate;
      }
    }
    ASSERT_NE(t, nullptr);
    const auto x = reader.read_float(*t);
    double sq_err = 0, sq_ref = 0, max_err = 0;
    std::uint64_t changed = 0;
    for (float v : x) {
      const double d = static_cast<double>(bf16_of(v)) - v;
      sq_err += d * d;
      sq_ref += static_cast<double>(v) * v;
      max_err = std::max(max_err, std::fabs(d));
      changed += d != 0;
    }
    ASSERT_GT(changed, x.size() / 2) << "the data must not be BF16 already";
    EXPECT_EQ(e.stats.error.max_abs_err, max_err) << e.layer << " " << e.tensor;
    EXPECT_NEAR(e.stats.error.sum_sq_err, sq_err, 1e-12 * sq_err);
    EXPECT_NEAR(*e.stats.error.sqnr_db().value, -10 * std::log10(sq_err / sq_ref), 1e-9);
  }
  // fprop of head at step 1: bf16(x) . bf16(w)^T against x . w^T.
  const fp4sim::trace::LayerInfo* head = nullptr;
  for (const auto& l : reader.info().find_step(1)->layers) {
    if (l.name == "head") head = &l;
  }
  ASSERT_NE(head, nullptr);
  const auto& layer = *head;
  const auto x = reader.read_float(layer.x()), w = reader.read_float(layer.w());
  double num = 0, den = 0;
  for (std::size_t i = 0; i < kTokens; ++i) {
    for (std::size_t j = 0; j < kOut; ++j) {
      double c = 0, chat = 0;
      for (std::size_t k = 0; k < kIn; ++k) {
        c += static_cast<double>(x[i * kIn + k]) * w[j * kIn + k];
        chat += static_cast<double>(bf16_of(x[i * kIn + k])) * bf16_of(w[j * kIn + k]);
      }
      num += (chat - c) * (chat - c);
      den += c * c;
    }
  }
  bool found = false;
  for (const auto& g : r.gemms) {
    if (g.step != 1 || g.layer != "head" || g.gemm != fp4sim::Gemm::fprop) continue;
    found = true;
    EXPECT_EQ(g.datapath, "f64");
    EXPECT_NEAR(*g.rel_fro_err.value, std::sqrt(num / den), 1e-9);
    EXPECT_GT(*g.rel_fro_err.value, 1e-4);  // BF16 rounding is seen
  }
  EXPECT_TRUE(found);
}

TEST(RecipeMap, UnmatchedLayersAndUnusedRulesAreUsageErrors) {
  EXPECT_NE(usage_error("layers=nvfp4").find("no rule for layer head at step 1"), std::string::npos);
  EXPECT_NE(usage_error("*=nvfp4,head=bf16").find("rule 'head=bf16'"), std::string::npos);      // shadowed
  EXPECT_NE(usage_error("hed=bf16,*=nvfp4").find("rule 'hed=bf16'"), std::string::npos);        // a typo
  EXPECT_NE(usage_error("head@3-9=bf16,*=nvfp4").find("rule 'head@3-9=bf16'"), std::string::npos);
  Options only_head;
  only_head.layers = "head";
  EXPECT_NE(usage_error("layers=bf16,*=nvfp4", only_head).find("rule 'layers=bf16'"), std::string::npos);
  Options both = map_options("*=nvfp4");
  both.recipes = {*fp4sim::find_recipe("nvfp4")};
  EXPECT_THROW(fp4sim::replay::run(small_trace(), both), UsageError);
}

// A sweep's map: its `grid` rules take each grid point, one policy per grid point named by it.
TEST(RecipeMap, SweepGridRulesTakeEachGridPoint) {
  fp4sim::sweep::Call call;
  call.trace = small_trace().string();
  call.scale_formats = "ue4m3,e8m0";
  call.blocks = "16";
  call.tensor_scales = "none";
  call.recipe_map = "head=bf16,*=grid";
  const auto mapped = fp4sim::sweep::run(call.resolve());
  call.recipe_map.reset();
  const auto plain = fp4sim::sweep::run(call.resolve());
  ASSERT_EQ(mapped.configs, plain.configs);
  ASSERT_EQ(mapped.configs.size(), 2u);
  ASSERT_EQ(mapped.tensors.size(), plain.tensors.size());
  std::size_t bf16 = 0;
  for (std::size_t i = 0; i < mapped.tensors.size(); ++i) {
    const auto &m = mapped.tensors[i], &p = plain.tensors[i];
    EXPECT_EQ(m.policy, p.recipe) << i;
    if (m.layer == "head") {
      EXPECT_EQ(m.recipe, "bf16");
      ++bf16;
      continue;
    }
    EXPECT_EQ(m.recipe, p.recipe);
    EXPECT_EQ(m.stats.error.sum_sq_err, p.stats.error.sum_sq_err) << m.layer << " " << m.tensor;
  }
  EXPECT_EQ(bf16, 2u * 3 * 2);  // steps x tensors x grid points
  EXPECT_NE(fp4sim::sweep::summary(mapped).find("recipe map head=bf16,*=grid"), std::string::npos);
  for (const std::string bad : {"*=nvfp4", "*=grid;*=grid,head=bf16"}) {
    call.recipe_map = bad;
    EXPECT_THROW(call.resolve(), UsageError) << bad;
  }
  call.trace.clear();
  call.recipe_map = "*=grid";
  EXPECT_THROW(call.resolve(), UsageError);
  // replay refuses `grid`: as text, and as a rule built for a sweep
  EXPECT_NE(usage_error("*=grid").find("unknown recipe 'grid'"), std::string::npos);
  Options o;
  o.recipe_maps = parse_recipe_maps("*=grid", true);
  EXPECT_THROW(fp4sim::replay::run(small_trace(), o), UsageError);
}

// The done-when: the shipped trace with its last layers in BF16 beside all-FP4, reported per policy.
TEST(RecipeMapCli, ShippedTraceWithBf16LastLayersReportsPerPolicy) {
  const std::string fp4 = "*=nvfp4", last_bf16 = "layers\\.5\\.=bf16,lm_head=bf16,*=nvfp4";
  const fs::path json = scratch("policies.json");
  const CliRun r = run_cli("replay " + kTraceA.string() + " --steps 200 --no-gemms --no-progress --recipe-map '" +
                           fp4 + "; " + last_bf16 + "' --json " + json.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("Per policy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n  " + fp4 + " "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n  " + last_bf16 + " "), std::string::npos) << r.out;
  // 4 last-layer linears (layers.5 q/o/down and lm_head) x 3 tensors kept in BF16 of 30 entries.
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\\n  layers\\S*=nvfp4 +12/30 "))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\\n  \\*=nvfp4 +0/30 "))) << r.out;
  const std::string text = slurp(json);
  EXPECT_NE(text.find("\"policies\":[\"*=nvfp4\",\"layers\\\\.5\\\\.=bf16,lm_head=bf16,*=nvfp4\"]"), std::string::npos);
  std::size_t bf16 = 0, pos = 0;
  while ((pos = text.find("\"recipe\":\"bf16\"", pos)) != std::string::npos) ++bf16, ++pos;
  EXPECT_EQ(bf16, 12u);
}

TEST(RecipeMapCli, AllNvfp4MapGivesTheFiguresOfRecipesNvfp4ByteForByte) {
  const fs::path a = scratch("map.json"), b = scratch("recipes.json");
  // Four of the ten layers (all ten took 22 s of the sanitized stage): the rule is the same for each.
  const std::string common =
      "replay " + kTraceA.string() + " --steps 1 --layers 'lm_head|layers\\.3\\.' -q --no-progress --json ";
  ASSERT_EQ(run_cli(common + a.string() + " --recipe-map '*=nvfp4'").status, 0);
  ASSERT_EQ(run_cli(common + b.string() + " --recipes nvfp4").status, 0);
  const std::regex seconds("\"seconds\":[^,]*,");
  std::string with_map = std::regex_replace(slurp(a), seconds, "");
  const std::string plain = std::regex_replace(slurp(b), seconds, "");
  const std::string label = ",\"policy\":\"*=nvfp4\"";
  std::size_t labels = 0;
  for (std::size_t p; (p = with_map.find(label)) != std::string::npos; ++labels) with_map.erase(p, label.size());
  EXPECT_EQ(labels, 24u);  // 12 tensors and 12 GEMMs
  const std::string list = ",\"policies\":[\"*=nvfp4\"]";
  ASSERT_NE(with_map.find(list), std::string::npos);
  with_map.erase(with_map.find(list), list.size());
  EXPECT_EQ(with_map, plain);
}

TEST(RecipeMapCli, MapErrorsExit2WithOneLine) {
  for (const std::string map : {"lm_head=bf16", "*=nvfp5", "nope=bf16,*=nvfp4", "*@9-1=bf16", "''"}) {
    const CliRun r = run_cli("replay " + kTraceA.string() + " --no-gemms -q --recipe-map '" + map + "'");
    EXPECT_EQ(r.status, 2) << map << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << map << ": " << r.err;
    EXPECT_NE(r.err.find("--recipe-map"), std::string::npos) << r.err;
  }
  const CliRun both = run_cli("replay " + kTraceA.string() + " --recipes nvfp4 --recipe-map '*=nvfp4'");
  EXPECT_EQ(both.status, 2) << both.err;
}
