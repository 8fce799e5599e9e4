#include "fp4sim/analysis/replay.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/gemm.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/core/hadamard.hpp"
#include "fp4sim/core/random.hpp"
#include "fp4sim/core/tensor_scale.hpp"
#include "replay_hold.hpp"
#include "replay_policy.hpp"
#include "replay_select.hpp"

namespace fp4sim::replay {

namespace {

using trace::TensorRole;

constexpr const char* kF64 = "f64";
constexpr const char* kRecipeDatapath = "recipe";

Role recipe_role(TensorRole r) {
  switch (r) {
    case TensorRole::weight: return Role::weight;
    case TensorRole::grad_output: return Role::grad_output;
    default: return Role::activation;
  }
}

template <class T>
std::vector<T> transpose(std::span<const T> x, std::size_t rows, std::size_t cols) {
  std::vector<T> t(x.size());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) t[c * rows + r] = x[r * cols + c];
  return t;
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
  // `bf16`: a column after the recipes' whose tensors are rounded to BF16, not quantized (recipe maps).
  Replayer(const trace::Reader& reader, const Options& o, Result& result, bool bf16)
      : reader_(reader), o_(o), result_(result), datapath_(find_datapath(o.datapath)),
        columns_(o.recipes.size() + (bf16 ? 1 : 0)) {
    for (const auto& s : reader.info().steps) {
      captured_.insert(s.step);
      auto& by_name = layers_[s.step];
      for (const auto& l : s.layers) by_name.emplace(l.name, &l);  // the first of a repeated name, as before
    }
  }

  // The tensors i (x 0, w 1, dy 2) of `mine` of one (step, layer) and, with GEMM entries (then all three
  // are mine), its GEMMs; `item` is 3 x the pair's position in the one-process order.
  // `starting(elements done before, what)` before each tensor and before the layer's GEMMs: the
  // progress report.
  void run_step_layer(const trace::StepInfo& step, const trace::LayerInfo& layer, const std::array<bool, 3>& mine,
                      std::uint64_t item, const std::function<void(std::uint64_t, const std::string&)>& starting) {
    LoadedTensor loaded[3];
    const TensorRole roles[3] = {TensorRole::activation, TensorRole::weight, TensorRole::grad_output};
    const Gemm views[3] = {Gemm::fprop, Gemm::fprop, Gemm::dgrad};
    const std::size_t slab_limit = slab_elements();
    const std::string where = "step " + std::to_string(step.step) + " " + layer.name;
    std::uint64_t done = 0;
    for (int i = 0; i < 3; ++i) {
      if (!mine[i]) continue;
      starting(done, where + " " + layer.find(roles[i])->name);
      item_ = item + static_cast<std::uint64_t>(i);
      if (o_.starting) o_.starting(item_);
      const trace::TensorInfo& t = *layer.find(roles[i]);
      loaded[i].info = &t;
      if (t.elements() <= slab_limit) {
        loaded[i].f32 = reader_.read_float(t);
        if (t.type == trace::ElementType::float64) {
          loaded[i].f64 = reader_.read_double(t);
        }
      }
      process_tensor(step.step, layer, t, recipe_role(roles[i]), views[i], loaded[i]);
      done += t.elements();
      if (!o_.gemms) loaded[i] = LoadedTensor{&t, {}, {}, {}};
    }
    if (o_.gemms) {
      starting(done, where + " gemms");
      process_gemms(step.step, layer, loaded[0], loaded[1], loaded[2]);
    }
  }

 private:
  // amax of a stored tensor as float32, cached per (step, layer, role).
  float tensor_amax(std::int64_t step, const std::string& layer, TensorRole role) {
    const auto key = std::make_tuple(step, layer, static_cast<int>(role), std::string());
    if (auto it = amax_.find(key); it != amax_.end()) return it->second;
    const trace::StepInfo* s = reader_.info().find_step(step);
    const trace::LayerInfo* l = nullptr;
    for (const auto& candidate : s->layers) {
      if (candidate.name == layer) l = &candidate;
    }
    const float a = reader_.amax(*l->find(role), slab_elements());
    amax_[key] = a;
    return a;
  }

