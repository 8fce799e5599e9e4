#include "fp4sim/io/output_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <system_error>
#include <vector>

#include "fp4sim/core/error.hpp"

namespace fp4sim {

namespace fs = std::filesystem;

namespace {

struct FileId {
  dev_t device;
  ino_t inode;
  std::string path;
};

// A temporary and where it goes: renamed onto `to`, or (merge) each of its files renamed into `to`.
struct Pending {
  fs::path temporary, to;
  std::string target;  // `to` made absolute and normal: two outputs are the same when these are equal
  bool merge = false;
  bool handed = false;  // committed to the OutputSet, renamed by its commit()
};

// What the process reads and writes. Never destroyed: a signal may use it while the process exits.
struct Registry {
  std::mutex mutex;
  std::vector<FileId> inputs;
  std::vector<Pending> pending;
  bool set_active = false;
  bool closed = false;  // after remove_temporaries(): nothing is renamed any more, the process is ending
};

Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

std::string target_of(const fs::path& path) {
  std::error_code ec;
  fs::path t = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return (ec ? path : t).lexically_normal().string();
}

std::string flag_prefix(const std::string& flag) { return flag.empty() ? std::string() : flag + " "; }

fs::path temporary_for(const fs::path& path) {
  fs::path t = path;
  t += ".tmp." + std::to_string(::getpid());
  return t;
}

fs::path without_trailing_separator(fs::path path) {
  while (!path.has_filename() && path.has_relative_path()) path = path.parent_path();
  return path;
}

// A directory named through "." or ".." (".", "e/.", "../out") by the directory it is: renaming onto a
// path ending in "." fails (EBUSY), and the temporary beside it must be beside that directory.
fs::path directory_named(fs::path path) {
  path = without_trailing_separator(std::move(path));
  if (path.empty() || (path.filename() != "." && path.filename() != "..")) return path;
  return without_trailing_separator(fs::absolute(path).lexically_normal());
}

void rename_into_place(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) throw DataError(to.string() + ": cannot rename into place: " + ec.message());
}

// The renames of one commit, undone together when one of them fails: a file a rename replaces keeps a
// second name (a hard link, else a copy) until the commit is done, so it is never lost, and a path
// that did not exist before is removed again.
class Renames {
 public:
  Renames() = default;
  Renames(const Renames&) = delete;
  Renames& operator=(const Renames&) = delete;
  ~Renames() {
    if (!done_) undo();
  }

  void rename(const fs::path& from, const fs::path& to) {
    Step step{to, {}, false};
    struct stat st {};
    if (::lstat(to.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) {
        step.was_directory = true;  // an empty one (OutputDirectory refuses any other): nothing to keep
      } else {
        step.kept = to;
        step.kept += ".tmp." + std::to_string(::getpid()) + ".kept";
        std::error_code ec;
        fs::remove(step.kept, ec);
        if (::link(to.c_str(), step.kept.c_str()) != 0 && !fs::copy_file(to, step.kept, ec)) {
          throw DataError(to.string() + ": cannot keep the existing file while replacing it: " + ec.message());
        }
      }
    }
    try {
      rename_into_place(from, to);
    } catch (...) {
      std::error_code ec;
      if (!step.kept.empty()) fs::remove(step.kept, ec);
      throw;
    }
    steps_.push_back(std::move(step));
  }

  // Every rename succeeded: the kept names go.
  void finish() noexcept {
    std::error_code ec;
    for (const Step& s : steps_) {
      if (!s.kept.empty()) fs::remove(s.kept, ec);
    }
    done_ = true;
  }

 private:
  struct Step {
    fs::path to, kept;
    bool was_directory;
  };

  void undo() noexcept {
    std::error_code ec;
    for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) {
      if (!it->kept.empty()) {
        fs::rename(it->kept, it->to, ec);
      } else {
        fs::remove_all(it->to, ec);
        if (it->was_directory) fs::create_directory(it->to, ec);
      }
    }
  }

  std::vector<Step> steps_;
  bool done_ = false;
};

// Under the registry's lock.
void refuse_inputs(const Registry& r, const fs::path& path, const std::string& flag) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  for (const FileId& input : r.inputs) {
    if (input.device == st.st_dev && input.inode == st.st_ino) {
      throw UsageError(flag_prefix(flag) + path.string() + ": is the input " + input.path +
                       " (an output never replaces an input; give another path)");
    }
  }
}

void rename_pending(const Pending& p, Renames& renames) {
  std::error_code ec;
  if (!p.merge || !fs::exists(p.to, ec)) {
    renames.rename(p.temporary, p.to);
    return;
  }
  for (const auto& entry : fs::directory_iterator(p.temporary)) {
    renames.rename(entry.path(), p.to / entry.path().filename());
  }
  fs::remove_all(p.temporary, ec);
}

}  // namespace

void note_input(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (r.set_active) r.inputs.push_back({st.st_dev, st.st_ino, path.string()});
}

