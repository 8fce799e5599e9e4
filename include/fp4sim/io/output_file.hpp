// An output written under a temporary name and renamed into place by commit(); destroyed without
// commit() it removes the temporary, so a failed command leaves no partial file (docs/cli.md).
#pragma once

#include <filesystem>
#include <fstream>

namespace fp4sim {

class OutputFile {
 public:
  explicit OutputFile(std::filesystem::path path);
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();

  std::ofstream& stream() { return stream_; }
  const std::filesystem::path& temporary_path() const { return temporary_; }
  void commit();

 private:
  std::filesystem::path path_;
  std::filesystem::path temporary_;
  std::ofstream stream_;
  bool committed_ = false;
};

// For writers that need a path rather than a stream (the HDF5 C library): the same contract.
class OutputPath {
 public:
  explicit OutputPath(std::filesystem::path path);
  OutputPath(const OutputPath&) = delete;
  OutputPath& operator=(const OutputPath&) = delete;
  ~OutputPath();

  const std::filesystem::path& temporary_path() const { return temporary_; }
  void commit();

 private:
  std::filesystem::path path_;
  std::filesystem::path temporary_;
  bool committed_ = false;
};

}  // namespace fp4sim
