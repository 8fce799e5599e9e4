#include "fp4sim/analysis/replay.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <numeric>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>
#include <variant>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/gemm.hpp"
#include "fp4sim/core/hadamard.hpp"
#include "fp4sim/core/random.hpp"
#include "fp4sim/core/tensor_scale.hpp"

namespace fp4sim::replay {

std::string_view hold_rule_name(HoldRule rule) { return rule == HoldRule::window ? "window" : "previous"; }

std::optional<HoldRule> parse_hold_rule(std::string_view name) {
  if (name == "window") return HoldRule::window;
  if (name == "previous") return HoldRule::previous;
  return std::nullopt;
}

std::uint64_t stream_id(std::int64_t step, std::string_view layer, std::string_view tensor, Gemm gemm) {
  const std::string key = std::to_string(step) + "/" + std::string(layer) + "/" + std::string(tensor) + "/" +
                          std::string(gemm_name(gemm));
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  for (const unsigned char c : key) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

namespace {

// C[i0..i0+4, j0..j0+4] of A·Bᵀ: 16 dot products sharing their loads. Statistics, not bits: the
// float64 sum order is free (omp simd); a float64 dot product of length K is accurate to ~K·2^-53
// relative, far below any FP4 error measured against it. Compiled for AVX-512, AVX2 and baseline
// x86-64, chosen at run time (docs/design.md: fast paths dispatch on the CPU they run on).
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void dot_4x4(const double* a, const double* b, std::size_t k, double* out) {
  const double *a0 = a, *a1 = a + k, *a2 = a + 2 * k, *a3 = a + 3 * k;
  const double *b0 = b, *b1 = b + k, *b2 = b + 2 * k, *b3 = b + 3 * k;
  double s00 = 0, s01 = 0, s02 = 0, s03 = 0, s10 = 0, s11 = 0, s12 = 0, s13 = 0;
  double s20 = 0, s21 = 0, s22 = 0, s23 = 0, s30 = 0, s31 = 0, s32 = 0, s33 = 0;
#pragma omp simd reduction(+ : s00, s01, s02, s03, s10, s11, s12, s13, s20, s21, s22, s23, s30, s31, s32, s33)
  for (std::size_t t = 0; t < k; ++t) {
    const double x0 = a0[t], x1 = a1[t], x2 = a2[t], x3 = a3[t];
    const double y0 = b0[t], y1 = b1[t], y2 = b2[t], y3 = b3[t];
    s00 += x0 * y0, s01 += x0 * y1, s02 += x0 * y2, s03 += x0 * y3;
    s10 += x1 * y0, s11 += x1 * y1, s12 += x1 * y2, s13 += x1 * y3;
    s20 += x2 * y0, s21 += x2 * y1, s22 += x2 * y2, s23 += x2 * y3;
    s30 += x3 * y0, s31 += x3 * y1, s32 += x3 * y2, s33 += x3 * y3;
  }
  const double s[16] = {s00, s01, s02, s03, s10, s11, s12, s13, s20, s21, s22, s23, s30, s31, s32, s33};
  for (int i = 0; i < 16; ++i) out[i] = s[i];
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
double dot_1(const double* a, const double* b, std::size_t k) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (std::size_t t = 0; t < k; ++t) s += a[t] * b[t];
  return s;
}

}  // namespace

std::vector<double> matmul_abt(std::span<const double> a, std::span<const double> b, std::size_t m, std::size_t n,
                               std::size_t k) {
  std::vector<double> c(m * n, 0.0);
  const std::size_t mb = (m + 3) / 4, nb = (n + 3) / 4;
  const bool parallel = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) > 4e6;
#pragma omp parallel for schedule(dynamic, 4) if (parallel)
  for (std::size_t ib = 0; ib < mb; ++ib) {
    const std::size_t i = ib * 4;
    for (std::size_t jb = 0; jb < nb; ++jb) {
      const std::size_t j = jb * 4;
      if (i + 4 <= m && j + 4 <= n) {
        double out[16];
        dot_4x4(a.data() + i * k, b.data() + j * k, k, out);
        for (int di = 0; di < 4; ++di)
          for (int dj = 0; dj < 4; ++dj) c[(i + di) * n + j + dj] = out[di * 4 + dj];
      } else {
        for (std::size_t ii = i; ii < std::min(m, i + 4); ++ii)
          for (std::size_t jj = j; jj < std::min(n, j + 4); ++jj) c[ii * n + jj] = dot_1(a.data() + ii * k, b.data() + jj * k, k);
      }
    }
  }
  return c;
}

namespace {

using trace::TensorRole;

constexpr std::array<Gemm, 3> kGemms{Gemm::fprop, Gemm::dgrad, Gemm::wgrad};
constexpr const char* kF64 = "f64";
constexpr const char* kRecipeDatapath = "recipe";

Role recipe_role(TensorRole r) {
  switch (r) {
    case TensorRole::weight: return Role::weight;
    case TensorRole::grad_output: return Role::grad_output;
    default: return Role::activation;
  }
}

std::string tensor_scale_text(const Recipe& r) {
  switch (r.tensor_scale) {
    case TensorScalePolicy::none: return "none";
    case TensorScalePolicy::current: return "current";
    case TensorScalePolicy::periodic: return "periodic:" + std::to_string(r.period);
  }
  return "?";
}

stats::Figure ratio(float current, float held) {
  if (held == 0.0f) {
    return stats::Figure::none(current == 0.0f ? "all-zero tensor (current and held amax are 0)" : "held amax is 0");
  }
  return stats::Figure::of(static_cast<double>(current) / static_cast<double>(held));
}

// NaN-ignoring max |x| (a NaN never compares greater), as the quantizer's tensor amax.
float abs_max(std::span<const float> x) {
  float m = 0.0f;
#pragma omp parallel for simd reduction(max : m) schedule(static) if (x.size() > (std::size_t{1} << 18))
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float a = std::fabs(x[i]);
    m = a > m ? a : m;
  }
  return m;
}

std::vector<float> transpose(std::span<const float> x, std::size_t rows, std::size_t cols) {
  std::vector<float> t(x.size());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) t[c * rows + r] = x[r * cols + c];
  return t;
}
std::vector<double> transpose(std::span<const double> x, std::size_t rows, std::size_t cols) {
  std::vector<double> t(x.size());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) t[c * rows + r] = x[r * cols + c];
  return t;
}

// Rows of one work chunk: a multiple of every block-row count in use, about 64 Ki elements.
std::size_t chunk_rows_for(std::size_t cols, std::size_t multiple) {
  const std::size_t target = (std::size_t{1} << 16) / std::max<std::size_t>(cols, 1);
  return std::max(multiple, target / multiple * multiple);
}

struct LoadedTensor {
  const trace::TensorInfo* info = nullptr;
  std::vector<float> f32;
  std::vector<double> f64;  // the stored values (float32 widened exactly, or the float64 data)
  // Per recipe, the reconstruction from the tensor entry (quantized as its first GEMM consumes it),
  // kept for the GEMM entries that consume it in the same orientation (fprop x and w, dgrad dy).
  std::vector<std::vector<float>> dequantized;
};

class Replayer {
 public:
  Replayer(const trace::Reader& reader, const Options& o, Result& result) : reader_(reader), o_(o), result_(result) {
    for (const auto& s : reader.info().steps) captured_.insert(s.step);
  }

