//===- cubecc.cpp - The C API over the runtime, environments and kernel libraries -------------===//
//
// Every entry point runs its body through `guarded`, which turns each exception into a status and
// the thread's last-error message: nothing crosses the C boundary. The status is decided by the
// exception's type and, for a runtime::Error, by a switch on its kind (status_of): never by its
// message.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc.h"

#include "cubecc/dlpack.hpp"
#include "cubecc/dsl/kernel_library_loader.h"
#include "cubecc/ir/ir.h"
#include "cubecc/ir/version.h"
#include "cubecc/runtime/runtime.h"
#include "cubecc/runtime/tensor.h"
#ifdef CUBECC_HAVE_VULKAN
#include "cubecc/runtime/vulkan_device.h"
#endif

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace rt = cubecc::runtime;
namespace ir = cubecc::ir;
namespace dsl = cubecc::dsl;

struct cubecc_runtime_t {
  explicit cubecc_runtime_t(rt::Runtime runtime) : runtime(std::move(runtime)) {}
  rt::Runtime runtime;
  uint64_t id = 0; ///< identifies the runtime to its buffers and kernels (never reused)
};

struct cubecc_buffer_t {
  /// Shared with the DLPack tensors exported from it: the memory lives until the last goes.
  std::shared_ptr<rt::Buffer> buffer;
  uint64_t runtime_id = 0;
  cubecc_dtype dtype = CUBECC_DTYPE_U8;
  rt::ExternalMemory native; ///< the memory's native handle, for DLPack
};

struct cubecc_library_t {
  std::unique_ptr<dsl::KernelLibrary> library;
  std::string path; ///< absolute: part of the kernels' cache keys
};

struct cubecc_kernel_t {
  rt::KernelHandle handle;
  uint64_t runtime_id = 0;
  std::string name;
  /// As traced (or as the bundle recorded them): "x", "x.shape0", "x.stride0" for a DSL Tensor
  /// x; "" each when unknown. From the handle's parameters (KernelHandle::parameters).
  std::vector<std::string> parameter_names;
};