void check_output_path(const fs::path& path, OutputKind kind, const std::string& flag) {
  const std::string name = flag_prefix(flag) + path.string();
  if (path.empty()) throw UsageError(flag_prefix(flag) + "an empty path names no file or directory");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (kind == OutputKind::file && S_ISDIR(st.st_mode)) throw UsageError(name + ": is a directory");
    if (kind == OutputKind::directory && !S_ISDIR(st.st_mode)) throw UsageError(name + ": exists and is not a directory");
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
      throw UsageError(name + ": is not a regular file (a device, FIFO or socket); refusing to replace it");
    }
  }
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  refuse_inputs(r, path, flag);
}

OutputPath::OutputPath(fs::path path, OutputKind kind) : path_(std::move(path)), temporary_(temporary_for(path_)) {
  check_output_path(path_, kind);
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Pending p{temporary_, path_, target_of(path_)};
  for (const Pending& other : r.pending) {
    if (other.target == p.target) throw UsageError(path_.string() + ": named twice as an output");
  }
  r.pending.push_back(std::move(p));
}

OutputPath::~OutputPath() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(temporary_, ec);
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::erase_if(r.pending, [&](const Pending& p) { return p.temporary == temporary_ && !p.handed; });
}

void OutputPath::commit() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = std::find_if(r.pending.begin(), r.pending.end(),
                         [&](const Pending& p) { return p.temporary == temporary_ && !p.handed; });
  if (r.set_active) {
    // Handed ones are renamed in the order of their commit(): a writer's own temporary (hdf5::File
    // writing to an OutputPath's temporary) before the output that contains it.
    if (it != r.pending.end()) {
      Pending p = std::move(*it);
      r.pending.erase(it);
      p.handed = true;
      r.pending.push_back(std::move(p));
    }
  } else {
    if (r.closed) throw DataError(path_.string() + ": not written (interrupted)");
    refuse_inputs(r, path_, {});
    rename_into_place(temporary_, path_);
    if (it != r.pending.end()) r.pending.erase(it);
  }
  committed_ = true;
}

OutputFile::OutputFile(fs::path path) : output_(std::move(path)), stream_(output_.temporary_path(), std::ios::binary) {
  if (!stream_) {
    throw DataError(output_.path().string() + ": cannot open for writing: " + std::strerror(errno));
  }
}

void OutputFile::commit() {
  stream_.flush();
  if (!stream_) throw DataError(output_.path().string() + ": write failed: " + std::strerror(errno));
  stream_.close();
  if (!stream_) throw DataError(output_.path().string() + ": write failed: " + std::strerror(errno));
  output_.commit();
}

OutputDirectory::OutputDirectory(fs::path path, Existing existing)
    : output_(directory_named(std::move(path)), OutputKind::directory), existing_(existing) {
  std::error_code ec;
  const auto status = fs::symlink_status(output_.path(), ec);
  // An existing empty directory takes the files one by one (as merge does): renamed over, it would be
  // another directory, and a shell standing in it (--out .) would stand nowhere.
  bool into_existing = existing_ == Existing::merge;
  if (existing_ == Existing::refuse && fs::exists(status)) {
    if (!fs::is_directory(status)) {
      throw UsageError(output_.path().string() + ": exists and is not a directory");
    }
    if (!fs::is_empty(output_.path(), ec) || ec) {
      throw UsageError(output_.path().string() + ": directory exists and is not empty (give a new or empty directory)");
    }
    into_existing = true;
  }
  fs::remove_all(temporary_path(), ec);  // a stale one left by a killed run of the same pid
  // A new directory (refuse) needs its parent; a merged one (plots) makes its parents as before.
  const bool created = existing_ == Existing::refuse ? fs::create_directory(temporary_path(), ec)
                                                     : fs::create_directories(temporary_path(), ec);
  if (!created || ec) {
    throw DataError(output_.path().string() + ": cannot create directory: " + ec.message());
  }
  if (into_existing) {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    for (Pending& p : r.pending) {
      if (p.temporary == temporary_path()) p.merge = true;
    }
  }
}

void OutputDirectory::commit() {
  // rename(2) makes a new directory (refuse); an existing one takes the files one by one.
  output_.commit();
}

OutputSet::OutputSet() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.set_active = true;
}

OutputSet::~OutputSet() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.set_active = false;
  r.inputs.clear();
  if (committed_) return;
  std::error_code ec;
  for (const Pending& p : r.pending) {
    if (p.handed) fs::remove_all(p.temporary, ec);
  }
  std::erase_if(r.pending, [](const Pending& p) { return p.handed; });
}

void OutputSet::commit() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (r.closed) throw DataError("interrupted: no output written");
  for (const Pending& p : r.pending) {
    if (p.handed) refuse_inputs(r, p.to, {});
  }
  Renames renames;
  for (const Pending& p : r.pending) {
    if (p.handed) rename_pending(p, renames);
  }
  renames.finish();
  std::erase_if(r.pending, [](const Pending& p) { return p.handed; });
  r.set_active = false;
  r.inputs.clear();
  committed_ = true;
}

void remove_temporaries() {
  Registry& r = registry();
  r.mutex.lock();  // after a commit in progress, if any
  r.closed = true;
  std::error_code ec;
  for (const Pending& p : r.pending) fs::remove_all(p.temporary, ec);
  r.pending.clear();
  r.mutex.unlock();
}

}  // namespace fp4sim
