// Outputs written under a temporary name and renamed into place by commit(); destroyed without commit()
// they remove the temporary, so a failed command leaves no partial output (docs/cli.md). One rule for
// every output: the temporary is "<path>.tmp.<pid>", and commit() renames it onto the path.
#pragma once

#include <filesystem>
#include <fstream>

namespace fp4sim {

// For writers that need a path rather than a stream (the HDF5 C library, a script writing a directory).
class OutputPath {
 public:
  explicit OutputPath(std::filesystem::path path);
  OutputPath(const OutputPath&) = delete;
  OutputPath& operator=(const OutputPath&) = delete;
  ~OutputPath();

  const std::filesystem::path& path() const { return path_; }
  const std::filesystem::path& temporary_path() const { return temporary_; }
  void commit();

 private:
  std::filesystem::path path_;
  std::filesystem::path temporary_;
  bool committed_ = false;
};

// A file written through a stream.
class OutputFile {
 public:
  explicit OutputFile(std::filesystem::path path);

  std::ofstream& stream() { return stream_; }
  const std::filesystem::path& temporary_path() const { return output_.temporary_path(); }
  void commit();  // flushes and closes the stream, then renames

 private:
  OutputPath output_;
  std::ofstream stream_;
};

// A directory of files (plots): the temporary directory is renamed into place, or, when the directory
// exists already, its files are moved into it.
class OutputDirectory {
 public:
  explicit OutputDirectory(std::filesystem::path path);

  const std::filesystem::path& temporary_path() const { return output_.temporary_path(); }
  void commit();

 private:
  OutputPath output_;
};

}  // namespace fp4sim
