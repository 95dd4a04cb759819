//===- cpu_device.cpp - Native x86-64 kernels from the LLVM backend, on the host's cores
//-------===//
#include "cpu/cpu_device.h"

#include "cpu/object_cache.h"
#include "cubecc/codegen/cpu_elf.h"

#include "cubecc/codegen/cpu.h"
#include "cubecc/codegen/cpu_abi.h"
#include "cubecc/ir/ir.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/structural_hash.h"
#include "cubecc/ir/version.h"
#include "cubecc/runtime/files.h"
#include "cubecc/runtime/log.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <tbb/version.h>
#include <xxhash.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

namespace cubecc::runtime {

namespace {

/// The device's limits: a workgroup count per dimension and workgroup sizes as on the interp and
/// Vulkan devices, so that a launch accepted here runs on the GPU devices too.
constexpr uint32_t kMaxWorkgroupCount = 65535;
constexpr uint64_t kAlignment = 64;
/// The stack of oneTBB's worker threads: a kernel's local arrays live on the stack of the thread
/// that runs its workgroups (docs/cpu.md), one copy per subgroup when the kernel has barriers, so
/// a workgroup of 1024 invocations with a local<f32, 1024> needs 4 MiB. oneTBB's default is 4 MiB.
constexpr size_t kWorkerStackBytes = size_t(32) << 20;

std::atomic<uint64_t> compiles{0};

/// The cubecc_cpu_interface text (cpu_abi.h) of code built for launches of `abi`.
std::string cpu_interface_text(const codegen::KernelAbi &abi) {
  const auto &wg = abi.workgroup_size;
  std::string text =
      fmt::format("workgroup {} {} {}; shared {}", wg[0], wg[1], wg[2], abi.shared_bytes);
  for (const codegen::ParamSlot &p : abi.params)
    text += p.kind == codegen::ParamSlot::Buffer
                ? fmt::format("; {} binding {}", p.type.str(), p.binding)
                : fmt::format("; {} at {} x{}", p.type.str(), p.offset, p.lane_bytes);
  return text;
}

/// Whether `bytes` at `address` lie inside one loaded segment of the object `map` describes,
/// mapped with the access `flag` (PF_R, PF_X).
bool segment_holds(const link_map *map, const void *address, size_t bytes, uint32_t flag) {
  struct Query {
    const link_map *map;
    uintptr_t begin, end;
    uint32_t flag;
    bool found = false;
  } query{map, reinterpret_cast<uintptr_t>(address), reinterpret_cast<uintptr_t>(address) + bytes,
          flag};
  ::dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) {
        auto &q = *static_cast<Query *>(data);
        if (info->dlpi_addr != q.map->l_addr || !info->dlpi_name || !q.map->l_name ||
            std::strcmp(info->dlpi_name, q.map->l_name) != 0)
          return 0;
        for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr) &p = info->dlpi_phdr[i];
          uintptr_t begin = info->dlpi_addr + p.p_vaddr, end = begin + p.p_memsz;
          if (p.p_type == PT_LOAD && (p.p_flags & q.flag) && q.begin >= begin && q.end <= end &&
              q.begin < q.end)
            q.found = true;
        }
        return 1;
      },
      &query);
  return query.found;
}

//===- The host ------------------------------------------------------------------------------===//

/// The CPU's brand string ("AMD EPYC 9R14 96-Core Processor") and vendor ("AMD", "Intel").
std::pair<std::string, std::string> cpu_name_and_vendor() {
  std::string name, vendor;
#if defined(__x86_64__)
  unsigned regs[12] = {};
  if (__get_cpuid(0, &regs[0], &regs[1], &regs[2], &regs[3])) {
    char id[13] = {};
    std::memcpy(id, &regs[1], 4); // ebx, edx, ecx
    std::memcpy(id + 4, &regs[3], 4);
    std::memcpy(id + 8, &regs[2], 4);
    vendor = id;
    if (vendor == "AuthenticAMD" || vendor == "HygonGenuine")
      vendor = vendor == "AuthenticAMD" ? "AMD" : "Hygon";
    else if (vendor == "GenuineIntel")
      vendor = "Intel";
  }
  unsigned top = __get_cpuid_max(0x80000000, nullptr);
  if (top >= 0x80000004) {
    char brand[49] = {};
    for (unsigned leaf = 0; leaf < 3; ++leaf) {
      unsigned r[4];
      __get_cpuid(0x80000002 + leaf, &r[0], &r[1], &r[2], &r[3]);
      std::memcpy(brand + leaf * 16, r, 16);
    }
    name = brand;
  }
#endif
  if (name.empty()) { // no brand string in cpuid: the kernel's name for it
    std::ifstream cpuinfo("/proc/cpuinfo");
    for (std::string line; std::getline(cpuinfo, line);)
      if (line.starts_with("model name")) {
        name = line.substr(line.find(':') == std::string::npos ? line.size() : line.find(':') + 1);
        break;
      }
  }
  auto trim = [](std::string s) {
    s.erase(0, s.find_first_not_of(" \t"));
    s.erase(s.find_last_not_of(" \t") + 1);
    return s;
  };
  name = trim(name);
  return {name.empty() ? "x86-64 CPU" : name, vendor.empty() ? "unknown" : vendor};
}

