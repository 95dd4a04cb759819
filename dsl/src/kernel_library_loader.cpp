//===- kernel_library_loader.cpp - Opening a kernel library without trusting it --------------===//
//
// A kernel library is a file someone else built, maybe copied halfway, maybe with a bug in its
// table or its static initializers. Opening one must never crash cubecc, so it goes in three
// steps: the file is checked against its own ELF headers (dlopen maps a truncated file and dies
// with SIGBUS on the missing pages), then a forked child loads it and reads its whole table (a
// static initializer that throws, or a table with a bad pointer, kills the child, not cubecc),
// and only then is it loaded here, with every field of the table checked.
//
//===----------------------------------------------------------------------------------------===//
#include "cubecc/dsl/kernel_library_loader.h"

#include "cubecc/dsl/kernel_library.h"
#include "cubecc/ir/parser.h"

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <mutex>
#include <poll.h>
#include <set>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <tuple>
#include <unistd.h>

namespace cubecc::dsl {
namespace {

// Bounds on what a table may hold: a larger count or a longer string is a broken table (an
// uninitialized field, a pointer into the wrong data), not a real library.
constexpr uint32_t kMaxKernels = 1u << 20;
constexpr uint32_t kMaxTunables = 1u << 16;
constexpr size_t kMaxNameBytes = 1024;
constexpr size_t kMaxConfigurationBytes = 64 * 1024;

#if defined(__x86_64__)
constexpr uint16_t kMachine = EM_X86_64;
constexpr const char *kMachineName = "x86-64";
#elif defined(__aarch64__)
constexpr uint16_t kMachine = EM_AARCH64;
constexpr const char *kMachineName = "AArch64";
#else
#error "the kernel library loader knows the ELF machine of x86-64 and AArch64 hosts only"
#endif

/// Reads `size` bytes at `offset` of `fd`; false when the file has fewer.
bool read_at(int fd, uint64_t offset, void *out, size_t size) {
  return pread(fd, out, size, static_cast<off_t>(offset)) == static_cast<ssize_t>(size);
}

/// `offset + count * entry_size <= file_size`, without overflow.
bool fits(uint64_t offset, uint64_t count, uint64_t entry_size, uint64_t file_size) {
  if (offset > file_size)
    return false;
  return entry_size == 0 || count <= (file_size - offset) / entry_size;
}

/// Why the file at `file` is not a whole ELF64 shared object of this host, or empty. Every byte
/// its headers describe must be in the file: dlopen maps the file and a missing page is SIGBUS.
std::string check_elf(const std::string &file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fmt::format("cannot load the kernel library: {}", std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return "cannot load the kernel library: not a regular file";
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  Elf64_Ehdr header{};
  if (!read_at(fd, 0, &header, sizeof header) || std::memcmp(header.e_ident, ELFMAG, SELFMAG))
    return fmt::format("not a kernel library: not an ELF file ({} bytes)", size);
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB ||
      header.e_machine != kMachine || header.e_type != ET_DYN)
    return fmt::format("not a kernel library for this host: it must be an ELF64 {} shared "
                       "object (build it with -shared -fPIC for this machine)",
                       kMachineName);
  auto truncated = [&](uint64_t needed) {
    return fmt::format("the kernel library is truncated: the file has {} bytes, its ELF headers "
                       "describe at least {} (an interrupted copy?); copy or build it again",
                       size, needed);
  };
  if (!fits(header.e_phoff, header.e_phnum, header.e_phentsize, size))
    return truncated(header.e_phoff + uint64_t{header.e_phnum} * header.e_phentsize);
  uint64_t sections = header.e_shnum;
  if (sections == 0 && header.e_shoff != 0) { // extended numbering: the count is in section 0
    Elf64_Shdr first{};
    if (!read_at(fd, header.e_shoff, &first, sizeof first))
      return truncated(header.e_shoff + sizeof first);
    sections = first.sh_size;
  }
  if (header.e_shoff != 0 && !fits(header.e_shoff, sections, header.e_shentsize, size))
    return truncated(header.e_shoff + sections * header.e_shentsize);
  if (header.e_phnum > 0 && header.e_phentsize < sizeof(Elf64_Phdr))
    return "not a kernel library: its ELF program headers are malformed";
  for (uint16_t i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment{};
    if (!read_at(fd, header.e_phoff + uint64_t{i} * header.e_phentsize, &segment, sizeof segment))
      return truncated(header.e_phoff + (uint64_t{i} + 1) * header.e_phentsize);
    if (!fits(segment.p_offset, 1, segment.p_filesz, size))
      return truncated(segment.p_offset + segment.p_filesz);
  }
  return {};
}

/// Why the library's table cannot be read, or empty. Reads every field `KernelLibrary` keeps, so
/// a probe that survives this has met every pointer the real load follows.
std::string check_table(const cubecc_kernel_library *library) {
  if (!library)
    return fmt::format("'{}' returned no table", CUBECC_KERNEL_LIBRARY_SYMBOL);
  const uint32_t version = library->abi_version;
  if (version < 1 || version > CUBECC_KERNEL_LIBRARY_ABI_VERSION)
    return fmt::format("the kernel library uses ABI version {}, this cubecc reads 1 to {}; "
                       "rebuild the library against this cubecc",
                       version, CUBECC_KERNEL_LIBRARY_ABI_VERSION);
  if (library->count > kMaxKernels)
    return fmt::format("the kernel table lists {} kernels (at most {}); the table is corrupt",
                       library->count, kMaxKernels);
  if (library->count > 0 && !library->kernels)
    return fmt::format("the kernel table lists {} kernels without their entries", library->count);
  if (!library->trace_ir || !library->last_error)
    return "the kernel table has no trace_ir or last_error function";
  std::set<std::string> names;
  for (uint32_t i = 0; i < library->count; ++i) {
    const cubecc_kernel_entry &entry = library->kernels[i];
    const size_t length = entry.name ? strnlen(entry.name, kMaxNameBytes + 1) : 0;
    if (length == 0)
      return fmt::format("kernel {} of the kernel table has no name", i);
    if (length > kMaxNameBytes)
      return fmt::format("kernel {} of the kernel table has a name longer than {} bytes", i,
                         kMaxNameBytes);
    if (!names.insert(entry.name).second)
      return fmt::format("two kernels of the kernel table are named '{}'", entry.name);
    if (!entry.configuration)
      return fmt::format("kernel '{}' of the kernel table has no configuration (an empty string "
                         "is none)",
                         entry.name);
    if (strnlen(entry.configuration, kMaxConfigurationBytes + 1) > kMaxConfigurationBytes)
      return fmt::format("kernel '{}' of the kernel table has a configuration longer than {} "
                         "bytes",
                         entry.name, kMaxConfigurationBytes);
  }
  if (version >= 2 && library->tunable_count > kMaxTunables)
    return fmt::format("the kernel table lists {} tunables (at most {}); the table is corrupt",
                       library->tunable_count, kMaxTunables);
  return {};
}

/// Text for how a child process ended.
std::string describe_status(int status) {
  if (WIFSIGNALED(status))
    return fmt::format("killed by signal {}, {}", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return fmt::format("exited with status {}", WEXITSTATUS(status));
}

/// How long a probe process may take before it is killed: CUBECC_LIBRARY_PROBE_TIMEOUT_MS, or
/// 60 s (loading a library and reading its table takes milliseconds; a global constructor that
/// never returns must not hang the caller).
int probe_timeout_ms() {
  if (const char *text = std::getenv("CUBECC_LIBRARY_PROBE_TIMEOUT_MS")) {
    char *end = nullptr;
    long ms = std::strtol(text, &end, 10);
    if (end != text && *end == '\0' && ms > 0 && ms <= 3600000)
      return static_cast<int>(ms);
  }
  return 60000;
}

} // namespace

std::string KernelLibrary::probe(const std::string &path, const std::string &file) {
  // One probe at a time in this process: a forked child inherits every pipe open at the fork, so
  // concurrent probes would each hold the others' write ends (and wait for each other's
  // children). A file that probed clean is not probed again while it is the same file (device,
  // inode, size, modification time): a library opened again and again (a framework's per-thread
  // handles) forks once. A child forked from a multithreaded process may inherit a lock (an
  // allocator's) that another thread held at the fork, so a child that crashed or did not finish
  // in time (then killed) is tried once more before the library is refused: a broken library
  // fails both times.
  static std::mutex one_at_a_time;
  static std::set<std::tuple<dev_t, ino_t, off_t, int64_t, int64_t>> probed_clean;
  std::lock_guard lock(one_at_a_time);
  struct stat st {};
  const bool known = ::stat(file.c_str(), &st) == 0;
  const auto key = std::make_tuple(st.st_dev, st.st_ino, st.st_size, int64_t(st.st_mtim.tv_sec),
                                   int64_t(st.st_mtim.tv_nsec));
  if (known && probed_clean.contains(key))
    return {};
  const int timeout_ms = probe_timeout_ms();
  std::string why;
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool retry = false;
    why = probe_once(path, file, timeout_ms, retry);
    if (why.empty() && known)
      probed_clean.insert(key);
    if (!retry)
      break;
  }
  return why;
}

std::string KernelLibrary::probe_once(const std::string &path, const std::string &file,
                                      int timeout_ms, bool &retry) {
  bool timed_out = false;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0)
    return fmt::format("cannot probe the kernel library: pipe: {}", std::strerror(errno));
  std::fflush(nullptr); // else the child's exit() could write the parent's buffered output again
  pid_t pid = fork();
  if (pid < 0) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    return fmt::format("cannot probe the kernel library: fork: {}", std::strerror(errno));
  }
  if (pid == 0) {
    // The child: a crash must end it by its signal (not by a sanitizer's report) and leave no
    // core file, and it must leave through _exit, running none of the parent's exit handlers.
    for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT})
      std::signal(sig, SIG_DFL);
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    ::close(pipe_fds[0]);
    auto send = [&](std::string_view text) {
      (void)!::write(pipe_fds[1], text.data(), text.size());
    };
    send("L");
    void *handle = nullptr;
    // An exception from a global constructor unwinds out of dlopen (leaving the loader's lock
    // taken); in the child it must end here, never in the caller of open(). glibc declares
    // dlopen noexcept, so it is called through a pointer the compiler cannot see through, or
    // the handlers below would be dropped.
    static void *(*volatile const open_library)(const char *, int) = dlopen;
    try {
      handle = open_library(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    } catch (const std::exception &e) {
      send(std::string("X") + e.what());
      _exit(1);
    } catch (...) {
      send("X");
      _exit(1);
    }
    send("T");
    std::string error;
    if (handle) // released, not closed: the library's destructors are not what is probed
      (void)load(path, file, error).release();
    send("D");
    _exit(0);
  }
  ::close(pipe_fds[1]);
  std::string report; // phases "L", "T", "D", then "X" and what a global constructor threw
  char buffer[512];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd readable{pipe_fds[0], POLLIN, 0};
    int ready = left.count() > 0 ? ::poll(&readable, 1, static_cast<int>(left.count())) : 0;
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready == 0) { // the child took too long: it goes, and the caller hears why
      timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    ssize_t n = ready > 0 ? ::read(pipe_fds[0], buffer, sizeof buffer) : -1;
    if (n > 0)
      report.append(buffer, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR)
      break;
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  retry = timed_out || WIFSIGNALED(status);
  if (timed_out)
    return fmt::format("a probe process loading the kernel library did not finish in {} ms, "
                       "twice (it was {}; a global constructor that never returns?); fix the "
                       "library's global constructors, or allow more time with "
                       "CUBECC_LIBRARY_PROBE_TIMEOUT_MS",
                       timeout_ms,
                       report.find('T') == std::string::npos ? "still loading it"
                                                             : "still reading its table");
  const size_t thrown = report.find('X');
  const std::string phases = report.substr(0, thrown);
  const char last = phases.empty() ? 0 : phases.back();
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && last == 'D')
    return {};
  if (thrown != std::string::npos)
    return fmt::format("the kernel library's static initializers failed: a global constructor "
                       "threw {} when a probe process loaded it; fix the library's global "
                       "constructors",
                       thrown + 1 < report.size()
                           ? "'" + report.substr(thrown + 1) + "'"
                           : std::string("an exception that is not a std::exception"));
  if (last == 'L')
    return fmt::format("the kernel library's static initializers failed: a probe process "
                       "loading it was {} (a global constructor crashed or called abort or "
                       "exit); fix the library's global constructors",
                       describe_status(status));
  return fmt::format("reading the kernel library's table failed: a probe process reading it was "
                     "{} (the table holds an invalid pointer); rebuild the library against this "
                     "cubecc",
                     describe_status(status));
}