namespace {

thread_local std::string last_error;

/// The IR parameters' names, from the DSL-level parameters they were grouped into.
std::vector<std::string> ir_parameter_names(const rt::KernelHandle &handle) {
  std::vector<std::string> names;
  for (const rt::KernelParameter &p : handle.parameters()) {
    names.push_back(p.name);
    for (uint32_t d = 0; d < p.rank; ++d)
      names.push_back(p.name + ".shape" + std::to_string(d));
    for (uint32_t d = 0; d < p.rank; ++d)
      names.push_back(p.name + ".stride" + std::to_string(d));
  }
  return names;
}
std::atomic<uint64_t> next_runtime_id{1};

/// An error the C API itself raises, with its status.
struct ApiError {
  cubecc_status status;
  std::string message;
};

[[noreturn]] void fail(cubecc_status status, std::string message) {
  throw ApiError{status, std::move(message)};
}

/// The C status of a runtime error's kind: one status per kind.
cubecc_status status_of(rt::ErrorKind kind) {
  switch (kind) {
  case rt::ErrorKind::NoDevice:
    return CUBECC_ERROR_NO_DEVICE;
  case rt::ErrorKind::OutOfMemory:
    return CUBECC_ERROR_OUT_OF_MEMORY;
  case rt::ErrorKind::InvalidArgument:
    return CUBECC_ERROR_INVALID_ARGUMENT;
  case rt::ErrorKind::NotFound:
    return CUBECC_ERROR_NOT_FOUND;
  case rt::ErrorKind::Compile:
    return CUBECC_ERROR_COMPILE;
  case rt::ErrorKind::Unsupported:
    return CUBECC_ERROR_UNSUPPORTED;
  case rt::ErrorKind::Environment:
    return CUBECC_ERROR_ENVIRONMENT;
  case rt::ErrorKind::DeviceFailure:
    return CUBECC_ERROR_DEVICE_FAILURE;
  case rt::ErrorKind::Internal:
    return CUBECC_ERROR_INTERNAL;
  }
  return CUBECC_ERROR_INTERNAL;
}

/// Runs `body`; any exception becomes a status and this thread's last error: the C API's own
/// failures carry their status (ApiError), a runtime::Error its kind (status_of), running out of
/// host memory is CUBECC_ERROR_OUT_OF_MEMORY and anything else a bug. The leading status is not
/// used (the kind decides); it stays until the entry points in flight drop it.
template <class F> cubecc_status guarded(cubecc_status, F &&body) noexcept {
  try {
    body();
    last_error.clear();
    return CUBECC_SUCCESS;
  } catch (const ApiError &e) {
    last_error = e.message;
    return e.status;
  } catch (const rt::Error &e) {
    last_error = e.what();
    return status_of(e.kind());
  } catch (const std::bad_alloc &) {
    last_error = "out of host memory";
    return CUBECC_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception &e) {
    last_error = fmt::format("internal error (a bug in cubecc, please report it): {}", e.what());
    return CUBECC_ERROR_INTERNAL;
  } catch (...) {
    last_error = "internal error (a bug in cubecc, please report it): an unknown exception";
    return CUBECC_ERROR_INTERNAL;
  }
}

template <class T> void need(T *pointer, const char *function, const char *what) {
  if (!pointer)
    fail(CUBECC_ERROR_INVALID_ARGUMENT, fmt::format("{}: {} is NULL", function, what));
}

std::optional<ir::Scalar> scalar_of(cubecc_dtype dtype) {
  switch (dtype) {
  case CUBECC_DTYPE_BOOL:
    return ir::Scalar::Bool;
  case CUBECC_DTYPE_I8:
    return ir::Scalar::I8;
  case CUBECC_DTYPE_I16:
    return ir::Scalar::I16;
  case CUBECC_DTYPE_I32:
    return ir::Scalar::I32;
  case CUBECC_DTYPE_I64:
    return ir::Scalar::I64;
  case CUBECC_DTYPE_U8:
    return ir::Scalar::U8;
  case CUBECC_DTYPE_U16:
    return ir::Scalar::U16;
  case CUBECC_DTYPE_U32:
    return ir::Scalar::U32;
  case CUBECC_DTYPE_U64:
    return ir::Scalar::U64;
  case CUBECC_DTYPE_F16:
    return ir::Scalar::F16;
  case CUBECC_DTYPE_BF16:
    return ir::Scalar::BF16;
  case CUBECC_DTYPE_F32:
    return ir::Scalar::F32;
  case CUBECC_DTYPE_F64:
    return ir::Scalar::F64;
  case CUBECC_DTYPE_E4M3:
    return ir::Scalar::E4M3;
  case CUBECC_DTYPE_E5M2:
    return ir::Scalar::E5M2;
  case CUBECC_DTYPE_E2M1:
    return ir::Scalar::E2M1;
  case CUBECC_DTYPE_UE8M0:
    return ir::Scalar::UE8M0;
  }
  return std::nullopt;
}

/// The element type of a buffer of `dtype`: not bool, a known dtype.
ir::Scalar buffer_scalar(cubecc_dtype dtype, const char *function) {
  std::optional<ir::Scalar> scalar = scalar_of(dtype);
  if (!scalar)
    fail(CUBECC_ERROR_INVALID_ARGUMENT,
         fmt::format("{}: {} is not a cubecc_dtype", function, static_cast<int>(dtype)));
  if (*scalar == ir::Scalar::Bool)
    fail(CUBECC_ERROR_INVALID_ARGUMENT,
         fmt::format("{}: buffers cannot hold bool (use CUBECC_DTYPE_U8 or CUBECC_DTYPE_U32)",
                     function));
  return *scalar;
}

rt::Runtime &runtime_of(cubecc_runtime runtime, const char *function) {
  need(runtime, function, "the runtime");
  return runtime->runtime;
}

rt::Buffer &buffer_of(cubecc_runtime runtime, cubecc_buffer buffer, const char *function) {
  need(buffer, function, "the buffer");
  if (runtime && buffer->runtime_id != runtime->id)
    fail(CUBECC_ERROR_INVALID_ARGUMENT,
         fmt::format("{}: the buffer belongs to another runtime (use it with the runtime that "
                     "made it)",
                     function));
  return *buffer->buffer;
}

cubecc_buffer make_buffer(cubecc_runtime runtime, rt::Buffer buffer, cubecc_dtype dtype) {
  auto *handle = new cubecc_buffer_t;
  handle->runtime_id = runtime->id;
  handle->dtype = dtype;
  handle->native = runtime->runtime.native_memory(buffer);
  handle->buffer = std::make_shared<rt::Buffer>(std::move(buffer));
  return handle;
}

/// Adopts `memory` (of `kind`) as `count` elements of `dtype`, after the checks only the C API
/// can make (the backend, with its own status; the count).
cubecc_status adopt(const char *function, cubecc_runtime runtime, rt::ExternalMemory memory,
                    cubecc_dtype dtype, size_t count, cubecc_release_fn release, void *user_data,
                    cubecc_buffer *out) {
  return guarded(CUBECC_ERROR_INVALID_ARGUMENT, [&] {
    rt::Runtime &r = runtime_of(runtime, function);
    need(out, function, "the output buffer pointer");
    const std::string &backend = r.info().backend;
    if (r.device().memory_kind() != memory.kind)
      fail(CUBECC_ERROR_UNSUPPORTED,
           fmt::format("{}: {} can be adopted only by a runtime on the {} device; this runtime's "
                       "device is {} ({}): adopt memory of the runtime's own backend",
                       function, rt::external_memory_kind_name(memory.kind),
                       rt::external_memory_backend(memory.kind), backend, r.info().name));
    ir::Scalar scalar = buffer_scalar(dtype, function);
    if (count == 0)
      fail(CUBECC_ERROR_INVALID_ARGUMENT,
           fmt::format("{}: count is 0: adopted memory must hold at least one element", function));
    if (__builtin_mul_overflow(uint64_t(count), uint64_t(ir::scalar_bits(scalar) / 8),
                               &memory.bytes))
      fail(CUBECC_ERROR_INVALID_ARGUMENT,
           fmt::format("{}: {} elements of {} are more than 2^64 bytes", function, count,
                       ir::scalar_name(scalar)));
    std::function<void()> callback;
    if (release)
      callback = [release, user_data] { release(user_data); };
    try {
      *out = make_buffer(runtime, r.adopt_memory(memory, scalar, std::move(callback)), dtype);
    } catch (const rt::Error &e) {
      throw rt::Error(e.kind(), fmt::format("{}: {}", function, e.what()), e.diagnostics());
    }
  });
}

//===- DLPack
//----------------------------------------------------------------------------------===//

/// What an exported tensor owns: a share of the buffer, and the shape and strides it points to.
struct ExportedTensor {
  DLManagedTensor tensor{};
  std::shared_ptr<rt::Buffer> buffer;
  std::vector<int64_t> shape, strides;
};

void delete_exported(DLManagedTensor *self) {
  delete static_cast<ExportedTensor *>(self->manager_ctx);
}

std::optional<DLDataType> dlpack_dtype(cubecc_dtype dtype) {
  switch (dtype) {
  case CUBECC_DTYPE_I8:
    return DLDataType{kDLInt, 8, 1};
  case CUBECC_DTYPE_I16:
    return DLDataType{kDLInt, 16, 1};
  case CUBECC_DTYPE_I32:
    return DLDataType{kDLInt, 32, 1};
  case CUBECC_DTYPE_I64:
    return DLDataType{kDLInt, 64, 1};
  case CUBECC_DTYPE_U8:
    return DLDataType{kDLUInt, 8, 1};
  case CUBECC_DTYPE_U16:
    return DLDataType{kDLUInt, 16, 1};
  case CUBECC_DTYPE_U32:
    return DLDataType{kDLUInt, 32, 1};
  case CUBECC_DTYPE_U64:
    return DLDataType{kDLUInt, 64, 1};
  case CUBECC_DTYPE_F16:
    return DLDataType{kDLFloat, 16, 1};
  case CUBECC_DTYPE_BF16:
    return DLDataType{kDLBfloat, 16, 1};
  case CUBECC_DTYPE_F32:
    return DLDataType{kDLFloat, 32, 1};
  case CUBECC_DTYPE_F64:
    return DLDataType{kDLFloat, 64, 1};
  case CUBECC_DTYPE_BOOL:
  case CUBECC_DTYPE_E4M3: // DLPack 0.6 has no codes for the storage floats
  case CUBECC_DTYPE_E5M2:
  case CUBECC_DTYPE_E2M1:
  case CUBECC_DTYPE_UE8M0:
    break;
  }
  return std::nullopt;
}

std::optional<cubecc_dtype> dtype_of(DLDataType t) {
  if (t.lanes != 1)
    return std::nullopt;
  for (cubecc_dtype d : {CUBECC_DTYPE_I8, CUBECC_DTYPE_I16, CUBECC_DTYPE_I32, CUBECC_DTYPE_I64,
                         CUBECC_DTYPE_U8, CUBECC_DTYPE_U16, CUBECC_DTYPE_U32, CUBECC_DTYPE_U64,
                         CUBECC_DTYPE_F16, CUBECC_DTYPE_BF16, CUBECC_DTYPE_F32, CUBECC_DTYPE_F64}) {
    DLDataType e = *dlpack_dtype(d);
    if (e.code == t.code && e.bits == t.bits)
      return d;
  }
  return std::nullopt;
}

const char *dlpack_device_name(int type) {
  switch (type) {
  case kDLCPU:
    return "kDLCPU";
  case kDLCUDA:
    return "kDLCUDA";
  case kDLCUDAHost:
    return "kDLCUDAHost";
  case kDLOpenCL:
    return "kDLOpenCL";
  case kDLVulkan:
    return "kDLVulkan";
  case kDLMetal:
    return "kDLMetal";
  case kDLROCM:
    return "kDLROCM";
  case kDLCUDAManaged:
    return "kDLCUDAManaged";
  default:
    return "an unknown device type";
  }
}

DLDeviceType dlpack_device_type(rt::ExternalMemory::Kind kind) {
  switch (kind) {
  case rt::ExternalMemory::Kind::Host:
    return kDLCPU;
  case rt::ExternalMemory::Kind::Cuda:
    return kDLCUDA;
  case rt::ExternalMemory::Kind::Hip:
    return kDLROCM;
  case rt::ExternalMemory::Kind::Vulkan:
    return kDLVulkan;
  }
  return kDLExtDev;
}

/// The DLPack device_id of the runtime's device: the index its backend opened.
int32_t dlpack_device_id(rt::ExternalMemory::Kind kind) {
  const char *variable = kind == rt::ExternalMemory::Kind::Cuda     ? "CUBECC_CUDA_DEVICE"
                         : kind == rt::ExternalMemory::Kind::Hip    ? "CUBECC_HIP_DEVICE"
                         : kind == rt::ExternalMemory::Kind::Vulkan ? "CUBECC_VULKAN_DEVICE"
                                                                    : nullptr;
  const char *value = variable ? std::getenv(variable) : nullptr;
  return value && *value ? static_cast<int32_t>(std::atoi(value)) : 0;
}

/// A DLPack tensor adopted as a Buffer: its elements from `data + byte_offset` to the last one
/// the shape and strides reach, with that shape and those strides (in elements).
struct ImportedTensor {
  rt::Buffer buffer;
  cubecc_dtype dtype = CUBECC_DTYPE_U8;
  std::vector<uint64_t> shape, strides;
};

/// Adopts `tensor`'s memory on `r` without copying; on success the Buffer owns the tensor (its
/// deleter runs when the Buffer is let go). Strides must be compact row-major unless `strided`
/// (then any non-negative strides). Fails (ApiError) naming `function`; the tensor then stays the
/// caller's.
ImportedTensor import_dlpack(rt::Runtime &r, DLManagedTensor *tensor, const char *function,
                             bool strided) {
  const DLTensor &t = tensor->dl_tensor;
  const std::string &backend = r.info().backend;
  rt::ExternalMemory::Kind kind = r.device().memory_kind().value_or(rt::ExternalMemory::Kind::Host);
  DLDeviceType wanted = dlpack_device_type(kind);
  if (t.device.device_type != wanted)
    fail(CUBECC_ERROR_UNSUPPORTED,
         fmt::format("{}: the tensor is on {} (device type {}); this runtime's device is {} "
                     "({}), which adopts only {} tensors (copy the tensor to that device "
                     "first)",
                     function, dlpack_device_name(t.device.device_type),
                     static_cast<int>(t.device.device_type), backend, r.info().name,
                     dlpack_device_name(wanted)));
  std::optional<cubecc_dtype> dtype = dtype_of(t.dtype);
  if (!dtype)
    fail(CUBECC_ERROR_UNSUPPORTED,
         fmt::format("{}: the tensor's dtype (code {}, {} bits, {} lanes) has no cubecc "
                     "element type (cubecc adopts int, uint, float and bfloat of 8 to 64 bits "
                     "with 1 lane)",
                     function, t.dtype.code, t.dtype.bits, t.dtype.lanes));
  if (t.ndim < 0 || (t.ndim > 0 && !t.shape))
    fail(CUBECC_ERROR_INVALID_ARGUMENT, fmt::format("{}: the tensor has {} dimensions and {} shape",
                                                    function, t.ndim, t.shape ? "a" : "no"));
  // Sizes from a foreign tensor: every product and sum below is checked (a shape whose
  // element count overflows must not become a small buffer that launches index past).
  auto too_large = [&] {
    fail(CUBECC_ERROR_INVALID_ARGUMENT,
         fmt::format("{}: the tensor's shape{} reaches more than 2^64 bytes", function,
                     t.strides && strided ? " and strides" : ""));
  };
  uint64_t count = 1;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] < 0)
      fail(CUBECC_ERROR_INVALID_ARGUMENT,
           fmt::format("{}: dimension {} of the tensor is negative ({})", function, d, t.shape[d]));
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(t.shape[d]), &count))
      too_large();
  }
  std::vector<uint64_t> shape(static_cast<size_t>(t.ndim)), strides(shape.size());
  for (int d = 0; d < t.ndim; ++d)
    shape[d] = static_cast<uint64_t>(t.shape[d]);
  if (t.strides && strided) {
    // The elements the tensor reaches: 1 + sum((shape - 1) * stride).
    uint64_t last = 0;
    for (int d = 0; d < t.ndim; ++d) {
      if (t.strides[d] < 0)
        fail(CUBECC_ERROR_UNSUPPORTED,
             fmt::format("{}: dimension {} of the tensor has a negative stride ({})", function, d,
                         t.strides[d]));
      strides[d] = static_cast<uint64_t>(t.strides[d]);
      uint64_t reach = 0;
      if (t.shape[d] && (__builtin_mul_overflow(shape[d] - 1, strides[d], &reach) ||
                         __builtin_add_overflow(last, reach, &last)))
        too_large();
    }
    if (count != 0 && __builtin_add_overflow(last, uint64_t(1), &count))
      too_large();
  } else if (t.strides) {
    int64_t expected = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
      if (t.shape[d] != 1 && t.strides[d] != expected)
        fail(CUBECC_ERROR_UNSUPPORTED,
             fmt::format("{}: the tensor is not compact: dimension {} has stride {}, a "
                         "row-major tensor of this shape has {} (make it contiguous first)",
                         function, d, t.strides[d], expected));
      if (__builtin_mul_overflow(expected, t.shape[d], &expected))
        too_large();
    }
  }
  if (count == 0)
    fail(CUBECC_ERROR_INVALID_ARGUMENT,
         fmt::format("{}: the tensor has no elements: adopted memory must hold at least one",
                     function));
  if (!t.data)
    fail(CUBECC_ERROR_INVALID_ARGUMENT, fmt::format("{}: the tensor's data is NULL", function));
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(count, uint64_t(t.dtype.bits / 8), &bytes))
    too_large();
  rt::ExternalMemory memory;
  if (kind == rt::ExternalMemory::Kind::Vulkan) {
    memory = rt::ExternalMemory::vulkan(reinterpret_cast<uintptr_t>(t.data), t.byte_offset, bytes);
  } else {
    memory.kind = kind;
    if (__builtin_add_overflow(reinterpret_cast<uintptr_t>(t.data), t.byte_offset, &memory.handle))
      fail(CUBECC_ERROR_INVALID_ARGUMENT,
           fmt::format("{}: the tensor's byte_offset {} wraps around the address space", function,
                       t.byte_offset));
    memory.bytes = bytes;
  }
  if (!t.strides || !strided)
    strides = rt::Tensor::contiguous_strides(shape);
  std::function<void()> release = [tensor] {
    if (tensor->deleter)
      tensor->deleter(tensor);
  };
  ImportedTensor imported;
  try {
    imported.buffer = r.adopt_memory(memory, *scalar_of(*dtype), std::move(release));
  } catch (const rt::Error &e) {
    throw rt::Error(e.kind(), fmt::format("{}: {}", function, e.what()), e.diagnostics());
  }
  imported.dtype = *dtype;
  imported.shape = std::move(shape);
  imported.strides = std::move(strides);
  return imported;
}

} // namespace

