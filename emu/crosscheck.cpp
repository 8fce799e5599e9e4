// The crosscheck engine (include/fp4sim/emu/crosscheck.hpp): the CUDA kernels of emu/ against the golden
// model on the same inputs.
//
// Quantize/dequantize: per preset, tensors of mixed shapes (block multiples and not, odd column counts)
// with random and adversarial values (E2M1 midpoints after scaling, zero blocks, NaN/Inf, subnormals,
// values near FLT_MAX, -0), every operand spec the preset uses (activation, 2-D weight, stochastic dY,
// RHT wgrad operands), current and held tensor amax, binary32 and (every third case) BF16 inputs. Compared: every code byte, every scale byte,
// tensor_amax, G and Gd bits; dequantized values bit for bit (any NaN equals any NaN).
// GEMM: random shapes (most small, a few up to --max-gemm), operands quantized by the golden model, then
// each kernel of the table (fp4sim/emu/gemm_kernels.hpp) against its golden datapath: bf16-tc vs sm90-bf16
// chained over the whole K from +0 in ascending k (the kernel's order), probe-matched vs probe-matched (inner
// sm90-bf16), exact vs exact.
// Writes one line per case with mismatch counts and the largest difference in ulps.
#include "fp4sim/emu/crosscheck.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/gemm.hpp"
#include "fp4sim/core/primitives.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/recipe.hpp"
#include "fp4sim/emu/gemm_kernels.hpp"
#include "fp4sim/emu/gpu.hpp"

