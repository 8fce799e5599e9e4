#include "fp4sim/io/output_file.hpp"

#include <system_error>
#include <unistd.h>

#include "fp4sim/core/error.hpp"

namespace fp4sim {

namespace {

std::filesystem::path temporary_for(const std::filesystem::path& path) {
  std::filesystem::path t = path;
  t += ".tmp." + std::to_string(::getpid());
  return t;
}

void rename_into_place(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::error_code ec;
  std::filesystem::rename(from, to, ec);
  if (ec) throw DataError(to.string() + ": cannot rename into place: " + ec.message());
}

}  // namespace

OutputPath::OutputPath(std::filesystem::path path) : path_(std::move(path)), temporary_(temporary_for(path_)) {}

OutputPath::~OutputPath() {
  if (!committed_) {
    std::error_code ec;
    std::filesystem::remove_all(temporary_, ec);
  }
}

void OutputPath::commit() {
  rename_into_place(temporary_, path_);
  committed_ = true;
}

OutputFile::OutputFile(std::filesystem::path path)
    : output_(std::move(path)), stream_(output_.temporary_path(), std::ios::binary) {
  if (!stream_) throw DataError(output_.path().string() + ": cannot open for writing");
}

void OutputFile::commit() {
  stream_.flush();
  if (!stream_) throw DataError(output_.path().string() + ": write failed");
  stream_.close();
  output_.commit();
}

OutputDirectory::OutputDirectory(std::filesystem::path path) : output_(std::move(path)) {
  std::filesystem::create_directories(output_.temporary_path());
}

void OutputDirectory::commit() {
  std::error_code ec;
  if (!std::filesystem::exists(output_.path(), ec)) {
    output_.commit();
    return;
  }
  for (const auto& entry : std::filesystem::directory_iterator(output_.temporary_path())) {
    rename_into_place(entry.path(), output_.path() / entry.path().filename());
  }
  // The emptied temporary goes with the OutputPath, which stays uncommitted.
}

}  // namespace fp4sim