/// The position of `level` in codegen::cpu_levels() (oldest first), or -1.
int level_rank(std::string_view level) {
  const std::vector<std::string> &levels = codegen::cpu_levels();
  auto it = std::find(levels.begin(), levels.end(), level);
  return it == levels.end() ? -1 : int(it - levels.begin());
}

bool checked_from_environment() {
  const char *text = std::getenv("CUBECC_CHECKED");
  if (!text || !*text || std::string_view(text) == "0")
    return false;
  if (std::string_view(text) == "1")
    return true;
  throw Error(ErrorKind::NoDevice, fmt::format("no device: cpu: CUBECC_CHECKED={} is not 0 or 1",
                                               shorten_for_message(text)));
}

//===- Memory --------------------------------------------------------------------------------===//

struct CpuMemory {
  uint8_t *data = nullptr;
  bool owned = false;
};

uint8_t *data_of(const DeviceMemory &memory) {
  return static_cast<CpuMemory *>(memory.handle)->data;
}

void check_range(const DeviceMemory &memory, uint64_t offset, uint64_t bytes, const char *what) {
  if (!memory.handle || offset > memory.bytes || bytes > memory.bytes - offset)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("cpu: {}: the range [{}, {}) lies outside the {} bytes of the memory",
                            what, offset, offset + bytes, memory.bytes));
}

/// Workgroup memory for one thread: grows to the largest kernel's, 64-byte aligned.
class Scratch {
public:
  Scratch() = default;
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  ~Scratch() { std::free(data_); }
  void *get(uint64_t bytes) {
    if (bytes == 0)
      return nullptr;
    if (bytes > size_) {
      std::free(data_);
      size_ = (bytes + kAlignment - 1) / kAlignment * kAlignment;
      data_ = std::aligned_alloc(kAlignment, size_);
      if (!data_) {
        size_ = 0;
        throw std::bad_alloc();
      }
    }
    return data_;
  }

private:
  void *data_ = nullptr;
  uint64_t size_ = 0;
};

//===- Kernels -------------------------------------------------------------------------------===//

class CpuDevice;

/// A loaded shared object: dlclose'd with the kernel.
class CpuKernel : public CompiledKernel {
public:
  CpuKernel(const CpuDevice *owner, codegen::KernelAbi abi) : owner_(owner) {
    abi_ = std::move(abi);
  }
  ~CpuKernel() override {
    if (handle)
      ::dlclose(handle);
  }
  const CpuDevice *owner() const { return owner_; }

  void *handle = nullptr;
  cubecc_cpu_kernel_fn function = nullptr;
  std::string level;
  uint32_t subgroup_size = 0;
  /// For checked-mode messages: the parameters' names and the kernel's source file, when the
  /// kernel was compiled here (an object from a bundle has neither).
  std::vector<std::string> parameter_names;
  std::string source_file;

private:
  const CpuDevice *owner_;
};

