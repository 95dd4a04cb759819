//===- files.h - Writing files so that no reader ever sees half of one ------------------------===//
//
// Tuning caches, environment bundles and every file the tools write (docs/cli.md, "How outputs
// are written") go through write_file_atomically:
//
// - The path is followed through symbolic links to the file it finally names (a dangling link:
//   the file it points to is created), so `-o link` writes the link's target and the link stays.
// - A target that exists and is not a regular file (a directory, a device, a FIFO, a socket) is
//   refused; /dev/null alone is accepted, and what is written to it is discarded.
// - The bytes go to a uniquely named temporary file in the target's folder
//   (`.<name>.<pid>.<counter>.<random>.tmp`, O_EXCL), which is fsynced, closed (each step
//   checked), renamed over the target, and the folder fsynced: a reader sees the old file or the
//   new one, never a torn one, a mapping of the old file stays valid, and a failure (a full disk)
//   leaves the old file as it was and no temporary behind. An existing target's permission bits
//   are kept.
// - Before writing, temporaries in that folder whose writer is gone (killed between create and
//   rename) and that are over a minute old are removed: remove_stale_temporaries.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/runtime/device.h"

#include <chrono>
#include <sys/stat.h>

#include <string>
#include <string_view>

namespace cubecc::runtime {

/// A file that cannot be read or written (ErrorKind::InvalidArgument: the path the caller named
/// does not work). what() is "<path>: <reason>"; the tools print
/// "<path>: error: <reason>". The path is shortened for messages (shorten_for_message).
class FileError : public Error {
public:
  FileError(const std::string &path, std::string reason);
  const std::string &path() const { return path_; }
  const std::string &reason() const { return reason_; }

private:
  std::string path_;
  std::string reason_;
};

/// Writes `bytes` to `path` as above. Throws FileError naming `path` and the failing step. The
/// folder must exist.
void write_file_atomically(const std::string &path, std::string_view bytes);

/// Throws FileError unless write_file_atomically(path, ...) could write now: the path resolves
/// to a regular file or a new one (or /dev/null), and a temporary file can be created in its
/// folder (one is created and removed). For commands that work a long time before writing.
void check_writable(const std::string &path);

/// The file a write to `path` lands on: symbolic links followed to the last one's target (which
/// need not exist). Throws FileError on a loop, or a path the system refuses (too long).
std::string resolve_output_path(const std::string &path);

/// Removes the temporaries of write_file_atomically in `folder` whose writing process no longer
/// exists (the pid in the name; kill(pid, 0) says ESRCH) and that were last modified at least
/// `min_age` ago. Returns how many it removed; never throws.
size_t remove_stale_temporaries(const std::string &folder,
                                std::chrono::seconds min_age = std::chrono::seconds(60));

/// The per-user cache folder: CUBECC_CACHE_DIR, else $XDG_CACHE_HOME/cubecc, else
/// $HOME/.cache/cubecc (empty variables count as unset). Throws Error when none is set. The
/// tuning cache (autotune/cache.h) and the cpu device's compiled objects live under it.
std::string user_cache_directory();

/// `text` for a message: as is up to `max` bytes, else its first `max` bytes followed by
/// "… (N bytes)". Names and paths from the user can be megabytes long.
std::string shorten_for_message(std::string_view text, size_t max = 200);

/// What a file of `st_mode` `mode` is, for a message refusing one that is not a regular file:
/// "a directory", "a FIFO", "a character device", "a block device", "a socket". Inline: the
/// bundle reader uses it without linking the runtime.
inline const char *file_kind(unsigned mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

} // namespace cubecc::runtime