std::unique_ptr<KernelLibrary> KernelLibrary::open(const std::string &path, std::string &error) {
  // A path without a slash would make dlopen search the library path instead of the file.
  std::string file = path.find('/') == std::string::npos ? "./" + path : path;
  std::string why = check_elf(file);
  if (why.empty())
    why = probe(path, file);
  if (!why.empty()) {
    error = fmt::format("{}: error: {}", path, why);
    return nullptr;
  }
  return load(path, file, error);
}

std::unique_ptr<KernelLibrary> KernelLibrary::load(const std::string &path, const std::string &file,
                                                   std::string &error) {
  void *handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    error = fmt::format("{}: error: cannot load the kernel library: {}", path, dlerror());
    return nullptr;
  }
  using Entry = const cubecc_kernel_library *(*)();
  auto symbol = reinterpret_cast<Entry>(dlsym(handle, CUBECC_KERNEL_LIBRARY_SYMBOL));
  if (!symbol) {
    dlclose(handle);
    error = fmt::format("{}: error: not a cubecc kernel library: it does not export '{}' (link "
                        "it with cubecc::dsl and register kernels with dsl::register_kernel)",
                        path, CUBECC_KERNEL_LIBRARY_SYMBOL);
    return nullptr;
  }
  const cubecc_kernel_library *library = nullptr;
  std::string why;
  try {
    library = symbol();
    why = check_table(library);
  } catch (const std::exception &e) {
    why = fmt::format("'{}' threw: {}", CUBECC_KERNEL_LIBRARY_SYMBOL, e.what());
  } catch (...) {
    why = fmt::format("'{}' threw an exception", CUBECC_KERNEL_LIBRARY_SYMBOL);
  }
  // Checked before dlclose, which unmaps the table.
  if (!why.empty()) {
    dlclose(handle);
    error = fmt::format("{}: error: {}", path, why);
    return nullptr;
  }
  std::unique_ptr<KernelLibrary> out(new KernelLibrary);
  out->path_ = path;
  out->source_name_ = path;
  out->handle_ = handle;
  out->library_ = library;
  for (uint32_t i = 0; i < library->count; ++i)
    out->entries_.push_back({library->kernels[i].name, library->kernels[i].configuration});
  if (library->abi_version >= 2 && !out->read_tunables(error))
    return nullptr; // the destructor closes the library
  return out;
}

