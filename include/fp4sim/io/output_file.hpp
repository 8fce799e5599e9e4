// Outputs written under a temporary name and renamed into place by commit(); destroyed without commit()
// they remove the temporary, so a failed command leaves no partial output (docs/cli.md). One rule for
// every output: the temporary is "<path>.tmp.<pid>", and commit() renames it onto the path.
#pragma once

#include <cstdint>
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

// A directory of files that appear together: built under the temporary name, renamed into place by
// commit(). A trailing separator in the path is ignored.
class OutputDirectory {
 public:
  // What may stand at the path already.
  enum class Existing : std::uint8_t {
    refuse,  // nothing or an empty directory (UsageError saying what is there otherwise): the directory
             // appears with all its files or not at all (`vectors`)
    merge,   // an existing directory takes the files, replacing those of the same names (`--plots`)
  };
  explicit OutputDirectory(std::filesystem::path path, Existing existing = Existing::refuse);

  const std::filesystem::path& path() const { return output_.path(); }
  const std::filesystem::path& temporary_path() const { return output_.temporary_path(); }
  // Where a file of the directory is written before commit().
  std::filesystem::path file(const std::filesystem::path& name) const { return temporary_path() / name; }
  void commit();

 private:
  OutputPath output_;
  Existing existing_;
};

}  // namespace fp4sim