/// Empty when a launch of `abi` can be packed and run safely: the parameters laid out inside the
/// parameter block and bindings in order (KernelAbi::of's layout), and within `f`'s limits.
std::string abi_problem(const codegen::KernelAbi &abi, const codegen::TargetFeatures &f) {
  uint64_t invocations = 1;
  for (int i = 0; i < 3; ++i) {
    if (abi.workgroup_size[i] == 0 || abi.workgroup_size[i] > f.max_workgroup_size[i])
      invocations = ~uint64_t(0);
    else if (invocations != ~uint64_t(0))
      invocations *= abi.workgroup_size[i];
  }
  if (invocations > f.max_workgroup_invocations)
    return fmt::format("its workgroup size ({}, {}, {}) is over the device's limit of {} "
                       "invocations",
                       abi.workgroup_size[0], abi.workgroup_size[1], abi.workgroup_size[2],
                       f.max_workgroup_invocations);
  if (abi.shared_bytes > f.max_shared_bytes)
    return fmt::format("it uses {} bytes of shared memory; the device has {}", abi.shared_bytes,
                       f.max_shared_bytes);
  if (abi.param_block_bytes > f.max_param_block_bytes)
    return fmt::format("its parameter block of {} bytes is over the device's {}",
                       abi.param_block_bytes, f.max_param_block_bytes);
  uint32_t binding = 0;
  for (size_t i = 0; i < abi.params.size(); ++i) {
    const codegen::ParamSlot &slot = abi.params[i];
    if (slot.kind == codegen::ParamSlot::Buffer) {
      if (slot.binding != binding++)
        return fmt::format("parameter {} has binding {}, not {}", i, slot.binding, binding - 1);
      continue;
    }
    uint64_t end = uint64_t(slot.offset) + uint64_t(slot.lane_bytes) * slot.type.lanes();
    if ((slot.lane_bytes != 4 && slot.lane_bytes != 8) || slot.offset % slot.lane_bytes ||
        end > abi.param_block_bytes)
      return fmt::format("parameter {} ({} lane(s) of {} bytes at byte {}) lies outside its "
                         "parameter block of {} bytes",
                         i, slot.type.lanes(), slot.lane_bytes, slot.offset, abi.param_block_bytes);
  }
  if (binding != abi.num_buffers)
    return fmt::format("it has {} buffer parameters but says {}", binding, abi.num_buffers);
  return "";
}

/// An open file descriptor, closed on scope exit.
struct FileDescriptor {
  FileDescriptor() = default;
  FileDescriptor(const FileDescriptor &) = delete;
  FileDescriptor &operator=(const FileDescriptor &) = delete;
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0)
      ::close(fd);
  }
};

const char *fault_kind_name(uint32_t kind) {
  switch (kind) {
  case 1:
    return "a load";
  case 2:
    return "a store";
  case 3:
    return "an atomic";
  default:
    return "an access";
  }
}

//===- The device ----------------------------------------------------------------------------===//

class CpuDevice final : public ImmediateDevice {
public:
  CpuDevice(std::string level, bool checked) : level_(std::move(level)), checked_(checked) {
    // Before this process's first parallel launch starts oneTBB's workers, for the process's
    // lifetime (oneTBB takes the largest stack size any global_control asks for). Never
    // destroyed: at exit oneTBB may already be gone.
    static const auto *worker_stack =
        new tbb::global_control(tbb::global_control::thread_stack_size, kWorkerStackBytes);
    (void)worker_stack;
    auto [name, vendor] = cpu_name_and_vendor();
    unsigned threads = unsigned(tbb::this_task_arena::max_concurrency());
    info_.backend = "cpu";
    info_.name = name;
    info_.vendor = vendor;
    info_.driver = fmt::format("cubecc cpu device, {} thread{} (oneTBB {}.{}){}", threads,
                               threads == 1 ? "" : "s", TBB_VERSION_MAJOR, TBB_VERSION_MINOR,
                               checked_ ? ", checked" : "");
    info_.arch = level_;
    info_.device_class = DeviceClass::Cpu;
    info_.features = codegen::cpu_features(level_);
    info_.subgroup_size = info_.features.subgroup_size;
    info_.max_buffer_bytes = host_memory_bytes();
    info_.timestamp_period_ns = 1;
  }

  const DeviceInfo &info() const override { return info_; }

  //===- Memory ------------------------------------------------------------------------------===//

