//===- object_cache.h - The per-user cache of compiled CPU kernel objects ---------------------===//
//
// The cpu device compiles a kernel once per user, not once per process: the shared object that
// codegen::compile_cpu makes is kept in `<dir>/cpu/<xxh3-128 of the key, 32 hex digits>.so`,
// where <dir> is runtime::user_cache_directory() (CUBECC_CACHE_DIR, $XDG_CACHE_HOME/cubecc or
// ~/.cache/cubecc). The key names everything that changes the object: the kernel's structural
// hash, the CPU level, checked mode, the LLVM and cubecc versions and the CPU ABI version.
//
// A file holds a header line, the key, the object's size and xxh3-64 checksum, then the object:
//   cubecc-cpu-object 1\n<key>\n<size> <checksum, 16 hex digits>\n<object bytes>
// It is written atomically (runtime::write_file_atomically), so readers see a whole file or none,
// whatever number of processes write at once. A file that is unreadable, of another key, or whose
// size or checksum disagrees is a miss with a warning (CUBECC_LOG), and the device compiles and
// writes it again; an object that passes is still validated (codegen/cpu_elf.h) before it is
// loaded.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cubecc::runtime {

class CpuObjectCache {
public:
  /// The cache rooted at `directory` (its "cpu" folder is created on the first store).
  explicit CpuObjectCache(std::string directory);

  /// The file that holds the object of `key`.
  std::string path_of(std::string_view key) const;
  /// The object stored under `key`, or nothing (missing; damaged or of another key: logged).
  std::optional<std::string> find(std::string_view key) const;
  /// Stores `object` under `key`, atomically. Throws Error when the file cannot be written.
  void store(std::string_view key, std::string_view object) const;

  /// The file's bytes for `key` and `object` (the format above).
  static std::string encode(std::string_view key, std::string_view object);
  /// The object in `file` if it is a whole, undamaged entry for `key`; else nothing, with `why`.
  static std::optional<std::string> decode(std::string_view file, std::string_view key,
                                           std::string &why);

private:
  std::string folder_;
};

} // namespace cubecc::runtime