  // amax of a GEMM operand after RHT (wgrad operands are the transposed tensors, transformed along
  // the token dimension), cached per (step, layer, role, the recipe's signs and precision).
  float rht_operand_amax(std::int64_t step, const std::string& layer, TensorRole role, const Recipe& recipe) {
    const auto key = std::make_tuple(step, layer, static_cast<int>(role),
                                     rht_signs_text(recipe.rht_signs) + std::string(name_of(recipe.rht_precision)));
    if (auto it = amax_.find(key); it != amax_.end()) return it->second;
    const trace::LayerInfo* l = find_layer(step, layer);
    const trace::TensorInfo& t = *l->find(role);
    // Streamed in slabs of whole 16-token groups, which the transform takes one at a time.
    const std::size_t slab_rows = std::max<std::size_t>(16, slab_elements() / std::max<std::size_t>(t.cols, 1) / 16 * 16);
    std::vector<float> x;
    float a = 0.0f;
    for (std::size_t r0 = 0; r0 < t.rows; r0 += slab_rows) {
      const std::size_t n = std::min(slab_rows, t.rows - r0);
      x.resize(n * t.cols);
      reader_.read_rows(t, r0, n, std::span<float>(x));
      a = std::max(a, abs_max(random_hadamard_transform(transpose<float>(x, n, t.cols), t.cols, n, recipe.rht_signs,
                                                          recipe.rht_precision)));
    }
    amax_[key] = a;
    return a;
  }

  // By name through an index: a scan of the step's layers per call made replay quadratic in the number
  // of layers (every call group of a v2 trace is one).
  const trace::LayerInfo* find_layer(std::int64_t step, const std::string& layer) const {
    const auto s = layers_.find(step);
    if (s == layers_.end()) return nullptr;
    const auto l = s->second.find(layer);
    return l == s->second.end() ? nullptr : l->second;
  }