  // The tensors i (x 0, w 1, dy 2) of `mine` of one (step, layer) and, with GEMM entries (then all three
  // are mine), its GEMMs; `item` is 3 x the pair's position in the one-process order.
  void run_step_layer(const trace::StepInfo& step, const trace::LayerInfo& layer, const std::array<bool, 3>& mine,
                      std::uint64_t item) {
    LoadedTensor loaded[3];
    const TensorRole roles[3] = {TensorRole::activation, TensorRole::weight, TensorRole::grad_output};
    const Gemm views[3] = {Gemm::fprop, Gemm::fprop, Gemm::dgrad};
    const std::size_t slab_limit = std::max<std::size_t>(o_.max_slab_bytes / sizeof(float), 1);
    for (int i = 0; i < 3; ++i) {
      if (!mine[i]) continue;
      item_ = item + static_cast<std::uint64_t>(i);
      if (o_.starting) o_.starting(item_);
      const trace::TensorInfo& t = *layer.find(roles[i]);
      loaded[i].info = &t;
      const bool fits = t.elements() <= slab_limit;
      if (o_.gemms || fits) {
        loaded[i].f32 = reader_.read_float(t);
        if (t.type == trace::ElementType::float64) {
          loaded[i].f64 = reader_.read_double(t);
        }
      }
      process_tensor(step.step, layer, t, recipe_role(roles[i]), views[i], loaded[i]);
      if (!o_.gemms) loaded[i] = LoadedTensor{&t, {}, {}, {}};
    }
    if (o_.gemms) process_gemms(step.step, layer, loaded[0], loaded[1], loaded[2]);
  }

 private:
  // amax of a stored tensor as float32, cached per (step, layer, role).
  float tensor_amax(std::int64_t step, const std::string& layer, TensorRole role) {
    const auto key = std::make_tuple(step, layer, static_cast<int>(role), false);
    if (auto it = amax_.find(key); it != amax_.end()) return it->second;
    const trace::StepInfo* s = reader_.info().find_step(step);
    const trace::LayerInfo* l = nullptr;
    for (const auto& candidate : s->layers) {
      if (candidate.name == layer) l = &candidate;
    }
    const float a = reader_.amax(*l->find(role), std::max<std::size_t>(o_.max_slab_bytes / sizeof(float), 1));
    amax_[key] = a;
    return a;
  }

  // amax of a GEMM operand after RHT (wgrad operands are the transposed tensors, transformed along
  // the token dimension), cached per (step, layer, role).
  float rht_operand_amax(std::int64_t step, const std::string& layer, TensorRole role) {
    const auto key = std::make_tuple(step, layer, static_cast<int>(role), true);
    if (auto it = amax_.find(key); it != amax_.end()) return it->second;
    const trace::LayerInfo* l = find_layer(step, layer);
    const trace::TensorInfo& t = *l->find(role);
    const std::vector<float> data = reader_.read_float(t);
    const std::vector<float> op = transpose(data, t.rows, t.cols);
    const std::vector<float> h = random_hadamard_transform(op, t.cols, t.rows);
    const float a = abs_max(h);
    amax_[key] = a;
    return a;
  }

  const trace::LayerInfo* find_layer(std::int64_t step, const std::string& layer) const {
    const trace::StepInfo* s = reader_.info().find_step(step);
    if (!s) return nullptr;
    for (const auto& l : s->layers) {
      if (l.name == layer) return &l;
    }
    return nullptr;
  }

  // The hold of a tensor-scale policy (period D) at `step`; amax_at(s) gives the operand amax at a
  // captured step s.
  template <class AmaxAt>
  Hold hold_for(TensorScalePolicy policy, int period, std::int64_t step, const std::string& layer, float current,
                AmaxAt&& amax_at) {
    Hold h;
    if (policy == TensorScalePolicy::none) {
      h.rho = stats::Figure::none("recipe has no tensor scale");
      return h;
    }
    if (policy == TensorScalePolicy::current) {
      h.held_amax = current;
      h.held_from_step = step;
      h.held_exact = true;
      h.rho = ratio(current, current);
      return h;
    }
    const std::int64_t refresh = refresh_step_for(static_cast<int>(step), period);
    std::optional<std::int64_t> from;
    bool exact = false;
    if (o_.hold == HoldRule::window) {
      if (refresh == step) {
        from = step;
        exact = true;
      } else if (captured_.count(refresh) && find_layer(refresh, layer)) {
        from = refresh;
        exact = true;
      } else {
        from = step;
        exact = false;
      }
    } else {
      std::optional<std::int64_t> prev;
      for (std::int64_t s : captured_) {
        if (s < step && find_layer(s, layer)) prev = s;
      }
      from = prev.value_or(step);
      exact = *from == refresh;
    }
    h.held_amax = *from == step ? current : amax_at(*from);
    h.held_from_step = from;
    h.held_exact = exact;
    h.rho = ratio(current, *h.held_amax);
    return h;
  }

  std::optional<float> amax_ref(const Recipe& r, const Hold& h, float current) const {
    if (r.tensor_scale == TensorScalePolicy::none) return std::nullopt;
    if (r.tensor_scale == TensorScalePolicy::current) return current;
    return h.held_amax;
  }

  // Block rows every recipe's layout and the headroom analysis divide (slabs start on a block row).
  std::size_t slab_row_multiple(Role role) const {
    std::size_t m = 16;
    for (const Recipe& r : o_.recipes) {
      const OperandSpec spec = operand_for_role(r, role);
      if (spec.two_d) m = std::lcm(m, static_cast<std::size_t>(r.block));
    }
    return m;
  }

