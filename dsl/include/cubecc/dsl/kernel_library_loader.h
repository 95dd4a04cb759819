//===- kernel_library_loader.h - Reading the kernels of a kernel library (.so) ---------------===//
#pragma once

#include "cubecc/dsl/tunable.h"
#include "cubecc/ir/diagnostic.h"
#include "cubecc/ir/ir.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

struct cubecc_kernel_library;

namespace cubecc::dsl {

/// A kernel library opened with dlopen: its registered kernels, traced on request.
class KernelLibrary {
public:
  /// Opens `path`; on failure returns null and sets `error` (naming the file and what to do).
  /// The file is checked against its ELF headers and probed in a forked process (its static
  /// initializers and its table) before it is loaded into this one: a truncated file, a throwing
  /// global constructor or a table with bad pointers is an error, never a crash, and one that
  /// never returns an error after a timeout. Thread-safe (probes run one at a time).
  static std::unique_ptr<KernelLibrary> open(const std::string &path, std::string &error);
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary &) = delete;
  KernelLibrary &operator=(const KernelLibrary &) = delete;

  struct Entry {
    std::string name;
    std::string configuration;
  };
  const std::vector<Entry> &kernels() const { return entries_; }

  /// The name diagnostics give the library: its path unless set, e.g. to the DSL source a
  /// temporary library was built from.
  void set_source_name(std::string name) { source_name_ = std::move(name); }

  /// Traces kernel `index` and parses it into `module` (appending the kernel). Returns false and
  /// appends diagnostics on failure: tracing failed or threw, or it produced another kernel
  /// than the table lists at `index`.
  bool trace(size_t index, ir::Module &module, std::vector<ir::Diagnostic> &errors) const;

  /// A tunable of the library (ABI version 2; none in a version 1 library).
  struct Tunable {
    std::string name;
    std::vector<size_t> variants; ///< indices into kernels()
    std::vector<std::string> dimensions;
    std::vector<std::vector<uint64_t>> anchors;
    std::string element_types;
    double relative_tolerance = 0;
  };
  const std::vector<Tunable> &tunables() const { return tunables_; }
  uint32_t abi_version() const;

  enum class Described { Launch, Invalid, Failed };
  /// How to launch variant `variant` (index into tunables()[tunable].variants) at `shape`:
  /// Launch (`launch` filled), Invalid (the variant cannot run that shape) or Failed (`error`
  /// says why, naming the library and the tunable).
  Described describe(size_t tunable, size_t variant, std::span<const uint64_t> shape,
                     TunableLaunch &launch, std::string &error) const;

private:
  KernelLibrary() = default;
  /// dlopen of `file` (`path` as the user gave it) and its table checked; no probe.
  static std::unique_ptr<KernelLibrary> load(const std::string &path, const std::string &file,
                                             std::string &error);
  /// Loads `file` in a forked child; why the child crashed, exited early or hung, or empty. One
  /// probe at a time per process, once per file that probed clean; a child that crashed or took
  /// longer than the timeout (CUBECC_LIBRARY_PROBE_TIMEOUT_MS, default 60 s; then killed) is
  /// tried once more.
  static std::string probe(const std::string &path, const std::string &file);
  /// One child; `retry` says it crashed or was killed for taking longer than `timeout_ms`.
  static std::string probe_once(const std::string &path, const std::string &file, int timeout_ms,
                                bool &retry);
  bool read_tunables(std::string &error);
  std::string path_;
  std::string source_name_; ///< what diagnostics call the library
  void *handle_ = nullptr;
  const cubecc_kernel_library *library_ = nullptr;
  std::vector<Entry> entries_;
  std::vector<Tunable> tunables_;
};

} // namespace cubecc::dsl
