// libFuzzer harness: fp4sim::npy::read on arbitrary bytes, then every conversion the commands apply to
// what it returns. A malformed file must be a DataError; any other exception, a crash, a sanitizer
// report or an allocation past libFuzzer's -malloc_limit_mb is a finding (docs/fuzzing.md).
//
// npy::read takes a path (it checks the file's size and kind), so each input is written to one file of
// this process in the temporary directory (tmpfs on Linux CI runners and here).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "fp4sim/core/error.hpp"
#include "fp4sim/io/npy.hpp"

namespace {

// The file each input is written to, removed when the fuzzer exits.
struct InputFile {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("fp4sim_npy_fuzz." + std::to_string(getpid()) + ".npy");
  ~InputFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

const std::filesystem::path& write_input(const std::uint8_t* data, std::size_t size) {
  static const InputFile file;
  std::ofstream out(file.path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) __builtin_trap();  // the harness itself failed: not a finding about the reader
  return file.path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::filesystem::path& path = write_input(data, size);
  try {
    const fp4sim::npy::Array a = fp4sim::npy::read(path);
    if (a.bytes.size() != a.size() * fp4sim::npy::dtype_size(a.dtype)) __builtin_trap();
    try {
      (void)fp4sim::npy::as_float32(a, path);
    } catch (const fp4sim::DataError&) {
    }
    try {
      (void)fp4sim::npy::as_float64(a, path);
    } catch (const fp4sim::DataError&) {
    }
    try {
      (void)fp4sim::npy::as_uint32(a, path);
    } catch (const fp4sim::DataError&) {
    }
    (void)fp4sim::npy::read_random_bits(path);
  } catch (const fp4sim::DataError&) {
  }
  return 0;
}