bool KernelLibrary::read_tunables(std::string &error) {
  const cubecc_kernel_library &library = *library_;
  if (library.tunable_count > 0 && (!library.tunables || !library.describe_tunable)) {
    error = fmt::format("{}: error: the kernel library lists {} tunables without their table",
                        source_name_, library.tunable_count);
    return false;
  }
  for (uint32_t i = 0; i < library.tunable_count; ++i) {
    const cubecc_tunable_entry &entry = library.tunables[i];
    Tunable t;
    t.name = entry.name ? entry.name : "";
    auto fail = [&](const std::string &what) {
      error = fmt::format("{}: error: tunable '{}': {}", source_name_, t.name, what);
      return false;
    };
    if (t.name.empty())
      return fail("it has no name");
    if (entry.variant_count == 0 || !entry.variants)
      return fail("it has no variants");
    if (entry.dimension_count == 0 || !entry.dimensions)
      return fail("it has no dimensions");
    if (entry.anchor_count > 0 && !entry.anchors)
      return fail("it lists anchors without their table");
    for (uint32_t v = 0; v < entry.variant_count; ++v) {
      std::string variant = entry.variants[v] ? entry.variants[v] : "";
      size_t index = 0;
      while (index < entries_.size() && entries_[index].name != variant)
        ++index;
      if (index == entries_.size())
        return fail(fmt::format("variant '{}' is not a kernel of the library (register it with "
                                "dsl::register_kernel)",
                                variant));
      for (size_t earlier : t.variants)
        if (earlier == index)
          return fail(fmt::format("variant '{}' is listed twice", variant));
      t.variants.push_back(index);
    }
    for (uint32_t d = 0; d < entry.dimension_count; ++d)
      t.dimensions.emplace_back(entry.dimensions[d] ? entry.dimensions[d] : "");
    for (uint32_t a = 0; a < entry.anchor_count; ++a)
      t.anchors.emplace_back(entry.anchors + size_t{a} * entry.dimension_count,
                             entry.anchors + size_t{a + 1} * entry.dimension_count);
    t.element_types = entry.element_types ? entry.element_types : "";
    t.relative_tolerance = entry.relative_tolerance;
    if (!(t.relative_tolerance >= 0))
      return fail("its relative tolerance is negative or NaN");
    tunables_.push_back(std::move(t));
  }
  return true;
}