  DeviceMemory allocate(uint64_t bytes) override {
    if (bytes > info_.max_buffer_bytes)
      throw Error(ErrorKind::OutOfMemory,
                  fmt::format("cpu: out of memory: {} bytes are more than the host's {}", bytes,
                              info_.max_buffer_bytes));
    uint64_t rounded =
        std::max<uint64_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
    void *data = std::aligned_alloc(kAlignment, rounded);
    if (!data)
      throw Error(ErrorKind::OutOfMemory,
                  fmt::format("cpu: out of memory: cannot allocate {} bytes", bytes));
    return DeviceMemory{new CpuMemory{static_cast<uint8_t *>(data), true}, bytes};
  }
  void free(DeviceMemory memory) override {
    auto *m = static_cast<CpuMemory *>(memory.handle);
    if (!m)
      return;
    if (m->owned)
      std::free(m->data);
    delete m;
  }
  std::optional<ExternalMemory::Kind> memory_kind() const override {
    return ExternalMemory::Kind::Host;
  }
  DeviceMemory adopt_memory(const ExternalMemory &memory) override {
    if (memory.kind != ExternalMemory::Kind::Host)
      return Device::adopt_memory(memory);
    return DeviceMemory{new CpuMemory{reinterpret_cast<uint8_t *>(memory.handle), false},
                        memory.bytes};
  }
  // Launches finish before launch() returns: nothing queued can still use the memory.
  void release_adopted(DeviceMemory memory) override {
    delete static_cast<CpuMemory *>(memory.handle);
  }
  ExternalMemory native_memory(const DeviceMemory &memory) const override {
    return ExternalMemory::host(data_of(memory), memory.bytes);
  }
  void copy_in(const DeviceMemory &dst, uint64_t offset, const void *src, uint64_t bytes) override {
    check_range(dst, offset, bytes, "upload");
    std::memcpy(data_of(dst) + offset, src, bytes);
  }
  void copy_out(const DeviceMemory &src, uint64_t offset, void *dst, uint64_t bytes) override {
    check_range(src, offset, bytes, "download");
    std::memcpy(dst, data_of(src) + offset, bytes);
  }

  //===- Kernels -----------------------------------------------------------------------------===//

  std::unique_ptr<CompiledKernel> compile(const ir::Kernel &kernel) override {
    codegen::KernelAbi abi = codegen::KernelAbi::of(kernel);
    if (std::string why = abi_problem(abi, info_.features); !why.empty())
      throw Error(ErrorKind::Unsupported, fmt::format("cpu: kernel '{}': {}", kernel.name(), why));
    std::string key = cpu_object_cache_key(kernel, level_, checked_);
    std::optional<CpuObjectCache> cache = object_cache();
    std::unique_ptr<CpuKernel> loaded;
    if (cache) {
      if (std::optional<std::string> object = cache->find(key)) {
        try {
          loaded = load_object(*object, level_, abi);
          log_debug("cpu: kernel '{}' loaded from {}", kernel.name(), cache->path_of(key));
        } catch (const Error &e) {
          log_warning("cpu object cache: {}: {} (ignored; the kernel is compiled again)",
                      cache->path_of(key), e.what());
        }
      }
    }
    if (!loaded) {
      codegen::CpuCompileOptions options;
      options.level = level_;
      options.checked = checked_;
      std::vector<ir::Diagnostic> errors;
      std::optional<codegen::CpuBinary> binary = codegen::compile_cpu(kernel, options, errors);
      ++compiles;
      if (!binary)
        throw Error(ErrorKind::Compile, fmt::format("cpu: cannot compile kernel '{}':\n{}",
                                                    kernel.name(), ir::to_string(errors)));
      if (std::string why = codegen::launch_shape_difference(binary->abi, "the compiled object",
                                                             abi, "the kernel");
          !why.empty())
        throw Error(ErrorKind::Internal,
                    fmt::format("cpu: kernel '{}': {} (a bug in cubecc)", kernel.name(), why));
      try {
        loaded = load_object(binary->object, binary->level, abi);
      } catch (const Error &e) {
        // The object was made just now: one that does not load is a bug in cubecc.
        throw Error(ErrorKind::Internal, fmt::format("{} (a bug in cubecc)", e.what()));
      }
      if (cache) {
        try {
          cache->store(key, binary->object);
        } catch (const Error &e) {
          log_warning("{} (the kernel is compiled again next time)", e.what());
        }
      }
    }
    for (unsigned i = 0; i < kernel.num_parameters(); ++i)
      loaded->parameter_names.push_back(kernel.parameter(i)->name());
    loaded->source_file = source_file_of(kernel);
    return loaded;
  }