  void process_tensor(std::int64_t step, const trace::LayerInfo& layer, const trace::TensorInfo& t, Role role,
                      Gemm view, LoadedTensor& loaded) {
    const bool whole = !loaded.f32.empty() || t.elements() == 0;
    const std::size_t slab_limit = std::max<std::size_t>(o_.max_slab_bytes / sizeof(float), 1);
    const float current = whole ? abs_max(loaded.f32) : reader_.amax(t, slab_limit);
    amax_[std::make_tuple(step, layer.name, static_cast<int>(t.role), false)] = current;
    auto amax_at = [&](std::int64_t s) { return tensor_amax(s, layer.name, t.role); };

    const std::uint64_t stream = stream_id(step, layer.name, t.name, view);
    const std::size_t first = result_.tensors.size();
    std::vector<QuantizeRequest> requests;
    for (const Recipe& r : o_.recipes) {
      TensorEntry e;
      e.step = step;
      e.layer = layer.name;
      e.tensor = t.name;
      e.role = role;
      e.view = view;
      e.recipe = r.name;
      e.rows = t.rows;
      e.cols = t.cols;
      const OperandSpec spec = operand_for_role(r, role);
      e.block_rows = spec.two_d ? r.block : 1;
      e.block_cols = r.block;
      e.element_format = format_name(r.element);
      e.scale_format = format_name(r.scale);
      e.rounding = std::string(rounding_name(spec.rounding));
      e.tensor_scale = tensor_scale_text(r);
      e.orig_dtype = t.orig_dtype;
      e.stream = stream;
      e.amax = current;
      e.hold = hold_for(r.tensor_scale, r.period, step, layer.name, current, amax_at);
      e.item = item_;
      QuantizeRequest q;
      q.spec = spec;
      q.amax_ref = amax_ref(r, e.hold, current);
      q.random.seed = o_.seed;
      q.random.stream = stream;
      requests.push_back(q);
      result_.tensors.push_back(std::move(e));
    }

    HeadroomEntry h;
    h.step = step;
    h.layer = layer.name;
    h.tensor = t.name;
    h.role = role;
    h.period = o_.headroom_period;
    h.target = o_.headroom_target;
    h.block_rows = role == Role::weight ? 16 : 1;
    h.block_cols = 16;
    h.amax = current;
    h.hold = hold_for(TensorScalePolicy::periodic, o_.headroom_period, step, layer.name, current, amax_at);
    h.item = item_;
    for (const auto& [name, f] : {std::pair{"ue4m3", formats::ue4m3}, std::pair{"ue5m3", formats::ue5m3},
                                  std::pair{"ue5m3fn", formats::ue5m3fn}}) {
      stats::HeadroomCounts c;
      c.scale = f;
      c.scale_name = name;
      c.max_scale = decode_to_double(f, f.max_finite_code());
      h.formats.push_back(c);
    }
    const float element_max = decode_to_float(formats::e2m1, formats::e2m1.max_finite_code());
    const float headroom_amax = h.hold.held_amax.value_or(current);

    // Work is split into chunks of whole block rows, fixed by the tensor's shape alone; each (recipe,
    // chunk) is one task, quantized with the whole tensor's amax reference and the whole tensor's
    // random bits, so a chunk's codes equal those of one whole-tensor quantization. Partial statistics
    // merge in chunk order: results do not depend on threads or slab size.
    const std::size_t multiple = slab_row_multiple(role);
    const std::size_t chunk_rows = chunk_rows_for(t.cols, multiple);
    const std::size_t recipes = o_.recipes.size();

    const bool keep = whole && o_.gemms && !o_.gemm_evaluator && o_.datapath == kF64;
    if (keep) loaded.dequantized.assign(recipes, std::vector<float>(t.elements()));

    auto process_slab = [&](std::span<const float> x, std::span<const double> ref, std::size_t row0,
                            std::size_t nrows) {
      const std::size_t chunks = std::max<std::size_t>(1, (nrows + chunk_rows - 1) / chunk_rows);
      std::vector<stats::TensorStats> partial(recipes * chunks);
      std::vector<GlobalScale> globals(recipes);
      std::vector<std::vector<stats::HeadroomCounts>> head(chunks, h.formats);
      for (auto& v : head) {
        for (auto& c : v) c.blocks = c.saturated = c.underflow = 0;
      }
      const std::size_t tasks = (recipes + 1) * chunks;
#pragma omp parallel for schedule(dynamic, 1) if (tasks > 1)
      for (std::size_t task = 0; task < tasks; ++task) {
        const std::size_t i = task / chunks, c = task % chunks;
        const std::size_t r0 = c * chunk_rows, n = std::min(nrows, r0 + chunk_rows) - std::min(nrows, r0);
        const std::span<const float> xc = x.subspan(r0 * t.cols, n * t.cols);
        if (i == recipes) {
          stats::accumulate_headroom(xc, n, t.cols, h.block_rows, h.block_cols, headroom_amax, h.target, element_max,
                                     head[c]);
          continue;
        }
        const Recipe& r = o_.recipes[i];
        QuantizeRequest request = requests[i];
        std::vector<std::uint32_t> bits;
        if (is_stochastic(request.spec.rounding)) {
          bits.resize(xc.size());
          fill_random_bits(request.random.seed, request.random.stream, (row0 + r0) * t.cols, r.sr_bits, bits);
          request.random.explicit_bits = bits;
        }
        const QuantizedTensor q = quantize(r, request, xc, n, t.cols);
        const std::vector<float> deq = dequantize(q);
        if (keep) std::copy(deq.begin(), deq.end(), loaded.dequantized[i].begin() + static_cast<std::ptrdiff_t>(r0 * t.cols));
        stats::accumulate(q, xc, ref.empty() ? ref : ref.subspan(r0 * t.cols, n * t.cols), deq,
                          partial[i * chunks + c]);
        if (c == 0) globals[i] = GlobalScale{q.global_encode_scale, q.global_decode_scale};
      }
      for (std::size_t i = 0; i < recipes; ++i) {
        TensorEntry& e = result_.tensors[first + i];
        for (std::size_t c = 0; c < chunks; ++c) e.stats.merge(partial[i * chunks + c]);
        e.global_encode_scale = globals[i].encode;
        e.global_decode_scale = globals[i].decode;
      }
      for (std::size_t c = 0; c < chunks; ++c) {
        for (std::size_t f = 0; f < h.formats.size(); ++f) h.formats[f].merge(head[c][f]);
      }
    };

    if (whole) {
      process_slab(loaded.f32, loaded.f64, 0, t.rows);
    } else {
      std::size_t slab_rows = std::max<std::size_t>(1, slab_limit / std::max<std::size_t>(t.cols, 1));
      slab_rows = std::max(chunk_rows, slab_rows / chunk_rows * chunk_rows);
      std::vector<float> x;
      std::vector<double> ref;
      for (std::size_t r0 = 0; r0 < t.rows; r0 += slab_rows) {
        const std::size_t n = std::min(slab_rows, t.rows - r0);
        x.resize(n * t.cols);
        reader_.read_rows(t, r0, n, std::span<float>(x));
        if (t.type == trace::ElementType::float64) {
          ref.resize(n * t.cols);
          reader_.read_rows(t, r0, n, std::span<double>(ref));
        }
        process_slab(x, ref, r0, n);
      }
    }
    result_.tensor_bytes += t.elements() * sizeof(float);
    result_.headroom.push_back(std::move(h));
  }

  // One GEMM of the layer with its operands in K-last orientation and its float64 reference.
  struct GemmProblem {
    Gemm gemm = Gemm::fprop;
    std::vector<float> a, b;
    std::size_t m = 0, n = 0, k = 0;
    const LoadedTensor *ta = nullptr, *tb = nullptr;
    std::vector<double> c;
    double ref_sq = 0.0;
    std::uint64_t stream_a = 0, stream_b = 0;
  };

  // One (GEMM, recipe) entry to compute: everything that touches the reader or the amax cache (the
  // holds) is resolved before the parallel phase.
  struct GemmTask {
    const GemmProblem* problem = nullptr;
    const Recipe* recipe = nullptr;
    std::size_t recipe_index = 0;
    GemmOperands ops;
    std::optional<float> amax_ref_a, amax_ref_b;
    bool reuse_a = false, reuse_b = false;
    GemmEntry entry;
  };