//===- Status, version, dtypes
//-------------------------------------------------------------------===//

extern "C" {

const char *cubecc_status_name(cubecc_status status) {
  switch (status) {
  case CUBECC_SUCCESS:
    return "CUBECC_SUCCESS";
  case CUBECC_ERROR_INVALID_ARGUMENT:
    return "CUBECC_ERROR_INVALID_ARGUMENT";
  case CUBECC_ERROR_NOT_FOUND:
    return "CUBECC_ERROR_NOT_FOUND";
  case CUBECC_ERROR_NO_DEVICE:
    return "CUBECC_ERROR_NO_DEVICE";
  case CUBECC_ERROR_COMPILE:
    return "CUBECC_ERROR_COMPILE";
  case CUBECC_ERROR_ENVIRONMENT:
    return "CUBECC_ERROR_ENVIRONMENT";
  case CUBECC_ERROR_OUT_OF_MEMORY:
    return "CUBECC_ERROR_OUT_OF_MEMORY";
  case CUBECC_ERROR_UNSUPPORTED:
    return "CUBECC_ERROR_UNSUPPORTED";
  case CUBECC_ERROR_INTERNAL:
    return "CUBECC_ERROR_INTERNAL";
  case CUBECC_ERROR_DEVICE_FAILURE:
    return "CUBECC_ERROR_DEVICE_FAILURE";
  }
  return "unknown status";
}

const char *cubecc_last_error(void) {
  return last_error.c_str();
}

const char *cubecc_version(void) {
  return cubecc::version().data(); // a string literal: null-terminated
}

const char *cubecc_dtype_name(cubecc_dtype dtype) {
  std::optional<ir::Scalar> scalar = scalar_of(dtype);
  return scalar ? ir::scalar_name(*scalar).data() : "unknown dtype";
}

size_t cubecc_dtype_size(cubecc_dtype dtype) {
  std::optional<ir::Scalar> scalar = scalar_of(dtype);
  if (!scalar)
    return 0;
  return *scalar == ir::Scalar::Bool ? 1 : ir::scalar_bits(*scalar) / 8;
}

//===- Runtime
//---------------------------------------------------------------------------------===//

cubecc_status cubecc_runtime_open(const char *device, cubecc_runtime *out) {
  return guarded(CUBECC_ERROR_NO_DEVICE, [&] {
    need(out, "cubecc_runtime_open", "the output runtime pointer");
    rt::Runtime runtime = rt::Runtime::open(device ? device : "");
    auto *handle = new cubecc_runtime_t(std::move(runtime));
    handle->id = next_runtime_id++;
    *out = handle;
  });
}

void cubecc_runtime_destroy(cubecc_runtime runtime) {
  guarded(CUBECC_ERROR_INTERNAL, [&] { delete runtime; });
}

cubecc_status cubecc_runtime_device_info(cubecc_runtime runtime, cubecc_device_info *out) {
  return guarded(CUBECC_ERROR_INTERNAL, [&] {
    const rt::DeviceInfo &info = runtime_of(runtime, "cubecc_runtime_device_info").info();
    need(out, "cubecc_runtime_device_info", "the output info pointer");
    *out = cubecc_device_info{info.backend.c_str(), info.name.c_str(), info.driver.c_str(),
                              info.vendor.c_str(),  info.arch.c_str(), info.subgroup_size,
                              info.max_buffer_bytes};
  });
}

namespace {

rt::EnvironmentOptions environment_options(const char *function, uint32_t flags) {
  constexpr uint32_t known = CUBECC_ENVIRONMENT_STRICT | CUBECC_ENVIRONMENT_REQUIRE_SIGNATURE;
  if (flags & ~known)
    fail(CUBECC_ERROR_INVALID_ARGUMENT,
         fmt::format("{}: unknown flags {:#x} (the flags are CUBECC_ENVIRONMENT_STRICT and "
                     "CUBECC_ENVIRONMENT_REQUIRE_SIGNATURE)",
                     function, flags & ~known));
  return rt::EnvironmentOptions{.fallback_to_jit = (flags & CUBECC_ENVIRONMENT_STRICT) == 0,
                                .require_signature =
                                    (flags & CUBECC_ENVIRONMENT_REQUIRE_SIGNATURE) != 0};
}

} // namespace

cubecc_status cubecc_runtime_use_environment(cubecc_runtime runtime, const char *path,
                                             uint32_t flags) {
  return guarded(CUBECC_ERROR_ENVIRONMENT, [&] {
    rt::Runtime &r = runtime_of(runtime, "cubecc_runtime_use_environment");
    need(path, "cubecc_runtime_use_environment", "the bundle path");
    r.use_environment(path, environment_options("cubecc_runtime_use_environment", flags));
  });
}

cubecc_status cubecc_runtime_use_signed_environment(cubecc_runtime runtime, const char *path,
                                                    uint32_t flags, const char *const *trusted_keys,
                                                    size_t num_keys) {
  constexpr const char *function = "cubecc_runtime_use_signed_environment";
  return guarded(CUBECC_ERROR_ENVIRONMENT, [&] {
    rt::Runtime &r = runtime_of(runtime, function);
    need(path, function, "the bundle path");
    if (num_keys > 0)
      need(trusted_keys, function, "the trusted keys pointer");
    rt::EnvironmentOptions options = environment_options(function, flags);
    options.require_signature = true;
    for (size_t i = 0; i < num_keys; ++i) {
      if (!trusted_keys[i])
        fail(CUBECC_ERROR_INVALID_ARGUMENT, fmt::format("{}: trusted key {} is NULL", function, i));
      options.trusted_keys.emplace_back(trusted_keys[i]);
    }
    r.use_environment(path, std::move(options));
  });
}

cubecc_status cubecc_runtime_statistics(cubecc_runtime runtime, cubecc_statistics *out) {
  return guarded(CUBECC_ERROR_INTERNAL, [&] {
    rt::Runtime &r = runtime_of(runtime, "cubecc_runtime_statistics");
    need(out, "cubecc_runtime_statistics", "the output statistics pointer");
    // The test hook documented in cubecc.h: a bug cannot be provoked on purpose, and an
    // application's (and the C API's) handling of CUBECC_ERROR_INTERNAL needs testing all the same.
    if (const char *hook = std::getenv("CUBECC_TEST_INTERNAL_ERROR"); hook && *hook == '1')
      throw std::logic_error("cubecc_runtime_statistics: CUBECC_TEST_INTERNAL_ERROR=1 (the test "
                             "hook) made this call fail as a bug would");
    rt::EnvironmentStatistics environment = r.environment_statistics();
    rt::KernelCacheStatistics cache = r.cache_statistics();
    rt::PoolStatistics pool = r.pool_statistics();
    *out = cubecc_statistics{environment.hits, environment.misses, environment.rejected,
                             cache.compiles,   cache.hits,         pool.bytes_reserved,
                             pool.bytes_live};
  });
}

//===- Buffers
//---------------------------------------------------------------------------------===//

cubecc_status cubecc_buffer_allocate(cubecc_runtime runtime, cubecc_dtype dtype, size_t count,
                                     cubecc_buffer *out) {
  return guarded(CUBECC_ERROR_INVALID_ARGUMENT, [&] {
    rt::Runtime &r = runtime_of(runtime, "cubecc_buffer_allocate");
    need(out, "cubecc_buffer_allocate", "the output buffer pointer");
    ir::Scalar scalar = buffer_scalar(dtype, "cubecc_buffer_allocate");
    if (count == 0)
      fail(CUBECC_ERROR_INVALID_ARGUMENT,
           "cubecc_buffer_allocate: count is 0 (a buffer holds at least one element)");
    *out = make_buffer(runtime, r.allocate(scalar, count), dtype);
  });
}

void cubecc_buffer_destroy(cubecc_buffer buffer) {
  guarded(CUBECC_ERROR_INTERNAL, [&] { delete buffer; });
}

cubecc_status cubecc_buffer_write(cubecc_runtime runtime, cubecc_buffer buffer, const void *src,
                                  size_t bytes) {
  return guarded(CUBECC_ERROR_INVALID_ARGUMENT, [&] {
    rt::Runtime &r = runtime_of(runtime, "cubecc_buffer_write");
    rt::Buffer &b = buffer_of(runtime, buffer, "cubecc_buffer_write");
    if (bytes)
      need(src, "cubecc_buffer_write", "the source pointer");
    r.write(b, src, bytes);
  });
}

cubecc_status cubecc_buffer_read(cubecc_runtime runtime, cubecc_buffer buffer, void *dst,
                                 size_t bytes) {
  return guarded(CUBECC_ERROR_INVALID_ARGUMENT, [&] {
    rt::Runtime &r = runtime_of(runtime, "cubecc_buffer_read");
    const rt::Buffer &b = buffer_of(runtime, buffer, "cubecc_buffer_read");
    if (bytes)
      need(dst, "cubecc_buffer_read", "the destination pointer");
    r.read(b, dst, bytes);
  });
}

cubecc_status cubecc_buffer_count(cubecc_buffer buffer, size_t *count) {
  return guarded(CUBECC_ERROR_INTERNAL, [&] {
    const rt::Buffer &b = buffer_of(nullptr, buffer, "cubecc_buffer_count");
    need(count, "cubecc_buffer_count", "the output count pointer");
    *count = b.size();
  });
}

cubecc_status cubecc_buffer_dtype(cubecc_buffer buffer, cubecc_dtype *dtype) {
  return guarded(CUBECC_ERROR_INTERNAL, [&] {
    buffer_of(nullptr, buffer, "cubecc_buffer_dtype");
    need(dtype, "cubecc_buffer_dtype", "the output dtype pointer");
    *dtype = buffer->dtype;
  });
}

cubecc_status cubecc_buffer_bytes(cubecc_buffer buffer, size_t *bytes) {
  return guarded(CUBECC_ERROR_INTERNAL, [&] {
    const rt::Buffer &b = buffer_of(nullptr, buffer, "cubecc_buffer_bytes");
    need(bytes, "cubecc_buffer_bytes", "the output bytes pointer");
    *bytes = b.bytes();
  });
}

//===- Adoption
//--------------------------------------------------------------------------------===//

cubecc_status cubecc_buffer_adopt_host(cubecc_runtime runtime, void *pointer, cubecc_dtype dtype,
                                       size_t count, cubecc_release_fn release, void *user_data,
                                       cubecc_buffer *out) {
  return adopt("cubecc_buffer_adopt_host", runtime, rt::ExternalMemory::host(pointer, 0), dtype,
               count, release, user_data, out);
}

cubecc_status cubecc_buffer_adopt_cuda(cubecc_runtime runtime, uint64_t device_pointer,
                                       cubecc_dtype dtype, size_t count, cubecc_release_fn release,
                                       void *user_data, cubecc_buffer *out) {
  return adopt("cubecc_buffer_adopt_cuda", runtime, rt::ExternalMemory::cuda(device_pointer, 0),
               dtype, count, release, user_data, out);
}

cubecc_status cubecc_buffer_adopt_hip(cubecc_runtime runtime, void *device_pointer,
                                      cubecc_dtype dtype, size_t count, cubecc_release_fn release,
                                      void *user_data, cubecc_buffer *out) {
  return adopt("cubecc_buffer_adopt_hip", runtime, rt::ExternalMemory::hip(device_pointer, 0),
               dtype, count, release, user_data, out);
}

cubecc_status cubecc_buffer_adopt_vulkan(cubecc_runtime runtime, uint64_t vk_buffer,
                                         uint64_t offset, cubecc_dtype dtype, size_t count,
                                         cubecc_release_fn release, void *user_data,
                                         cubecc_buffer *out) {
  return adopt("cubecc_buffer_adopt_vulkan", runtime,
               rt::ExternalMemory::vulkan(vk_buffer, offset, 0), dtype, count, release, user_data,
               out);
}

cubecc_status cubecc_runtime_vulkan_handles(cubecc_runtime runtime, cubecc_vulkan_handles *out) {
  return guarded(CUBECC_ERROR_INTERNAL, [&] {
    rt::Runtime &r = runtime_of(runtime, "cubecc_runtime_vulkan_handles");
    need(out, "cubecc_runtime_vulkan_handles", "the output handles pointer");
#ifdef CUBECC_HAVE_VULKAN
    if (auto *vulkan = dynamic_cast<rt::VulkanDevice *>(&r.device())) {
      rt::VulkanDevice::Handles h = vulkan->handles();
      *out = cubecc_vulkan_handles{h.instance, h.physical_device, h.device, h.queue_family_index,
                                   h.get_instance_proc_addr};
      return;
    }
#endif
    fail(CUBECC_ERROR_UNSUPPORTED,
         fmt::format("cubecc_runtime_vulkan_handles: the runtime's device is {} ({}), not vulkan "
                     "(open the runtime with \"vulkan\")",
                     r.info().backend, r.info().name));
  });
}

//===- DLPack
//----------------------------------------------------------------------------------===//

cubecc_status cubecc_buffer_to_dlpack(cubecc_buffer buffer, DLManagedTensor **out) {
  return guarded(CUBECC_ERROR_INTERNAL, [&] {
    buffer_of(nullptr, buffer, "cubecc_buffer_to_dlpack");
    need(out, "cubecc_buffer_to_dlpack", "the output tensor pointer");
    std::optional<DLDataType> dtype = dlpack_dtype(buffer->dtype);
    if (!dtype)
      fail(CUBECC_ERROR_UNSUPPORTED,
           fmt::format("cubecc_buffer_to_dlpack: DLPack 0.6 has no code for {}",
                       cubecc_dtype_name(buffer->dtype)));
    auto exported = std::make_unique<ExportedTensor>();
    exported->buffer = buffer->buffer;
    exported->shape = {static_cast<int64_t>(buffer->buffer->size())};
    const rt::ExternalMemory &native = buffer->native;
    DLTensor &t = exported->tensor.dl_tensor;
    t.data = reinterpret_cast<void *>(static_cast<uintptr_t>(native.handle));
    t.device = cubecc::dlpack_device_of(native.kind);
    t.ndim = 1;
    t.dtype = *dtype;
    t.shape = exported->shape.data();
    t.strides = nullptr;
    t.byte_offset = native.offset;
    exported->tensor.manager_ctx = exported.get();
    exported->tensor.deleter = delete_exported;
    *out = &exported.release()->tensor;
  });
}

cubecc_status cubecc_buffer_from_dlpack(cubecc_runtime runtime, DLManagedTensor *tensor,
                                        cubecc_buffer *out) {
  return guarded(CUBECC_ERROR_INVALID_ARGUMENT, [&] {
    const char *function = "cubecc_buffer_from_dlpack";
    rt::Runtime &r = runtime_of(runtime, function);
    need(tensor, function, "the tensor");
    need(out, function, "the output buffer pointer");
    ImportedTensor imported = import_dlpack(r, tensor, function, false);
    *out = make_buffer(runtime, std::move(imported.buffer), imported.dtype);
  });
}

//===- Kernel libraries and kernels
//--------------------------------------------------------------===//

cubecc_status cubecc_library_open(const char *path, cubecc_library *out) {
  return guarded(CUBECC_ERROR_NOT_FOUND, [&] {
    need(path, "cubecc_library_open", "the library path");
    need(out, "cubecc_library_open", "the output library pointer");
    std::string error;
    std::unique_ptr<dsl::KernelLibrary> library = dsl::KernelLibrary::open(path, error);
    if (!library)
      fail(CUBECC_ERROR_NOT_FOUND, error);
    auto *handle = new cubecc_library_t;
    handle->library = std::move(library);
    std::error_code ec;
    std::filesystem::path absolute = std::filesystem::weakly_canonical(path, ec);
    handle->path = ec ? std::string(path) : absolute.string();
    *out = handle;
  });
}

void cubecc_library_destroy(cubecc_library library) {
  guarded(CUBECC_ERROR_INTERNAL, [&] { delete library; });
}

cubecc_status cubecc_library_kernel_count(cubecc_library library, size_t *count) {
  return guarded(CUBECC_ERROR_INTERNAL, [&] {
    need(library, "cubecc_library_kernel_count", "the library");
    need(count, "cubecc_library_kernel_count", "the output count pointer");
    *count = library->library->kernels().size();
  });
}

cubecc_status cubecc_library_kernel_info(cubecc_library library, size_t index, const char **name,
                                         const char **configuration) {
  return guarded(CUBECC_ERROR_INTERNAL, [&] {
    need(library, "cubecc_library_kernel_info", "the library");
    const auto &kernels = library->library->kernels();
    if (index >= kernels.size())
      fail(CUBECC_ERROR_INVALID_ARGUMENT,
           fmt::format("cubecc_library_kernel_info: no kernel {} (the library {} has {})", index,
                       library->path, kernels.size()));
    if (name)
      *name = kernels[index].name.c_str();
    if (configuration)
      *configuration = kernels[index].configuration.c_str();
  });
}

cubecc_status cubecc_library_kernel(cubecc_runtime runtime, cubecc_library library,
                                    const char *name, const char *configuration,
                                    cubecc_kernel *out) {
  return guarded(CUBECC_ERROR_COMPILE, [&] {
    const char *function = "cubecc_library_kernel";
    rt::Runtime &r = runtime_of(runtime, function);
    need(library, function, "the library");
    need(name, function, "the kernel name");
    need(out, function, "the output kernel pointer");
    const auto &kernels = library->library->kernels();
    std::optional<size_t> found;
    std::string listed;
    for (size_t i = 0; i < kernels.size(); ++i) {
      listed += fmt::format("{}{} ({})", i ? ", " : "", kernels[i].name, kernels[i].configuration);
      if (!found && kernels[i].name == name &&
          (!configuration || kernels[i].configuration == configuration))
        found = i;
    }
    if (!found)
      fail(CUBECC_ERROR_NOT_FOUND,
           fmt::format("{}: the library {} has no kernel '{}'{} (it has: {})", function,
                       library->path, name,
                       configuration ? fmt::format(" with configuration '{}'", configuration)
                                     : std::string(),
                       listed));
    const dsl::KernelLibrary::Entry &entry = kernels[*found];
    std::string key = fmt::format("{}:{}:{}", library->path, entry.name, entry.configuration);
    rt::KernelHandle handle = r.kernel(key, [&]() -> std::unique_ptr<ir::Module> {
      auto module = std::make_unique<ir::Module>();
      std::vector<ir::Diagnostic> errors;
      if (!library->library->trace(*found, *module, errors))
        fail(CUBECC_ERROR_COMPILE,
             fmt::format("{}: kernel '{}' ({}) of {} does not trace:\n{}", function, entry.name,
                         entry.configuration, library->path, ir::to_string(errors)));
      return module;
    });
    auto *kernel = new cubecc_kernel_t;
    kernel->handle = std::move(handle);
    kernel->runtime_id = runtime->id;
    kernel->name = entry.name;
    kernel->parameter_names = ir_parameter_names(kernel->handle);
    *out = kernel;
  });
}

cubecc_status cubecc_environment_kernel(cubecc_runtime runtime, const char *library,
                                        const char *name, const char *configuration,
                                        cubecc_kernel *out) {
  return guarded(CUBECC_ERROR_NOT_FOUND, [&] {
    const char *function = "cubecc_environment_kernel";
    rt::Runtime &r = runtime_of(runtime, function);
    need(library, function, "the library name");
    need(name, function, "the kernel name");
    need(out, function, "the output kernel pointer");
    rt::KernelHandle handle =
        r.kernel_from_environment(library, name, configuration ? configuration : "");
    auto *kernel = new cubecc_kernel_t;
    kernel->handle = std::move(handle);
    kernel->runtime_id = runtime->id;
    kernel->name = name;
    kernel->parameter_names = ir_parameter_names(kernel->handle);
    *out = kernel;
  });
}

void cubecc_kernel_destroy(cubecc_kernel kernel) {
  guarded(CUBECC_ERROR_INTERNAL, [&] { delete kernel; });
}

const char *cubecc_kernel_name(cubecc_kernel kernel) {
  return kernel ? kernel->name.c_str() : "";
}

cubecc_status cubecc_kernel_parameter_count(cubecc_kernel kernel, size_t *count) {
  return guarded(CUBECC_ERROR_INTERNAL, [&] {
    need(kernel, "cubecc_kernel_parameter_count", "the kernel");
    need(count, "cubecc_kernel_parameter_count", "the output count pointer");
    *count = kernel->handle.abi().params.size();
  });
}

cubecc_status cubecc_kernel_parameter_name(cubecc_kernel kernel, size_t index, const char **name) {
  return guarded(CUBECC_ERROR_INTERNAL, [&] {
    need(kernel, "cubecc_kernel_parameter_name", "the kernel");
    need(name, "cubecc_kernel_parameter_name", "the output name pointer");
    if (index >= kernel->parameter_names.size())
      fail(CUBECC_ERROR_INVALID_ARGUMENT,
           fmt::format("cubecc_kernel_parameter_name: kernel '{}' has no parameter {} (it has {})",
                       kernel->name, index, kernel->parameter_names.size()));
    *name = kernel->parameter_names[index].c_str();
  });
}

} // extern "C"