  std::vector<BinaryTarget> binary_targets() const override {
    // Checked mode compiles every kernel with its bounds checks: no prebuilt object has them.
    if (checked_)
      return {};
    std::vector<BinaryTarget> targets;
    for (int rank = level_rank(level_); rank >= 0; --rank)
      targets.push_back({"cpu:" + codegen::cpu_levels()[size_t(rank)], "elf", "", ""});
    return targets;
  }

  std::unique_ptr<CompiledKernel> load_binary(const KernelBinary &binary) override {
    const BinaryTarget &target = binary.target;
    const std::string &name = binary.abi.name;
    if (target.format != "elf" || !target.target.starts_with("cpu:"))
      throw Error(ErrorKind::Environment,
                  fmt::format("cpu: kernel '{}': cannot load a {} binary for {}", name,
                              target.format, target.target));
    std::string level = target.target.substr(4);
    if (level_rank(level) < 0)
      throw Error(ErrorKind::Environment,
                  fmt::format("cpu: kernel '{}': unknown CPU level '{}' (cubecc knows {})", name,
                              shorten_for_message(level), fmt::join(codegen::cpu_levels(), ", ")));
    if (level_rank(level) > level_rank(level_))
      throw Error(ErrorKind::Environment,
                  fmt::format("cpu: kernel '{}': its object is built for {}, which this CPU does "
                              "not run (it runs {}): refused before loading it",
                              name, level, level_));
    if (std::string why = abi_problem(binary.abi, info_.features); !why.empty())
      throw Error(ErrorKind::Environment, fmt::format("cpu: kernel '{}': {}", name, why));
    return load_object(binary.bytes, level, binary.abi);
  }

  //===- Launches ----------------------------------------------------------------------------===//

  void run_launch(const CompiledKernel &compiled, std::array<uint32_t, 3> num_workgroups,
                  std::span<const LaunchArg> args) override {
    const auto *k = dynamic_cast<const CpuKernel *>(&compiled);
    if (!k || k->owner() != this)
      throw Error(
          ErrorKind::InvalidArgument,
          fmt::format("cpu: kernel '{}' was compiled for another device", compiled.abi().name));
    const codegen::KernelAbi &abi = k->abi();
    for (uint32_t count : num_workgroups)
      if (count > kMaxWorkgroupCount)
        throw Error(ErrorKind::InvalidArgument,
                    fmt::format("cpu: launch of kernel '{}': a grid of {}x{}x{} workgroups "
                                "exceeds the device's maximum of {}x{}x{}",
                                abi.name, num_workgroups[0], num_workgroups[1], num_workgroups[2],
                                kMaxWorkgroupCount, kMaxWorkgroupCount, kMaxWorkgroupCount));
    if (args.size() != abi.params.size())
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("cpu: launch of kernel '{}': {} arguments for {} parameters",
                              abi.name, args.size(), abi.params.size()));

    std::vector<void *> buffers(abi.num_buffers);
    std::vector<uint64_t> counts(abi.num_buffers);
    // 8-aligned (64-bit lanes are read in place) and never empty (a valid pointer).
    std::vector<uint64_t> block((abi.param_block_bytes + 7) / 8 + 1);
    auto *block_bytes = reinterpret_cast<uint8_t *>(block.data());
    for (size_t i = 0; i < args.size(); ++i) {
      const codegen::ParamSlot &slot = abi.params[i];
      const LaunchArg &a = args[i];
      if (slot.kind == codegen::ParamSlot::Value) {
        if (a.memory || a.bits.size() != slot.type.lanes())
          throw Error(ErrorKind::InvalidArgument,
                      fmt::format("cpu: launch of kernel '{}': parameter {} needs {} lane(s)",
                                  abi.name, i, slot.type.lanes()));
        codegen::pack_value(slot, a.bits.data(), block_bytes);
        continue;
      }
      if (!a.memory)
        throw Error(
            ErrorKind::InvalidArgument,
            fmt::format("cpu: launch of kernel '{}': parameter {} needs a buffer", abi.name, i));
      check_range(*a.memory, a.offset, a.bytes, "launch");
      uint64_t element_bytes = std::max(1u, ir::scalar_bits(slot.type.element()) / 8);
      if (a.offset % element_bytes)
        throw Error(ErrorKind::InvalidArgument,
                    fmt::format("cpu: launch of kernel '{}': parameter {} starts at byte {}, not "
                                "a multiple of its element size {}",
                                abi.name, i, a.offset, element_bytes));
      buffers[slot.binding] = data_of(*a.memory) + a.offset;
      counts[slot.binding] = a.bytes / element_bytes;
    }