  void process_gemms(std::int64_t step, const trace::LayerInfo& layer, const LoadedTensor& x, const LoadedTensor& w,
                     const LoadedTensor& dy) {
    const std::size_t tokens = x.info->rows, in = x.info->cols, out = w.info->rows;
    auto as_double = [](const LoadedTensor& t) {
      if (!t.f64.empty()) return t.f64;
      return std::vector<double>(t.f32.begin(), t.f32.end());
    };
    const std::vector<double> x64 = as_double(x), w64 = as_double(w), dy64 = as_double(dy);
    std::vector<GemmProblem> problems(kGemms.size());
    for (std::size_t gi = 0; gi < kGemms.size(); ++gi) {
      // Operands with K last: fprop A = x, B = w; dgrad A = dy, B = wᵀ; wgrad A = dyᵀ, B = xᵀ.
      GemmProblem& p = problems[gi];
      p.gemm = kGemms[gi];
      std::vector<double> a64, b64;
      switch (p.gemm) {
        case Gemm::fprop:
          p.a = x.f32, p.b = w.f32, a64 = x64, b64 = w64;
          p.m = tokens, p.n = out, p.k = in, p.ta = &x, p.tb = &w;
          break;
        case Gemm::dgrad:
          p.a = dy.f32, p.b = transpose(std::span<const float>(w.f32), out, in);
          a64 = dy64, b64 = transpose(std::span<const double>(w64), out, in);
          p.m = tokens, p.n = in, p.k = out, p.ta = &dy, p.tb = &w;
          break;
        case Gemm::wgrad:
          p.a = transpose(std::span<const float>(dy.f32), tokens, out);
          p.b = transpose(std::span<const float>(x.f32), tokens, in);
          a64 = transpose(std::span<const double>(dy64), tokens, out);
          b64 = transpose(std::span<const double>(x64), tokens, in);
          p.m = out, p.n = in, p.k = tokens, p.ta = &dy, p.tb = &x;
          break;
      }
      p.c = matmul_abt(a64, b64, p.m, p.n, p.k);
      for (double v : p.c) p.ref_sq += v * v;
      p.stream_a = stream_id(step, layer.name, p.ta->info->name, p.gemm);
      p.stream_b = stream_id(step, layer.name, p.tb->info->name, p.gemm);
    }

    // Serial phase: holds and reference amaxes (reads the trace for held steps and RHT amaxes).
    std::vector<GemmTask> tasks;
    for (const GemmProblem& p : problems) {
      for (std::size_t ri = 0; ri < o_.recipes.size(); ++ri) {
        const Recipe& r = o_.recipes[ri];
        GemmTask t;
        t.problem = &p;
        t.recipe = &r;
        t.recipe_index = ri;
        t.ops = operands_for(r, p.gemm);
        GemmEntry& e = t.entry;
        e.item = item_;
        e.step = step;
        e.layer = layer.name;
        e.gemm = p.gemm;
        e.recipe = r.name;
        e.datapath = datapath_for(r);
        e.m = p.m, e.n = p.n, e.k = p.k;
        e.stream_a = p.stream_a;
        e.stream_b = p.stream_b;
        auto hold_of = [&](const OperandSpec& spec, const LoadedTensor& lt, Hold& hold) {
          float current;
          std::function<float(std::int64_t)> amax_at;
          if (spec.rht) {
            current = rht_operand_amax(step, layer.name, lt.info->role);
            amax_at = [&](std::int64_t s) { return rht_operand_amax(s, layer.name, lt.info->role); };
          } else {
            current = tensor_amax(step, layer.name, lt.info->role);
            amax_at = [&](std::int64_t s) { return tensor_amax(s, layer.name, lt.info->role); };
          }
          hold = hold_for(r.tensor_scale, r.period, step, layer.name, current, amax_at);
          return amax_ref(r, hold, current);
        };
        t.amax_ref_a = hold_of(t.ops.a, *p.ta, e.hold_a);
        t.amax_ref_b = hold_of(t.ops.b, *p.tb, e.hold_b);
        // An operand quantized exactly as its tensor entry was (fprop x and w, dgrad dy: same spec,
        // orientation, reference amax and random stream) reuses that entry's reconstruction.
        const bool f64 = e.datapath == kF64 && !o_.gemm_evaluator;
        t.reuse_a = f64 && p.gemm != Gemm::wgrad && p.ta->dequantized.size() == o_.recipes.size();
        t.reuse_b = f64 && p.gemm == Gemm::fprop && p.tb->dequantized.size() == o_.recipes.size();
        tasks.push_back(std::move(t));
      }
    }

    // Parallel phase: one task per (GEMM, recipe); quantize() and gemm() run single-threaded inside.
    std::vector<std::exception_ptr> failures(tasks.size());
#pragma omp parallel for schedule(dynamic, 1) if (tasks.size() > 1)
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      try {
        run_gemm_task(tasks[i]);
      } catch (...) {
        failures[i] = std::current_exception();  // rethrown below, on this thread, with its type
      }
    }
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      if (failures[i]) std::rethrow_exception(failures[i]);
      result_.gemms.push_back(std::move(tasks[i].entry));
    }
  }

  void run_gemm_task(GemmTask& t) {
    const GemmProblem& p = *t.problem;
    const Recipe& r = *t.recipe;
    GemmEntry& e = t.entry;
    const bool f64 = e.datapath == kF64 && !o_.gemm_evaluator;
    auto operand = [&](const OperandSpec& spec, const std::vector<float>& data, std::size_t rows,
                       std::optional<float> ref, std::uint64_t stream, bool reuse, const LoadedTensor& lt,
                       std::optional<QuantizedTensor>& q, std::vector<float>& deq) {
      if (reuse) {
        deq = lt.dequantized[t.recipe_index];
        return;
      }
      QuantizeRequest request;
      request.spec = spec;
      request.amax_ref = ref;
      request.random.seed = o_.seed;
      request.random.stream = stream;
      q = quantize(r, request, data, rows, p.k);
      if (f64) deq = dequantize(*q);
    };
    std::optional<QuantizedTensor> qa, qb;
    std::vector<float> da, db;
    operand(t.ops.a, p.a, p.m, t.amax_ref_a, p.stream_a, t.reuse_a, *p.ta, qa, da);
    operand(t.ops.b, p.b, p.n, t.amax_ref_b, p.stream_b, t.reuse_b, *p.tb, qb, db);
    e.ref_fro_norm = std::sqrt(p.ref_sq);
    std::vector<double> chat;
    try {
      if (o_.gemm_evaluator) {
        chat = o_.gemm_evaluator(r, p.gemm, *qa, *qb, e.datapath);
      } else if (f64) {
        chat = matmul_abt(std::vector<double>(da.begin(), da.end()), std::vector<double>(db.begin(), db.end()), p.m,
                          p.n, p.k);
      } else {
        GemmRequest request;
        request.datapath = e.datapath;
        const std::vector<float> c = fp4sim::gemm(r, *qa, *qb, request);
        chat.assign(c.begin(), c.end());
      }
    } catch (const DataError& error) {
      // The datapath cannot take these operands (e.g. probe-matched with K % 64 != 0): the entry says
      // why; the replay goes on.
      e.rel_fro_err = stats::Figure::none(std::string("datapath ") + e.datapath + ": " + error.what());
      e.max_abs_err = std::nan("");
      return;
    }
    double err_sq = 0.0, max_abs = 0.0;
    bool nonfinite = false;
    for (std::size_t i = 0; i < p.c.size(); ++i) {
      const double d = chat[i] - p.c[i];
      if (!std::isfinite(d)) nonfinite = true;
      err_sq += d * d;
      max_abs = std::max(max_abs, std::fabs(d));
    }
    e.max_abs_err = max_abs;
    if (nonfinite) {
      e.rel_fro_err = stats::Figure::none("non-finite values in the product (NaN/Inf inputs or overflow)");
    } else if (p.ref_sq == 0.0) {
      e.rel_fro_err = stats::Figure::none("reference product is all zero");
    } else {
      e.rel_fro_err = stats::Figure::of(std::sqrt(err_sq / p.ref_sq));
    }
  }

  std::string datapath_for(const Recipe& r) const {
    return o_.datapath == kRecipeDatapath ? r.default_datapath : o_.datapath;
  }

  const trace::Reader& reader_;
  const Options& o_;
  Result& result_;
  std::set<std::int64_t> captured_;
  std::map<std::tuple<std::int64_t, std::string, int, bool>, float> amax_;
  std::uint64_t item_ = 0;  // the work item being done
};

}  // namespace