//===- Launches
//--------------------------------------------------------------------------------===//

namespace {

/// Appends the IR arguments of tensor argument `position` (the IR parameters from `first`) to
/// `values`: the buffer from the tensor's offset, its shapes, its strides. Checks the descriptor
/// against the kernel's parameters, by their names (dsl/memory.h: x, x.shape<d>, x.stride<d>).
void bind_tensor(cubecc_runtime runtime, cubecc_kernel kernel, size_t position, size_t first,
                 const cubecc_tensor *t, std::vector<rt::ArgumentValue> &values) {
  const std::vector<std::string> &names = kernel->parameter_names;
  const auto &params = kernel->handle.abi().params;
  std::string where =
      fmt::format("cubecc_launch: kernel '{}': argument {}", kernel->name, position);
  if (first >= params.size())
    fail(CUBECC_ERROR_INVALID_ARGUMENT,
         fmt::format("{}: the kernel has {} IR parameters, all taken by the arguments before",
                     where, params.size()));
  if (params[first].kind != cubecc::codegen::ParamSlot::Buffer)
    fail(CUBECC_ERROR_INVALID_ARGUMENT,
         fmt::format("{}: IR parameter {} ('{}') is a value, not a tensor", where, first,
                     first < names.size() ? names[first] : std::string("?")));
  // The DSL parameter that starts at IR parameter `first` (KernelHandle::parameters).
  const rt::KernelParameter *group = nullptr;
  for (const rt::KernelParameter &p : kernel->handle.parameters())
    if (p.first == first)
      group = &p;
  if (!group || group->name.empty())
    fail(CUBECC_ERROR_INVALID_ARGUMENT,
         fmt::format("{}: {}, so a tensor argument cannot be matched to its parameters (pass the "
                     "buffer, shapes and strides as CUBECC_ARG_BUFFER and CUBECC_ARG_SCALAR "
                     "arguments)",
                     where,
                     group ? "the kernel's parameter names are unknown"
                           : fmt::format("IR parameter {} is inside another parameter's tensor "
                                         "layout",
                                         first)));
  const std::string &name = group->name;
  const size_t rank = group->rank;
  where += fmt::format(" (tensor '{}')", name);
  if (group->kind != rt::KernelParameter::Kind::Tensor)
    fail(CUBECC_ERROR_INVALID_ARGUMENT,
         fmt::format("{}: the parameter is a buffer (a DSL Array), not a tensor: pass a "
                     "CUBECC_ARG_BUFFER",
                     where));
  if (!t)
    fail(CUBECC_ERROR_INVALID_ARGUMENT, where + ": the tensor descriptor is NULL");
  if (!t->buffer)
    fail(CUBECC_ERROR_INVALID_ARGUMENT, where + ": the tensor's buffer is NULL");
  const rt::Buffer &buffer = buffer_of(runtime, t->buffer, where.c_str());
  if (t->dtype != t->buffer->dtype)
    fail(CUBECC_ERROR_INVALID_ARGUMENT,
         fmt::format("{}: the descriptor says {}, its buffer holds {}", where,
                     cubecc_dtype_name(t->dtype), cubecc_dtype_name(t->buffer->dtype)));
  ir::Scalar element = params[first].type.element();
  if (*scalar_of(t->dtype) != element)
    fail(CUBECC_ERROR_INVALID_ARGUMENT,
         fmt::format("{}: the kernel's tensor holds {}, the descriptor's buffer {}", where,
                     ir::scalar_name(element), cubecc_dtype_name(t->dtype)));
  if (t->rank < 1 || t->rank > CUBECC_MAX_RANK)
    fail(CUBECC_ERROR_INVALID_ARGUMENT,
         fmt::format("{}: rank {} is not 1 to {}", where, t->rank, CUBECC_MAX_RANK));
  if (static_cast<size_t>(t->rank) != rank)
    fail(CUBECC_ERROR_INVALID_ARGUMENT,
         fmt::format("{}: the kernel's tensor has {} dimension(s), the descriptor {}", where, rank,
                     t->rank));
  need(t->shape, where.c_str(), "the tensor's shape");
  std::array<int64_t, CUBECC_MAX_RANK> strides{};
  for (size_t d = rank, stride = 1; d-- > 0;) {
    strides[d] = t->strides ? t->strides[d] : static_cast<int64_t>(stride);
    stride *= static_cast<size_t>(std::max<int64_t>(t->shape[d], 0));
  }
  uint64_t count = buffer.size(), last = 0;
  bool empty = false;
  for (size_t d = 0; d < rank; ++d) {
    for (auto [what, value] : {std::pair{"size", t->shape[d]}, std::pair{"stride", strides[d]}})
      if (value < 0 || value > int64_t{UINT32_MAX})
        fail(CUBECC_ERROR_INVALID_ARGUMENT,
             fmt::format("{}: the {} of dimension {} is {}: the kernel takes 0 to 2^32 - 1", where,
                         what, d, value));
    empty |= t->shape[d] == 0;
    last += static_cast<uint64_t>(t->shape[d] ? t->shape[d] - 1 : 0) *
            static_cast<uint64_t>(strides[d]);
  }
  if (t->offset < 0 || static_cast<uint64_t>(t->offset) > count ||
      (!empty && static_cast<uint64_t>(t->offset) + last >= count))
    fail(CUBECC_ERROR_INVALID_ARGUMENT,
         fmt::format("{}: the tensor (offset {}, last element {} past it) reaches past the end "
                     "of its buffer of {} elements",
                     where, t->offset, last, count));
  values.push_back(t->offset == 0 ? rt::ArgumentValue(buffer)
                                  : rt::ArgumentValue::range(buffer, uint64_t(t->offset),
                                                             rt::ArgumentValue::kWholeBuffer));
  for (size_t d = 0; d < rank; ++d)
    values.emplace_back(static_cast<uint32_t>(t->shape[d]));
  for (size_t d = 0; d < rank; ++d)
    values.emplace_back(static_cast<uint32_t>(strides[d]));
}

} // namespace

