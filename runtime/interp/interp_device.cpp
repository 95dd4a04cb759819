//===- interp_device.cpp - The reference interpreter as a device ------------------------------===//
#include "interp_device.h"

#include "cubecc/ir/clone.h"
#include "cubecc/ir/interpreter.h"
#include "cubecc/ir/parser.h"
#include "cubecc/ir/verifier.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace cubecc::runtime {

namespace {

/// Host memory: the device's own (`owned`) or the caller's (adopted).
struct HostMemory {
  uint8_t *data = nullptr;
  std::vector<uint8_t> owned;
};

HostMemory &host(const DeviceMemory &memory) {
  return *static_cast<HostMemory *>(memory.handle);
}

/// The interp device's limits: the smallest of the devices cubecc runs on, so that a kernel
/// and a launch the interpreter accepts run on them too. Shared memory is lavapipe's 32 KiB (CUDA
/// and HIP allow 48 and 64 KiB; CUBECC_INTERP_SHARED_BYTES raises it for tests of big arrays),
/// the workgroup count Vulkan's minimum maxComputeWorkGroupCount.
constexpr uint32_t kDefaultSharedBytes = 32u << 10;
constexpr uint32_t kMaxWorkgroupInvocations = 1024;
constexpr uint32_t kMaxWorkgroupSize = 1024;
constexpr uint32_t kMaxWorkgroupCount = 65535;

/// Refuses a kernel over the device's shared memory, with the Vulkan device's message: the
/// interpreter would otherwise allocate whatever the kernel asks for. (Workgroup sizes over 1024
/// invocations are refused by the verifier, for every device.)
void check_kernel_limits(const codegen::KernelAbi &abi, uint32_t max_shared_bytes) {
  if (abi.shared_bytes > max_shared_bytes)
    throw Error(ErrorKind::Unsupported,
                fmt::format("interp: kernel '{}' uses {} bytes of shared memory; the device has {}",
                            abi.name, abi.shared_bytes, max_shared_bytes));
}

class InterpKernel : public CompiledKernel {
public:
  InterpKernel(std::unique_ptr<ir::Module> module, uint32_t max_shared_bytes)
      : module_(std::move(module)) {
    abi_ = codegen::KernelAbi::of(kernel());
    check_kernel_limits(abi_, max_shared_bytes);
  }
  const ir::Kernel &kernel() const { return *module_->kernels().front(); }

private:
  std::unique_ptr<ir::Module> module_;
};

/// CUBECC_INTERP_SHARED_BYTES: the shared memory the device offers (default 32 KiB).
uint32_t shared_bytes_from_environment() {
  const char *text = std::getenv("CUBECC_INTERP_SHARED_BYTES");
  if (!text || !*text)
    return kDefaultSharedBytes;
  char *end = nullptr;
  unsigned long long value = std::strtoull(text, &end, 10);
  if (*end != '\0' || value < 1024 || value > (1ull << 30))
    throw Error(ErrorKind::NoDevice,
                fmt::format("no device: interp: CUBECC_INTERP_SHARED_BYTES={} is not a byte count "
                            "from 1024 to 1073741824",
                            text));
  return static_cast<uint32_t>(value);
}

uint32_t subgroup_size_from_environment() {
  const char *text = std::getenv("CUBECC_INTERP_SUBGROUP_SIZE");
  if (!text || !*text)
    return 32;
  char *end = nullptr;
  unsigned long value = std::strtoul(text, &end, 10);
  if (*end != '\0' || value < 1 || value > 128 || (value & (value - 1)) != 0)
    throw Error(ErrorKind::NoDevice,
                fmt::format("no device: interp: CUBECC_INTERP_SUBGROUP_SIZE={} is not a power "
                            "of two from 1 to 128",
                            text));
  return static_cast<uint32_t>(value);
}

class InterpDevice final : public ImmediateDevice {
public:
  InterpDevice() {
    info_.backend = "interp";
    info_.device_class = DeviceClass::Software;
    info_.name = "cubecc reference interpreter";
    info_.driver = "cubecc interpreter";
    info_.vendor = "cubecc";
    info_.subgroup_size = subgroup_size_from_environment();
    codegen::TargetFeatures &f = info_.features;
    f.target = "interp";
    f.int8 = f.int16 = f.int64 = f.float16 = f.bfloat16 = f.float64 = true;
    f.int64_atomics = f.float32_atomic_add = f.float32_atomics = f.float64_atomic_add = true;
    f.float32_atomic_min_max = true;
    f.subgroup_arithmetic = f.subgroup_shuffle = f.subgroup_ballot = true;
    f.subgroup_extended_types = true;
    f.narrow_atomics = true;
    // The interpreter implements docs/ir.md exactly: fma rounds once, subgroups are consecutive
    // local_index values, signed zeros are kept.
    f.fused_fma = true;
    f.signed_zero_inf_nan_preserve = true;
    f.subgroup_size = info_.subgroup_size;
    f.linear_subgroups = true;
    f.matrix_shapes = ir::matrix_shape_mask([](const ir::MatrixShape &) { return true; });
    f.async_copy = true; // copies land at their wait (docs/ir.md §4.14)
    f.max_shared_bytes = shared_bytes_from_environment();
    f.max_param_block_bytes = 4096;
    f.max_workgroup_invocations = kMaxWorkgroupInvocations;
    f.max_workgroup_size[0] = f.max_workgroup_size[1] = f.max_workgroup_size[2] = kMaxWorkgroupSize;
    info_.max_buffer_bytes = host_memory_bytes();
    info_.timestamp_period_ns = 0; // the times reported are host times
  }

