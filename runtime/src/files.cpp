//===- files.cpp ------------------------------------------------------------------------------===//
#include "cubecc/runtime/files.h"

#include <fmt/format.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>

namespace cubecc::runtime {

namespace {

/// Linux resolves at most 40 links in one path; so does this.
constexpr int kMaxSymlinks = 40;
/// The part of the target's name kept in a temporary's name: the temporary must stay under
/// NAME_MAX (255) whatever the target is called.
constexpr size_t kNameInTemporary = 64;

/// Writes all of `data` to `fd`; false (errno set) on failure.
bool write_all(int fd, std::string_view data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n == 0)
      errno = EIO; // a regular file never takes nothing; do not spin
    if (n <= 0)
      return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

/// A name no other writer uses: the process, a per-process counter and random bits (O_EXCL
/// still guards against the unlikely clash). remove_stale_temporaries parses it back.
std::string temporary_name(const std::string &final_name) {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 random{std::random_device{}()};
  return fmt::format(".{}.{}.{}.{:016x}.tmp", final_name.substr(0, kNameInTemporary), ::getpid(),
                     counter++, random());
}

/// The pid in a temporary's name (".<name>.<pid>.<counter>.<16 hex>.tmp"), if it is one.
std::optional<pid_t> temporary_writer(std::string_view name) {
  constexpr std::string_view kSuffix = ".tmp";
  if (name.size() < 2 || name[0] != '.' || !name.ends_with(kSuffix))
    return std::nullopt;
  name.remove_suffix(kSuffix.size());
  // Three fields from the end: the random bits, the counter, the pid.
  std::string_view fields[3];
  for (std::string_view &field : fields) {
    size_t dot = name.rfind('.');
    if (dot == std::string_view::npos || dot == 0)
      return std::nullopt;
    field = name.substr(dot + 1);
    name = name.substr(0, dot);
  }
  auto all_of = [](std::string_view s, auto predicate) {
    if (s.empty())
      return false;
    for (char c : s)
      if (!predicate(static_cast<unsigned char>(c)))
        return false;
    return true;
  };
  if (fields[0].size() != 16 || !all_of(fields[0], ::isxdigit) || !all_of(fields[1], ::isdigit) ||
      !all_of(fields[2], ::isdigit) || fields[2].size() > 9)
    return std::nullopt;
  pid_t pid = 0;
  for (char c : fields[2])
    pid = pid * 10 + (c - '0');
  return pid > 0 ? std::optional<pid_t>(pid) : std::nullopt;
}

/// Whether `st` is the null device (/dev/null, however it is reached).
bool is_null_device(const struct stat &st) {
  struct stat null;
  return S_ISCHR(st.st_mode) && ::stat("/dev/null", &null) == 0 && S_ISCHR(null.st_mode) &&
         st.st_rdev == null.st_rdev;
}

/// Where a write to `path` goes, and what is there now.
struct Destination {
  std::string target;             ///< symbolic links followed
  std::optional<mode_t> existing; ///< the mode of the file there, if there is one
  bool discard = false;           ///< the null device
};

Destination destination(const std::string &path) {
  if (path.empty())
    throw FileError(path, "cannot write the file: the path is empty");
  if (path.size() >= PATH_MAX)
    throw FileError(path, fmt::format("cannot write the file: the path is {} bytes, longer than "
                                      "the system's limit (PATH_MAX, {} bytes)",
                                      path.size(), PATH_MAX));
  Destination d;
  d.target = resolve_output_path(path);
  struct stat st;
  if (::stat(d.target.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return d; // a new file (its folder is checked when the temporary is created)
    throw FileError(path, fmt::format("cannot write the file: {}", std::strerror(errno)));
  }
  if (is_null_device(st)) {
    d.discard = true;
    return d;
  }
  if (!S_ISREG(st.st_mode))
    throw FileError(path, fmt::format("not a regular file{}; cubecc writes only regular files",
                                      d.target == path ? fmt::format(" ({})", file_kind(st.st_mode))
                                                       : fmt::format(" ({} is {})",
                                                                     shorten_for_message(d.target),
                                                                     file_kind(st.st_mode))));
  d.existing = st.st_mode;
  return d;
}

std::filesystem::path folder_of(const std::string &target) {
  std::filesystem::path p(target);
  return p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
}

/// Creates a temporary beside `target`; returns its fd (and its path in `temporary`).
int create_temporary(const std::string &path, const std::string &target,
                     std::filesystem::path &temporary, mode_t mode) {
  const std::filesystem::path folder = folder_of(target);
  const std::string name = std::filesystem::path(target).filename().string();
  for (int attempt = 0;; ++attempt) {
    temporary = folder / temporary_name(name);
    int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd >= 0)
      return fd;
    if (errno == EEXIST && attempt < 8)
      continue;
    throw FileError(path, fmt::format("cannot create a temporary file in {}: {}",
                                      shorten_for_message(folder.string()), std::strerror(errno)));
  }
}

} // namespace

FileError::FileError(const std::string &path, std::string reason)
    : Error(ErrorKind::InvalidArgument, fmt::format("{}: {}", shorten_for_message(path), reason)),
      path_(shorten_for_message(path)), reason_(std::move(reason)) {}

std::string user_cache_directory() {
  auto non_empty_env = [](const char *name) -> std::string {
    const char *value = std::getenv(name);
    return value && *value ? value : "";
  };
  if (std::string dir = non_empty_env("CUBECC_CACHE_DIR"); !dir.empty())
    return dir;
  if (std::string dir = non_empty_env("XDG_CACHE_HOME"); !dir.empty())
    return (std::filesystem::path(dir) / "cubecc").string();
  if (std::string dir = non_empty_env("HOME"); !dir.empty())
    return (std::filesystem::path(dir) / ".cache" / "cubecc").string();
  throw Error(ErrorKind::InvalidArgument,
              "no cache folder: set CUBECC_CACHE_DIR, XDG_CACHE_HOME or HOME");
}

std::string shorten_for_message(std::string_view text, size_t max) {
  if (text.size() <= max)
    return std::string(text);
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80)
    --cut; // do not split a UTF-8 sequence
  return fmt::format("{}… ({} bytes)", text.substr(0, cut), text.size());
}