namespace fp4sim::crosscheck {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Distance in ulps between two binary32 values: NaN vs NaN is 0, NaN vs a number the maximum.
std::uint64_t ulps(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return 0;
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<std::uint32_t>::max();
  const std::int64_t d = ulp_distance(a, b);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}
bool same(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

// Tensor values: one of several distributions, with adversarial entries mixed in.
std::vector<float> make_tensor(std::mt19937_64& rng, std::size_t rows, std::size_t cols, int kind) {
  std::vector<float> x(rows * cols);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int spread = 1 + static_cast<int>(rng() % 40);
  const int center = static_cast<int>(rng() % 60) - 30;
  const float e2m1_mid[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 0.5f, 1.0f, 6.0f};
  for (std::size_t i = 0; i < x.size(); ++i) {
    float v;
    switch (kind) {
      case 0: v = normal(rng); break;
      case 1: v = std::ldexp(1.0f + u(rng), center + static_cast<int>(rng() % (2 * spread + 1)) - spread); break;
      case 2: v = e2m1_mid[rng() % 10] * std::ldexp(1.0f, static_cast<int>(rng() % 5)); break;  // ties in blocks
      default: v = normal(rng) * std::ldexp(1.0f, center); break;
    }
    if (rng() & 1) v = -v;
    x[i] = v;
  }
  if (kind != 0) {
    // Adversarial sprinkles.
    const std::size_t specials = std::max<std::size_t>(1, x.size() / 5000);
    for (std::size_t s = 0; s < specials; ++s) {
      const std::size_t i = rng() % x.size();
      switch (rng() % 10) {
        case 0: x[i] = std::numeric_limits<float>::quiet_NaN(); break;
        case 1: x[i] = (rng() & 1) ? INFINITY : -INFINITY; break;
        case 2: x[i] = std::numeric_limits<float>::denorm_min() * static_cast<float>(1 + rng() % 1000); break;
        case 3: x[i] = std::numeric_limits<float>::max() * ((rng() & 1) ? 1.0f : -0.75f); break;
        case 4: x[i] = -0.0f; break;
        case 5: x[i] = 0.0f; break;
        default: x[i] = std::ldexp(1.0f, static_cast<int>(rng() % 250) - 125); break;
      }
    }
    // Zero rows / zero blocks.
    if (rows > 1 && (rng() % 2)) {
      const std::size_t r = rng() % rows;
      std::fill(x.begin() + r * cols, x.begin() + (r + 1) * cols, 0.0f);
    }
  }
  return x;
}

struct Tally {
  std::uint64_t cases = 0, elements = 0, mismatches = 0, max_ulps = 0;
  double golden_s = 0.0, gpu_s = 0.0;
};

// Row-scaled amax (AmaxScope::row) takes 1-D blocks only: its 2-D weight specs are left out. The quantizer is
// checked row-scaled under every other spec (each operand's rounding and RHT), as `quantize --role` takes it.
std::vector<OperandSpec> specs_of(const Recipe& r) {
  const bool row_scaled = r.amax_scope == AmaxScope::row;
  std::vector<OperandSpec> specs;
  for (Gemm g : {Gemm::fprop, Gemm::dgrad, Gemm::wgrad}) {
    const GemmOperands ops = operands_for(r, g);
    for (OperandSpec s : {ops.a, ops.b}) {
      s.takes_row_amax = true;
      if (row_scaled && s.two_d) continue;
      const bool dup = std::any_of(specs.begin(), specs.end(), [&](const OperandSpec& o) {
        return o.two_d == s.two_d && o.rounding == s.rounding && o.rht == s.rht && o.target == s.target;
      });
      if (!dup) specs.push_back(s);
    }
  }
  return specs;
}

std::string spec_name(const OperandSpec& s) {
  std::string n = std::string(name_of(s.role)) + (s.two_d ? "/2d" : "/1d") + "/" + std::string(name_of(s.rounding));
  if (s.rht) n += "/rht";
  return n;
}

// Progress of one phase (quantize elements, then GEMMs): `before` units done by the earlier recipes.
struct PhaseProgress {
  std::uint64_t before = 0, total = 0;
};

void check_quantize(std::FILE* log, const Recipe& recipe, const Options& o, std::mt19937_64& rng, Tally& tq, Tally& td,
                    const PhaseProgress& phase) {
  const auto specs = specs_of(recipe);
  double done = 0.0;
  int case_id = 0;
  while (done < o.elements) {
    if (o.progress) {
      const auto here = std::min<std::uint64_t>(static_cast<std::uint64_t>(done), phase.total - phase.before);
      o.progress(phase.before + here, phase.total, "quantize " + recipe.name);
    }
    // Shapes: mostly large block-multiple tensors (to reach the element budget), some ragged ones.
    std::size_t rows, cols;
    const int shape = case_id % 5;
    if (shape == 0) { rows = 1 + rng() % 67; cols = 1 + rng() % 301; }
    else if (shape == 1) { rows = 1 + rng() % 300; cols = 2 * (1 + rng() % 150) + 1; }
    else { rows = 512 * (1 + rng() % 8); cols = 1024 * (1 + rng() % 8); }
    const int kind = case_id % 4;
    const OperandSpec spec = specs[case_id % specs.size()];
    std::vector<float> x = make_tensor(rng, rows, cols, kind);
    // Every third case reaches the kernels as BF16 bit patterns (the path fp4sim.torch takes for a BF16
    // tensor), the golden model quantizing their binary32 widening.
    const bool bf16_in = case_id % 3 == 1;
    std::vector<std::uint16_t> x_bf16;
    if (bf16_in) {
      x_bf16.resize(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) {
        const std::uint32_t b = fp32_to_bf16_rne(std::bit_cast<std::uint32_t>(x[i]));
        x[i] = std::bit_cast<float>(b);
        x_bf16[i] = static_cast<std::uint16_t>(b >> 16);
      }
    }
    QuantizeRequest req;
    req.spec = spec;
    req.random.seed = rng();
    req.random.stream = rng() % 3;
    // A held amax now and then (row-scaled amax takes none).
    if (recipe.amax_scope != AmaxScope::row && (recipe.tensor_scale == TensorScalePolicy::periodic || (rng() % 3 == 0))) {
      if (rng() % 2) req.amax_ref = std::ldexp(1.0f + static_cast<float>(rng() % 100) / 100.0f, static_cast<int>(rng() % 40) - 10);
    }
    auto t0 = Clock::now();
    QuantizedTensor golden = quantize(recipe, req, x, rows, cols);
    tq.golden_s += seconds_since(t0);
    QuantizedTensor gpu_q;
    t0 = Clock::now();
    const gpu::Status st = bf16_in ? gpu::quantize(recipe, req, std::span<const std::uint16_t>(x_bf16), rows, cols, gpu_q)
                                   : gpu::quantize(recipe, req, std::span<const float>(x), rows, cols, gpu_q);
    tq.gpu_s += seconds_since(t0);
    std::uint64_t bad = 0;
    if (st != gpu::Status::success) {
      std::fprintf(log, "quantize %-12s case %4d %-28s %5zux%-5zu GPU status %s\n", recipe.name.c_str(), case_id,
                  spec_name(spec).c_str(), rows, cols, std::string(gpu::status_name(st)).c_str());
      bad = golden.codes.size() + golden.scales.size();
    } else {
      for (std::size_t i = 0; i < golden.codes.size(); ++i) bad += golden.codes[i] != gpu_q.codes[i];
      for (std::size_t i = 0; i < golden.scales.size(); ++i) bad += golden.scales[i] != gpu_q.scales[i];
      bad += !same(golden.tensor_amax, gpu_q.tensor_amax) + !same(golden.global_encode_scale, gpu_q.global_encode_scale) +
             !same(golden.global_decode_scale, gpu_q.global_decode_scale);
      if (gpu_q.row_amax.size() != golden.row_amax.size()) {
        bad += golden.row_amax.size() + 1;
      } else {
        for (std::size_t i = 0; i < golden.row_amax.size(); ++i) bad += !same(golden.row_amax[i], gpu_q.row_amax[i]);
      }
    }
    tq.cases++;
    tq.elements += rows * cols;
    tq.mismatches += bad;
    if (bad || o.verbose)
      std::fprintf(log, "quantize   %-12s case %4d %-28s %5zux%-5zu kind %d%s: %llu mismatching bytes\n",
                  recipe.name.c_str(), case_id, spec_name(spec).c_str(), rows, cols, kind, bf16_in ? " (bf16 in)" : "",
                  static_cast<unsigned long long>(bad));
    if (bad && st == gpu::Status::success) {
      int shown = 0;
      for (std::size_t i = 0; i < golden.scales.size() && shown < 3; ++i)
        if (golden.scales[i] != gpu_q.scales[i]) {
          std::fprintf(log, "  scale[%zu]: golden %02x gpu %02x\n", i, golden.scales[i], gpu_q.scales[i]);
          ++shown;
        }
      for (std::size_t i = 0; i < golden.codes.size() && shown < 6; ++i)
        if (golden.codes[i] != gpu_q.codes[i]) {
          const std::size_t r = i / golden.code_cols(), c = (i % golden.code_cols()) * 2;
          std::fprintf(log, "  codes[%zu,%zu]: golden %02x gpu %02x x=%a,%a\n", r, c, golden.codes[i], gpu_q.codes[i],
                      x[r * cols + c], c + 1 < cols ? x[r * cols + c + 1] : 0.0f);
          ++shown;
        }
      std::fprintf(log, "  amax golden %a gpu %a, G %a/%a, Gd %a/%a\n", golden.tensor_amax, gpu_q.tensor_amax,
                  golden.global_encode_scale, gpu_q.global_encode_scale, golden.global_decode_scale,
                  gpu_q.global_decode_scale);
    }
    // Dequantize the golden tensor on both sides.
    if (std::find(o.paths.begin(), o.paths.end(), "dequantize") != o.paths.end()) {
      t0 = Clock::now();
      const std::vector<float> dg = dequantize(golden);
      td.golden_s += seconds_since(t0);
      std::vector<float> dd(rows * cols);
      t0 = Clock::now();
      const gpu::Status sd = gpu::dequantize(golden, dd);
      td.gpu_s += seconds_since(t0);
      std::uint64_t dbad = 0, dmax = 0;
      if (sd != gpu::Status::success) {
        dbad = dg.size();
      } else {
        for (std::size_t i = 0; i < dg.size(); ++i) {
          if (!same(dg[i], dd[i])) {
            ++dbad;
            dmax = std::max(dmax, ulps(dg[i], dd[i]));
          }
        }
      }
      td.cases++;
      td.elements += rows * cols;
      td.mismatches += dbad;
      td.max_ulps = std::max(td.max_ulps, dmax);
      if (dbad || o.verbose)
        std::fprintf(log, "dequantize %-12s case %4d %5zux%-5zu: %llu mismatching values, max %llu ulps\n",
                    recipe.name.c_str(), case_id, rows, cols, static_cast<unsigned long long>(dbad),
                    static_cast<unsigned long long>(dmax));
    }
    done += static_cast<double>(rows * cols);
    ++case_id;
  }
}

// A GEMM kernel and the tally of its cases against its golden datapath.
struct PathCheck {
  const gpu::GemmKernel* kernel;
  Tally tally;
};

struct Shape {
  std::size_t m, n, k;
};

void check_gemms(std::FILE* log, const Recipe& recipe, int count, int large, const Options& o, std::mt19937_64& rng,
                 std::vector<PathCheck>& checks, const PhaseProgress& phase, const std::vector<Shape>& fixed = {}) {
  // A row-scaled recipe: A (activations, 1-D) row-scaled, with one alpha per row; B (the weight) keeps its
  // tensor amax (OperandSpec::takes_row_amax), as TE's row-scaled activations leave the weights.
  const GemmOperands ops = operands_for(recipe, Gemm::fprop);
  if (!fixed.empty()) {
    count = static_cast<int>(fixed.size());
    large = count;
  }
  for (int g = 0; g < count; ++g) {
    if (o.progress) o.progress(phase.before + static_cast<std::uint64_t>(g), phase.total, "gemm " + recipe.name);
    std::size_t m, n, k;
    if (!fixed.empty()) {
      m = fixed[static_cast<std::size_t>(g)].m;
      n = fixed[static_cast<std::size_t>(g)].n;
      k = fixed[static_cast<std::size_t>(g)].k;
    } else if (g < large) {
      m = static_cast<std::size_t>(o.max_gemm) >> (rng() % 2);
      n = static_cast<std::size_t>(o.max_gemm) >> (rng() % 2);
      k = static_cast<std::size_t>(o.max_gemm) * (1 + rng() % 4);
    } else {
      m = 1 + rng() % 64;
      n = 1 + rng() % 64;
      k = 64 * (1 + rng() % 6);
      if (rng() % 4 == 0) k = 16 * (1 + rng() % 24);
      if (rng() % 8 == 0) k = 1 + rng() % 200;  // ragged K: the last k16 step is partly padding
    }
    const int kind = static_cast<int>(rng() % 4);
    const std::vector<float> xa = make_tensor(rng, m, k, kind == 2 ? 1 : kind);
    const std::vector<float> xb = make_tensor(rng, n, k, kind == 2 ? 1 : kind);
    QuantizeRequest ra, rb;
    ra.spec = ops.a;
    rb.spec = ops.b;
    ra.random.seed = rb.random.seed = rng();
    ra.random.stream = 1;
    rb.random.stream = 2;
    const QuantizedTensor qa = quantize(recipe, ra, xa, m, k);
    const QuantizedTensor qb = quantize(recipe, rb, xb, n, k);
    const bool snap = rng() % 4 != 0;  // probe-matched: the recipe's snap mostly, --no-snap too
    for (PathCheck& pc : checks) {
      const gpu::GemmKernel& kernel = *pc.kernel;
      if (!kernel.takes_k(k)) continue;
      GemmOptions go;
      go.datapath = kernel.golden;
      go.snap = snap;
      const AlphaRule rule = alpha_rule_for(*kernel.golden, recipe);
      go.alpha = gemm_alpha(rule, qa.tensor_amax, qa.target, qb.tensor_amax, qb.target, 6.0f);
      if (!qa.tensor_scaled || !qb.tensor_scaled) go.alpha = 1.0f;
      if (!qa.row_amax.empty()) go.row_alpha = gemm_row_alpha(rule, qa, qb, 6.0f);
      std::vector<float> cg;
      auto t0 = Clock::now();
      const auto case_start = t0;
      try {
        cg = gemm(qa, qb, go);
      } catch (const DataError& e) {
        if (o.verbose)
          std::fprintf(log, "gemm %s %s: golden refuses (%s), skipped\n", recipe.name.c_str(),
                       std::string(kernel.name).c_str(), e.what());
        continue;
      }
      pc.tally.golden_s += seconds_since(t0);
      gpu::GemmOptions gopt;
      gopt.path = kernel.path;
      gopt.alpha = go.alpha;
      gopt.row_alpha = go.row_alpha;
      gopt.snap = snap;
      std::vector<float> cd(m * n);
      t0 = Clock::now();
      const gpu::Status st = gpu::gemm(qa, qb, gopt, cd);
      pc.tally.gpu_s += seconds_since(t0);
      std::uint64_t bad = 0, worst = 0;
      std::size_t first = 0;
      if (st != gpu::Status::success) {
        bad = cg.size();
      } else {
        for (std::size_t i = 0; i < cg.size(); ++i)
          if (!same(cg[i], cd[i])) {
            if (bad == 0) first = i;
            ++bad;
            worst = std::max(worst, ulps(cg[i], cd[i]));
          }
      }
      pc.tally.cases++;
      pc.tally.elements += m * n;
      pc.tally.mismatches += bad;
      pc.tally.max_ulps = std::max(pc.tally.max_ulps, worst);
      if (bad || o.verbose || g < large) {
        std::fprintf(log, "gemm %-14s %-12s %4zux%4zux%-4zu%s: %llu mismatching outputs, max %llu ulps (%.1f s)%s",
                     std::string(kernel.name).c_str(), recipe.name.c_str(), m, n, k,
                     kernel.golden->snap && !snap ? " no-snap" : "", static_cast<unsigned long long>(bad),
                    static_cast<unsigned long long>(worst), seconds_since(case_start),
                    st != gpu::Status::success ? (" (GPU status " + std::string(gpu::status_name(st)) + ")").c_str() : "");
        if (bad && st == gpu::Status::success)
          std::fprintf(log, "  first [%zu,%zu] golden %08x gpu %08x", first / n, first % n, std::bit_cast<std::uint32_t>(cg[first]),
                      std::bit_cast<std::uint32_t>(cd[first]));
        std::fprintf(log, "\n");
      }
    }
  }
}

}  // namespace

std::uint64_t run(const Options& o, std::FILE* log) {
  const std::vector<Recipe> recipes = o.recipes.empty() ? default_recipes() : o.recipes;
  if (!gpu::device_available()) {
    throw DataError(
        "crosscheck: no GPU that can run this build's sm_90 kernels was found, so nothing can be checked "
        "(crosscheck needs a GPU; it never reports success without one)");
  }
  auto wants = [&](std::string_view p) { return std::find(o.paths.begin(), o.paths.end(), p) != o.paths.end(); };
  std::mt19937_64 rng(o.seed);
  std::uint64_t total_bad = 0;
  std::fprintf(log, "%-12s %-14s %8s %14s %12s %10s %10s %10s\n", "recipe", "path", "cases", "elements", "mismatches",
              "max_ulps", "golden_s", "gpu_s");
  std::vector<std::string> summary;
  auto line = [&](const std::string& recipe, const std::string& path, const Tally& t) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%-12s %-14s %8llu %14llu %12llu %10llu %10.2f %10.2f", recipe.c_str(), path.c_str(),
                  static_cast<unsigned long long>(t.cases), static_cast<unsigned long long>(t.elements),
                  static_cast<unsigned long long>(t.mismatches), static_cast<unsigned long long>(t.max_ulps),
                  t.golden_s, t.gpu_s);
    summary.emplace_back(buf);
    std::fprintf(log, "%s\n", buf);
    std::fflush(log);
    total_bad += t.mismatches;
  };
  const auto elements = static_cast<std::uint64_t>(std::ceil(o.elements));
  for (std::size_t i = 0; i < recipes.size(); ++i) {
    const Recipe& r = recipes[i];
    if (wants("quantize") || wants("dequantize")) {
      Tally tq, td;
      check_quantize(log, r, o, rng, tq, td, {i * elements, recipes.size() * elements});
      line(r.name, "quantize", tq);
      if (wants("dequantize")) line(r.name, "dequantize", td);
    }
  }
  const int per_recipe = std::max(1, o.gemms / static_cast<int>(recipes.size()));
  std::vector<PathCheck> checks;
  for (const gpu::GemmKernel& kernel : gpu::gemm_kernels()) {
    if (wants(kernel.name)) checks.push_back({&kernel, {}});
  }
  if (!checks.empty() && o.gemms > 0) {
    const std::uint64_t all_gemms = per_recipe * recipes.size() + o.shapes.size();
    for (std::size_t i = 0; i < recipes.size(); ++i) {
      const int large = static_cast<int>((o.large_gemms + recipes.size() - 1 - i) / recipes.size());
      check_gemms(log, recipes[i], per_recipe, large, o, rng, checks, {i * per_recipe, all_gemms});
    }
    std::vector<Shape> fixed;
    for (const std::string& text : o.shapes) {
      Shape sh{};
      char x1 = 0, x2 = 0;
      if (std::sscanf(text.c_str(), "%zu%c%zu%c%zu", &sh.m, &x1, &sh.n, &x2, &sh.k) != 5 || x1 != 'x' || x2 != 'x' ||
          sh.m == 0 || sh.n == 0 || sh.k == 0)
        throw UsageError("crosscheck: {shape} wants MxNxK, got '" + text + "'");
      fixed.push_back(sh);
    }
    if (!fixed.empty()) {
      check_gemms(log, recipes[0], 0, 0, o, rng, checks, {per_recipe * recipes.size(), all_gemms}, fixed);
    }
    if (o.progress) o.progress(all_gemms, all_gemms, "done");
    for (const PathCheck& pc : checks) line("all", std::string(pc.kernel->name), pc.tally);
  }
  std::fprintf(log, "\nsummary\n");
  for (const auto& s : summary) std::fprintf(log, "%s\n", s.c_str());
  return total_bad;
}

}  // namespace fp4sim::crosscheck
