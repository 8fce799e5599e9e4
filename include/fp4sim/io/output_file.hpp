// An output written under a temporary name and renamed into place by commit(); destroyed without
// commit() it removes the temporary, so a failed command leaves no partial file (docs/cli.md).
// OutputDirectory does the same for a directory of files that must appear together.
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

// A directory built under a temporary sibling name and renamed into place by commit(), so it appears
// with all its files or not at all. The target may not exist yet or be an empty directory (rename(2)
// replaces an empty directory); anything else is refused with a UsageError saying what is there. A
// trailing separator in the path is ignored. Destroyed without commit() it removes the temporary tree.
class OutputDirectory {
 public:
  explicit OutputDirectory(std::filesystem::path path);
  OutputDirectory(const OutputDirectory&) = delete;
  OutputDirectory& operator=(const OutputDirectory&) = delete;
  ~OutputDirectory();

  const std::filesystem::path& path() const { return path_; }
  const std::filesystem::path& temporary_path() const { return temporary_; }
  // Where a file of the directory is written before commit().
  std::filesystem::path file(const std::filesystem::path& name) const { return temporary_ / name; }
  void commit();

 private:
  std::filesystem::path path_;
  std::filesystem::path temporary_;
  bool committed_ = false;
};

}  // namespace fp4sim