uint32_t KernelLibrary::abi_version() const {
  return library_->abi_version;
}

KernelLibrary::Described KernelLibrary::describe(size_t tunable, size_t variant,
                                                 std::span<const uint64_t> shape,
                                                 TunableLaunch &launch, std::string &error) const {
  if (tunable >= tunables_.size() || variant >= tunables_[tunable].variants.size()) {
    error =
        fmt::format("{}: error: no tunable {} with a variant {}", source_name_, tunable, variant);
    return Described::Failed;
  }
  const Tunable &t = tunables_[tunable];
  if (shape.size() != t.dimensions.size()) {
    error = fmt::format("{}: error: tunable '{}' has {} dimensions, the shape {}", source_name_,
                        t.name, t.dimensions.size(), shape.size());
    return Described::Failed;
  }
  cubecc_tunable_launch out{};
  int result = -1;
  std::string why;
  try {
    result = library_->describe_tunable(static_cast<uint32_t>(tunable),
                                        static_cast<uint32_t>(variant), shape.data(), &out);
    if (result != 0 && result != 1) {
      const char *text = library_->last_error();
      why = text ? text : "the library gave no reason";
    }
  } catch (const std::exception &e) {
    why = std::string("the library's describe function threw: ") + e.what();
  } catch (...) {
    why = "the library's describe function threw an exception that is not a std::exception";
  }
  if (result == 0 && why.empty())
    return Described::Invalid;
  if (result == 1 && (out.buffer_count > CUBECC_TUNABLE_MAX_BUFFERS ||
                      out.value_count > CUBECC_TUNABLE_MAX_VALUES))
    why = "too many buffers or values";
  if (!why.empty()) {
    error = fmt::format("{}: error: tunable '{}': describing variant '{}' failed: {}", source_name_,
                        t.name, entries_[t.variants[variant]].name, why);
    return Described::Failed;
  }
  launch = TunableLaunch{};
  launch.grid = {out.grid[0], out.grid[1], out.grid[2]};
  launch.buffer_elements.assign(out.buffer_elements, out.buffer_elements + out.buffer_count);
  for (uint32_t v = 0; v < out.value_count; ++v) {
    const cubecc_launch_value &value = out.values[v];
    switch (value.kind) {
    case CUBECC_LAUNCH_VALUE_INT:
      launch.values.emplace_back(value.value.i);
      break;
    case CUBECC_LAUNCH_VALUE_UINT:
      launch.values.emplace_back(value.value.u);
      break;
    case CUBECC_LAUNCH_VALUE_FLOAT:
      launch.values.emplace_back(value.value.f);
      break;
    default:
      error = fmt::format("{}: error: tunable '{}': value {} has unknown kind {}", source_name_,
                          t.name, v, value.kind);
      return Described::Failed;
    }
  }
  return Described::Launch;
}