extern "C" {

cubecc_status cubecc_launch(cubecc_runtime runtime, cubecc_kernel kernel, const uint32_t grid[3],
                            const cubecc_arg *args, size_t num_args) {
  return guarded(CUBECC_ERROR_INVALID_ARGUMENT, [&] {
    const char *function = "cubecc_launch";
    rt::Runtime &r = runtime_of(runtime, function);
    need(kernel, function, "the kernel");
    need(grid, function, "the grid");
    if (num_args)
      need(args, function, "the argument array");
    if (kernel->runtime_id != runtime->id)
      fail(CUBECC_ERROR_INVALID_ARGUMENT,
           fmt::format("{}: kernel '{}' was loaded on another runtime (load it on this one with "
                       "cubecc_library_kernel)",
                       function, kernel->name));
    // Every argument binds one IR parameter or more: more arguments than parameters is wrong
    // whatever they are (and the array is not read past what the kernel can take).
    if (num_args > kernel->parameter_names.size())
      fail(CUBECC_ERROR_INVALID_ARGUMENT,
           fmt::format("launch of kernel '{}': {} argument(s) given, the kernel has {} "
                       "parameter(s)",
                       kernel->name, num_args, kernel->parameter_names.size()));
    std::vector<rt::ArgumentValue> values;
    values.reserve(num_args);
    for (size_t i = 0; i < num_args; ++i) {
      const cubecc_arg &a = args[i];
      // Formatted only for an error: this loop is on every launch's path.
      auto where = [&] {
        return fmt::format("{}: kernel '{}': argument {}", function, kernel->name, i);
      };
      if (a.kind == CUBECC_ARG_TENSOR) {
        bind_tensor(runtime, kernel, i, values.size(), a.value.tensor, values);
        continue;
      }
      if (a.kind == CUBECC_ARG_BUFFER) {
        if (!a.buffer)
          fail(CUBECC_ERROR_INVALID_ARGUMENT, where() + ": the buffer is NULL");
        if (a.buffer->runtime_id != runtime->id)
          buffer_of(runtime, a.buffer, where().c_str()); // fails, naming the argument
        values.emplace_back(*a.buffer->buffer);
        continue;
      }
      if (a.kind != CUBECC_ARG_SCALAR)
        fail(CUBECC_ERROR_INVALID_ARGUMENT,
             fmt::format("{}: kind {} is not CUBECC_ARG_BUFFER, CUBECC_ARG_SCALAR or "
                         "CUBECC_ARG_TENSOR",
                         where(), static_cast<int>(a.kind)));
      std::optional<ir::Scalar> scalar = scalar_of(a.dtype);
      if (!scalar)
        fail(CUBECC_ERROR_INVALID_ARGUMENT,
             fmt::format("{}: {} is not a cubecc_dtype", where(), static_cast<int>(a.dtype)));
      switch (ir::scalar_class(*scalar)) {
      case ir::ScalarClass::Bool:
        values.emplace_back(a.value.u != 0);
        break;
      case ir::ScalarClass::Signed:
        values.emplace_back(a.value.i);
        break;
      case ir::ScalarClass::Unsigned:
        values.emplace_back(a.value.u);
        break;
      case ir::ScalarClass::Float:
      case ir::ScalarClass::StorageFloat:
        values.emplace_back(a.value.f);
        break;
      }
    }
    r.launch_values(kernel->handle, {grid[0], grid[1], grid[2]}, values);
  });
}

cubecc_status cubecc_synchronize(cubecc_runtime runtime) {
  // A launch that failed on the device (an out-of-bounds access) surfaces here.
  return guarded(CUBECC_ERROR_INVALID_ARGUMENT,
                 [&] { runtime_of(runtime, "cubecc_synchronize").synchronize(); });
}

cubecc_status cubecc_last_launch_times(cubecc_runtime runtime, double *times_ns, size_t capacity,
                                       size_t *count) {
  return guarded(CUBECC_ERROR_INTERNAL, [&] {
    rt::Runtime &r = runtime_of(runtime, "cubecc_last_launch_times");
    need(count, "cubecc_last_launch_times", "the output count pointer");
    if (capacity)
      need(times_ns, "cubecc_last_launch_times", "the times array");
    std::vector<double> times = r.last_launch_times_ns();
    for (size_t i = 0; i < times.size() && i < capacity; ++i)
      times_ns[i] = times[i];
    *count = times.size();
  });
}

} // extern "C"

