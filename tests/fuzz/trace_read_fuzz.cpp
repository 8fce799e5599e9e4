// libFuzzer harness: the trace reader (fp4sim::trace::Reader) on arbitrary bytes as an HDF5 file image
// (hdf5::File::open_image: the core driver, no file system), then a bounded read of every tensor it
// accepted. A malformed trace must be a DataError; any other exception, a crash, a sanitizer report or
// an allocation past libFuzzer's -malloc_limit_mb is a finding (docs/fuzzing.md).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fp4sim/core/error.hpp"
#include "fp4sim/io/trace.hpp"

namespace {

// At most this many elements of a tensor are read: enough to reach the data of every layout (contiguous,
// chunked, filtered) without making a large declared shape the fuzzer's bottleneck.
constexpr std::size_t kReadElements = 1 << 16;

void read_some(const fp4sim::trace::Reader& reader, const fp4sim::trace::TensorInfo& t) {
  if (t.cols == 0 || t.rows == 0) return;
  const std::size_t rows = std::min(t.rows, std::max<std::size_t>(1, kReadElements / t.cols));
  if (rows * t.cols > kReadElements) return;  // one row is already too long to read here
  std::vector<double> values(rows * t.cols);
  reader.read_rows(t, 0, rows, std::span<double>(values));
  std::vector<float> last(t.cols);
  reader.read_rows(t, t.rows - 1, 1, std::span<float>(last));
  if (t.elements() <= kReadElements) (void)reader.amax(t, kReadElements / 4);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const fp4sim::trace::Reader reader(
        fp4sim::hdf5::File::open_image(std::as_bytes(std::span(data, size)), "fuzz.h5"));
    for (const auto& step : reader.info().steps) {
      for (const auto& layer : step.layers) {
        for (const auto& tensor : layer.tensors) {
          try {
            read_some(reader, tensor);
          } catch (const fp4sim::DataError&) {
          }
        }
      }
    }
  } catch (const fp4sim::DataError&) {
  }
  return 0;
}