Result run(const std::filesystem::path& trace_path, const Options& options_in) {
  const auto t0 = std::chrono::steady_clock::now();
  Options o = options_in;
  if (o.recipes.empty()) {
    for (const char* name : {"ue5m3", "nvfp4", "mxfp4"}) o.recipes.push_back(*find_recipe(name));
  }
  for (const Recipe& r : o.recipes) {
    const auto problems = validate(r);
    if (!problems.empty()) throw UsageError("recipe " + r.name + ": " + problems.front());
  }
  if (o.datapath != kF64 && o.datapath != kRecipeDatapath && !o.gemm_evaluator && !find_datapath(o.datapath)) {
    throw UsageError("--datapath: unknown datapath '" + o.datapath + "' (known: recipe f64 " + datapath_names() + ")");
  }
  if (o.headroom_period < 1) throw UsageError("the headroom period D must be >= 1");
  std::optional<std::regex> layer_regex;
  if (!o.layers.empty()) {
    try {
      layer_regex.emplace(o.layers, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw UsageError("--layers: invalid regular expression '" + o.layers + "': " + e.what());
    }
  }

  const trace::Reader reader(trace_path);
  const trace::TraceInfo& info = reader.info();
  Result result;
  result.trace = info;
  result.datapath = o.datapath;
  if (o.gemm_evaluator) {
    result.datapath_note = "a caller-supplied GEMM evaluator";
  } else if (o.datapath == kF64) {
    result.datapath_note = "f64: the recipe's dequantized operands multiplied in float64 (no hardware model)";
  } else if (o.datapath == kRecipeDatapath) {
    result.datapath_note = "recipe: each recipe's default datapath (gemm.hpp), FP32 output";
  } else {
    result.datapath_note = "gemm.hpp datapath " + o.datapath + ", FP32 output";
  }
  result.hold = o.hold;
  result.seed = o.seed;
  for (const Recipe& r : o.recipes) {
    result.recipe_names.push_back(r.name);
    result.recipe_sources.push_back(r.source);
  }

  // Selection.
  std::vector<const trace::StepInfo*> steps;
  if (o.steps && !o.steps->empty()) {
    for (std::int64_t s : *o.steps) {
      const trace::StepInfo* si = info.find_step(s);
      if (!si) {
        std::string known;
        for (const auto& x : info.steps) known += (known.empty() ? "" : ", ") + std::to_string(x.step);
        throw UsageError("--steps: step " + std::to_string(s) + " is not in " + info.path + " (captured: " + known + ")");
      }
      if (std::find(steps.begin(), steps.end(), si) == steps.end()) steps.push_back(si);
    }
    std::sort(steps.begin(), steps.end(), [](auto* a, auto* b) { return a->step < b->step; });
  } else {
    for (const auto& s : info.steps) steps.push_back(&s);
  }
  std::vector<std::pair<const trace::StepInfo*, const trace::LayerInfo*>> work;
  for (const auto* s : steps) {
    for (const auto& l : s->layers) {
      if (layer_regex && !std::regex_search(l.name, *layer_regex)) continue;
      work.emplace_back(s, &l);
    }
  }
  if (work.empty()) throw UsageError("--layers '" + o.layers + "' matches no layer of " + info.path);
  for (const auto* s : steps) result.steps.push_back(s->step);

  // Units of work (share.hpp): a layer name, or without GEMM entries a (layer name, tensor), through every
  // selected step. A unit's estimated cost counts its elements and, with GEMM entries, the multiply-adds
  // of its three GEMMs: quantizing one element costs about as much as 100 multiply-adds of a GEMM entry
  // (trace_a, one thread: 40 ns per element and recipe against 0.4 ns per multiply-add and recipe).
  constexpr std::uint64_t kMultiplyAddsPerElement = 100;
  std::map<std::pair<std::string, int>, std::size_t> unit_of;
  std::vector<std::uint64_t> unit_cost;
  auto unit = [&](const trace::LayerInfo& l, int tensor) {
    const auto key = std::make_pair(l.name, o.gemms ? 0 : tensor);
    const auto [it, added] = unit_of.emplace(key, unit_cost.size());
    if (added) unit_cost.push_back(0);
    return it->second;
  };
  for (const auto& [s, l] : work) {
    const trace::TensorInfo* tensors[3] = {&l->x(), &l->w(), &l->dy()};
    for (int i = 0; i < 3; ++i) {
      std::uint64_t cost = tensors[i]->elements() * kMultiplyAddsPerElement;
      if (o.gemms && i == 0) cost += 3 * std::uint64_t{l->x().rows} * l->x().cols * l->w().rows;
      unit_cost[unit(*l, i)] += cost;
    }
  }
  const std::vector<int> share_of = assign_shares(unit_cost, o.share);
  auto mine = [&](const trace::LayerInfo& l, int tensor) { return share_of[unit(l, tensor)] == o.share.index; };

  std::uint64_t total_elements = 0;
  for (const auto& [s, l] : work) {
    const trace::TensorInfo* tensors[3] = {&l->x(), &l->w(), &l->dy()};
    for (int i = 0; i < 3; ++i) total_elements += mine(*l, i) ? tensors[i]->elements() : 0;
  }
  Replayer replayer(reader, o, result);
  std::uint64_t done = 0;
  for (std::size_t w = 0; w < work.size(); ++w) {
    const auto& [s, l] = work[w];
    const std::array<bool, 3> which{mine(*l, 0), mine(*l, 1), mine(*l, 2)};
    if (!which[0] && !which[1] && !which[2]) continue;
    if (o.progress) o.progress(total_elements ? static_cast<double>(done) / total_elements : 0.0,
                               "step " + std::to_string(s->step) + " " + l->name);
    replayer.run_step_layer(*s, *l, which, 3 * static_cast<std::uint64_t>(w));
    const trace::TensorInfo* tensors[3] = {&l->x(), &l->w(), &l->dy()};
    for (int i = 0; i < 3; ++i) done += which[i] ? tensors[i]->elements() : 0;
  }
  if (o.progress) o.progress(1.0, "done");
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

Result merge(std::vector<Result> shares) {
  if (shares.empty()) throw UsageError("merge: no share");
  Result out = std::move(shares.front());
  for (std::size_t i = 1; i < shares.size(); ++i) {
    Result& part = shares[i];
    merge_in_item_order(out.tensors, std::move(part.tensors));
    merge_in_item_order(out.gemms, std::move(part.gemms));
    merge_in_item_order(out.headroom, std::move(part.headroom));
    out.tensor_bytes += part.tensor_bytes;
    out.seconds = std::max(out.seconds, part.seconds);
  }
  out.shares = static_cast<int>(shares.size());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Output: JSON

namespace {

void write_hold(stats::JsonWriter& j, const Hold& h, const char* prefix = "") {
  const std::string p(prefix);
  const char* none = "recipe has no tensor scale";
  if (h.held_amax) {
    j.number_field(p + "held_amax", *h.held_amax);
  } else {
    j.field(p + "held_amax", stats::Figure::none(none));
  }
  if (h.held_from_step) {
    j.field(p + "held_from_step", *h.held_from_step);
  } else {
    j.field(p + "held_from_step", stats::Figure::none(h.held_amax ? "not from a trace step" : none));
  }
  if (h.held_exact) {
    j.field(p + "held_exact", *h.held_exact);
  } else {
    j.field(p + "held_exact", stats::Figure::none(h.held_amax ? "not from a trace step" : none));
  }
  j.field(p + "rho", h.rho);
}

template <std::size_t N>
void write_sparse_histogram(stats::JsonWriter& j, std::string_view key, const std::array<std::uint64_t, N>& bins,
                            int first) {
  j.key(key).begin_object();
  for (std::size_t i = 0; i < N; ++i) {
    if (bins[i]) j.field(std::to_string(first + static_cast<int>(i)), bins[i]);
  }
  j.end_object();
}

}  // namespace

void write_tensor_json(stats::JsonWriter& j, const TensorEntry& e) {
  const stats::ErrorAccumulator& er = e.stats.error;
  const stats::BlockAccumulator& b = e.stats.blocks;
  const QuantizeCounts& c = e.stats.counts;
  j.begin_object();
  j.field("step", e.step).field("layer", e.layer).field("tensor", e.tensor);
  if (!e.distribution.empty()) j.field("distribution", e.distribution);
  j.field("role", role_name(e.role)).field("gemm", gemm_name(e.view)).field("recipe", e.recipe);
  j.field("rows", static_cast<std::uint64_t>(e.rows)).field("cols", static_cast<std::uint64_t>(e.cols));
  j.field("element_format", e.element_format).field("scale_format", e.scale_format);
  j.field("block_rows", e.block_rows).field("block_cols", e.block_cols);
  j.field("rounding", e.rounding).field("tensor_scale", e.tensor_scale);
  if (!e.orig_dtype.empty()) j.field("orig_dtype", e.orig_dtype);
  j.field("stream", e.stream);
  j.field("elements", er.elements).field("nonzero", er.nonzero);
  j.field("mse", er.mse()).field("rel_mse", er.rel_mse()).field("sqnr_db", er.sqnr_db());
  j.number_field("max_abs_err", er.max_abs_err);
  j.field("underflow_fraction", er.underflow_fraction()).field("underflow", er.underflow);
  j.field("saturated_fraction", e.stats.saturated_fraction()).field("saturated", c.saturated);
  j.field("blocks", b.blocks).field("zero_blocks", b.zero_blocks);
  j.field("scale_saturated", c.scale_saturated).field("scale_underflow", c.scale_underflow);
  j.field("nan", er.nan).field("inf", er.inf).field("nonfinite_outputs", er.nonfinite_out);
  j.number_field("amax", e.amax);
  if (er.nonzero) {
    j.number_field("amin_nonzero", er.amin_nonzero);
  } else {
    j.field("amin_nonzero", stats::Figure::none("no nonzero finite inputs"));
  }
  j.field("dynamic_range_log2", er.dynamic_range_log2());
  write_hold(j, e.hold);
  j.number_field("global_encode_scale", e.global_encode_scale);
  j.number_field("global_decode_scale", e.global_decode_scale);
  // Per-block statistics.
  j.key("block_stats").begin_object();
  j.field("nonfinite_blocks", b.nonfinite_blocks).field("exact_blocks", b.exact_blocks);
  if (b.block_amax_max > 0) {
    j.number_field("block_amax_min_nonzero", b.block_amax_min_nonzero);
    j.number_field("block_amax_max", b.block_amax_max);
  } else {
    j.field("block_amax_min_nonzero", stats::Figure::none("no nonzero finite blocks"));
    j.field("block_amax_max", stats::Figure::none("no nonzero finite blocks"));
  }
  j.field("block_amax_log2_p01", b.block_amax_log2_quantile(0.01));
  j.field("block_amax_log2_p50", b.block_amax_log2_quantile(0.50));
  j.field("block_amax_log2_p99", b.block_amax_log2_quantile(0.99));
  j.field("scale_log2_mean", b.scale_log2_mean()).field("scale_log2_std", b.scale_log2_std());
  j.field("block_sqnr_db_p01", b.block_sqnr_db_quantile(0.01));
  j.field("block_sqnr_db_p10", b.block_sqnr_db_quantile(0.10));
  j.field("block_sqnr_db_p50", b.block_sqnr_db_quantile(0.50));
  j.field("worst_block_sqnr_db", b.worst_block_sqnr_db());
  write_sparse_histogram(j, "scale_codes", b.scale_codes, 0);
  write_sparse_histogram(j, "block_amax_log2_hist", b.amax_log2, stats::BlockAccumulator::kAmaxLog2Min);
  write_sparse_histogram(j, "block_sqnr_db_hist", b.sqnr_db, stats::BlockAccumulator::kSqnrMinDb);
  j.end_object();
  j.end_object();
}

void write_json(const Result& r, std::ostream& os) {
  stats::JsonWriter j(os, false);
  j.begin_object();
  j.field("fp4sim", "0.1.0");
  j.key("trace").begin_object();
  j.field("path", r.trace.path).field("schema_version", r.trace.schema_version);
  j.field("model", r.trace.model).field("framework", r.trace.framework);
  j.key("steps").begin_array();
  for (const auto& s : r.trace.steps) j.value(s.step);
  j.end_array();
  j.end_object();
  j.key("recipes").begin_array();
  for (std::size_t i = 0; i < r.recipe_names.size(); ++i) {
    j.begin_object().field("name", r.recipe_names[i]).field("source", r.recipe_sources[i]).end_object();
  }
  j.end_array();
  // The value of every finite nonnegative code of each scale format the entries use, in code order: the
  // key to block_stats.scale_codes, so that readers (tools/plot_replay.py) hold no copy of the formats.
  j.key("scale_code_values").begin_object();
  std::set<std::string> written;
  for (const TensorEntry& e : r.tensors) {
    if (!written.insert(e.scale_format).second) continue;
    const Format f = parse_format(e.scale_format).value();  // format_name() output always parses
    j.key(e.scale_format).begin_array();
    for (std::uint32_t code = 0; code <= f.max_finite_code(); ++code) j.value(decode_to_double(f, code));
    j.end_array();
  }
  j.end_object();
  j.field("datapath", r.datapath);
  if (!r.datapath_note.empty()) j.field("datapath_note", r.datapath_note);
  j.field("hold", hold_rule_name(r.hold)).field("seed", r.seed);
  j.key("replayed_steps").begin_array();
  for (auto s : r.steps) j.value(s);
  j.end_array();
  j.field("tensor_bytes", r.tensor_bytes);
  j.number_field("seconds", r.seconds);
  j.field("shares", r.shares);
  j.key("tensors").begin_array();
  for (const TensorEntry& e : r.tensors) write_tensor_json(j, e);
  j.end_array();
  j.key("gemms").begin_array();
  for (const GemmEntry& e : r.gemms) {
    j.begin_object();
    j.field("step", e.step).field("layer", e.layer).field("gemm", gemm_name(e.gemm)).field("recipe", e.recipe);
    j.field("datapath", e.datapath);
    j.field("m", static_cast<std::uint64_t>(e.m)).field("n", static_cast<std::uint64_t>(e.n));
    j.field("k", static_cast<std::uint64_t>(e.k));
    j.field("rel_fro_err", e.rel_fro_err);
    j.number_field("max_abs_err", e.max_abs_err).number_field("ref_fro_norm", e.ref_fro_norm);
    write_hold(j, e.hold_a, "a_");
    write_hold(j, e.hold_b, "b_");
    j.field("stream_a", e.stream_a).field("stream_b", e.stream_b);
    j.end_object();
  }
  j.end_array();
  j.key("headroom").begin_array();
  for (const HeadroomEntry& h : r.headroom) {
    j.begin_object();
    j.field("step", h.step).field("layer", h.layer).field("tensor", h.tensor).field("role", role_name(h.role));
    j.field("period", h.period).number_field("target", h.target);
    j.field("block_rows", h.block_rows).field("block_cols", h.block_cols);
    j.number_field("amax", h.amax);
    write_hold(j, h.hold);
    j.key("formats").begin_object();
    for (const auto& f : h.formats) {
      j.key(f.scale_name).begin_object();
      j.number_field("max_scale", f.max_scale);
      j.number_field("headroom", f.max_scale / h.target);
      // Proposition 1: every block is unsaturated iff T * rho <= U (exact arithmetic; the FP32 rounding of
      // the ideal scale can still put the block holding the amax one ulp above U, counted below).
      if (h.hold.rho.value) {
        j.field("guaranteed_unsaturated", *h.hold.rho.value * h.target <= f.max_scale);
      } else {
        j.field("guaranteed_unsaturated", stats::Figure::none(h.hold.rho.note));
      }
      j.field("blocks", f.blocks).field("saturated_blocks", f.saturated).field("underflow_blocks", f.underflow);
      j.end_object();
    }
    j.end_object();
    j.end_object();
  }
  j.end_array();
  j.end_object();
  os << '\n';
}

// ---------------------------------------------------------------------------------------------
// Output: columns (CSV and HDF5 share them)

namespace {

struct Cell {
  enum Kind { number, integer, text, missing } kind = missing;
  double d = 0.0;
  std::int64_t i = 0;
  std::string s;
  static Cell num(const stats::Figure& f) { return f.value ? Cell{number, *f.value, 0, {}} : Cell{}; }
  static Cell num(double v) { return std::isfinite(v) ? Cell{number, v, 0, {}} : Cell{}; }
  static Cell integ(std::int64_t v) { return Cell{integer, 0.0, v, {}}; }
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
    return h.held_exact ? Cell::integ(*h.held_exact ? 1 : 0) : Cell{};
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
  c.emplace_back("role", [](const E& e) { return Cell::str(std::string(role_name(e.role))); });
  c.emplace_back("gemm", [](const E& e) { return Cell::str(std::string(gemm_name(e.view))); });
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
  return c;
}

Columns<GemmEntry> gemm_columns() {
  using E = GemmEntry;
  Columns<E> c;
  c.emplace_back("step", [](const E& e) { return Cell::integ(e.step); });
  c.emplace_back("layer", [](const E& e) { return Cell::str(e.layer); });
  c.emplace_back("gemm", [](const E& e) { return Cell::str(std::string(gemm_name(e.gemm))); });
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
  return c;
}

Columns<HeadroomEntry> headroom_columns() {
  using E = HeadroomEntry;
  Columns<E> c;
  c.emplace_back("step", [](const E& e) { return Cell::integ(e.step); });
  c.emplace_back("layer", [](const E& e) { return Cell::str(e.layer); });
  c.emplace_back("tensor", [](const E& e) { return Cell::str(e.tensor); });
  c.emplace_back("role", [](const E& e) { return Cell::str(std::string(role_name(e.role))); });
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
    case Cell::number: return stats::JsonWriter::number(c.d);
    case Cell::integer: return std::to_string(c.i);
    case Cell::text: return csv_escape(c.s);
    case Cell::missing: return "";
  }
  return "";
}

}  // namespace

void write_tensor_csv_header(std::ostream& os) {
  bool first = true;
  for (const auto& [name, get] : tensor_columns()) {
    os << (first ? "" : ",") << name;
    first = false;
  }
  os << '\n';
}

void write_tensor_csv_row(std::ostream& os, const TensorEntry& e) {
  bool first = true;
  for (const auto& [name, get] : tensor_columns()) {
    os << (first ? "" : ",") << cell_text(get(e));
    first = false;
  }
  os << '\n';
}

void write_csv(const Result& r, std::ostream& os) {
  const auto tc = tensor_columns();
  const auto gc = gemm_columns();
  const auto hc = headroom_columns();
  std::vector<std::string> header{"kind"};
  std::map<std::string, std::size_t> index;
  auto add = [&](const std::string& n) {
    if (!index.count(n)) {
      index[n] = header.size();
      header.push_back(n);
    }
  };
  for (const auto& [n, g] : tc) add(n);
  for (const auto& [n, g] : gc) add(n);
  for (const auto& [n, g] : hc) add(n);
  for (std::size_t i = 0; i < header.size(); ++i) os << (i ? "," : "") << header[i];
  os << '\n';
  auto emit = [&](const char* kind, const auto& cols, const auto& entry) {
    std::vector<std::string> row(header.size());
    row[0] = kind;
    for (const auto& [n, g] : cols) row[index[n]] = cell_text(g(entry));
    for (std::size_t i = 0; i < row.size(); ++i) os << (i ? "," : "") << row[i];
    os << '\n';
  };
  for (const auto& e : r.tensors) emit("tensor", tc, e);
  for (const auto& e : r.gemms) emit("gemm", gc, e);
  for (const auto& e : r.headroom) emit("headroom", hc, e);
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
    } else if (kind == Cell::integer) {
      // Integers that may be missing (held_from_step) use -1 for "none".
      std::vector<std::int64_t> v;
      for (const Cell& c : cells) v.push_back(c.kind == Cell::integer ? c.i : -1);
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
  f.write_attribute("fp4sim", "0.1.0");
  f.write_attribute("trace", r.trace.path);
  std::string recipes;
  for (const auto& n : r.recipe_names) recipes += (recipes.empty() ? "" : ",") + n;
  f.write_attribute("recipes", recipes);
  f.write_attribute("datapath", r.datapath);
  f.write_attribute("hold", hold_rule_name(r.hold));
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

// ---------------------------------------------------------------------------------------------
// Terminal summary

namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string pad(std::string s, std::size_t width, bool right = false) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

struct Mean {
  double sum = 0;
  std::size_t n = 0;
  void add(const stats::Figure& f) {
    if (f.value) {
      sum += *f.value;
      ++n;
    }
  }
  std::optional<double> get() const { return n ? std::optional<double>(sum / n) : std::nullopt; }
};

std::string opt(const std::optional<double>& v, const char* format) { return v ? fmt(format, *v) : "-"; }

}  // namespace

std::string summary(const Result& r) {
  std::ostringstream out;
  out << "fp4sim replay: " << r.trace.path;
  if (!r.trace.model.empty()) out << "\n  model: " << r.trace.model;
  std::set<std::string> layers;
  for (const auto& e : r.tensors) layers.insert(e.layer);
  out << "\n  " << r.steps.size() << " step(s) (";
  for (std::size_t i = 0; i < r.steps.size(); ++i) out << (i ? ", " : "") << r.steps[i];
  out << ") x " << layers.size() << " layer(s) x 3 tensors; recipes ";
  for (std::size_t i = 0; i < r.recipe_names.size(); ++i) out << (i ? ", " : "") << r.recipe_names[i];
  out << "; hold " << hold_rule_name(r.hold) << "; seed " << r.seed << "\n";

  // Per recipe.
  out << "\nPer recipe (mean over tensor entries; SQNR in dB, higher is better)\n";
  out << "  " << pad("recipe", 12) << pad("SQNR mean", 10, true) << pad("min", 8, true) << pad("underflow", 11, true)
      << pad("saturated", 11, true) << pad("scale sat", 11, true) << pad("scale unf", 11, true);
  if (!r.gemms.empty()) out << "   GEMM rel err fprop / dgrad / wgrad";
  out << "\n";
  for (const std::string& name : r.recipe_names) {
    Mean sqnr;
    double min_sqnr = INFINITY;
    std::uint64_t under = 0, nonzero = 0, sat = 0, elements = 0, ssat = 0, sunf = 0, blocks = 0;
    for (const auto& e : r.tensors) {
      if (e.recipe != name) continue;
      const auto s = e.stats.error.sqnr_db();
      sqnr.add(s);
      if (s.value) min_sqnr = std::min(min_sqnr, *s.value);
      under += e.stats.error.underflow;
      nonzero += e.stats.error.nonzero;
      sat += e.stats.counts.saturated;
      elements += e.stats.error.elements;
      ssat += e.stats.counts.scale_saturated;
      sunf += e.stats.counts.scale_underflow;
      blocks += e.stats.blocks.blocks;
    }
    out << "  " << pad(name, 12) << pad(opt(sqnr.get(), "%.2f"), 10, true)
        << pad(std::isfinite(min_sqnr) ? fmt("%.2f", min_sqnr) : "-", 8, true)
        << pad(nonzero ? fmt("%.3g%%", 100.0 * under / nonzero) : "-", 11, true)
        << pad(elements ? fmt("%.3g%%", 100.0 * sat / elements) : "-", 11, true)
        << pad(blocks ? fmt("%.3g%%", 100.0 * ssat / blocks) : "-", 11, true)
        << pad(blocks ? fmt("%.3g%%", 100.0 * sunf / blocks) : "-", 11, true);
    if (!r.gemms.empty()) {
      out << "   ";
      for (const Gemm g : kGemms) {
        Mean m;
        for (const auto& e : r.gemms) {
          if (e.recipe == name && e.gemm == g) m.add(e.rel_fro_err);
        }
        out << (g == Gemm::fprop ? "" : " / ") << opt(m.get(), "%.4f");
      }
    }
    out << "\n";
  }

  // Best recipe per tensor role.
  out << "\nBest recipe per tensor role (mean SQNR dB)\n";
  out << "  " << pad("role", 18);
  for (const auto& n : r.recipe_names) out << pad(n, 12, true);
  out << "   best\n";
  for (const Role role : {Role::activation, Role::weight, Role::grad_output}) {
    const char* tensor = role == Role::activation ? " (x)" : role == Role::weight ? " (w)" : " (dy)";
    out << "  " << pad(std::string(role_name(role)) + tensor, 18);
    std::vector<std::optional<double>> means;
    std::optional<double> best;
    for (const auto& n : r.recipe_names) {
      Mean m;
      for (const auto& e : r.tensors) {
        if (e.recipe == n && e.role == role) m.add(e.stats.error.sqnr_db());
      }
      means.push_back(m.get());
      out << pad(opt(m.get(), "%.2f"), 12, true);
      if (m.get() && (!best || *m.get() > *best)) best = m.get();
    }
    // Recipes within 0.05 dB of the best are a tie.
    std::string best_names;
    for (std::size_t i = 0; i < means.size(); ++i) {
      if (best && means[i] && *means[i] >= *best - 0.05) {
        best_names += (best_names.empty() ? "" : " = ") + r.recipe_names[i];
      }
    }
    out << "   " << (best_names.empty() ? "-" : best_names) << "\n";
  }

  // Worst layers.
  out << "\nWorst tensors per recipe (lowest SQNR dB)\n";
  for (const auto& n : r.recipe_names) {
    std::vector<const TensorEntry*> v;
    for (const auto& e : r.tensors) {
      if (e.recipe == n && e.stats.error.sqnr_db().value) v.push_back(&e);
    }
    std::sort(v.begin(), v.end(), [](auto* a, auto* b) {
      return *a->stats.error.sqnr_db().value < *b->stats.error.sqnr_db().value;
    });
    out << "  " << n << ":\n";
    for (std::size_t i = 0; i < std::min<std::size_t>(3, v.size()); ++i) {
      const auto& e = *v[i];
      out << "    " << pad(fmt("%.2f dB", *e.stats.error.sqnr_db().value), 10, true) << "  step " << e.step << "  "
          << e.layer << " " << e.tensor << "  (underflow "
          << opt(e.stats.error.underflow_fraction().value, "%.3g") << ", block SQNR p01 "
          << opt(e.stats.blocks.block_sqnr_db_quantile(0.01).value, "%.0f") << " dB)\n";
    }
  }

  // Proposition 1.
  if (!r.headroom.empty()) {
    const auto& h0 = r.headroom.front();
    out << "\nPeriodic scaling, Proposition 1 (D = " << h0.period << ", T = " << fmt("%g", h0.target) << ", hold "
        << hold_rule_name(r.hold) << "; rho = current amax / held amax)\n";
    std::size_t exact = 0;
    const HeadroomEntry* worst = nullptr;
    for (const auto& h : r.headroom) {
      if (h.hold.held_exact.value_or(false)) ++exact;
      if (h.hold.rho.value && (!worst || *h.hold.rho.value > *worst->hold.rho.value)) worst = &h;
    }
    out << "  held amax exact (refresh step captured) for " << exact << " of " << r.headroom.size() << " tensors";
    if (exact < r.headroom.size() && r.hold == HoldRule::window) {
      out << "; others use their own amax (rho = 1): try --hold previous to stress staleness";
    }
    out << "\n";
    if (worst) {
      out << "  largest rho " << fmt("%.3g", *worst->hold.rho.value) << " at step " << worst->step << " "
          << worst->layer << " " << worst->tensor << " (held from step " << worst->hold.held_from_step.value_or(0)
          << ")\n";
    }
    out << "  " << pad("scale format", 14) << pad("U/T", 8, true) << pad("tensors sat.", 14, true)
        << pad("blocks saturated", 18, true) << pad("blocks underflow", 18, true) << "\n";
    for (std::size_t f = 0; f < h0.formats.size(); ++f) {
      std::uint64_t blocks = 0, sat = 0, unf = 0, tensors = 0;
      for (const auto& h : r.headroom) {
        blocks += h.formats[f].blocks;
        sat += h.formats[f].saturated;
        unf += h.formats[f].underflow;
        tensors += h.formats[f].saturated > 0;
      }
      out << "  " << pad(h0.formats[f].scale_name, 14) << pad(fmt("%.3g", h0.formats[f].max_scale / h0.target), 8, true)
          << pad(std::to_string(tensors) + "/" + std::to_string(r.headroom.size()), 14, true)
          << pad(std::to_string(sat) + fmt(" (%.2g%%)", blocks ? 100.0 * sat / blocks : 0.0), 18, true)
          << pad(std::to_string(unf) + fmt(" (%.2g%%)", blocks ? 100.0 * unf / blocks : 0.0), 18, true) << "\n";
    }
  }
  out << "\n"
      << fmt("%.2f", r.tensor_bytes / 1e6) << " MB of float32 tensor data per recipe in " << fmt("%.2f", r.seconds)
      << " s";
  if (r.shares > 1) out << " on " << r.shares << " processes";
  if (!r.gemms.empty()) {
    out << "; GEMM datapaths:";
    for (const auto& name : r.recipe_names) {
      for (const auto& g : r.gemms) {
        if (g.recipe == name) {
          out << " " << name << "=" << g.datapath;
          break;
        }
      }
    }
  }
  out << "\n";
  return out.str();
}

}  // namespace fp4sim::replay
