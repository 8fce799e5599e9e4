// The rule every input path meets before anything opens it (docs/cli.md): it names a regular file. A
// FIFO, a character device or a socket opened for reading blocks until a writer comes (forever, for a
// FIFO nobody writes), and a directory is no file; so the path is stat'ed, never opened, and refused as a
// usage error (exit 2). A path that does not exist is left to the reader, which names it a DataError.
#pragma once

#include <filesystem>

namespace fp4sim {

// UsageError "<path>: is a FIFO, not a regular file ..." unless `path` names a regular file (symlinks
// followed) or names nothing.
void check_input_path(const std::filesystem::path& path);

}  // namespace fp4sim