    cubecc_cpu_fault fault{};
    cubecc_cpu_launch launch{};
    launch.buffers = buffers.data();
    launch.buffer_counts = counts.data();
    launch.params = block.data();
    std::copy(num_workgroups.begin(), num_workgroups.end(), launch.num_workgroups);
    launch.fault = &fault;

    run(*k, launch);
    if (fault.kind != 0)
      throw Error(ErrorKind::DeviceFailure, fault_message(*k, fault));
  }

private:
  /// Runs every workgroup of `launch`: ranges of linear workgroup ids on oneTBB's threads (the
  /// calling thread takes part), each range with its thread's shared memory.
  void run(const CpuKernel &k, const cubecc_cpu_launch &launch) {
    const uint64_t groups =
        uint64_t(launch.num_workgroups[0]) * launch.num_workgroups[1] * launch.num_workgroups[2];
    if (groups == 0)
      return;
    const uint64_t shared_bytes = k.abi().shared_bytes;
    const unsigned threads = unsigned(tbb::this_task_arena::max_concurrency());
    if (groups == 1 || threads <= 1) {
      k.function(&launch, 0, groups, scratch_.local().get(shared_bytes));
      return;
    }
    // About 16 ranges per thread to start with: enough for oneTBB to balance uneven workgroups,
    // few enough that a tiny workgroup's cost is not dwarfed by scheduling.
    const uint64_t grain = std::max<uint64_t>(1, groups / (uint64_t(threads) * 16));
    tbb::parallel_for(tbb::blocked_range<uint64_t>(0, groups, grain),
                      [&](const tbb::blocked_range<uint64_t> &range) {
                        k.function(&launch, range.begin(), range.end(),
                                   scratch_.local().get(shared_bytes));
                      });
  }

  std::string fault_message(const CpuKernel &k, const cubecc_cpu_fault &fault) const {
    const codegen::KernelAbi &abi = k.abi();
    if (fault.kind == CUBECC_CPU_FAULT_NO_MEMORY)
      return fmt::format("cpu: kernel '{}': its local arrays need {} bytes of heap per call (one "
                         "copy per invocation of a workgroup) and the allocation failed: the "
                         "launch did not run; give the kernel smaller local arrays or a smaller "
                         "workgroup",
                         abi.name, fault.count);
    std::string parameter = fmt::format("parameter {}", fault.param);
    if (fault.param == CUBECC_CPU_FAULT_SHARED_ARRAY)
      parameter = "a shared array";
    else if (fault.param == CUBECC_CPU_FAULT_LOCAL_ARRAY)
      parameter = "a local array";
    else if (fault.param < k.parameter_names.size() && !k.parameter_names[fault.param].empty())
      parameter += fmt::format(" ('{}')", k.parameter_names[fault.param]);
    std::string where;
    if (fault.line)
      where = fmt::format(" ({}{}:{})", k.source_file.empty() ? "line " : k.source_file + ":",
                          fault.line, fault.column);
    return fmt::format("cpu: kernel '{}': {}, {} at index {} of {} elements{} (checked mode: the "
                       "first out-of-bounds access of the launch)",
                       abi.name, parameter, fault_kind_name(fault.kind), fault.index, fault.count,
                       where);
  }

  /// The file the kernel's locations name (the kernel's own, else its first op's); "" if none.
  static std::string source_file_of(const ir::Kernel &kernel) {
    const ir::Module *module = kernel.module();
    if (!module)
      return "";
    uint32_t file = kernel.location().file;
    if (file == 0)
      kernel.walk([&](const ir::Operation *op) {
        if (file == 0)
          file = op->location().file;
      });
    return std::string(module->file_name(file));
  }

  /// The per-user object cache, or nothing (with a warning, once) when there is no folder for it.
  std::optional<CpuObjectCache> object_cache() {
    try {
      return CpuObjectCache(user_cache_directory());
    } catch (const Error &e) {
      if (!cache_warned_.exchange(true))
        log_warning("cpu: {}; compiled kernels are not kept between runs", e.what());
      return std::nullopt;
    }
  }

  /// Checks `object` (codegen/cpu_elf.h), loads it from memory and checks its exports: the ABI
  /// version and the subgroup size of `level`. `abi` is the launch metadata it is called with.
  std::unique_ptr<CpuKernel> load_object(std::string_view object, const std::string &level,
                                         const codegen::KernelAbi &abi) {
    // One load at a time: the descriptor-number dance below must not interleave with another.
    std::lock_guard lock(load_mutex_);
    const std::string &name = abi.name;
    if (std::string why = codegen::elf_shared_object_problem(object); !why.empty())
      throw Error(ErrorKind::Environment,
                  fmt::format("cpu: kernel '{}': its object is not a loadable shared object: {}",
                              name, why));
    FileDescriptor file;
    file.fd = ::memfd_create(("cubecc-" + name.substr(0, 200)).c_str(), MFD_CLOEXEC);
    if (file.fd < 0)
      throw Error(ErrorKind::Internal, fmt::format("cpu: kernel '{}': memfd_create failed: {}",
                                                   name, std::strerror(errno)));
    for (size_t done = 0; done < object.size();) {
      ssize_t n = ::write(file.fd, object.data() + done, object.size() - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        throw Error(ErrorKind::Internal,
                    fmt::format("cpu: kernel '{}': writing its object to memory failed: {}", name,
                                std::strerror(n < 0 ? errno : EIO)));
      done += size_t(n);
    }
    // The loader knows objects by path: a descriptor number that an object still loaded was
    // opened under would give that object back. Such a number is skipped by duplicating the
    // descriptor (to the lowest free number) until the path is unused; the numbers skipped stay
    // open until then, so that the duplicate cannot land on them again.
    std::vector<std::unique_ptr<FileDescriptor>> skipped;
    std::string path = fmt::format("/proc/self/fd/{}", file.fd);
    while (void *earlier = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) {
      ::dlclose(earlier);
      skipped.push_back(std::make_unique<FileDescriptor>());
      skipped.back()->fd = file.fd;
      file.fd = ::fcntl(file.fd, F_DUPFD_CLOEXEC, 0);
      if (file.fd < 0)
        throw Error(ErrorKind::Internal,
                    fmt::format("cpu: kernel '{}': dup failed: {}", name, std::strerror(errno)));
      path = fmt::format("/proc/self/fd/{}", file.fd);
    }
    auto kernel = std::make_unique<CpuKernel>(this, abi);
    kernel->level = level;
    kernel->handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!kernel->handle) {
      const char *error = ::dlerror();
      throw Error(ErrorKind::Environment,
                  fmt::format("cpu: kernel '{}': its object does not load: {}", name,
                              error ? error : "dlopen failed"));
    }
    link_map *map = nullptr;
    if (::dlinfo(kernel->handle, RTLD_DI_LINKMAP, &map) != 0 || !map)
      throw Error(ErrorKind::Environment,
                  fmt::format("cpu: kernel '{}': the loader does not describe its object", name));
    // An export is read (or called) only where the object's own segments map it with that
    // access: a damaged symbol table must not send this process to an arbitrary address.
    auto symbol = [&](const char *symbol_name, size_t bytes, bool code) {
      ::dlerror();
      void *address = ::dlsym(kernel->handle, symbol_name);
      if (!address)
        throw Error(
            ErrorKind::Environment,
            fmt::format("cpu: kernel '{}': its object does not export {}", name, symbol_name));
      if (!segment_holds(map, address, bytes, code ? PF_X : PF_R))
        throw Error(ErrorKind::Environment,
                    fmt::format("cpu: kernel '{}': its object's {} lies outside its {} segments "
                                "(a damaged object): rebuild it",
                                name, symbol_name, code ? "executable" : "readable"));
      return address;
    };
    uint32_t version =
        *static_cast<const uint32_t *>(symbol(CUBECC_CPU_ABI_VERSION_SYMBOL, 4, false));
    if (version != CUBECC_CPU_ABI_VERSION)
      throw Error(ErrorKind::Environment,
                  fmt::format("cpu: kernel '{}': its object follows CPU ABI version {}, this "
                              "runtime calls version {}",
                              name, version, CUBECC_CPU_ABI_VERSION));
    kernel->subgroup_size =
        *static_cast<const uint32_t *>(symbol(CUBECC_CPU_SUBGROUP_SIZE_SYMBOL, 4, false));
    uint32_t expected = codegen::cpu_features(level).subgroup_size;
    if (kernel->subgroup_size != expected)
      throw Error(ErrorKind::Environment,
                  fmt::format("cpu: kernel '{}': its object has subgroups of {} lanes, but {} "
                              "has {}",
                              name, kernel->subgroup_size, level, expected));
    // The interface the code was built for must be the launch metadata's: metadata that
    // disagrees (a bundle's, damaged behind its checksums) would run the code on wrong memory.
    const std::string interface = cpu_interface_text(abi);
    const char *built_for =
        static_cast<const char *>(symbol(CUBECC_CPU_INTERFACE_SYMBOL, interface.size() + 1, false));
    if (std::memcmp(built_for, interface.c_str(), interface.size() + 1) != 0)
      throw Error(ErrorKind::Environment,
                  fmt::format("cpu: kernel '{}': its object's code was not built for its launch "
                              "metadata ({}): rebuild it",
                              name, interface));
    kernel->function =
        reinterpret_cast<cubecc_cpu_kernel_fn>(symbol(CUBECC_CPU_KERNEL_SYMBOL, 1, true));
    return kernel;
  }

  DeviceInfo info_;
  std::string level_;
  bool checked_ = false;
  std::atomic<bool> cache_warned_{false};
  tbb::enumerable_thread_specific<Scratch> scratch_;
  std::mutex load_mutex_;
};

} // namespace