  const DeviceInfo &info() const override { return info_; }

  DeviceMemory allocate(uint64_t bytes) override {
    if (bytes > info_.max_buffer_bytes)
      throw Error(ErrorKind::OutOfMemory,
                  fmt::format("interp: out of memory: {} bytes are more than the host's {}", bytes,
                              info_.max_buffer_bytes));
    HostMemory *memory = nullptr;
    try {
      memory = new HostMemory{nullptr, std::vector<uint8_t>(bytes)};
    } catch (const std::bad_alloc &) {
      throw Error(ErrorKind::OutOfMemory,
                  fmt::format("interp: out of memory: {} bytes could not be allocated", bytes));
    }
    memory->data = memory->owned.data();
    return DeviceMemory{memory, bytes};
  }
  void free(DeviceMemory memory) override { delete static_cast<HostMemory *>(memory.handle); }
  std::optional<ExternalMemory::Kind> memory_kind() const override {
    return ExternalMemory::Kind::Host;
  }
  DeviceMemory adopt_memory(const ExternalMemory &memory) override {
    if (memory.kind != ExternalMemory::Kind::Host)
      return Device::adopt_memory(memory);
    auto *adopted = new HostMemory{reinterpret_cast<uint8_t *>(memory.handle), {}};
    return DeviceMemory{adopted, memory.bytes};
  }
  // Launches run at once: nothing queued can still use the memory.
  void release_adopted(DeviceMemory memory) override {
    delete static_cast<HostMemory *>(memory.handle);
  }
  ExternalMemory native_memory(const DeviceMemory &memory) const override {
    return ExternalMemory::host(host(memory).data, memory.bytes);
  }

  void copy_in(const DeviceMemory &dst, uint64_t offset, const void *src, uint64_t bytes) override {
    check_range(dst, offset, bytes, "upload");
    std::memcpy(host(dst).data + offset, src, bytes);
  }
  void copy_out(const DeviceMemory &src, uint64_t offset, void *dst, uint64_t bytes) override {
    check_range(src, offset, bytes, "download");
    std::memcpy(dst, host(src).data + offset, bytes);
  }

  std::unique_ptr<CompiledKernel> compile(const ir::Kernel &kernel) override {
    return std::make_unique<InterpKernel>(ir::copy_kernel(kernel), info_.features.max_shared_bytes);
  }