KernelLibrary::~KernelLibrary() {
  if (handle_)
    dlclose(handle_);
}

bool KernelLibrary::trace(size_t index, ir::Module &module,
                          std::vector<ir::Diagnostic> &errors) const {
  const std::string &name = entries_[index].name;
  auto fail = [&](const std::string &message) {
    errors.push_back({source_name_, 0, 0, message, {}});
    return false;
  };
  // The library's code is C++ behind a C signature: an exception may still come through.
  const char *text = nullptr;
  try {
    text = library_->trace_ir(static_cast<uint32_t>(index));
    if (!text) {
      const char *why = library_->last_error();
      return fail(fmt::format("kernel '{}' failed to trace:\n{}", name,
                              why ? why : "(the library gave no reason)"));
    }
  } catch (const std::exception &e) {
    return fail(fmt::format("kernel '{}' failed to trace: the library's trace function threw: {}",
                            name, e.what()));
  } catch (...) {
    return fail(fmt::format("kernel '{}' failed to trace: the library's trace function threw an "
                            "exception that is not a std::exception",
                            name));
  }
  std::string buffer = fmt::format("{}:{}", source_name_, name);
  ir::ParseResult parsed = ir::parse_module(text, buffer);
  if (!parsed.module) {
    for (ir::Diagnostic &d : parsed.errors)
      d.notes.push_back("the kernel library produced IR this cubecc cannot read; rebuild it "
                        "against this cubecc");
    errors.insert(errors.end(), parsed.errors.begin(), parsed.errors.end());
    return false;
  }
  // Tracing kernel `name` must give that kernel and no other: a kernel the table does not list
  // would reach bundles and caches under a name no one asked for.
  for (const auto &k : parsed.module->kernels())
    if (k->name() != name)
      return fail(fmt::format("tracing kernel '{}' produced a kernel named '{}', which the "
                              "library's table does not list under that entry; register each "
                              "kernel under the name it traces to",
                              name, k->name()));
  if (parsed.module->kernels().size() != 1)
    return fail(fmt::format("tracing kernel '{}' produced {} kernels, not one", name,
                            parsed.module->kernels().size()));
  if (module.find_kernel(name))
    return fail(fmt::format("two kernels are named '{}'; kernel names must be unique", name));
  module.adopt_kernels(std::move(*parsed.module));
  return true;
}

} // namespace cubecc::dsl
