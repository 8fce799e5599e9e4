#include "fp4sim/io/input_path.hpp"

#include <sys/stat.h>

#include <string>

#include "fp4sim/core/error.hpp"

namespace fp4sim {

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

}  // namespace

void check_input_path(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;
  throw UsageError(path.string() + ": is " + kind_of(st.st_mode) +
                   ", not a regular file; an input is read from a regular file (docs/cli.md)");
}

}  // namespace fp4sim