  // The interpreter's binary is the optimized kernel's IR text: loading it parses and verifies,
  // and runs no passes.
  std::vector<BinaryTarget> binary_targets() const override {
    return {BinaryTarget{"interp", "ir", "", ""}};
  }
  std::unique_ptr<CompiledKernel> load_binary(const KernelBinary &binary) override {
    const BinaryTarget &target = binary.target;
    const codegen::KernelAbi &abi = binary.abi;
    if (target.target != "interp" || target.format != "ir")
      throw Error(ErrorKind::Environment,
                  fmt::format("interp: kernel '{}': cannot load a {} binary for {}", abi.name,
                              target.format, target.target));
    ir::ParseResult parsed = ir::parse_module(binary.bytes, abi.name + ".cir");
    std::vector<ir::Diagnostic> problems = parsed.errors;
    if (parsed.module && problems.empty())
      problems = ir::verify(*parsed.module, &parsed.source_map);
    if (!parsed.module || !problems.empty())
      throw Error(ErrorKind::Environment,
                  fmt::format("interp: kernel '{}': its IR does not load: {}", abi.name,
                              problems.empty() ? "no module" : problems.front().message));
    if (parsed.module->kernels().size() != 1 ||
        parsed.module->kernels().front()->name() != abi.name)
      throw Error(ErrorKind::Environment,
                  fmt::format("interp: the IR for kernel '{}' does not hold exactly that kernel",
                              abi.name));
    auto kernel =
        std::make_unique<InterpKernel>(std::move(parsed.module), info_.features.max_shared_bytes);
    // The launch metadata is what the launch is checked against: the IR must agree with it, and
    // fit the device (the interpreter allocates the shared memory the IR asks for).
    const codegen::KernelAbi &ir = kernel->abi();
    if (std::string why =
            codegen::launch_shape_difference(ir, "its IR", abi, "the launch metadata");
        !why.empty())
      throw Error(ErrorKind::Environment, fmt::format("interp: kernel '{}': {}", abi.name, why));
    const codegen::TargetFeatures &f = info_.features;
    uint64_t invocations =
        uint64_t(ir.workgroup_size[0]) * ir.workgroup_size[1] * ir.workgroup_size[2];
    for (int i = 0; i < 3; ++i)
      if (ir.workgroup_size[i] > f.max_workgroup_size[i])
        invocations = ~uint64_t(0);
    if (invocations > f.max_workgroup_invocations)
      throw Error(ErrorKind::Unsupported,
                  fmt::format("interp: kernel '{}' has workgroup size ({}, {}, {}); the device "
                              "allows at most {} invocations",
                              abi.name, ir.workgroup_size[0], ir.workgroup_size[1],
                              ir.workgroup_size[2], f.max_workgroup_invocations));
    uint64_t shared_bytes = 0; // in 64 bits: IR from outside may ask for any amount
    for (const ir::Operation *op : kernel->kernel().body())
      if (op->opcode() == ir::Opcode::SharedAlloc)
        shared_bytes += uint64_t(op->result()->type().count()) *
                        (ir::scalar_bits(op->result()->type().element()) / 8);
    if (shared_bytes > f.max_shared_bytes)
      throw Error(ErrorKind::Unsupported,
                  fmt::format("interp: kernel '{}' uses {} bytes of shared memory; the device has "
                              "{}",
                              abi.name, shared_bytes, f.max_shared_bytes));
    return kernel;
  }