  // The hold of a tensor-scale policy (period D) at `step`; amax_at(s) gives the operand amax at a
  // captured step s.
  Hold hold_for(TensorScalePolicy policy, int period, std::int64_t step, const std::string& layer, float current,
                const std::function<float(std::int64_t)>& amax_at) const {
    return detail::hold_for(policy, period, o_.hold, step, current, captured_,
                            [&](std::int64_t s) { return find_layer(s, layer) != nullptr; }, amax_at);
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
    const std::size_t slab_limit = slab_elements();
    const float current = whole ? abs_max(loaded.f32) : reader_.amax(t, slab_limit);
    amax_[std::make_tuple(step, layer.name, static_cast<int>(t.role), std::string())] = current;
    auto amax_at = [&](std::int64_t s) { return tensor_amax(s, layer.name, t.role); };

    const std::uint64_t stream = stream_id(step, layer.name, t.name, view);
    const std::size_t first = result_.tensors.size();
    std::vector<QuantizeRequest> requests;
    for (std::size_t i = 0; i < columns_; ++i) {
      const Recipe* r = i < o_.recipes.size() ? &o_.recipes[i] : nullptr;  // nullptr: the bf16 column
      TensorEntry e = r ? tensor_entry(*r, role, view, t.rows, t.cols) : detail::bf16_entry(role, view, t.rows, t.cols);
      e.step = step;
      e.layer = layer.name;
      e.tensor = t.name;
      e.orig_dtype = t.orig_dtype;
      e.stream = stream;
      e.amax = current;
      e.hold = hold_for(r ? r->tensor_scale : TensorScalePolicy::none, r ? r->period : 1, step, layer.name, current,
                        amax_at);
      e.item = item_;
      QuantizeRequest q;
      if (r) {
        q.spec = operand_for_role(*r, role);
        q.amax_ref = detail::amax_ref(*r, q.spec, e.hold, current);
      }
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
    const std::size_t chunk_rows = stats::chunk_rows(t.cols, multiple);
    const std::size_t recipes = columns_;

    const bool keep = whole && o_.gemms && !o_.gemm_evaluator && o_.datapath == kF64 &&
                      recipes * t.elements() <= slab_limit;
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
      // A small tensor on one thread: a parallel region per tiny layer cost more than its work.
      const bool parallel = tasks > 1 && (recipes + 1) * nrows * t.cols >= kParallelThreshold;
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
      for (std::size_t task = 0; task < tasks; ++task) {
        const std::size_t i = task / chunks, c = task % chunks;
        const std::size_t r0 = c * chunk_rows, n = std::min(nrows, r0 + chunk_rows) - std::min(nrows, r0);
        const std::span<const float> xc = x.subspan(r0 * t.cols, n * t.cols);
        if (i == recipes) {
          stats::accumulate_headroom(xc, n, t.cols, h.block_rows, h.block_cols, headroom_amax, h.target, element_max,
                                     head[c]);
          continue;
        }
        if (i == o_.recipes.size()) {  // the bf16 column
          const std::vector<float> deq = detail::to_bf16(xc);
          if (keep) std::copy(deq.begin(), deq.end(), loaded.dequantized[i].begin() + static_cast<std::ptrdiff_t>(r0 * t.cols));
          detail::accumulate_unscaled(xc, ref.empty() ? ref : ref.subspan(r0 * t.cols, n * t.cols), deq,
                                      partial[i * chunks + c]);
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

  // A GEMM operand as the rows of its K-last matrix: fprop A = x, B = w; dgrad A = dy, B = wᵀ; wgrad
  // A = dyᵀ, B = xᵀ.
  struct Operand {
    const LoadedTensor* tensor = nullptr;
    bool transposed = false;
    std::size_t rows() const { return transposed ? tensor->info->cols : tensor->info->rows; }
    std::size_t k() const { return transposed ? tensor->info->rows : tensor->info->cols; }
  };

  // Rows [row0, row0 + n) of an operand, the stored values exactly: from memory when the tensor was
  // held whole, else read from the trace (a transposed operand's rows are columns of the tensor).
  std::vector<double> operand_rows(const Operand& op, std::size_t row0, std::size_t n) const {
    const LoadedTensor& lt = *op.tensor;
    const trace::TensorInfo& t = *lt.info;
    auto held = [&](std::size_t r, std::size_t c) {
      return lt.f64.empty() ? static_cast<double>(lt.f32[r * t.cols + c]) : lt.f64[r * t.cols + c];
    };
    const bool in_memory = !lt.f32.empty();
    if (!op.transposed) {
      std::vector<double> out(n * t.cols);
      if (!in_memory) {
        reader_.read_rows(t, row0, n, std::span<double>(out));
      } else {
        for (std::size_t r = 0; r < n; ++r)
          for (std::size_t c = 0; c < t.cols; ++c) out[r * t.cols + c] = held(row0 + r, c);
      }
      return out;
    }
    std::vector<double> columns(t.rows * n);
    if (!in_memory) {
      reader_.read_columns(t, row0, n, std::span<double>(columns));
    } else {
      for (std::size_t r = 0; r < t.rows; ++r)
        for (std::size_t c = 0; c < n; ++c) columns[r * n + c] = held(r, row0 + c);
    }
    return transpose(std::span<const double>(columns), t.rows, n);
  }

  // One GEMM of the layer: its operands and shape.
  struct GemmProblem {
    Gemm gemm = Gemm::fprop;
    Operand a, b;
    std::size_t m = 0, n = 0, k = 0;
    std::uint64_t stream_a = 0, stream_b = 0;
  };

  // Rows of A and of B per tile. A tile's operands (rows x K each) and its product hold at most
  // slab elements / tile_share() each (the three GEMMs' tiles are in work at once, every recipe
  // quantizing its own copies), so the GEMM entries follow --slab-mib like the tensor entries; B is
  // split only when it takes more than half of that.
  struct Tiling {
    std::size_t a_rows = 0, b_rows = 0;
  };
  std::optional<Tiling> tiling(const GemmProblem& p) const {
    const std::size_t budget = std::max<std::size_t>(slab_elements() / tile_share(), 1);
    const std::size_t unit = gemm_row_multiple();
    const std::size_t k = std::max<std::size_t>(p.k, 1);
    auto whole_units = [&](std::size_t fit, std::size_t total) { return fit >= total ? total : fit / unit * unit; };
    Tiling t;
    t.b_rows = whole_units(budget / 2 / k, p.n);
    if (p.n > 0 && t.b_rows == 0) return std::nullopt;
    t.a_rows = whole_units(std::min(budget / k - t.b_rows, budget / std::max<std::size_t>(t.b_rows, 1)), p.m);
    if (p.m > 0 && t.a_rows == 0) return std::nullopt;
    return t;
  }

  // Tile starts of `total` rows in tiles of `rows` (one empty tile for an empty operand).
  static std::vector<std::size_t> tile_starts(std::size_t total, std::size_t rows) {
    std::vector<std::size_t> starts{0};
    for (std::size_t r = rows; r < total; r += rows) starts.push_back(r);
    return starts;
  }

  // The tiles of the layer's three GEMMs are in work at once, each quantized by every recipe.
  std::size_t tile_share() const { return 3 * columns_; }

  std::size_t slab_elements() const { return std::max<std::size_t>(o_.max_slab_bytes / sizeof(float), 1); }

  // Rows every recipe's blocks divide (a tile starts on a block row of any operand).
  std::size_t gemm_row_multiple() const {
    std::size_t m = 16;
    for (const Recipe& r : o_.recipes) m = std::lcm(m, static_cast<std::size_t>(r.block));
    return m;
  }

  // One (GEMM, recipe) entry to compute: everything that touches the amax cache (the holds) is resolved
  // before the parallel phase; the error sums run on over the tiles in row-major order.
  struct GemmTask {
    const GemmProblem* problem = nullptr;
    const Recipe* recipe = nullptr;  // nullptr: the bf16 column
    std::size_t recipe_index = 0;
    bool bf16 = false;  // the bf16 column: operands rounded to BF16, multiplied in float64
    GemmOperands ops;
    const Datapath* datapath = nullptr;  // nullptr: f64
    std::optional<float> amax_ref_a, amax_ref_b;
    bool reuse_a = false, reuse_b = false;
    double err_sq = 0.0, max_abs = 0.0;
    bool nonfinite = false;
    std::optional<std::string> failed;  // why the datapath could not take the operands
    std::optional<QuantizedTensor> qb;   // the current B tile, quantized (and dequantized for f64)
    std::vector<float> db;
    GemmEntry entry;
  };

  // One tile of a GEMM: rows [a_row0, a_row0 + m) of A, [b_row0, b_row0 + n) of B, and their float64 product.
  struct Tile {
    std::size_t a_row0 = 0, b_row0 = 0, m = 0, n = 0;
    std::vector<float> a, b;
    std::vector<double> c;
  };

  // One GEMM of the layer through its tiles: its tasks, its plan (none: its tiles do not fit), the tile
  // in work and the reference's sum of squares so far.
  struct GemmRun {
    GemmProblem p;
    std::vector<GemmTask> tasks;
    std::optional<Tiling> plan;
    std::vector<std::pair<std::size_t, std::size_t>> tiles;  // (B row0, A row0), B tiles outer
    Tile tile;
    std::vector<double> b64;
    double ref_sq = 0.0;
  };

  void process_gemms(std::int64_t step, const trace::LayerInfo& layer, const LoadedTensor& x, const LoadedTensor& w,
                     const LoadedTensor& dy) {
    const std::size_t tokens = x.info->rows, in = x.info->cols, out = w.info->rows;
    const auto gemms = names(Gemm{});  // fprop, dgrad, wgrad
    std::vector<GemmRun> runs(gemms.size());
    std::size_t rounds = 0;
    for (std::size_t gi = 0; gi < gemms.size(); ++gi) {
      GemmRun& run = runs[gi];
      GemmProblem& p = run.p;
      p.gemm = gemms[gi].value;
      switch (p.gemm) {
        case Gemm::fprop:
          p.a = {&x, false}, p.b = {&w, false}, p.m = tokens, p.n = out, p.k = in;
          break;
        case Gemm::dgrad:
          p.a = {&dy, false}, p.b = {&w, true}, p.m = tokens, p.n = in, p.k = out;
          break;
        case Gemm::wgrad:
          p.a = {&dy, true}, p.b = {&x, true}, p.m = out, p.n = in, p.k = tokens;
          break;
      }
      p.stream_a = stream_id(step, layer.name, p.a.tensor->info->name, p.gemm);
      p.stream_b = stream_id(step, layer.name, p.b.tensor->info->name, p.gemm);
      run.tasks = gemm_tasks(step, layer, p);
      run.plan = tiling(p);
      if (!run.plan) continue;
      for (std::size_t b_row0 : tile_starts(p.n, run.plan->b_rows)) {
        for (std::size_t a_row0 : tile_starts(p.m, run.plan->a_rows)) run.tiles.emplace_back(b_row0, a_row0);
      }
      rounds = std::max(rounds, run.tiles.size());
    }
    // Round i takes the i-th tile of every GEMM: its (GEMM, recipe) tasks form one parallel region (one
    // region per layer when the GEMMs fit whole: many short regions spin at their barriers on a shared
    // machine).
    for (std::size_t i = 0; i < rounds; ++i) {
      std::vector<std::pair<GemmRun*, GemmTask*>> work;
      for (GemmRun& run : runs) {
        if (i >= run.tiles.size()) continue;
        next_tile(run, i);
        for (GemmTask& t : run.tasks) work.emplace_back(&run, &t);
      }
      std::vector<std::exception_ptr> failures(work.size());
#pragma omp parallel for schedule(dynamic, 1) if (work.size() > 1)
      for (std::size_t j = 0; j < work.size(); ++j) {
        try {
          run_gemm_tile(*work[j].second, work[j].first->tile, work[j].first->tile.a_row0 == 0);
        } catch (...) {
          failures[j] = std::current_exception();  // rethrown below, on this thread, with its type
        }
      }
      for (const auto& f : failures) {
        if (f) std::rethrow_exception(f);
      }
    }
    for (GemmRun& run : runs) finish_gemm(run);
  }

  // Reads the i-th tile of a GEMM (its B rows only at the B tile's first A tile) and its float64 product.
  void next_tile(GemmRun& run, std::size_t i) const {
    const GemmProblem& p = run.p;
    Tile& tile = run.tile;
    const auto [b_row0, a_row0] = run.tiles[i];
    if (a_row0 == 0) {
      tile.b_row0 = b_row0;
      tile.n = std::min(run.plan->b_rows, p.n - b_row0);
      run.b64 = operand_rows(p.b, b_row0, tile.n);
      tile.b.assign(run.b64.begin(), run.b64.end());  // float64 data rounded to nearest even, as the reader does
    }
    tile.a_row0 = a_row0;
    tile.m = std::min(run.plan->a_rows, p.m - a_row0);
    const std::vector<double> a64 = operand_rows(p.a, a_row0, tile.m);
    tile.a.assign(a64.begin(), a64.end());
    tile.c = matmul_abt(a64, run.b64, tile.m, tile.n, p.k);
    for (double v : tile.c) run.ref_sq += v * v;
  }

  // Serial phase of a GEMM: holds and reference amaxes (reads the trace for held steps and RHT amaxes).
  std::vector<GemmTask> gemm_tasks(std::int64_t step, const trace::LayerInfo& layer, const GemmProblem& p) {
    std::vector<GemmTask> tasks;
    for (std::size_t ri = 0; ri < columns_; ++ri) {
      GemmTask t;
      t.problem = &p;
      t.recipe_index = ri;
      GemmEntry& e = t.entry;
      e.item = item_;
      e.step = step;
      e.layer = layer.name;
      e.gemm = p.gemm;
      e.m = p.m, e.n = p.n, e.k = p.k;
      e.stream_a = p.stream_a;
      e.stream_b = p.stream_b;
      if (ri == o_.recipes.size()) {  // the bf16 column: no tensor scale, operands rounded, float64 product
        t.bf16 = true;
        e.recipe = detail::kBf16;
        e.datapath = kF64;
        e.hold_a = e.hold_b = hold_for(TensorScalePolicy::none, 1, step, layer.name, 0.0f, {});
        t.reuse_a = !p.a.transposed && p.a.tensor->dequantized.size() == columns_;
        t.reuse_b = !p.b.transposed && p.b.tensor->dequantized.size() == columns_;
        tasks.push_back(std::move(t));
        continue;
      }
      const Recipe& r = o_.recipes[ri];
      t.recipe = &r;
      t.ops = operands_for(r, p.gemm);
      e.recipe = r.name;
      t.datapath = o_.datapath == kRecipeDatapath ? r.default_datapath : datapath_;
      e.datapath = t.datapath ? std::string(t.datapath->name) : o_.datapath;
      auto hold_of = [&](const OperandSpec& spec, const LoadedTensor& lt, Hold& hold) {
        float current;
        std::function<float(std::int64_t)> amax_at;
        if (spec.rht) {
          current = rht_operand_amax(step, layer.name, lt.info->role, r);
          amax_at = [&](std::int64_t s) { return rht_operand_amax(s, layer.name, lt.info->role, r); };
        } else {
          current = tensor_amax(step, layer.name, lt.info->role);
          amax_at = [&](std::int64_t s) { return tensor_amax(s, layer.name, lt.info->role); };
        }
        hold = hold_for(r.tensor_scale, r.period, step, layer.name, current, amax_at);
        return detail::amax_ref(r, spec, hold, current);
      };
      t.amax_ref_a = hold_of(t.ops.a, *p.a.tensor, e.hold_a);
      t.amax_ref_b = hold_of(t.ops.b, *p.b.tensor, e.hold_b);
      // An operand quantized exactly as its tensor entry was (fprop x and w, dgrad dy: same spec,
      // orientation, reference amax and random stream) reuses that entry's reconstruction.
      const bool f64 = e.datapath == kF64 && !o_.gemm_evaluator;
      t.reuse_a = f64 && !p.a.transposed && p.a.tensor->dequantized.size() == columns_;
      t.reuse_b = f64 && !p.b.transposed && p.b.tensor->dequantized.size() == columns_;
      tasks.push_back(std::move(t));
    }
    return tasks;
  }

  // The entries of a GEMM, in recipe order.
  void finish_gemm(GemmRun& run) {
    if (!run.plan) {
      const double need_mib = std::ceil(2.0 * static_cast<double>(gemm_row_multiple() * run.p.k) *
                                        static_cast<double>(tile_share()) * sizeof(float) / (1 << 20));
      for (GemmTask& t : run.tasks) {
        t.entry.rel_fro_err = stats::Figure::none(
            "not computed: tiles of " + std::to_string(gemm_row_multiple()) + " operand rows of K = " +
            std::to_string(run.p.k) + " need slab_mib " + std::to_string(static_cast<long long>(need_mib)) +
            " or more");
        t.entry.max_abs_err = std::nan("");
        t.entry.ref_fro_norm = std::nan("");
        result_.gemms.push_back(std::move(t.entry));
      }
      return;
    }
    for (GemmTask& t : run.tasks) {
      GemmEntry& e = t.entry;
      e.ref_fro_norm = std::sqrt(run.ref_sq);
      if (t.failed) {
        // The datapath cannot take these operands (e.g. probe-matched with K % 64 != 0): the entry says
        // why; the replay goes on.
        e.rel_fro_err = stats::Figure::none(std::string("datapath ") + e.datapath + ": " + *t.failed);
        e.max_abs_err = std::nan("");
      } else {
        e.max_abs_err = t.max_abs;
        if (t.nonfinite) {
          e.rel_fro_err = stats::Figure::none("non-finite values in the product (NaN/Inf inputs or overflow)");
        } else if (run.ref_sq == 0.0) {
          e.rel_fro_err = stats::Figure::none("reference product is all zero");
        } else {
          e.rel_fro_err = stats::Figure::of(std::sqrt(t.err_sq / run.ref_sq));
        }
      }
      result_.gemms.push_back(std::move(e));
    }
  }

  // One tile of a task; B is quantized once per B tile (at its first A tile) and kept for the others.
  void run_gemm_tile(GemmTask& t, const Tile& tile, bool new_b) {
    if (t.failed) return;
    const GemmProblem& p = *t.problem;
    const GemmEntry& e = t.entry;
    const bool f64 = t.bf16 || (e.datapath == kF64 && !o_.gemm_evaluator);
    auto operand = [&](const OperandSpec& spec, const std::vector<float>& data, std::size_t row0, std::size_t rows,
                       std::optional<float> ref, std::uint64_t stream, bool reuse, const LoadedTensor& lt,
                       std::optional<QuantizedTensor>& q, std::vector<float>& deq) {
      if (reuse) {
        const auto first = lt.dequantized[t.recipe_index].begin() + static_cast<std::ptrdiff_t>(row0 * p.k);
        deq.assign(first, first + static_cast<std::ptrdiff_t>(rows * p.k));
        return;
      }
      if (t.bf16) {
        deq = detail::to_bf16(data);
        return;
      }
      QuantizeRequest request;
      request.spec = spec;
      request.amax_ref = ref;
      request.random.seed = o_.seed;
      request.random.stream = stream;
      // A tile's random bits are those of its rows in the whole operand.
      std::vector<std::uint32_t> bits;
      if (is_stochastic(spec.rounding)) {
        bits.resize(data.size());
        fill_random_bits(o_.seed, stream, row0 * p.k, t.recipe->sr_bits, bits);
        request.random.explicit_bits = bits;
      }
      q = quantize(*t.recipe, request, data, rows, p.k);
      if (f64) deq = dequantize(*q);
    };
    if (new_b) operand(t.ops.b, tile.b, tile.b_row0, tile.n, t.amax_ref_b, p.stream_b, t.reuse_b, *p.b.tensor, t.qb, t.db);
    std::optional<QuantizedTensor> qa;
    std::vector<float> da;
    operand(t.ops.a, tile.a, tile.a_row0, tile.m, t.amax_ref_a, p.stream_a, t.reuse_a, *p.a.tensor, qa, da);
    const std::optional<QuantizedTensor>& qb = t.qb;
    const std::vector<float>& db = t.db;
    std::vector<double> chat;
    try {
      if (f64) {
        chat = matmul_abt(std::vector<double>(da.begin(), da.end()), std::vector<double>(db.begin(), db.end()), tile.m,
                          tile.n, p.k);
      } else if (o_.gemm_evaluator) {
        chat = o_.gemm_evaluator(*t.recipe, p.gemm, *qa, *qb, e.datapath);
      } else {
        GemmRequest request;
        request.datapath = t.datapath;
        const std::vector<float> c = fp4sim::gemm(*t.recipe, *qa, *qb, request);
        chat.assign(c.begin(), c.end());
      }
    } catch (const DataError& error) {
      t.failed = error.what();
      return;
    }
    for (std::size_t i = 0; i < tile.c.size(); ++i) {
      const double d = chat[i] - tile.c[i];
      if (!std::isfinite(d)) t.nonfinite = true;
      t.err_sq += d * d;
      t.max_abs = std::max(t.max_abs, std::fabs(d));
    }
  }

  const trace::Reader& reader_;
  const Options& o_;
  Result& result_;
  std::set<std::int64_t> captured_;
  std::map<std::int64_t, std::unordered_map<std::string, const trace::LayerInfo*>> layers_;  // step -> name -> layer
  // amax per (step, layer, role, "" for the stored tensor or the RHT sign vector of its transposed operand)
  std::map<std::tuple<std::int64_t, std::string, int, std::string>, float> amax_;
  const Datapath* datapath_;  // the row Options::datapath names (nullptr for "recipe" and "f64")
  std::size_t columns_;       // the recipes, and bf16 after them where recipe maps name it
  std::uint64_t item_ = 0;    // the work item being done
};

}  // namespace

Result run(const std::filesystem::path& trace_path, const Options& options_in) {
  const auto t0 = std::chrono::steady_clock::now();
  Options o = options_in;
  const detail::MapColumns map_columns = detail::map_columns(o.recipe_maps);
  if (!o.recipe_maps.empty()) {
    if (!o.recipes.empty()) throw UsageError("give {recipes} or {recipe_map}, not both");
    o.recipes = map_columns.recipes;
  } else if (o.recipes.empty()) {
    for (const char* name : {"ue5m3", "nvfp4", "mxfp4"}) o.recipes.push_back(*find_recipe(name));
  }
  for (const Recipe& r : o.recipes) {
    const auto problems = validate(r);
    if (!problems.empty()) throw UsageError("recipe " + r.name + ": " + problems.front());
  }
  if (o.datapath != kF64 && o.datapath != kRecipeDatapath && !o.gemm_evaluator && !find_datapath(o.datapath)) {
    throw UsageError("{datapath}: unknown datapath '" + o.datapath + "' (known: recipe f64 " + datapath_names() + ")");
  }
  if (o.headroom_period < 1) throw UsageError("the headroom period D must be >= 1");
  const std::optional<detail::LayerFilter> layer_filter =
      o.layers.empty() ? std::nullopt : std::optional<detail::LayerFilter>(detail::LayerFilter(o.layers));

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
  if (map_columns.bf16) {
    result.recipe_names.push_back(detail::kBf16);
    result.recipe_sources.push_back("not quantized: rounded RNE to BF16, GEMMs in float64 (recipe maps)");
  }

  const detail::Selection selection = detail::select(info, o, layer_filter);
  const auto& work = selection.work;
  for (const auto* s : selection.steps) result.steps.push_back(s->step);
  const detail::MapChoice map_choice = detail::resolve_maps(o.recipe_maps, selection);

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
  Replayer replayer(reader, o, result, map_columns.bf16);
  std::uint64_t done = 0;
  for (std::size_t w = 0; w < work.size(); ++w) {
    const auto& [s, l] = work[w];
    const std::array<bool, 3> which{mine(*l, 0), mine(*l, 1), mine(*l, 2)};
    if (!which[0] && !which[1] && !which[2]) continue;
    replayer.run_step_layer(*s, *l, which, 3 * static_cast<std::uint64_t>(w),
                            [&](std::uint64_t in_layer, const std::string& what) {
                              if (o.progress) o.progress(done + in_layer, total_elements, what);
                            });
    const trace::TensorInfo* tensors[3] = {&l->x(), &l->w(), &l->dy()};
    for (int i = 0; i < 3; ++i) done += which[i] ? tensors[i]->elements() : 0;
  }
  if (o.progress) o.progress(total_elements, total_elements, "done");
  if (!o.recipe_maps.empty()) detail::apply_maps(result, o.recipe_maps, map_choice);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

Result merge(std::vector<Result> shares) {
  return join_shares(std::move(shares), [](Result& out, Result&& part) {
    merge_in_item_order(out.tensors, std::move(part.tensors));
    merge_in_item_order(out.gemms, std::move(part.gemms));
    merge_in_item_order(out.headroom, std::move(part.headroom));
    out.tensor_bytes += part.tensor_bytes;
    out.seconds = std::max(out.seconds, part.seconds);
  });
}

}  // namespace fp4sim::replay