//===- DLPack for C++ tensors (cubecc/dlpack.hpp)
//----------------------------------------------===//

namespace {

/// The runtime::ErrorKind of a C API status, for the C++ functions that share its code.
rt::ErrorKind error_kind_of(cubecc_status status) {
  switch (status) {
  case CUBECC_ERROR_UNSUPPORTED:
    return rt::ErrorKind::Unsupported;
  case CUBECC_ERROR_OUT_OF_MEMORY:
    return rt::ErrorKind::OutOfMemory;
  case CUBECC_ERROR_INTERNAL:
    return rt::ErrorKind::Internal;
  default:
    return rt::ErrorKind::InvalidArgument;
  }
}

std::optional<cubecc_dtype> dtype_of_scalar(ir::Scalar scalar) {
  for (int d = CUBECC_DTYPE_I8; d <= CUBECC_DTYPE_F64; ++d)
    if (scalar_of(static_cast<cubecc_dtype>(d)) == scalar)
      return static_cast<cubecc_dtype>(d);
  return std::nullopt;
}

} // namespace

namespace cubecc {

DLDevice dlpack_device_of(runtime::ExternalMemory::Kind kind) {
  return DLDevice{dlpack_device_type(kind), dlpack_device_id(kind)};
}

std::optional<ir::Scalar> element_of_dlpack(DLDataType dtype) {
  std::optional<cubecc_dtype> d = dtype_of(dtype);
  return d ? scalar_of(*d) : std::nullopt;
}

runtime::Tensor tensor_from_dlpack(runtime::Runtime &rt, DLManagedTensor *tensor) {
  const char *function = "cubecc::tensor_from_dlpack";
  try {
    need(tensor, function, "the tensor");
    ImportedTensor imported = import_dlpack(rt, tensor, function, true);
    return runtime::Tensor(std::make_shared<runtime::Buffer>(std::move(imported.buffer)),
                           std::move(imported.shape), std::move(imported.strides), 0);
  } catch (const ApiError &e) {
    throw runtime::Error(error_kind_of(e.status), e.message);
  }
}

DLManagedTensor *tensor_to_dlpack(runtime::Runtime &rt, const runtime::Tensor &tensor) {
  const char *function = "cubecc::tensor_to_dlpack";
  if (!tensor.valid())
    throw runtime::Error(runtime::ErrorKind::InvalidArgument,
                         std::string(function) + ": the tensor is empty");
  std::optional<cubecc_dtype> dtype = dtype_of_scalar(tensor.element());
  std::optional<DLDataType> dl = dtype ? dlpack_dtype(*dtype) : std::nullopt;
  if (!dl)
    throw runtime::Error(runtime::ErrorKind::Unsupported,
                         fmt::format("{}: DLPack 0.6 has no code for {}", function,
                                     ir::scalar_name(tensor.element())));
  rt::ExternalMemory native = rt.native_memory(tensor.buffer());
  auto exported = std::make_unique<ExportedTensor>();
  exported->buffer = tensor.storage();
  for (size_t d = 0; d < tensor.rank(); ++d) {
    exported->shape.push_back(static_cast<int64_t>(tensor.shape(d)));
    exported->strides.push_back(static_cast<int64_t>(tensor.stride(d)));
  }
  DLTensor &t = exported->tensor.dl_tensor;
  t.data = reinterpret_cast<void *>(static_cast<uintptr_t>(native.handle));
  t.device = dlpack_device_of(native.kind);
  t.ndim = static_cast<int32_t>(tensor.rank());
  t.dtype = *dl;
  t.shape = exported->shape.data();
  t.strides = exported->strides.data();
  t.byte_offset = native.offset + tensor.offset() * (ir::scalar_bits(tensor.element()) / 8);
  exported->tensor.manager_ctx = exported.get();
  exported->tensor.deleter = delete_exported;
  return &exported.release()->tensor;
}

} // namespace cubecc