  void run_launch(const CompiledKernel &compiled, std::array<uint32_t, 3> num_workgroups,
                  std::span<const LaunchArg> args) override {
    const auto *k = dynamic_cast<const InterpKernel *>(&compiled);
    if (!k)
      throw Error(
          ErrorKind::InvalidArgument,
          fmt::format("interp: kernel '{}' was compiled for another device", compiled.abi().name));
    const ir::Kernel &kernel = k->kernel();
    for (uint32_t count : num_workgroups)
      if (count > kMaxWorkgroupCount)
        throw Error(ErrorKind::InvalidArgument,
                    fmt::format("interp: launch of kernel '{}': a grid of {}x{}x{} workgroups "
                                "exceeds the device's maximum of {}x{}x{}",
                                kernel.name(), num_workgroups[0], num_workgroups[1],
                                num_workgroups[2], kMaxWorkgroupCount, kMaxWorkgroupCount,
                                kMaxWorkgroupCount));
    if (args.size() != kernel.num_parameters())
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("interp: kernel '{}' takes {} arguments, got {}", kernel.name(),
                              kernel.num_parameters(), args.size()));
    // Buffer ranges are copied into host buffers of the parameter's element type: the kernel
    // sees exactly the range. The same range bound twice shares one copy; other overlaps would
    // lose the aliasing and are refused.
    std::vector<ir::HostBuffer> copies(args.size());
    std::vector<ir::Argument> arguments(args.size());
    std::vector<size_t> owner(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      owner[i] = i;
      const LaunchArg &a = args[i];
      ir::Type type = kernel.parameter(static_cast<unsigned>(i))->type();
      if (type.kind() != ir::TypeKind::Buffer) {
        arguments[i].bits = a.bits;
        continue;
      }
      if (!a.memory)
        throw Error(
            ErrorKind::InvalidArgument,
            fmt::format("interp: kernel '{}': parameter {} needs a buffer", kernel.name(), i));
      check_range(*a.memory, a.offset, a.bytes, "launch");
      for (size_t j = 0; j < i; ++j) {
        const LaunchArg &b = args[j];
        if (!b.memory || b.memory->handle != a.memory->handle)
          continue;
        bool same =
            b.offset == a.offset && b.bytes == a.bytes && copies[j].element == type.element();
        if (same) {
          owner[i] = j;
          break;
        }
        if (a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes)
          throw Error(ErrorKind::InvalidArgument,
                      fmt::format("interp: kernel '{}': the buffers of parameters {} and {} "
                                  "overlap without being the same range",
                                  kernel.name(), j, i));
      }
      if (owner[i] == i) {
        copies[i].element = type.element();
        const uint8_t *begin = host(*a.memory).data + a.offset;
        copies[i].bytes.assign(begin, begin + a.bytes);
      }
      arguments[i].buffer = &copies[owner[i]];
    }

    ir::LaunchConfig config;
    config.num_workgroups = num_workgroups;
    config.subgroup_size = info_.subgroup_size;
    std::vector<ir::Diagnostic> problems;
    if (num_workgroups[0] && num_workgroups[1] && num_workgroups[2])
      problems = ir::interpret(kernel, arguments, config);
    if (!problems.empty())
      throw Error(ErrorKind::DeviceFailure, fmt::format("interp: launch of kernel '{}' failed:\n{}",
                                                        kernel.name(), ir::to_string(problems)));

    std::vector<bool> written(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      ir::Type type = kernel.parameter(static_cast<unsigned>(i))->type();
      if (type.kind() == ir::TypeKind::Buffer && type.is_writable())
        written[owner[i]] = true;
    }
    for (size_t i = 0; i < args.size(); ++i) {
      if (written[i])
        std::memcpy(host(*args[i].memory).data + args[i].offset, copies[i].bytes.data(),
                    args[i].bytes);
    }
  }

private:
  static void check_range(const DeviceMemory &memory, uint64_t offset, uint64_t bytes,
                          const char *what) {
    if (offset > memory.bytes || bytes > memory.bytes - offset)
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("interp: {}: the range [{}, {}) lies outside the {} bytes of the "
                              "memory",
                              what, offset, offset + bytes, memory.bytes));
  }

  DeviceInfo info_;
};

} // namespace

std::unique_ptr<Device> open_interp_device() {
  return std::make_unique<InterpDevice>();
}

const DeviceKind &interp_device_kind() {
  static const DeviceKind kind{
      "interp", DeviceClass::Software, [] { return open_interp_device(); }, {}};
  return kind;
}

} // namespace cubecc::runtime
