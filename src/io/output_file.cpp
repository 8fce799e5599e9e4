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

std::filesystem::path without_trailing_separator(std::filesystem::path path) {
  while (!path.has_filename() && path.has_relative_path()) path = path.parent_path();
  return path;
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

OutputDirectory::OutputDirectory(std::filesystem::path path, Existing existing)
    : output_(without_trailing_separator(std::move(path))), existing_(existing) {
  std::error_code ec;
  const auto status = std::filesystem::symlink_status(output_.path(), ec);
  if (existing_ == Existing::refuse && std::filesystem::exists(status)) {
    if (!std::filesystem::is_directory(status)) {
      throw UsageError(output_.path().string() + ": exists and is not a directory");
    }
    if (!std::filesystem::is_empty(output_.path(), ec) || ec) {
      throw UsageError(output_.path().string() + ": directory exists and is not empty (give a new or empty directory)");
    }
  }
  std::filesystem::remove_all(temporary_path(), ec);  // a stale one left by a killed run of the same pid
  // A new directory (refuse) needs its parent; a merged one (plots) makes its parents as before.
  const bool created = existing_ == Existing::refuse ? std::filesystem::create_directory(temporary_path(), ec)
                                                     : std::filesystem::create_directories(temporary_path(), ec);
  if (!created || ec) {
    throw DataError(temporary_path().string() + ": cannot create directory: " + ec.message());
  }
}

void OutputDirectory::commit() {
  std::error_code ec;
  if (existing_ == Existing::refuse || !std::filesystem::exists(output_.path(), ec)) {
    output_.commit();  // rename(2) replaces an empty directory
    return;
  }
  for (const auto& entry : std::filesystem::directory_iterator(temporary_path())) {
    rename_into_place(entry.path(), output_.path() / entry.path().filename());
  }
  // The emptied temporary goes with the OutputPath, which stays uncommitted.
}

}  // namespace fp4sim
