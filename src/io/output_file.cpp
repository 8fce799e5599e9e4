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
}  // namespace

OutputFile::OutputFile(std::filesystem::path path)
    : path_(std::move(path)), temporary_(temporary_for(path_)), stream_(temporary_, std::ios::binary) {
  if (!stream_) throw DataError(path_.string() + ": cannot open for writing");
}

OutputFile::~OutputFile() {
  if (!committed_) {
    stream_.close();
    std::error_code ec;
    std::filesystem::remove(temporary_, ec);
  }
}

void OutputFile::commit() {
  stream_.flush();
  if (!stream_) throw DataError(path_.string() + ": write failed");
  stream_.close();
  std::error_code ec;
  std::filesystem::rename(temporary_, path_, ec);
  if (ec) throw DataError(path_.string() + ": cannot rename into place: " + ec.message());
  committed_ = true;
}

OutputPath::OutputPath(std::filesystem::path path) : path_(std::move(path)), temporary_(temporary_for(path_)) {}

OutputPath::~OutputPath() {
  if (!committed_) {
    std::error_code ec;
    std::filesystem::remove(temporary_, ec);
  }
}

void OutputPath::commit() {
  std::error_code ec;
  std::filesystem::rename(temporary_, path_, ec);
  if (ec) throw DataError(path_.string() + ": cannot rename into place: " + ec.message());
  committed_ = true;
}

namespace {
std::filesystem::path without_trailing_separator(std::filesystem::path path) {
  while (!path.has_filename() && path.has_relative_path()) path = path.parent_path();
  return path;
}
}  // namespace

OutputDirectory::OutputDirectory(std::filesystem::path path)
    : path_(without_trailing_separator(std::move(path))), temporary_(temporary_for(path_)) {
  std::error_code ec;
  const auto status = std::filesystem::symlink_status(path_, ec);
  if (std::filesystem::exists(status)) {
    if (!std::filesystem::is_directory(status)) throw UsageError(path_.string() + ": exists and is not a directory");
    if (!std::filesystem::is_empty(path_, ec) || ec) {
      throw UsageError(path_.string() + ": directory exists and is not empty (give a new or empty directory)");
    }
  }
  std::filesystem::remove_all(temporary_, ec);  // a stale one left by a killed run of the same pid
  if (!std::filesystem::create_directory(temporary_, ec) || ec) {
    throw DataError(temporary_.string() + ": cannot create directory: " + ec.message());
  }
}

OutputDirectory::~OutputDirectory() {
  if (!committed_) {
    std::error_code ec;
    std::filesystem::remove_all(temporary_, ec);
  }
}

void OutputDirectory::commit() {
  std::error_code ec;
  std::filesystem::rename(temporary_, path_, ec);
  if (ec) throw DataError(path_.string() + ": cannot rename into place: " + ec.message());
  committed_ = true;
}

}  // namespace fp4sim
