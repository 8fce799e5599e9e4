#include "fp4sim/analysis/sweep.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <new>
#include <sstream>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/random.hpp"

namespace fp4sim::sweep {

namespace {

bool parse_double(std::string_view text, double& out) {
  const std::string s(text);
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size() && std::isfinite(out);
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Uniform in (0, 1) from a 32-bit word: (w + 0.5) / 2^32, never 0 or 1.
double uniform(std::uint32_t w) { return (static_cast<double>(w) + 0.5) * 0x1p-32; }

constexpr double kTwoPi = 6.283185307179586476925286766559;

// Philox block `draw` of element `index`: counter {index, draw (and the stream)}, key = seed.
Philox4x32::Counter block(std::uint64_t seed, std::uint64_t stream, std::uint64_t index, std::uint32_t draw) {
  const Philox4x32::Counter ctr{static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
                                static_cast<std::uint32_t>(stream) ^ (draw << 24),
                                static_cast<std::uint32_t>(stream >> 32)};
  return Philox4x32::generate(ctr, {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
}

// Box-Muller: one standard normal from two uniforms.
double normal_of(std::uint32_t a, std::uint32_t b) {
  return std::sqrt(-2.0 * std::log(uniform(a))) * std::cos(kTwoPi * uniform(b));
}

}  // namespace

std::optional<Distribution> parse_distribution(std::string_view text) {
  Distribution d;
  std::string_view base = text;
  const auto plus = text.find('+');
  if (plus != std::string_view::npos) {
    base = text.substr(0, plus);
    const std::string_view suffix = text.substr(plus + 1);
    if (suffix.substr(0, 9) != "outliers:") return std::nullopt;
    const std::string_view rest = suffix.substr(9);
    const auto colon = rest.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    if (!parse_double(rest.substr(0, colon), d.outlier_probability) ||
        !parse_double(rest.substr(colon + 1), d.outlier_scale)) {
      return std::nullopt;
    }
    if (d.outlier_probability < 0 || d.outlier_probability > 1 || d.outlier_scale <= 0) return std::nullopt;
  }
  const auto colon = base.find(':');
  const std::string_view kind = base.substr(0, colon);
  const std::string_view param = colon == std::string_view::npos ? std::string_view{} : base.substr(colon + 1);
  if (kind == "normal" && param.empty()) {
    d.kind = Distribution::Kind::normal;
  } else if (kind == "laplace" && param.empty()) {
    d.kind = Distribution::Kind::laplace;
  } else if (kind == "student-t") {
    d.kind = Distribution::Kind::student_t;
    d.parameter = 3;
    if (!param.empty() && !parse_double(param, d.parameter)) return std::nullopt;
    if (d.parameter < 1 || d.parameter > 64 || d.parameter != std::floor(d.parameter)) return std::nullopt;
  } else if (kind == "lognormal") {
    d.kind = Distribution::Kind::lognormal;
    d.parameter = 1;
    if (!param.empty() && !parse_double(param, d.parameter)) return std::nullopt;
    if (d.parameter <= 0 || d.parameter > 8) return std::nullopt;
  } else {
    return std::nullopt;
  }
  d.name = std::string(kind);
  if (d.kind == Distribution::Kind::student_t || d.kind == Distribution::Kind::lognormal) {
    d.name += ":" + number_text(d.parameter);
  }
  if (d.outlier_probability > 0) {
    d.name += "+outliers:" + number_text(d.outlier_probability) + ":" + number_text(d.outlier_scale);
  }
  return d;
}

std::vector<float> generate(const Distribution& d, std::size_t rows, std::size_t cols, std::uint64_t seed,
                            std::uint64_t stream) {
  std::vector<float> out(rows * cols);
  const int nu = static_cast<int>(d.parameter);
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto b0 = block(seed, stream, i, 0);
    double v = 0.0;
    switch (d.kind) {
      case Distribution::Kind::normal: v = normal_of(b0[0], b0[1]); break;
      case Distribution::Kind::laplace: {
        // Inverse CDF: -sign(u - 1/2) * log(1 - 2|u - 1/2|).
        const double u = uniform(b0[0]) - 0.5;
        v = (u < 0 ? 1.0 : -1.0) * std::log(1.0 - 2.0 * std::fabs(u));
        break;
      }
      case Distribution::Kind::student_t: {
        // Z / sqrt(V / nu), V a sum of nu squared normals (two per Philox block).
        const double z = normal_of(b0[0], b0[1]);
        double chi2 = 0.0;
        for (int k = 0; k < nu; k += 2) {
          const auto bk = block(seed, stream, i, static_cast<std::uint32_t>(1 + k / 2));
          const double n1 = normal_of(bk[0], bk[1]);
          chi2 += n1 * n1;
          if (k + 1 < nu) {
            const double n2 = normal_of(bk[2], bk[3]);
            chi2 += n2 * n2;
          }
        }
        v = z / std::sqrt(chi2 / nu);
        break;
      }
      case Distribution::Kind::lognormal:
        v = std::exp(d.parameter * normal_of(b0[0], b0[1])) * ((b0[3] & 1) ? -1.0 : 1.0);
        break;
    }
    if (d.outlier_probability > 0 && uniform(b0[2]) < d.outlier_probability) v *= d.outlier_scale;
    out[i] = static_cast<float>(v);
  }
  return out;
}

std::string grid_point_name(const Format& element, const Format& scale, int block, const TensorScaleSetting& ts,
                            Rounding rounding, std::optional<ScaleRule> rule, std::optional<BlockScaleChoice> choice) {
  return format_name(element) + "/" + format_name(scale) + "/b" + std::to_string(block) + "/" +
         tensor_scale_text(ts.policy, ts.period) + "/" + std::string(name_of(rounding)) +
         (rule ? "/" + std::string(name_of(*rule)) : "") + (choice ? "/" + std::string(name_of(*choice)) : "");
}

std::optional<Recipe> make_recipe(const Grid& grid, const Format& element, const Format& scale, int block,
                                  const TensorScaleSetting& ts, Rounding rounding, std::string& why,
                                  std::optional<ScaleRule> rule, std::optional<BlockScaleChoice> choice) {
  Recipe r = grid.base;
  r.element = element;
  r.scale = scale;
  r.block = block;
  r.tensor_scale = ts.policy;
  r.period = ts.period;
  r.element_rounding = rounding;
  r.grad_rounding = rounding;
  r.rht_wgrad = false;
  if (scale.specials == Specials::pow2_nan) {
    r.scale_rule = rule.value_or(ScaleRule::pow2_floor);
    r.zero_scale = ZeroScale::keep;
    r.dequantize_order = DequantizeOrder::portable;
    r.alpha = AlphaRule::one;
  } else {
    r.scale_rule = rule.value_or(ScaleRule::two_level);
    if (r.dequantize_order == DequantizeOrder::te_kernel && ts.policy == TensorScalePolicy::none) {
      r.dequantize_order = DequantizeOrder::portable;
    }
  }
  if (choice) r.block_choice = *choice;
  r.name = grid_point_name(element, scale, block, ts, rounding, rule, choice);
  const auto problems = validate(r);
  if (!problems.empty()) {
    why = problems.front();
    return std::nullopt;
  }
  return r;
}

namespace {

struct GridPoint {
  Recipe recipe;
  double rho = 1.0;  // synthetic periodic
  std::string name;
};

std::vector<GridPoint> expand(const Options& o, bool synthetic, std::vector<Skipped>& skipped) {
  std::vector<TensorScaleSetting> scales = o.grid.tensor_scales;
  if (scales.empty()) scales = {*parse_tensor_scale("none"), *parse_tensor_scale("current")};
  // The scale rule and block choice of each grid point (none: the scale format's rule, the base's choice).
  struct Variant {
    std::optional<ScaleRule> rule;
    std::optional<BlockScaleChoice> choice;
  };
  std::vector<std::optional<ScaleRule>> rules(o.grid.scale_rules.begin(), o.grid.scale_rules.end());
  if (rules.empty()) rules.push_back(std::nullopt);
  std::vector<std::optional<BlockScaleChoice>> choices(o.grid.block_choices.begin(), o.grid.block_choices.end());
  if (choices.empty()) choices.push_back(std::nullopt);
  std::vector<Variant> variants;
  for (const auto& rule : rules) {
    for (const auto& choice : choices) variants.push_back({rule, choice});
  }
  std::vector<GridPoint> points;
  for (const Format& e : o.grid.element_formats)
    for (const Format& s : o.grid.scale_formats)
      for (int b : o.grid.blocks)
        for (const auto& ts : scales)
          for (Rounding rd : o.grid.roundings)
            for (const Variant& v : variants) {
              std::string why;
              auto r = make_recipe(o.grid, e, s, b, ts, rd, why, v.rule, v.choice);
              const std::string name = grid_point_name(e, s, b, ts, rd, v.rule, v.choice);
              if (!r) {
                skipped.push_back({name, why});
                continue;
              }
              if (synthetic && ts.policy == TensorScalePolicy::periodic) {
                for (double rho : o.grid.rhos) {
                  GridPoint p{*r, rho, name + "/rho=" + number_text(rho)};
                  p.recipe.name = p.name;
                  points.push_back(std::move(p));
                }
              } else {
                points.push_back({*r, 1.0, name});
              }
            }
  return points;
}

}  // namespace

Result run(const Options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  Result result;
  result.seed = o.seed;
  const bool synthetic = o.trace.empty();
  if (o.grid.element_formats.empty() || o.grid.scale_formats.empty() || o.grid.blocks.empty() ||
      o.grid.roundings.empty()) {
    throw UsageError("sweep: every grid dimension needs at least one value");
  }
  const std::vector<GridPoint> points = expand(o, synthetic, result.skipped);
  for (const auto& p : points) result.configs.push_back(p.name);
  if (points.empty()) throw UsageError("sweep: no valid grid point (every combination was skipped)");

  if (!synthetic) {
    result.input = o.trace.string();
    replay::Options ro;
    for (const auto& p : points) {
      if (!o.recipe_map) {
        ro.recipes.push_back(p.recipe);
        continue;
      }
      replay::RecipeMap m{p.name, o.recipe_map->rules};  // the grid point's policy, named by it
      for (replay::MapRule& rule : m.rules) {
        if (rule.grid) rule.recipe = p.recipe, rule.grid = false;
      }
      ro.recipe_maps.push_back(std::move(m));
    }
    if (o.recipe_map) result.recipe_map = o.recipe_map->name;
    ro.gemms = false;
    ro.steps = o.steps;
    ro.step_ranges = o.step_ranges;
    ro.layers = o.layers;
    ro.seed = o.seed;
    ro.hold = o.hold;
    ro.max_slab_bytes = o.max_slab_bytes;
    ro.progress = o.progress;
    ro.share = o.share;
    ro.starting = o.starting;
    replay::Result rr = replay::run(o.trace, ro);
    result.tensors = std::move(rr.tensors);
  } else {
    if (o.distributions.empty()) throw UsageError("sweep: no synthetic distribution");
    if (o.rows == 0 || o.cols == 0) throw UsageError("sweep: {rows} and {cols} must be positive");
    // A synthetic tensor is generated whole: it must fit the memory --slab-mib allows.
    std::size_t bytes = 0;
    if (__builtin_mul_overflow(o.rows, o.cols, &bytes) || __builtin_mul_overflow(bytes, sizeof(float), &bytes) ||
        bytes > o.max_slab_bytes) {
      throw UsageError("sweep: {rows} x {cols} (" + std::to_string(o.rows) + " x " + std::to_string(o.cols) +
                       " float32) exceeds {slab_mib} (" + std::to_string(o.max_slab_bytes >> 20) +
                       " MiB); shrink them or raise {slab_mib}");
    }
    result.input = "synthetic";
    result.rows = o.rows;
    result.cols = o.cols;
    const Gemm view = o.role == Role::grad_output ? Gemm::dgrad : Gemm::fprop;
    const std::vector<int> share_of =
        assign_shares(std::vector<std::uint64_t>(o.distributions.size(), o.rows * o.cols), o.share);
    const auto mine = static_cast<std::size_t>(std::count(share_of.begin(), share_of.end(), o.share.index));
    // Progress in tensor elements quantized, as replay counts them.
    const std::uint64_t elements = std::uint64_t{o.rows} * o.cols, total = mine * points.size() * elements;
    std::uint64_t done = 0;
    // Each tensor and its quantizations are held whole: memory the machine refuses is named by the
    // options that asked for it, not as a bare std::bad_alloc.
    try {
      for (std::size_t item = 0; item < o.distributions.size(); ++item) {
        if (share_of[item] != o.share.index) continue;
        if (o.starting) o.starting(item);
        const Distribution& d = o.distributions[item];
        const std::uint64_t stream = stream_of(d.name);
        const std::vector<float> x = generate(d, o.rows, o.cols, o.seed, stream);
        const float amax = abs_max(x);
        for (const GridPoint& p : points) {
          if (o.progress) o.progress(done, total, d.name + " " + p.name);
          done += elements;
          const Recipe& r = p.recipe;
          replay::TensorEntry e = replay::tensor_entry(r, o.role, view, o.rows, o.cols);
          e.step = 0;
          e.layer = "synthetic";
          e.tensor = d.name;
          e.distribution = d.name;
          e.item = item;
          e.stream = stream;
          e.amax = amax;
          QuantizeRequest q;
          q.spec = operand_for_role(r, o.role);
          q.random.seed = o.seed;
          q.random.stream = stream;
          switch (r.tensor_scale) {
            case TensorScalePolicy::none: e.hold.rho = stats::Figure::none("recipe has no tensor scale"); break;
            case TensorScalePolicy::current:
              e.hold.held_amax = amax;
              e.hold.rho = stats::Figure::of(amax > 0 ? 1.0 : NAN);
              if (!row_scaled(r, q.spec)) q.amax_ref = amax;
              break;
            case TensorScalePolicy::periodic: {
              // RN32(amax / rho): the held amax a tensor that grew by rho since the refresh would have.
              const float held = static_cast<float>(static_cast<double>(amax) / p.rho);
              e.hold.held_amax = held;
              e.hold.rho = stats::Figure::of(held > 0 ? static_cast<double>(amax) / held : NAN);
              q.amax_ref = held;
              break;
            }
          }
          const QuantizedTensor qt = quantize(r, q, x, o.rows, o.cols);
          e.global_encode_scale = qt.global_encode_scale;
          e.global_decode_scale = qt.global_decode_scale;
          stats::accumulate(qt, x, {}, dequantize(qt), e.stats);
          result.tensors.push_back(std::move(e));
        }
      }
    } catch (const std::bad_alloc&) {
      throw DataError("sweep: out of memory for {rows} x {cols} (" + std::to_string(o.rows) + " x " +
                      std::to_string(o.cols) + " float32, " + std::to_string(bytes >> 20) +
                      " MiB a tensor, a few held at once): shrink them ({slab_mib} allows " +
                      std::to_string(o.max_slab_bytes >> 20) + " MiB, more than this machine gives)");
    }
    if (o.progress) o.progress(total, total, "done");
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

Result merge(std::vector<Result> shares) {
  return join_shares(std::move(shares), [](Result& out, Result&& part) {
    merge_in_item_order(out.tensors, std::move(part.tensors));
    out.seconds = std::max(out.seconds, part.seconds);
  });
}

void write_json(const Result& r, std::ostream& os) {
  stats::JsonWriter j(os, false);
  j.begin_object();
  j.field("fp4sim", FP4SIM_VERSION).field("kind", "sweep").field("input", r.input).field("seed", r.seed);
  if (r.input == "synthetic") {
    j.field("rows", static_cast<std::uint64_t>(r.rows)).field("cols", static_cast<std::uint64_t>(r.cols));
  }
  j.key("trace").begin_object().field("path", r.input).end_object();
  if (!r.recipe_map.empty()) j.field("recipe_map", r.recipe_map);
  j.key("configs").begin_array();
  for (const auto& c : r.configs) j.value(c);
  j.end_array();
  j.number_field("seconds", r.seconds);
  j.field("shares", r.shares);
  j.key("tensors").begin_array();
  for (const auto& e : r.tensors) replay::write_tensor_json(j, e);
  j.end_array();
  j.key("skipped").begin_array();
  for (const auto& s : r.skipped) j.begin_object().field("config", s.config).field("reason", s.reason).end_object();
  j.end_array();
  j.end_object();
  os << '\n';
}

void write_csv(const Result& r, std::ostream& os) {
  replay::write_tensors_csv(r.tensors, os);
}

std::string summary(const Result& r) {
  std::ostringstream out;
  // Inputs: distributions (synthetic) or layer/tensor pairs (trace), each column the mean SQNR.
  std::vector<std::string> inputs;
  auto input_of = [&](const replay::TensorEntry& e) {
    return r.input == "synthetic" ? e.distribution : e.tensor;  // trace: per tensor role (x, w, dy)
  };
  for (const auto& e : r.tensors) {
    const std::string in = input_of(e);
    if (std::find(inputs.begin(), inputs.end(), in) == inputs.end()) inputs.push_back(in);
  }
  out << "fp4sim sweep: " << r.input;
  if (r.input == "synthetic") out << " (" << r.rows << " x " << r.cols << ", seed " << r.seed << ")";
  out << "\n" << r.configs.size() << " configuration(s)";
  if (!r.skipped.empty()) out << ", " << r.skipped.size() << " skipped (see JSON 'skipped')";
  out << "; mean SQNR in dB" << (r.input == "synthetic" ? "" : " over the trace's tensors of each kind");
  // With a recipe map (entries then name their policy, the grid point): -10 log10 of the mean rel_mse, a
  // BF16 entry counting its own (0 when exact), as replay's per-policy summary.
  const bool policies = !r.recipe_map.empty();
  if (policies) out << "\n(recipe map " << r.recipe_map << ": SQNR = -10 log10 of the mean rel_mse, BF16 entries included)";
  out << "\n\n";
  std::size_t width = 14;
  for (const auto& c : r.configs) width = std::max(width, c.size() + 2);
  char buf[64];
  std::vector<int> col(inputs.size());
  out << std::string(width, ' ');
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    col[i] = static_cast<int>(std::max<std::size_t>(10, inputs[i].size() + 2));
    std::snprintf(buf, sizeof buf, "%*s", col[i], inputs[i].c_str());
    out << buf;
  }
  out << "\n";
  std::vector<std::pair<double, std::string>> best(inputs.size(), {-INFINITY, "-"});
  for (const auto& c : r.configs) {
    out << c << std::string(width - c.size(), ' ');
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      double sum = 0;
      int n = 0;
      for (const auto& e : r.tensors) {
        if ((policies ? e.policy : e.recipe) == c && input_of(e) == inputs[i]) {
          const auto s = policies ? e.stats.error.rel_mse() : e.stats.error.sqnr_db();
          if (s.value) {
            sum += *s.value;
            ++n;
          }
        }
      }
      std::optional<double> value;
      if (n && !policies) value = sum / n;
      if (n && policies && sum > 0) value = -10.0 * std::log10(sum / n);
      if (value) {
        std::snprintf(buf, sizeof buf, "%*.2f", col[i], *value);
        if (*value > best[i].first) best[i] = {*value, c};
      } else {
        std::snprintf(buf, sizeof buf, "%*s", col[i], "-");
      }
      out << buf;
    }
    out << "\n";
  }
  out << "\nBest configuration per input\n";
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%.2f", best[i].first);
    out << "  " << inputs[i] << ": " << best[i].second << " (" << (std::isfinite(best[i].first) ? buf : "-")
        << " dB)\n";
  }
  std::snprintf(buf, sizeof buf, "%.2f", r.seconds);
  out << "\n" << buf << " s";
  if (r.shares > 1) out << " on " << r.shares << " processes";
  out << "\n";
  return out.str();
}

}  // namespace fp4sim::sweep
