// Outputs written under a temporary name and renamed into place by commit(); destroyed without commit()
// they remove the temporary, so a failed command leaves no partial output (docs/cli.md). One rule for
// every output: the temporary is "<path>.tmp.<pid>", and commit() renames it onto the path.
//
// The paths are checked when the output is made: a path that names a file the command read as input
// (the same device and inode, symlinks followed), names another output of the process, or names an
// existing directory (for a file) or non-regular file is a UsageError, so an input or a device node is
// never replaced. While an OutputSet is alive (the CLI holds one per command), commit() hands the
// temporary to it and the renames happen together in OutputSet::commit(), after every output
// succeeded; an OutputSet destroyed without commit() removes them all, so an existing file is never
// lost to a command that failed. A rename that fails part-way through the commit undoes the ones
// before it (each replaced file keeps a second name until the commit is done). Every live temporary is known to the process, so a signal can remove
// them (remove_temporaries()).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace fp4sim {

// Records `path` (opened for reading) as an input of the command: while an OutputSet is alive, no output
// may replace it. (Without one, as in the library's own use, a file read may be written later.)
void note_input(const std::filesystem::path& path);

enum class OutputKind : std::uint8_t { file, directory };
// The checks an output path gets when it is made (UsageError naming `flag` and the path), for a command
// that checks its outputs before its work.
void check_output_path(const std::filesystem::path& path, OutputKind kind, const std::string& flag = {});

// For writers that need a path rather than a stream (the HDF5 C library, a script writing a directory).
class OutputPath {
 public:
  explicit OutputPath(std::filesystem::path path, OutputKind kind = OutputKind::file);
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

// The outputs of one command, renamed into place together (see the top of this file). One at a time.
class OutputSet {
 public:
  OutputSet();
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;
  ~OutputSet();  // without commit(): removes every temporary handed to it
  void commit();

 private:
  bool committed_ = false;
};

// Removes every temporary the process still holds (uncommitted outputs and those handed to an
// OutputSet) and blocks further commits; for a handler of SIGINT/SIGTERM about to end the process.
void remove_temporaries();

}  // namespace fp4sim