uint64_t cpu_device_compiles() {
  return compiles.load();
}

std::string cpu_object_cache_key(const ir::Kernel &kernel, const std::string &level, bool checked) {
  // The compiler's identity is read without loading LLVM: a start whose kernels are all cached
  // never maps the plugin.
  std::string key =
      fmt::format("kernel={} level={} checked={} abi={} compiler=\"{}\" cubecc={}",
                  ir::structural_hash(kernel).hex(), level, checked ? 1 : 0, CUBECC_CPU_ABI_VERSION,
                  codegen::cpu_compiler_identity(), cubecc::version());
  if (checked) {
    std::string text = ir::to_string(kernel);
    key += fmt::format(" text={:016x}", XXH3_64bits(text.data(), text.size()));
  }
  return key;
}

std::string cpu_device_level(std::string *why) {
#if !defined(__x86_64__)
  if (why)
    *why = "the cpu device runs x86-64 code only, and this host is not x86-64";
  return "";
#else
  std::string level = codegen::host_cpu_level();
  // A CUBECC_CPU_LEVEL the level does not follow (not a level, or above this CPU's) is said, as
  // `compile --target cpu:native` says it, rather than silently ignored.
  if (const char *env = std::getenv("CUBECC_CPU_LEVEL"); env && *env && level != env) {
    if (why)
      *why = level_rank(env) < 0
                 ? fmt::format("CUBECC_CPU_LEVEL={} is not a CPU level (x86-64-v2, x86-64-v3, "
                               "x86-64-v4): set one or unset it",
                               env)
                 : fmt::format("CUBECC_CPU_LEVEL={} is above this CPU's level ({}): set that or a "
                               "lower one, or unset it",
                               env, level);
    return "";
  }
  if (level_rank(level) < 0) {
    if (why)
      *why = level.empty() ? "this CPU is below x86-64-v2 (SSE4.2, POPCNT), the oldest level "
                             "cubecc compiles for"
                           : fmt::format("unknown CPU level '{}'", level);
    return "";
  }
  return level;
#endif
}

std::unique_ptr<Device> open_cpu_device() {
  std::string why;
  std::string level = cpu_device_level(&why);
  if (level.empty())
    throw Error(ErrorKind::NoDevice, "no device: cpu: " + why);
  return std::make_unique<CpuDevice>(level, checked_from_environment());
}

const DeviceKind &cpu_device_kind() {
  static const DeviceKind kind{"cpu", DeviceClass::Cpu, [] { return open_cpu_device(); }, {}};
  return kind;
}

} // namespace cubecc::runtime
