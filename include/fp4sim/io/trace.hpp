// Tensor traces (docs/trace-format.md, versions 1 and 2): a validating, streaming reader and a writer.
//
// Reader: the constructor walks every step, layer and tensor and checks every rule of the format on
// the metadata alone (attributes, ranks, element types, shapes); a broken rule is a DataError naming
// the file, the HDF5 path and the rule. Tensor data is read afterwards on demand, whole or as row
// hyperslabs, so a caller holds at most one tensor (or one slab of a large one) in memory, never the
// file. Chunked and filtered (gzip, shuffle) storage is read through the HDF5 library.
//
// Version 2 adds call groups (several forwards of one layer in a step, each its own layer to the reader)
// and the quantized operands an FP4 layer used (extra content to the reader); both read alike.
//
// Writer: writes the v1 layout (tests, benchmarks, tools) through hdf5::File (temporary + rename).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fp4sim/io/hdf5.hpp"

namespace fp4sim::trace {

inline constexpr std::string_view kSchema = "fp4-trace";
inline constexpr std::int64_t kSchemaVersion = 1;        // what Writer writes
inline constexpr std::int64_t kNewestSchemaVersion = 2;  // the reader knows 1 .. this

// The role of a tensor of a linear layer (docs/trace-format.md @role); `output` is y, which has no @role name.
enum class TensorRole : std::uint8_t { activation, weight, grad_output, grad_input, grad_weight, output };
std::string_view tensor_role_name(TensorRole role);
std::optional<TensorRole> parse_tensor_role(std::string_view name);  // the @role names only
std::optional<TensorRole> role_from_dataset_name(std::string_view name);  // x w dy dx dw y
std::string_view canonical_name(TensorRole role);                     // x w dy dx dw y

enum class ElementType : std::uint8_t { float32, float64 };

struct TensorInfo {
  std::string name;      // dataset name in its layer group ("x")
  std::string path;      // full HDF5 path ("/step_000200/lm_head/x")
  TensorRole role = TensorRole::activation;
  std::size_t rows = 0, cols = 0;
  ElementType type = ElementType::float32;
  std::string orig_dtype;  // @orig_dtype ("bfloat16", "float16") or ""
  bool chunked = false;

  std::size_t elements() const { return rows * cols; }
};

struct LayerInfo {
  std::string name;  // group path relative to the step group ("model.layers.3.mlp.down_proj")
  std::string path;  // full HDF5 path
  std::vector<TensorInfo> tensors;  // every recognised tensor (x, w, dy always present)

  const TensorInfo* find(TensorRole role) const;
  const TensorInfo& x() const { return *find(TensorRole::activation); }
  const TensorInfo& w() const { return *find(TensorRole::weight); }
  const TensorInfo& dy() const { return *find(TensorRole::grad_output); }
};

struct StepInfo {
  std::int64_t step = 0;  // @step, one-based optimizer step
  std::string group;      // "step_000200"
  std::vector<LayerInfo> layers;  // in name order
};

struct TraceInfo {
  std::string path;
  std::int64_t schema_version = 0;
  std::string model, framework, notes;  // optional root attributes ("" when absent)
  std::vector<StepInfo> steps;          // ascending @step
  std::uint64_t x_w_dy_elements = 0;    // elements of every x, w and dy

  const StepInfo* find_step(std::int64_t step) const;
};

class Reader {
 public:
  // Opens and validates; DataError on any broken rule (never crashes on a malformed file).
  explicit Reader(const std::filesystem::path& path);
  // The same on a file already open for reading (hdf5::File::open_image: a trace held in memory).
  explicit Reader(hdf5::File opened);

  const TraceInfo& info() const { return info_; }
  const std::string& path() const { return info_.path; }

  // Rows [row0, row0 + nrows) of a tensor, row-major, converted exactly (float32 data into float or
  // double, float64 data into double). float64 data into float is rounded to nearest even.
  void read_rows(const TensorInfo& t, std::size_t row0, std::size_t nrows, std::span<float> out) const;
  void read_rows(const TensorInfo& t, std::size_t row0, std::size_t nrows, std::span<double> out) const;
  // Columns [col0, col0 + ncols) of every row of a tensor, row-major [rows, ncols], converted exactly.
  void read_columns(const TensorInfo& t, std::size_t col0, std::size_t ncols, std::span<double> out) const;
  std::vector<float> read_float(const TensorInfo& t) const;
  std::vector<double> read_double(const TensorInfo& t) const;

  // NaN-ignoring max |x| over the tensor as float32 (the quantizer's tensor amax), streamed in slabs
  // of at most max_slab_elements.
  float amax(const TensorInfo& t, std::size_t max_slab_elements) const;

 private:
  hdf5::File file_;
  TraceInfo info_;
};

struct WriterOptions {
  std::string model, framework, notes;
  int gzip = 4;            // 0: no compression
  bool shuffle = true;
  std::size_t chunk_rows = 0;  // 0: about 1 MiB chunks
};

class Writer {
 public:
  Writer(const std::filesystem::path& path, const WriterOptions& options = {});

  // The group of a step (created with @step on first use).
  hdf5::Group& step_group(std::int64_t step);
  // The group of a layer in a step.
  hdf5::Group layer_group(std::int64_t step, std::string_view layer);

  // Writes one 2-D tensor of a layer; orig_dtype/role are written as attributes when non-empty.
  void write_tensor(std::int64_t step, std::string_view layer, std::string_view name, std::size_t rows,
                    std::size_t cols, std::span<const float> data, std::string_view orig_dtype = "",
                    std::string_view role = "");
  void write_tensor(std::int64_t step, std::string_view layer, std::string_view name, std::size_t rows,
                    std::size_t cols, std::span<const double> data, std::string_view orig_dtype = "",
                    std::string_view role = "");
  // An empty float32 tensor to fill with Dataset::write_rows (large tensors, benchmarks).
  hdf5::Dataset create_tensor(std::int64_t step, std::string_view layer, std::string_view name, std::size_t rows,
                              std::size_t cols);

  hdf5::File& file() { return file_; }
  void commit();

  static std::string step_group_name(std::int64_t step);  // "step_000200"

 private:
  hdf5::DatasetOptions dataset_options(std::size_t rows, std::size_t cols, std::size_t element_size) const;
  template <class T>
  void write_values(std::int64_t step, std::string_view layer, std::string_view name, std::size_t rows,
                    std::size_t cols, std::span<const T> data, std::string_view orig_dtype, std::string_view role);
  WriterOptions options_;
  hdf5::File file_;
  std::vector<std::pair<std::int64_t, hdf5::Group>> steps_;
};

}  // namespace fp4sim::trace