std::string resolve_output_path(const std::string &path) {
  std::string current = path;
  for (int links = 0;; ++links) {
    struct stat st;
    if (::lstat(current.c_str(), &st) != 0) {
      if (errno == ENOENT)
        return current;
      throw FileError(path, fmt::format("cannot write the file: {}", std::strerror(errno)));
    }
    if (!S_ISLNK(st.st_mode))
      return current;
    if (links == kMaxSymlinks)
      throw FileError(path, fmt::format("cannot write the file: more than {} symbolic links "
                                        "(a loop?)",
                                        kMaxSymlinks));
    std::string link(PATH_MAX, '\0');
    ssize_t n = ::readlink(current.c_str(), link.data(), link.size());
    if (n < 0)
      throw FileError(path, fmt::format("cannot read the symbolic link {}: {}",
                                        shorten_for_message(current), std::strerror(errno)));
    link.resize(static_cast<size_t>(n));
    if (link.empty())
      throw FileError(path, "cannot write the file: an empty symbolic link");
    current = link.front() == '/' ? link : (folder_of(current) / link).string();
    if (current.size() >= PATH_MAX)
      throw FileError(path, fmt::format("cannot write the file: its symbolic links lead to a path "
                                        "longer than PATH_MAX ({} bytes)",
                                        PATH_MAX));
  }
}

size_t remove_stale_temporaries(const std::string &folder, std::chrono::seconds min_age) {
  DIR *dir = ::opendir(folder.c_str());
  if (!dir)
    return 0;
  const time_t now = ::time(nullptr);
  size_t removed = 0;
  while (const dirent *entry = ::readdir(dir)) {
    std::optional<pid_t> writer = temporary_writer(entry->d_name);
    if (!writer || *writer == ::getpid())
      continue;
    struct stat st;
    if (::fstatat(::dirfd(dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode) || now - st.st_mtime < min_age.count())
      continue;
    // ESRCH: no such process. EPERM means it exists (another user's): keep its file.
    if (::kill(*writer, 0) == 0 || errno != ESRCH)
      continue;
    if (::unlinkat(::dirfd(dir), entry->d_name, 0) == 0)
      ++removed;
  }
  ::closedir(dir);
  return removed;
}

void check_writable(const std::string &path) {
  Destination d = destination(path);
  if (d.discard)
    return;
  std::filesystem::path temporary;
  int fd = create_temporary(path, d.target, temporary, 0600);
  ::close(fd);
  ::unlink(temporary.c_str());
}

void write_file_atomically(const std::string &path, std::string_view bytes) {
  Destination d = destination(path);
  if (d.discard)
    return;
  const std::filesystem::path folder = folder_of(d.target);
  // Space held by writers killed before their rename (a full disk may be full of them).
  remove_stale_temporaries(folder.string());
  std::filesystem::path temporary;
  const mode_t mode = d.existing ? (*d.existing & 0777) : 0644;
  int fd = create_temporary(path, d.target, temporary, mode);
  std::string failure;
  if (d.existing && ::fchmod(fd, mode) != 0) // creation applied the umask
    failure = fmt::format("chmod: {}", std::strerror(errno));
  else if (!write_all(fd, bytes))
    failure = fmt::format("write: {}", std::strerror(errno));
  else if (::fsync(fd) != 0)
    failure = fmt::format("fsync: {}", std::strerror(errno));
  if (::close(fd) != 0 && failure.empty())
    failure = fmt::format("close: {}", std::strerror(errno));
  if (failure.empty() && ::rename(temporary.c_str(), d.target.c_str()) != 0)
    failure = fmt::format("rename: {}", std::strerror(errno));
  if (!failure.empty()) {
    ::unlink(temporary.c_str());
    throw FileError(path, fmt::format("cannot write the file: {}", failure));
  }
  // The rename itself reaches the disk with the folder.
  int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

} // namespace cubecc::runtime
