#include "fp4sim/io/trace.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <utility>

#include "fp4sim/core/error.hpp"
#include "fp4sim/core/quantize.hpp"

namespace fp4sim::trace {

namespace {

constexpr std::array<std::pair<std::string_view, TensorRole>, 5> kRoleNames{{
    {"activation", TensorRole::activation},
    {"weight", TensorRole::weight},
    {"grad_output", TensorRole::grad_output},
    {"grad_input", TensorRole::grad_input},
    {"grad_weight", TensorRole::grad_weight},
}};
constexpr std::array<std::pair<std::string_view, TensorRole>, 6> kDatasetNames{{
    {"x", TensorRole::activation},
    {"w", TensorRole::weight},
    {"dy", TensorRole::grad_output},
    {"dx", TensorRole::grad_input},
    {"dw", TensorRole::grad_weight},
    {"y", TensorRole::output},
}};

constexpr std::string_view kRules = " (docs/trace-format.md)";

std::string shape_text(const std::vector<hsize_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string shape_text(const TensorInfo& t) { return "[" + std::to_string(t.rows) + ", " + std::to_string(t.cols) + "]"; }

[[noreturn]] void reject(const std::string& file, const std::string& path, const std::string& rule) {
  throw DataError(file + ": " + path + ": " + rule + std::string(kRules));
}

// A step group name: "step_" followed by at least 6 digits. Returns the number, or nullopt when the
// name is not a step name at all; throws when it looks like one but breaks the padding rule.
std::optional<std::int64_t> step_number(const std::string& file, std::string_view name) {
  if (name.substr(0, 5) != "step_") return std::nullopt;
  const std::string_view digits = name.substr(5);
  // "step_-00001" reads as a step, and steps are one-based: refused, not skipped as an extra group
  if (digits.size() > 1 && (digits[0] == '-' || digits[0] == '+') &&
      std::all_of(digits.begin() + 1, digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    reject(file, "/" + std::string(name), "a step group names a one-based step (step_000001 or later), not a signed one");
  }
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;  // "step_notes" and the like: an extra group, ignored
  }
  if (digits.size() < 6) {
    reject(file, "/" + std::string(name), "step group names are zero-padded to 6 or more digits (step_000200)");
  }
  if (digits.size() > 18) reject(file, "/" + std::string(name), "step number too large");
  std::int64_t n = 0;
  for (char c : digits) n = n * 10 + (c - '0');
  return n;
}

struct LayerScan {
  const hdf5::File& file;
  std::vector<LayerInfo>& layers;
  int depth = 0;
};

void scan_tensor(const hdf5::Group& layer_group, const hdf5::Child& child, std::optional<TensorRole> role,
                 LayerInfo& layer) {
  const std::string& file = layer_group.file_name();
  hdf5::Dataset d = layer_group.open_dataset(child.name);
  if (d.has_attribute("role")) {
    if (d.attribute_class("role") != H5T_STRING) reject(file, d.path(), "@role must be a string");
    const std::string text = d.read_string_attribute("role");
    role = parse_tensor_role(text);
    if (!role) {
      reject(file, d.path(),
             "unknown @role \"" + text + "\" (known: activation, weight, grad_output, grad_input, grad_weight)");
    }
  }
  if (!role) return;  // an extra dataset: ignored
  for (const TensorInfo& t : layer.tensors) {
    if (t.role == *role) {
      reject(file, d.path(), "two datasets of role " + std::string(tensor_role_name(*role)) + " in one layer (" +
                                 t.name + " and " + child.name + ")");
    }
  }
  const std::vector<hsize_t> dims = d.shape();
  if (dims.size() != 2) {
    reject(file, d.path(),
           "tensor is " + std::to_string(dims.size()) + "-D " + shape_text(dims) + "; tensors must be 2-D [rows, cols]");
  }
  const hdf5::TypeClass type = d.type_class();
  if (type == hdf5::TypeClass::other) {
    reject(file, d.path(), "element type " + d.type_description() + "; tensors must be float32 or float64");
  }
  // A dataset declared but never (or not wholly) written holds fill values only: reading it would take
  // as long as its declared size (2^40 rows: forever) for no data, so it is refused here. Chunks are
  // counted (the allocated size says nothing under compression); other layouts report their status.
  if (dims[0] != 0 && dims[1] != 0) {
    const std::string declared = "tensor " + shape_text(dims) + " was declared but ";
    if (d.is_chunked()) {
      hdf5::SilenceErrors quiet;
      hdf5::PropertyListHandle plist(H5Dget_create_plist(d.id()));
      hdf5::DataspaceHandle space(H5Dget_space(d.id()));
      hsize_t chunk[2] = {0, 0};
      hsize_t written = 0;
      if (!plist || H5Pget_chunk(plist.get(), 2, chunk) != 2 || chunk[0] == 0 || chunk[1] == 0 ||
          !space || H5Dget_num_chunks(d.id(), space.get(), &written) < 0) {
        reject(file, d.path(), "cannot read its chunk layout");
      }
      const hsize_t per_row = (dims[1] + chunk[1] - 1) / chunk[1];
      const hsize_t rows = (dims[0] + chunk[0] - 1) / chunk[0];
      hsize_t expected = 0;
      if (__builtin_mul_overflow(rows, per_row, &expected) || written < expected) {
        reject(file, d.path(), declared + (written == 0 ? std::string("never written (no chunk stored)")
                                                        : "not wholly written (" + std::to_string(written) +
                                                              " chunks stored)"));
      }
    } else {
      H5D_space_status_t status = H5D_SPACE_STATUS_ERROR;
      if (H5Dget_space_status(d.id(), &status) < 0 || status != H5D_SPACE_STATUS_ALLOCATED) {
        reject(file, d.path(), declared + "never written (no storage allocated)");
      }
    }
  }
  TensorInfo t;
  t.name = child.name;
  t.path = d.path();
  t.role = *role;
  t.rows = dims[0];
  t.cols = dims[1];
  t.type = type == hdf5::TypeClass::float32 ? ElementType::float32 : ElementType::float64;
  t.chunked = d.is_chunked();
  if (d.has_attribute("orig_dtype") && d.attribute_class("orig_dtype") == H5T_STRING) {
    t.orig_dtype = d.read_string_attribute("orig_dtype");
  }
  layer.tensors.push_back(std::move(t));
}

// A group holding any recognised tensor is a layer; its subgroups are searched too (a framework may
// write "model/layers/3" as nested groups).
void scan_group(const hdf5::Group& group, const std::string& relative, std::vector<LayerInfo>& layers, int depth) {
  const std::string& file = group.file_name();
  if (depth > 64) reject(file, group.path(), "groups nested more than 64 deep");
  LayerInfo layer;
  layer.name = relative;
  layer.path = group.path();
  std::vector<hdf5::Child> subgroups;
  for (const hdf5::Child& child : group.children()) {
    if (child.kind == hdf5::ChildKind::group) {
      subgroups.push_back(child);
    } else if (child.kind == hdf5::ChildKind::dataset) {
      scan_tensor(group, child, role_from_dataset_name(child.name), layer);
    } else {
      const std::optional<TensorRole> role = role_from_dataset_name(child.name);
      if (role) reject(file, group.path() + "/" + child.name, "link does not resolve to a dataset");
    }
  }
  if (!layer.tensors.empty() && !relative.empty()) {
    for (TensorRole required : {TensorRole::activation, TensorRole::weight, TensorRole::grad_output}) {
      if (!layer.find(required)) {
        reject(file, group.path(),
               "layer has no " + std::string(canonical_name(required)) + " (" +
                   std::string(tensor_role_name(required)) + ") dataset; x, w and dy are required");
      }
    }
    const TensorInfo& x = layer.x();
    const TensorInfo& w = layer.w();
    const TensorInfo& dy = layer.dy();
    if (x.cols != w.cols) {
      reject(file, group.path(),
             "shapes disagree: x " + shape_text(x) + " and w " + shape_text(w) + " need x.cols == w.cols (in_features)");
    }
    if (dy.cols != w.rows) {
      reject(file, group.path(),
             "shapes disagree: dy " + shape_text(dy) + " and w " + shape_text(w) + " need dy.cols == w.rows (out_features)");
    }
    if (x.rows != dy.rows) {
      reject(file, group.path(),
             "shapes disagree: x " + shape_text(x) + " and dy " + shape_text(dy) + " need x.rows == dy.rows (tokens)");
    }
    std::sort(layer.tensors.begin(), layer.tensors.end(),
              [](const TensorInfo& a, const TensorInfo& b) { return a.role < b.role; });
    layers.push_back(std::move(layer));
  }
  for (const hdf5::Child& child : subgroups) {
    hdf5::Group sub = group.open_group(child.name);
    scan_group(sub, relative.empty() ? child.name : relative + "/" + child.name, layers, depth + 1);
  }
}

}  // namespace

std::string_view tensor_role_name(TensorRole role) {
  if (role == TensorRole::output) return "output";
  for (const auto& [n, r] : kRoleNames) {
    if (r == role) return n;
  }
  return "?";
}

std::optional<TensorRole> parse_tensor_role(std::string_view name) {
  for (const auto& [n, r] : kRoleNames) {
    if (n == name) return r;
  }
  return std::nullopt;
}

std::optional<TensorRole> role_from_dataset_name(std::string_view name) {
  for (const auto& [n, r] : kDatasetNames) {
    if (n == name) return r;
  }
  return std::nullopt;
}

std::string_view canonical_name(TensorRole role) {
  for (const auto& [n, r] : kDatasetNames) {
    if (r == role) return n;
  }
  return "?";
}

const TensorInfo* LayerInfo::find(TensorRole role) const {
  for (const TensorInfo& t : tensors) {
    if (t.role == role) return &t;
  }
  return nullptr;
}

const StepInfo* TraceInfo::find_step(std::int64_t step) const {
  for (const StepInfo& s : steps) {
    if (s.step == step) return &s;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Reader

Reader::Reader(const std::filesystem::path& path) : Reader(hdf5::File::open(path)) {}

Reader::Reader(hdf5::File opened) : file_(std::move(opened)) {
  const std::string& file = file_.file_name();
  info_.path = file;

  // Root attributes.
  if (!file_.has_attribute("schema")) {
    reject(file, "/", "attribute @schema is missing; a trace's root group carries @schema = \"fp4-trace\"");
  }
  if (file_.attribute_class("schema") != H5T_STRING) reject(file, "/", "@schema must be the string \"fp4-trace\"");
  const std::string schema = file_.read_string_attribute("schema");
  if (schema != kSchema) reject(file, "/", "@schema is \"" + schema + "\", expected \"fp4-trace\"");
  if (!file_.has_attribute("schema_version")) reject(file, "/", "attribute @schema_version is missing");
  if (file_.attribute_class("schema_version") != H5T_INTEGER) reject(file, "/", "@schema_version must be an integer");
  info_.schema_version = file_.read_int_attribute("schema_version");
  if (info_.schema_version < 1 || info_.schema_version > kNewestSchemaVersion) {
    reject(file, "/",
           "unknown @schema_version " + std::to_string(info_.schema_version) + " (this reader knows versions 1 and 2)");
  }
  for (auto [name, out] : {std::pair{"model", &info_.model}, std::pair{"framework", &info_.framework},
                           std::pair{"notes", &info_.notes}}) {
    if (file_.has_attribute(name) && file_.attribute_class(name) == H5T_STRING) *out = file_.read_string_attribute(name);
  }

  // Steps.
  std::map<std::int64_t, std::string> seen;
  for (const hdf5::Child& child : file_.children()) {
    const std::optional<std::int64_t> number = step_number(file, child.name);
    if (!number) continue;
    const std::string where = "/" + child.name;
    if (child.kind != hdf5::ChildKind::group) reject(file, where, "a step must be a group");
    hdf5::Group g = file_.open_group(child.name);
    if (!g.has_attribute("step")) reject(file, where, "attribute @step is missing (required, integer)");
    if (g.attribute_class("step") != H5T_INTEGER) reject(file, where, "@step must be an integer");
    StepInfo s;
    s.step = g.read_int_attribute("step");
    s.group = child.name;
    if (s.step != *number) {
      reject(file, where, "@step = " + std::to_string(s.step) + " disagrees with the group name");
    }
    if (s.step < 1) reject(file, where, "@step = " + std::to_string(s.step) + "; steps are one-based optimizer steps");
    if (auto it = seen.find(s.step); it != seen.end()) {
      reject(file, where, "step " + std::to_string(s.step) + " appears twice (also /" + it->second + ")");
    }
    seen.emplace(s.step, child.name);
    scan_group(g, "", s.layers, 0);
    if (s.layers.empty()) reject(file, where, "step holds no layer group with x, w and dy datasets");
    for (const LayerInfo& l : s.layers) {
      info_.x_w_dy_elements += l.x().elements() + l.w().elements() + l.dy().elements();
    }
    info_.steps.push_back(std::move(s));
  }
  if (info_.steps.empty()) {
    reject(file, "/", "no step groups (step_NNNNNN with @step): a trace holds at least one captured step");
  }
  std::sort(info_.steps.begin(), info_.steps.end(), [](const StepInfo& a, const StepInfo& b) { return a.step < b.step; });
}

void Reader::read_rows(const TensorInfo& t, std::size_t row0, std::size_t nrows, std::span<float> out) const {
  hdf5::Dataset d = file_.open_dataset(t.path);
  if (t.type == ElementType::float32) {
    d.read_rows<float>(row0, nrows, out);
    return;
  }
  // float64 into float: read as double, round to nearest even (the host's default conversion).
  std::vector<double> tmp(out.size());
  d.read_rows<double>(row0, nrows, tmp);
  for (std::size_t i = 0; i < tmp.size(); ++i) out[i] = static_cast<float>(tmp[i]);
}

void Reader::read_rows(const TensorInfo& t, std::size_t row0, std::size_t nrows, std::span<double> out) const {
  file_.open_dataset(t.path).read_rows<double>(row0, nrows, out);
}

void Reader::read_columns(const TensorInfo& t, std::size_t col0, std::size_t ncols, std::span<double> out) const {
  file_.open_dataset(t.path).read_block<double>(0, t.rows, col0, ncols, out);
}

std::vector<float> Reader::read_float(const TensorInfo& t) const {
  std::vector<float> out(t.elements());
  read_rows(t, 0, t.rows, std::span<float>(out));
  return out;
}

std::vector<double> Reader::read_double(const TensorInfo& t) const {
  std::vector<double> out(t.elements());
  read_rows(t, 0, t.rows, std::span<double>(out));
  return out;
}

float Reader::amax(const TensorInfo& t, std::size_t max_slab_elements) const {
  const std::size_t slab_rows =
      t.cols == 0 ? t.rows : std::max<std::size_t>(1, std::min(t.rows, max_slab_elements / std::max<std::size_t>(t.cols, 1)));
  std::vector<float> buffer;
  float amax = 0.0f;
  for (std::size_t r = 0; r < t.rows; r += slab_rows) {
    const std::size_t n = std::min(slab_rows, t.rows - r);
    buffer.resize(n * t.cols);
    read_rows(t, r, n, std::span<float>(buffer));
    amax = std::max(amax, abs_max(buffer));
  }
  return amax;
}

// ---------------------------------------------------------------------------------------------
// Writer

std::string Writer::step_group_name(std::int64_t step) {
  std::string digits = std::to_string(step);
  if (digits.size() < 6) digits.insert(0, 6 - digits.size(), '0');
  return "step_" + digits;
}

Writer::Writer(const std::filesystem::path& path, const WriterOptions& options)
    : options_(options), file_(hdf5::File::create(path)) {
  file_.write_attribute("schema", kSchema);
  file_.write_attribute("schema_version", kSchemaVersion);
  if (!options.model.empty()) file_.write_attribute("model", options.model);
  if (!options.framework.empty()) file_.write_attribute("framework", options.framework);
  if (!options.notes.empty()) file_.write_attribute("notes", options.notes);
}

hdf5::Group& Writer::step_group(std::int64_t step) {
  for (auto& [s, g] : steps_) {
    if (s == step) return g;
  }
  hdf5::Group g = file_.create_group(step_group_name(step));
  g.write_attribute("step", step);
  steps_.emplace_back(step, std::move(g));
  return steps_.back().second;
}

hdf5::Group Writer::layer_group(std::int64_t step, std::string_view layer) {
  hdf5::Group& s = step_group(step);
  if (s.exists(layer)) return s.open_group(layer);
  return s.create_group(layer);
}

hdf5::DatasetOptions Writer::dataset_options(std::size_t rows, std::size_t cols, std::size_t element_size) const {
  hdf5::DatasetOptions o;
  o.gzip = options_.gzip;
  o.shuffle = options_.shuffle;
  if (rows > 0 && cols > 0) {
    std::size_t chunk_rows = options_.chunk_rows;
    if (chunk_rows == 0) chunk_rows = std::max<std::size_t>(1, (std::size_t{1} << 20) / (cols * element_size));
    o.chunk = {std::min(chunk_rows, rows), cols};
  } else {
    o.gzip = 0;
    o.shuffle = false;
  }
  return o;
}

template <class T>
void Writer::write_values(std::int64_t step, std::string_view layer, std::string_view name, std::size_t rows,
                          std::size_t cols, std::span<const T> data, std::string_view orig_dtype,
                          std::string_view role) {
  hdf5::Group g = layer_group(step, layer);
  const hsize_t dims[2] = {rows, cols};
  hdf5::Dataset d =
      g.write_dataset<T>(name, std::span<const hsize_t>(dims), data, dataset_options(rows, cols, sizeof(T)));
  if (!orig_dtype.empty()) d.write_attribute("orig_dtype", orig_dtype);
  if (!role.empty()) d.write_attribute("role", role);
}

void Writer::write_tensor(std::int64_t step, std::string_view layer, std::string_view name, std::size_t rows,
                          std::size_t cols, std::span<const float> data, std::string_view orig_dtype,
                          std::string_view role) {
  write_values(step, layer, name, rows, cols, data, orig_dtype, role);
}

void Writer::write_tensor(std::int64_t step, std::string_view layer, std::string_view name, std::size_t rows,
                          std::size_t cols, std::span<const double> data, std::string_view orig_dtype,
                          std::string_view role) {
  write_values(step, layer, name, rows, cols, data, orig_dtype, role);
}

hdf5::Dataset Writer::create_tensor(std::int64_t step, std::string_view layer, std::string_view name, std::size_t rows,
                                    std::size_t cols) {
  hdf5::Group g = layer_group(step, layer);
  const hsize_t dims[2] = {rows, cols};
  return g.create_dataset<float>(name, std::span<const hsize_t>(dims), dataset_options(rows, cols, 4));
}

void Writer::commit() {
  steps_.clear();
  file_.commit();
}

}  // namespace fp4sim::trace
