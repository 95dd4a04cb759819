//===- module.cpp - cubecc._cubecc: the runtime for Python (nanobind) -------------------------===//
//
// The C++ runtime (runtime.h, tensor.h, dlpack.hpp) as Python objects:
//
//   Runtime        a thread-safe context of one device (runtime::Runtime), shared by the
//                  Tensors, Kernels and Streams made from it
//   Tensor         a strided view of device memory (runtime::Tensor), with __dlpack__
//   Kernel         a compiled kernel (runtime::KernelHandle) and its DSL-level parameters
//   KernelLibrary  a kernel library (.so) built with the DSL
//   Stream, Event  in-order queues and points in them
//
// Launches are checked against the kernel's parameters, one Python argument per DSL parameter
// (a Tensor or any DLPack producer for a Tensor or Array, a number or a sequence of numbers for
// a value); errors are the exception classes of __init__.py, one per runtime::ErrorKind.
//
// The GIL is released around every call into the runtime that may take one of its locks
// (launches, copies, compiles, waits, statistics): the deleter of memory adopted from a Python
// producer takes the GIL, and the runtime may run it on a thread that holds a runtime lock, so a
// thread must never wait for a runtime lock while holding the GIL.
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/dlpack.hpp"
#include "cubecc/dsl/kernel_library_loader.h"
#include "cubecc/ir/diagnostic.h"
#include "cubecc/ir/ir.h"
#include "cubecc/ir/version.h"
#include "cubecc/runtime/runtime.h"
#include "cubecc/runtime/tensor.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace nb = nanobind;
namespace rt = cubecc::runtime;
namespace ir = cubecc::ir;
namespace dsl = cubecc::dsl;

using namespace nb::literals;

namespace {

//===- Errors --------------------------------------------------------------------------------===//

/// The Python exception class of each runtime::ErrorKind (set by __init__.py through
/// _set_error_classes, before anything can fail).
std::array<PyObject *, 9> error_classes{};

[[noreturn]] void fail(rt::ErrorKind kind, const std::string &message) {
  throw rt::Error(kind, message);
}

void translate_error(const std::exception_ptr &p, void *) {
  try {
    std::rethrow_exception(p);
  } catch (const rt::Error &e) {
    PyObject *cls = error_classes[static_cast<size_t>(e.kind())];
    PyErr_SetString(cls ? cls : PyExc_RuntimeError, e.what());
  }
}

//===- Element types -------------------------------------------------------------------------===//

struct DtypeName {
  const char *name;
  ir::Scalar scalar;
};
constexpr DtypeName kDtypeNames[] = {
    {"i8", ir::Scalar::I8},       {"int8", ir::Scalar::I8},     {"i16", ir::Scalar::I16},
    {"int16", ir::Scalar::I16},   {"i32", ir::Scalar::I32},     {"int32", ir::Scalar::I32},
    {"i64", ir::Scalar::I64},     {"int64", ir::Scalar::I64},   {"u8", ir::Scalar::U8},
    {"uint8", ir::Scalar::U8},    {"u16", ir::Scalar::U16},     {"uint16", ir::Scalar::U16},
    {"u32", ir::Scalar::U32},     {"uint32", ir::Scalar::U32},  {"u64", ir::Scalar::U64},
    {"uint64", ir::Scalar::U64},  {"f16", ir::Scalar::F16},     {"float16", ir::Scalar::F16},
    {"half", ir::Scalar::F16},    {"bf16", ir::Scalar::BF16},   {"bfloat16", ir::Scalar::BF16},
    {"f32", ir::Scalar::F32},     {"float32", ir::Scalar::F32}, {"float", ir::Scalar::F32},
    {"f64", ir::Scalar::F64},     {"float64", ir::Scalar::F64}, {"double", ir::Scalar::F64},
    {"e4m3", ir::Scalar::E4M3},   {"e5m2", ir::Scalar::E5M2},   {"e2m1", ir::Scalar::E2M1},
    {"ue8m0", ir::Scalar::UE8M0},
};

/// The element type `dtype` names: "f32", "float32", a NumPy dtype or scalar type, a torch dtype.
ir::Scalar element_of(nb::handle dtype) {
  std::string name;
  if (nb::isinstance<nb::str>(dtype))
    name = nb::cast<std::string>(dtype);
  else if (nb::hasattr(dtype, "itemsize") && nb::hasattr(dtype, "name")) // numpy.dtype
    name = nb::cast<std::string>(dtype.attr("name"));
  else if (nb::hasattr(dtype, "__name__")) // numpy.float32 and the like
    name = nb::cast<std::string>(dtype.attr("__name__"));
  else
    name = nb::cast<std::string>(nb::str(dtype));
  if (name.rfind("torch.", 0) == 0)
    name = name.substr(6);
  for (const DtypeName &d : kDtypeNames)
    if (name == d.name)
      return d.scalar;
  fail(rt::ErrorKind::InvalidArgument,
       "unknown dtype '" + name +
           "': give i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32 or f64 (or the NumPy "
           "name, e.g. float32, or a NumPy or torch dtype)");
}

size_t element_bytes(ir::Scalar s) {
  return ir::scalar_bits(s) / 8;
}

//===- Objects -------------------------------------------------------------------------------===//

using RuntimePtr = std::shared_ptr<rt::Runtime>;

struct TensorObject {
  rt::Tensor tensor;
  RuntimePtr runtime; ///< for copies and DLPack export
};

struct KernelObject {
  rt::KernelHandle handle;
  RuntimePtr runtime;
};

struct LibraryObject {
  std::unique_ptr<dsl::KernelLibrary> library;
  std::string path; ///< absolute: part of its kernels' cache keys
};

struct RuntimeObject {
  RuntimePtr runtime;
};

struct StreamObject {
  rt::Stream stream;
  RuntimePtr runtime;
};

struct Statistics {
  uint64_t environment_hits = 0, environment_misses = 0, environment_rejected = 0;
  uint64_t compiles = 0, traces = 0, kernel_cache_hits = 0;
  uint64_t pool_bytes_reserved = 0, pool_bytes_live = 0, pool_allocations = 0, pool_reuses = 0;
};

//===- DLPack in -----------------------------------------------------------------------------===//

/// A DLPack tensor taken from a producer, whose deleter takes the GIL: the runtime lets adopted
/// memory go on whatever thread releases it last, and a Python producer's deleter needs the GIL.
struct TakenTensor {
  DLManagedTensor outer{};
  DLManagedTensor *inner = nullptr;
};

bool python_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

void delete_taken(DLManagedTensor *self) {
  auto *taken = static_cast<TakenTensor *>(self->manager_ctx);
  // At exit the producer's memory goes with the interpreter.
  if (taken->inner && taken->inner->deleter && Py_IsInitialized() && !python_finalizing()) {
    PyGILState_STATE state = PyGILState_Ensure();
    taken->inner->deleter(taken->inner);
    PyGILState_Release(state);
  }
  delete taken;
}

/// Calls `object.__dlpack__()` and takes the tensor out of the capsule (renamed "used_dltensor",
/// as the protocol asks). The result is the caller's: adopt it or delete_taken it.
DLManagedTensor *take_dlpack(nb::handle object, const std::string &what) {
  if (!nb::hasattr(object, "__dlpack__"))
    fail(rt::ErrorKind::InvalidArgument,
         what + ": a " +
             nb::cast<std::string>(nb::str(nb::handle(object.type()).attr("__name__"))) +
             " is not a tensor: give a cubecc.Tensor, a NumPy array, a torch.Tensor or any object "
             "with __dlpack__");
  nb::object capsule = object.attr("__dlpack__")();
  if (!PyCapsule_IsValid(capsule.ptr(), "dltensor"))
    fail(rt::ErrorKind::Unsupported,
         what + ": __dlpack__ returned no \"dltensor\" capsule (an unused DLPack 0.x tensor is "
                "what cubecc reads)");
  auto *inner = static_cast<DLManagedTensor *>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  auto *taken = new TakenTensor;
  taken->inner = inner;
  taken->outer.dl_tensor = inner->dl_tensor;
  taken->outer.manager_ctx = taken;
  taken->outer.deleter = delete_taken;
  return &taken->outer;
}

/// Copies the elements of the strided view at `base` (`shape`, `strides` in elements, negative
/// ones included; at least one element) to `out` in row-major order, `bytes` each.
void gather(const uint8_t *base, std::span<const int64_t> shape, std::span<const int64_t> strides,
            size_t bytes, uint8_t *out) {
  std::vector<int64_t> index(shape.size(), 0);
  for (bool more = true; more; out += bytes) {
    int64_t at = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      at += index[d] * strides[d];
    std::memcpy(out, base + at * static_cast<int64_t>(bytes), bytes);
    more = false;
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) {
        more = true;
        break;
      }
      index[d] = 0;
    }
  }
}

/// `tensor` (a DLPack tensor in host memory) copied into a new contiguous Tensor on `runtime`,
/// allocated and written on `stream` (null: the runtime's default stream).
rt::Tensor copy_host_dlpack(rt::Runtime &runtime, rt::Stream *stream, const DLTensor &t,
                            const std::string &what) {
  std::optional<ir::Scalar> element = cubecc::element_of_dlpack(t.dtype);
  if (!element)
    fail(rt::ErrorKind::Unsupported,
         what + ": the tensor's dtype (DLPack code " + std::to_string(t.dtype.code) + ", " +
             std::to_string(t.dtype.bits) + " bits, " + std::to_string(t.dtype.lanes) +
             " lanes) has no cubecc element type");
  if (t.ndim < 1 || t.ndim > static_cast<int>(rt::Tensor::kMaxRank))
    fail(rt::ErrorKind::InvalidArgument,
         what + ": a tensor has 1 to 8 dimensions, not " + std::to_string(t.ndim));
  if (!t.shape)
    fail(rt::ErrorKind::InvalidArgument, what + ": the tensor's shape is NULL");
  std::vector<uint64_t> shape(t.shape, t.shape + t.ndim);
  const size_t bytes = element_bytes(*element);
  uint64_t count = 1;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] <= 0)
      fail(rt::ErrorKind::InvalidArgument, what + ": dimension " + std::to_string(d) +
                                               " has size " + std::to_string(t.shape[d]) +
                                               " (a cubecc tensor holds at least one element)");
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(t.shape[d]), &count) ||
        count > (uint64_t{1} << 48) / bytes)
      fail(rt::ErrorKind::OutOfMemory, what + ": the tensor's shape holds more elements than "
                                              "host memory can (the product overflows)");
  }
  if (!t.data)
    fail(rt::ErrorKind::InvalidArgument, what + ": the tensor's data is NULL");
  // The strides come from the producer: the farthest element from the first, in bytes, must be
  // a number (gather's arithmetic may not overflow) before any memory is read.
  std::vector<int64_t> strides(t.ndim);
  int64_t reach = 0;
  for (int64_t d = t.ndim, s = 1; d-- > 0;) {
    strides[d] = t.strides ? t.strides[d] : s;
    s *= t.shape[d];
    int64_t step = 0;
    if (strides[d] == INT64_MIN ||
        __builtin_mul_overflow(t.shape[d] - 1, strides[d] < 0 ? -strides[d] : strides[d], &step) ||
        __builtin_add_overflow(reach, step, &reach) ||
        reach > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(bytes) ||
        t.byte_offset > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(rt::ErrorKind::InvalidArgument,
           what + ": the tensor's strides and byte offset reach past 2^63 bytes (dimension " +
               std::to_string(d) + ", stride " + std::to_string(strides[d]) + ")");
  }
  std::vector<uint8_t> host(count * bytes);
  const auto *base = static_cast<const uint8_t *>(t.data) + t.byte_offset;
  gather(base, std::span<const int64_t>(t.shape, t.ndim), strides, bytes, host.data());
  rt::Buffer buffer =
      stream ? stream->allocate(*element, count) : runtime.allocate(*element, count);
  if (stream)
    stream->write(buffer, host.data(), host.size());
  else
    runtime.write(buffer, host.data(), host.size());
  return rt::Tensor(std::move(buffer), std::move(shape));
}

/// A Tensor of `object` (any DLPack producer) on `runtime`. copy: None shares the memory when
/// the device reaches it and copies host memory otherwise; False only shares; True always copies
/// (from host memory), on `stream` (null: the default stream).
rt::Tensor import_tensor(rt::Runtime &runtime, nb::handle object, std::optional<bool> copy,
                         const std::string &what, rt::Stream *stream = nullptr) {
  DLManagedTensor *taken = take_dlpack(object, what);
  const DLTensor t = taken->dl_tensor;
  const int type = t.device.device_type;
  const bool host = type == kDLCPU || type == kDLCUDAHost;
  // By the device without a copy: memory of the kind it adopts.
  std::optional<rt::ExternalMemory::Kind> kind = runtime.device().memory_kind();
  const bool reachable = kind && cubecc::dlpack_device_of(*kind).device_type == type;
  // Shared when asked (copy=False), or by default when the device reaches the memory: a layout
  // it cannot adopt (negative strides, misaligned data) is then copied instead.
  if (copy.has_value() ? !*copy : reachable) {
    try {
      nb::gil_scoped_release release;
      return cubecc::tensor_from_dlpack(runtime, taken);
    } catch (const rt::Error &e) {
      if (copy.has_value() || !host) {
        taken->deleter(taken); // a failed adoption leaves the tensor ours
        std::string hint = host && !reachable ? " (Runtime.tensor(x) copies it to the device)" : "";
        fail(e.kind(), what + ": " + e.what() + hint);
      }
    }
  }
  if (!host) {
    taken->deleter(taken);
    fail(rt::ErrorKind::Unsupported,
         what + ": copying is only from host memory; this tensor is on DLPack device type " +
             std::to_string(t.device.device_type) + " (move it to the CPU first)");
  }
  try {
    rt::Tensor copied;
    {
      nb::gil_scoped_release release;
      copied = copy_host_dlpack(runtime, stream, t, what);
    }
    taken->deleter(taken);
    return copied;
  } catch (...) {
    taken->deleter(taken);
    throw;
  }
}

//===- DLPack out ----------------------------------------------------------------------------===//

void capsule_destructor(PyObject *capsule) {
  // Never consumed: the tensor is still the capsule's.
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto *t = static_cast<DLManagedTensor *>(PyCapsule_GetPointer(capsule, "dltensor"));
    if (t && t->deleter)
      t->deleter(t);
  } else {
    PyErr_Clear();
  }
}

nb::object export_dlpack(TensorObject &self) {
  // A consumer reads the memory at once: the launches queued on the default stream first (the
  // interp and cpu devices ran them already).
  if (self.runtime->native_memory(self.tensor.buffer()).kind != rt::ExternalMemory::Kind::Host) {
    nb::gil_scoped_release release;
    self.runtime->synchronize();
  }
  DLManagedTensor *t = cubecc::tensor_to_dlpack(*self.runtime, self.tensor);
  PyObject *capsule = PyCapsule_New(t, "dltensor", capsule_destructor);
  if (!capsule) {
    t->deleter(t);
    throw nb::python_error();
  }
  return nb::steal(capsule);
}

std::pair<int, int> dlpack_device(const TensorObject &self) {
  DLDevice device =
      cubecc::dlpack_device_of(self.runtime->native_memory(self.tensor.buffer()).kind);
  return {device.device_type, device.device_id};
}

/// The tensor's elements copied to a new NumPy array of its shape (after the queued work).
nb::object to_numpy(TensorObject &self) {
  const rt::Tensor &t = self.tensor;
  const ir::Scalar element = t.element();
  std::optional<nb::dlpack::dtype> dtype;
  switch (ir::scalar_class(element)) {
  case ir::ScalarClass::Signed:
    dtype = nb::dlpack::dtype{uint8_t(nb::dlpack::dtype_code::Int),
                              uint8_t(ir::scalar_bits(element)), 1};
    break;
  case ir::ScalarClass::Unsigned:
    dtype = nb::dlpack::dtype{uint8_t(nb::dlpack::dtype_code::UInt),
                              uint8_t(ir::scalar_bits(element)), 1};
    break;
  case ir::ScalarClass::Float:
    if (element != ir::Scalar::BF16)
      dtype = nb::dlpack::dtype{uint8_t(nb::dlpack::dtype_code::Float),
                                uint8_t(ir::scalar_bits(element)), 1};
    break;
  default:
    break;
  }
  if (!dtype)
    fail(rt::ErrorKind::Unsupported,
         "Tensor.numpy: NumPy has no " + std::string(ir::scalar_name(element)) +
             " (share the tensor with torch.from_dlpack on a host device, or convert it in a "
             "kernel)");
  const size_t bytes = element_bytes(element);
  const uint64_t count = t.size();
  auto *out = new uint8_t[std::max<uint64_t>(count, 1) * bytes];
  nb::capsule owner(out, [](void *p) noexcept { delete[] static_cast<uint8_t *>(p); });
  if (count) {
    nb::gil_scoped_release release;
    if (t.offset() == 0 && t.contiguous()) {
      self.runtime->read(t.buffer(), out, count * bytes);
    } else {
      // Reads from element 0 to the last one the view reaches, then gathers.
      std::vector<uint8_t> all((t.offset() + t.extent()) * bytes);
      self.runtime->read(t.buffer(), all.data(), all.size());
      std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
      std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
      gather(all.data() + t.offset() * bytes, shape, strides, bytes, out);
    }
  }
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  return nb::cast(nb::ndarray<nb::numpy>(out, shape.size(), shape.data(), owner, nullptr, *dtype));
}

//===- Launches ------------------------------------------------------------------------------===//

std::array<uint32_t, 3> grid_of(nb::handle grid) {
  std::array<uint32_t, 3> g = {1, 1, 1};
  auto axis = [](nb::handle v, size_t d) -> uint32_t {
    if (!PyIndex_Check(v.ptr()) || PyBool_Check(v.ptr()))
      fail(rt::ErrorKind::InvalidArgument,
           "launch: the grid's axis " + std::to_string(d) + " is not an integer");
    long long n = PyLong_AsLongLong(v.ptr());
    if (n == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      n = -1;
    }
    if (n < 1 || n > 0xffffffffLL)
      fail(rt::ErrorKind::InvalidArgument, "launch: the grid's axis " + std::to_string(d) + " is " +
                                               nb::cast<std::string>(nb::repr(v)) +
                                               ": give 1 to 2^32 - 1 workgroups");
    return static_cast<uint32_t>(n);
  };
  if (PyIndex_Check(grid.ptr())) {
    g[0] = axis(grid, 0);
    return g;
  }
  if (!PyTuple_Check(grid.ptr()) && !PyList_Check(grid.ptr()))
    fail(rt::ErrorKind::InvalidArgument,
         "launch: the grid is an int or a tuple of 1 to 3 ints (workgroups along x, y, z)");
  nb::sequence s = nb::borrow<nb::sequence>(grid);
  size_t n = nb::len(s);
  if (n < 1 || n > 3)
    fail(rt::ErrorKind::InvalidArgument,
         "launch: the grid has " + std::to_string(n) + " axes; give 1 to 3 (x, y, z)");
  for (size_t d = 0; d < n; ++d)
    g[d] = axis(s[d], d);
  return g;
}

[[noreturn]] void argument_error(const rt::KernelHandle &k, size_t position,
                                 const rt::KernelParameter &p, const std::string &problem) {
  fail(rt::ErrorKind::InvalidArgument, "launch of kernel '" + k.name() + "': argument " +
                                           std::to_string(position) + " (" + p.describe() +
                                           "): " + problem);
}

std::string python_type_name(nb::handle h) {
  return nb::cast<std::string>(nb::handle(h.type()).attr("__name__"));
}

/// A Python integer as a signed or unsigned lane; errors when it fits neither 64-bit type.
void integer_lane(PyObject *integer, rt::ArgumentValue::Kind &kind, uint64_t &bits,
                  const rt::KernelHandle &k, size_t position, const rt::KernelParameter &p) {
  int overflow = 0;
  long long s = PyLong_AsLongLongAndOverflow(integer, &overflow);
  if (overflow == 0) {
    kind = rt::ArgumentValue::Signed;
    bits = static_cast<uint64_t>(s);
    return;
  }
  unsigned long long u = overflow > 0 ? PyLong_AsUnsignedLongLong(integer) : 0;
  if (overflow < 0 || (u == static_cast<unsigned long long>(-1) && PyErr_Occurred())) {
    PyErr_Clear();
    argument_error(k, position, p,
                   nb::cast<std::string>(nb::repr(nb::handle(integer))) + " does not fit 64 bits");
  }
  kind = rt::ArgumentValue::Unsigned;
  bits = u;
}

/// One lane of a value argument: a bool, an integer (anything with __index__) or a float
/// (anything with __float__). The runtime checks it against the parameter's type, with one
/// Python convenience first: an integer given for a float parameter is converted when the
/// double holds it exactly (2 for 2.0), as NumPy does.
void set_lane(rt::ArgumentValue &v, size_t lane, nb::handle x, const rt::KernelHandle &k,
              size_t position, const rt::KernelParameter &p) {
  PyObject *o = x.ptr();
  rt::ArgumentValue::Kind kind;
  uint64_t bits = 0;
  double d = 0;
  if (PyBool_Check(o)) {
    kind = rt::ArgumentValue::Bool;
    bits = o == Py_True;
  } else if (PyFloat_Check(o)) {
    kind = rt::ArgumentValue::Float;
    d = PyFloat_AS_DOUBLE(o);
  } else if (PyLong_Check(o)) {
    integer_lane(o, kind, bits, k, position, p);
  } else if (std::string t = python_type_name(x); t == "bool_" || t == "bool") { // numpy.bool_
    kind = rt::ArgumentValue::Bool;
    bits = PyObject_IsTrue(o) ? 1 : 0;
  } else if (PyIndex_Check(o)) { // numpy integers
    nb::object i = nb::steal(PyNumber_Index(o));
    if (!i.is_valid()) {
      PyErr_Clear();
      argument_error(k, position, p, "a " + t + " that does not convert to an integer");
    }
    integer_lane(i.ptr(), kind, bits, k, position, p);
  } else if (nb::hasattr(x, "__float__")) { // numpy floats
    kind = rt::ArgumentValue::Float;
    d = PyFloat_AsDouble(o);
    if (d == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      argument_error(k, position, p, "a " + t + " that does not convert to a float");
    }
  } else {
    argument_error(k, position, p,
                   "needs a number, got a " + t +
                       (nb::hasattr(x, "__dlpack__") ? " (a tensor, for a value parameter)" : ""));
  }
  const bool float_parameter = ir::scalar_class(p.type.element()) == ir::ScalarClass::Float;
  if (float_parameter && kind != rt::ArgumentValue::Float && kind != rt::ArgumentValue::Bool) {
    d = kind == rt::ArgumentValue::Signed ? static_cast<double>(static_cast<int64_t>(bits))
                                          : static_cast<double>(bits);
    const bool exact =
        kind == rt::ArgumentValue::Signed
            ? d >= -0x1p63 && d < 0x1p63 && static_cast<int64_t>(d) == static_cast<int64_t>(bits)
            : d < 0x1p64 && static_cast<uint64_t>(d) == bits;
    if (!exact)
      argument_error(k, position, p,
                     nb::cast<std::string>(nb::repr(x)) +
                         " has no exact double: give a float for a float parameter");
    kind = rt::ArgumentValue::Float;
  }
  if (kind == rt::ArgumentValue::Float)
    std::memcpy(&bits, &d, sizeof bits);
  if (lane > 0 && kind != v.kind)
    argument_error(k, position, p, "the lanes mix bools, integers and floats");
  v.kind = kind;
  v.bits[lane] = bits;
}

/// The launch arguments of `args` (one per DSL parameter of `kernel`) for a launch on `runtime`:
/// `values` for the runtime, `imported` the tensors adopted from DLPack producers, which must
/// stay alive until the launch is queued.
void bind_arguments(rt::Runtime &runtime, const KernelObject &kernel, nb::args args,
                    std::vector<rt::ArgumentValue> &values, std::vector<rt::Tensor> &imported) {
  const rt::KernelHandle &k = kernel.handle;
  std::span<const rt::KernelParameter> params = k.parameters();
  if (args.size() != params.size())
    fail(rt::ErrorKind::InvalidArgument, "launch of kernel '" + k.name() +
                                             "': " + std::to_string(args.size()) +
                                             " argument(s) given; the kernel takes " +
                                             std::to_string(params.size()) + ": " + k.signature());
  values.reserve(params.size() + 8);
  for (size_t i = 0; i < params.size(); ++i) {
    const rt::KernelParameter &p = params[i];
    nb::handle a = args[i];
    if (p.kind != rt::KernelParameter::Kind::Value) {
      if (nb::isinstance<TensorObject>(a)) {
        const TensorObject *t = nb::inst_ptr<TensorObject>(a);
        if (t->runtime.get() != &runtime)
          argument_error(
              k, i, p,
              "the tensor belongs to another Runtime (copy it: runtime.tensor(t.numpy()))");
        rt::bind_tensor(k, i, p, t->tensor, values);
      } else {
        imported.push_back(import_tensor(runtime, a, false,
                                         "launch of kernel '" + k.name() + "': argument " +
                                             std::to_string(i) + " (" + p.describe() + ")"));
        rt::bind_tensor(k, i, p, imported.back(), values);
      }
      continue;
    }
    const uint32_t lanes = p.type.lanes();
    rt::ArgumentValue v(uint32_t{0});
    if (lanes == 1) {
      set_lane(v, 0, a, k, i, p);
    } else {
      if (!PyTuple_Check(a.ptr()) && !PyList_Check(a.ptr()))
        argument_error(k, i, p,
                       "needs a tuple or list of " + std::to_string(lanes) + " numbers, got a " +
                           python_type_name(a));
      nb::sequence s = nb::borrow<nb::sequence>(a);
      if (nb::len(s) != lanes)
        argument_error(k, i, p,
                       "needs " + std::to_string(lanes) + " lanes, got " +
                           std::to_string(nb::len(s)));
      for (size_t l = 0; l < lanes; ++l)
        set_lane(v, l, s[l], k, i, p);
    }
    v.lanes = lanes;
    values.push_back(v);
  }
}

/// A launch's arguments bound to the kernel's parameters: what the runtime is given.
struct BoundLaunch {
  std::array<uint32_t, 3> grid{};
  std::vector<rt::ArgumentValue> values;
  std::vector<rt::Tensor> imported; ///< adopted from DLPack producers: alive until queued
};

BoundLaunch bind_launch(rt::Runtime &runtime, const KernelObject &kernel, nb::handle grid,
                        nb::args args) {
  if (kernel.runtime.get() != &runtime)
    fail(rt::ErrorKind::InvalidArgument,
         "launch of kernel '" + kernel.handle.name() +
             "': it was loaded on another Runtime (load it on this one)");
  BoundLaunch bound;
  bound.grid = grid_of(grid);
  bind_arguments(runtime, kernel, args, bound.values, bound.imported);
  return bound;
}

/// Binds `args` and queues the launch on `queue` (the Runtime or one of its Streams).
template <class Queue>
void launch_on(Queue &queue, rt::Runtime &runtime, const KernelObject &kernel, nb::handle grid,
               nb::args args) {
  BoundLaunch bound = bind_launch(runtime, kernel, grid, args);
  nb::gil_scoped_release release;
  queue.launch_values(kernel.handle, bound.grid, bound.values);
  bound.imported.clear(); // adopted memory is let go once the launch is done with it
}

/// For the launch benchmark (python/bench/launch_overhead.py): `iterations` launches queued from
/// C++ with arguments bound once, as a C++ program launches; the seconds it took, after a
/// synchronize.
double cpp_launches(rt::Runtime &runtime, const KernelObject &kernel, size_t iterations,
                    nb::handle grid, nb::args args) {
  BoundLaunch bound = bind_launch(runtime, kernel, grid, args);
  nb::gil_scoped_release release;
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < iterations; ++i)
    runtime.launch_values(kernel.handle, bound.grid, bound.values);
  runtime.synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

//===- Kernels -------------------------------------------------------------------------------===//

KernelObject library_kernel(const RuntimePtr &runtime, const LibraryObject &library,
                            const std::string &name, std::optional<std::string> configuration) {
  const auto &kernels = library.library->kernels();
  std::optional<size_t> found;
  std::string listed;
  for (size_t i = 0; i < kernels.size(); ++i) {
    listed += (i ? ", " : "") + kernels[i].name +
              (kernels[i].configuration.empty() ? "" : " (" + kernels[i].configuration + ")");
    if (!found && kernels[i].name == name &&
        (!configuration || kernels[i].configuration == *configuration))
      found = i;
  }
  if (!found)
    fail(rt::ErrorKind::NotFound,
         "the kernel library " + library.path + " has no kernel '" + name + "'" +
             (configuration ? " with configuration '" + *configuration + "'" : "") +
             " (it has: " + listed + ")");
  const dsl::KernelLibrary::Entry &entry = kernels[*found];
  // The C API's key: both find each other's kernels in a runtime's cache.
  const std::string key = library.path + ":" + entry.name + ":" + entry.configuration;
  KernelObject k;
  k.runtime = runtime;
  nb::gil_scoped_release release;
  k.handle = runtime->kernel(key, [&]() -> std::unique_ptr<ir::Module> {
    auto module = std::make_unique<ir::Module>();
    std::vector<ir::Diagnostic> errors;
    if (!library.library->trace(*found, *module, errors))
      throw rt::Error(rt::ErrorKind::Compile,
                      "kernel '" + entry.name + "' (" + entry.configuration + ") of " +
                          library.path + " does not trace:\n" + ir::to_string(errors),
                      errors);
    return module;
  });
  return k;
}

std::string absolute_path(const std::string &path) {
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::weakly_canonical(path, ec);
  return ec ? path : absolute.string();
}

std::shared_ptr<LibraryObject> open_library(const std::string &path) {
  std::string error;
  std::unique_ptr<dsl::KernelLibrary> library;
  {
    nb::gil_scoped_release release;
    library = dsl::KernelLibrary::open(path, error);
  }
  if (!library)
    fail(rt::ErrorKind::NotFound, error);
  auto object = std::make_shared<LibraryObject>();
  object->library = std::move(library);
  object->path = absolute_path(path);
  return object;
}

//===- Tensors -------------------------------------------------------------------------------===//

std::vector<uint64_t> shape_of(nb::handle shape) {
  std::vector<uint64_t> s;
  auto dim = [](nb::handle v) -> uint64_t {
    if (!PyIndex_Check(v.ptr()) || PyBool_Check(v.ptr()))
      fail(rt::ErrorKind::InvalidArgument, "a shape is an int or a tuple of ints");
    long long n = PyLong_AsLongLong(v.ptr());
    if (n < 1) {
      PyErr_Clear();
      fail(rt::ErrorKind::InvalidArgument,
           "a tensor's dimensions are at least 1, not " + nb::cast<std::string>(nb::repr(v)));
    }
    return static_cast<uint64_t>(n);
  };
  if (PyIndex_Check(shape.ptr()))
    return {dim(shape)};
  if (!PyTuple_Check(shape.ptr()) && !PyList_Check(shape.ptr()))
    fail(rt::ErrorKind::InvalidArgument, "a shape is an int or a tuple of ints");
  for (nb::handle v : nb::borrow<nb::sequence>(shape))
    s.push_back(dim(v));
  if (s.empty() || s.size() > rt::Tensor::kMaxRank)
    fail(rt::ErrorKind::InvalidArgument,
         "a tensor has 1 to 8 dimensions, not " + std::to_string(s.size()));
  return s;
}

TensorObject empty_tensor(const RuntimePtr &runtime, nb::handle shape, nb::handle dtype,
                          rt::Stream *stream = nullptr) {
  std::vector<uint64_t> s = shape_of(shape);
  ir::Scalar element = element_of(dtype);
  uint64_t count = 1;
  for (uint64_t d : s)
    if (__builtin_mul_overflow(count, d, &count))
      fail(rt::ErrorKind::InvalidArgument, "the shape's element count overflows 64 bits");
  rt::Buffer b;
  {
    nb::gil_scoped_release release;
    b = stream ? stream->allocate(element, count) : runtime->allocate(element, count);
  }
  return TensorObject{rt::Tensor(std::move(b), std::move(s)), runtime};
}

nb::tuple to_tuple(std::span<const uint64_t> values) {
  nb::list l;
  for (uint64_t v : values)
    l.append(v);
  return nb::tuple(l);
}

Statistics statistics_of(rt::Runtime &r) {
  rt::EnvironmentStatistics environment = r.environment_statistics();
  rt::KernelCacheStatistics cache = r.cache_statistics();
  rt::PoolStatistics pool = r.pool_statistics();
  Statistics s;
  s.environment_hits = environment.hits;
  s.environment_misses = environment.misses;
  s.environment_rejected = environment.rejected;
  s.compiles = cache.compiles;
  s.traces = cache.traces;
  s.kernel_cache_hits = cache.hits;
  s.pool_bytes_reserved = pool.bytes_reserved;
  s.pool_bytes_live = pool.bytes_live;
  s.pool_allocations = pool.allocations;
  s.pool_reuses = pool.reuses;
  return s;
}

} // namespace

NB_MODULE(_cubecc, m) {
  m.doc() = "cubecc's runtime: devices, environment bundles, kernels, tensors and launches";
  nb::register_exception_translator(translate_error);

  m.def(
      "_set_error_classes",
      [](nb::list classes) {
        if (nb::len(classes) != error_classes.size())
          throw std::runtime_error("_set_error_classes: one class per runtime::ErrorKind");
        for (size_t i = 0; i < error_classes.size(); ++i) {
          Py_XDECREF(error_classes[i]);
          error_classes[i] = nb::object(classes[i]).release().ptr();
        }
      },
      "classes"_a);
  m.def("_error_kinds", [] {
    std::vector<std::string> kinds;
    for (size_t i = 0; i < error_classes.size(); ++i)
      kinds.push_back(rt::error_kind_name(static_cast<rt::ErrorKind>(i)));
    return kinds;
  });
  m.def(
      "version", [] { return std::string(cubecc::version()); },
      "The version of the cubecc this package was built from, e.g. 0.1.0.");

  nb::class_<rt::DeviceInfo>(m, "DeviceInfo", "What a device is and can do.")
      .def_ro("backend", &rt::DeviceInfo::backend, "the backend: vulkan, cuda, hip, cpu or interp")
      .def_prop_ro(
          "device_class",
          [](const rt::DeviceInfo &i) { return rt::device_class_name(i.device_class); },
          "what runs its kernels: GPU, CPU or software")
      .def_ro("name", &rt::DeviceInfo::name)
      .def_ro("driver", &rt::DeviceInfo::driver)
      .def_ro("vendor", &rt::DeviceInfo::vendor)
      .def_ro("arch", &rt::DeviceInfo::arch,
              "its architecture: sm_90, gfx90a, x86-64-v3; Vulkan: vendorid:deviceid")
      .def_ro("subgroup_size", &rt::DeviceInfo::subgroup_size)
      .def_ro("max_buffer_bytes", &rt::DeviceInfo::max_buffer_bytes)
      .def("__repr__", [](const rt::DeviceInfo &i) {
        return "<cubecc.DeviceInfo " + i.backend + ": " + i.name + ">";
      });

  struct DeviceEntry {
    std::string backend;
    bool built;
    bool available;
    std::string detail;
    std::optional<rt::DeviceInfo> info;
  };
  nb::class_<DeviceEntry>(m, "DeviceEntry", "A backend built into cubecc and its device here.")
      .def_ro("backend", &DeviceEntry::backend)
      .def_ro("built", &DeviceEntry::built, "False when this cubecc was built without it")
      .def_ro("available", &DeviceEntry::available, "whether its device opens here")
      .def_ro("detail", &DeviceEntry::detail, "the device's name, or why there is none")
      .def_ro("info", &DeviceEntry::info)
      .def("__repr__", [](const DeviceEntry &e) {
        return "<cubecc.DeviceEntry " + e.backend + (e.available ? ": " : " (none): ") + e.detail +
               ">";
      });
  m.def(
      "devices",
      [] {
        std::vector<rt::DeviceEntry> entries;
        {
          nb::gil_scoped_release release;
          entries = rt::list_devices();
        }
        std::vector<DeviceEntry> out;
        for (rt::DeviceEntry &e : entries)
          out.push_back({e.backend, e.built, e.available, e.detail, std::move(e.info)});
        return out;
      },
      "Every backend built in, and whether its device opens here (as `cubecc devices`).");

  nb::class_<Statistics>(m, "Statistics", "What a Runtime did so far.")
      .def_ro("environment_hits", &Statistics::environment_hits, "kernels loaded from the bundle")
      .def_ro("environment_misses", &Statistics::environment_misses, "kernels it did not hold")
      .def_ro("environment_rejected", &Statistics::environment_rejected,
              "entries it held but could not use (damaged, another toolkit)")
      .def_ro("compiles", &Statistics::compiles, "kernels compiled (JIT) for the device")
      .def_ro("traces", &Statistics::traces, "kernels traced from a kernel library")
      .def_ro("kernel_cache_hits", &Statistics::kernel_cache_hits,
              "kernel requests answered by the in-process cache")
      .def_ro("pool_bytes_reserved", &Statistics::pool_bytes_reserved,
              "device memory the memory pool holds")
      .def_ro("pool_bytes_live", &Statistics::pool_bytes_live, "of it, held by live tensors")
      .def_ro("pool_allocations", &Statistics::pool_allocations, "buffers handed out")
      .def_ro("pool_reuses", &Statistics::pool_reuses, "of those, served from a cached block")
      .def("__repr__", [](const Statistics &s) {
        return "<cubecc.Statistics environment_hits=" + std::to_string(s.environment_hits) +
               " environment_misses=" + std::to_string(s.environment_misses) +
               " compiles=" + std::to_string(s.compiles) +
               " kernel_cache_hits=" + std::to_string(s.kernel_cache_hits) + ">";
      });

  nb::class_<LibraryObject>(m, "KernelLibrary",
                            "A kernel library: a shared library built with the DSL (docs/dsl.md).")
      .def(
          "__init__",
          [](LibraryObject *self, const std::string &path) {
            std::shared_ptr<LibraryObject> opened = open_library(path);
            new (self) LibraryObject{std::move(opened->library), opened->path};
          },
          "path"_a,
          "Opens a kernel library (checked and probed in a child process first). Raises "
          "NotFoundError naming the file and why it does not load.")
      .def_ro("path", &LibraryObject::path)
      .def_prop_ro(
          "kernels",
          [](const LibraryObject &l) {
            std::vector<std::pair<std::string, std::string>> out;
            for (const auto &e : l.library->kernels())
              out.emplace_back(e.name, e.configuration);
            return out;
          },
          "(name, configuration) of every kernel it registers")
      .def("__repr__", [](const LibraryObject &l) {
        return "<cubecc.KernelLibrary " + l.path + ": " +
               std::to_string(l.library->kernels().size()) + " kernels>";
      });

  nb::class_<KernelObject>(m, "Kernel", "A kernel compiled for one Runtime's device.")
      .def_prop_ro("name", [](const KernelObject &k) { return k.handle.name(); })
      .def_prop_ro(
          "signature", [](const KernelObject &k) { return k.handle.signature(); },
          "the DSL signature, e.g. axpy(x: Tensor[f32, 1], y: Tensor[f32, 1], a: f32)")
      .def_prop_ro(
          "parameters",
          [](const KernelObject &k) {
            std::vector<std::string> out;
            for (const rt::KernelParameter &p : k.handle.parameters())
              out.push_back(p.describe());
            return out;
          },
          "one entry per launch argument, as \"name: type\"")
      .def_prop_ro(
          "workgroup_size",
          [](const KernelObject &k) {
            auto w = k.handle.abi().workgroup_size;
            return nb::make_tuple(w[0], w[1], w[2]);
          },
          "invocations per workgroup (x, y, z)")
      .def(
          "grid_for",
          [](const KernelObject &k, nb::args invocations) {
            std::vector<uint64_t> n;
            for (nb::handle v : invocations) {
              int overflow = 0;
              long long count = -1;
              if (PyIndex_Check(v.ptr()) && !PyBool_Check(v.ptr())) { // int, numpy.int64, ...
                nb::object i = nb::steal(PyNumber_Index(v.ptr()));
                if (i.is_valid())
                  count = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
                PyErr_Clear();
              }
              if (count < 0 || overflow)
                fail(rt::ErrorKind::InvalidArgument,
                     "grid_for: invocations are non-negative ints; got " +
                         nb::cast<std::string>(nb::repr(v)));
              n.push_back(static_cast<uint64_t>(count));
            }
            auto g = rt::grid_for(std::span<const uint64_t>(n), k.handle.abi().workgroup_size);
            return nb::make_tuple(g[0], g[1], g[2]);
          },
          "The workgroups that cover these invocations (x[, y[, z]]) in workgroups of the "
          "kernel's size.")
      .def("__repr__",
           [](const KernelObject &k) { return "<cubecc.Kernel " + k.handle.signature() + ">"; });

  nb::class_<TensorObject>(m, "Tensor",
                           "A strided view of device memory: dtype, shape, strides, offset.")
      .def_prop_ro(
          "dtype",
          [](const TensorObject &t) { return std::string(ir::scalar_name(t.tensor.element())); },
          "the element type: f32, i64, ...")
      .def_prop_ro("shape", [](const TensorObject &t) { return to_tuple(t.tensor.shape()); })
      .def_prop_ro(
          "strides", [](const TensorObject &t) { return to_tuple(t.tensor.strides()); },
          "in elements")
      .def_prop_ro(
          "offset", [](const TensorObject &t) { return t.tensor.offset(); },
          "where element (0, ...) is in the buffer, in elements")
      .def_prop_ro("ndim", [](const TensorObject &t) { return t.tensor.rank(); })
      .def_prop_ro(
          "size", [](const TensorObject &t) { return t.tensor.size(); }, "elements")
      .def_prop_ro(
          "nbytes",
          [](const TensorObject &t) { return t.tensor.size() * element_bytes(t.tensor.element()); })
      .def_prop_ro("contiguous", [](const TensorObject &t) { return t.tensor.contiguous(); })
      .def_prop_ro("device", [](const TensorObject &t) { return t.runtime->info().backend; })
      .def_prop_ro(
          "data_ptr",
          [](const TensorObject &t) {
            rt::ExternalMemory m = t.runtime->native_memory(t.tensor.buffer());
            return m.handle + m.offset + t.tensor.offset() * element_bytes(t.tensor.element());
          },
          "the address of element (0, ...): a host or device pointer (Vulkan: the VkBuffer "
          "handle plus the byte offset)")
      .def("__len__", [](const TensorObject &t) { return t.tensor.shape(0); })
      .def(
          "transpose",
          [](const TensorObject &t, size_t a, size_t b) {
            return TensorObject{t.tensor.transpose(a, b), t.runtime};
          },
          "a"_a = 0, "b"_a = 1, "The same elements with dimensions a and b swapped (no copy).")
      .def(
          "slice",
          [](const TensorObject &t, size_t d, uint64_t begin, uint64_t end) {
            return TensorObject{t.tensor.slice(d, begin, end), t.runtime};
          },
          "dim"_a, "begin"_a, "end"_a, "Indices [begin, end) of dimension dim (no copy).")
      .def("numpy", &to_numpy, nb::sig("def numpy(self) -> numpy.ndarray"),
           "A NumPy array of the elements, copied from the device after the queued work.")
      .def(
          "__array__",
          [](TensorObject &t, nb::handle dtype, nb::handle copy) {
            if (copy.is_valid() && !copy.is_none() && !nb::cast<bool>(copy))
              fail(rt::ErrorKind::Unsupported,
                   "Tensor.__array__: copy=False: an array of a cubecc tensor is a copy "
                   "(numpy.from_dlpack shares the memory on interp and cpu)");
            nb::object array = to_numpy(t);
            return dtype.is_none() ? array : array.attr("astype")(dtype);
          },
          "dtype"_a = nb::none(), "copy"_a = nb::none(),
          "numpy.asarray(tensor): Tensor.numpy(), converted to dtype if given.")
      .def(
          "__dlpack__", [](TensorObject &t, nb::kwargs) { return export_dlpack(t); },
          "Shares the memory as a DLPack capsule (no copy): host memory on interp and cpu, "
          "device memory on cuda, hip and vulkan, after the work queued on the runtime's default "
          "stream (synchronize other streams first).")
      .def("__dlpack_device__",
           [](const TensorObject &t) {
             auto [type, id] = dlpack_device(t);
             return nb::make_tuple(type, id);
           })
      .def("__repr__", [](const TensorObject &t) {
        return "<cubecc.Tensor " + t.tensor.describe() + " on " + t.runtime->info().backend + ">";
      });

  nb::class_<rt::Event>(m, "Event", "A point in a stream's work.")
      .def_prop_ro("done", &rt::Event::done, "whether the work before it finished (never blocks)")
      .def("synchronize", &rt::Event::synchronize, nb::call_guard<nb::gil_scoped_release>(),
           "Waits for the work before it; raises DeviceFailureError when it failed.");

  nb::class_<StreamObject>(m, "Stream",
                           "An in-order queue of launches and copies; one thread at a time.")
      .def(
          "launch",
          [](StreamObject &s, const KernelObject &k, nb::handle grid, nb::args args) {
            launch_on(s.stream, *s.runtime, k, grid, args);
          },
          "kernel"_a, "grid"_a, "args"_a,
          nb::sig("def launch(self, kernel: Kernel, grid: int | tuple[int, ...], *args: object) "
                  "-> None"),
          "Queues a launch on this stream (see Runtime.launch).")
      .def(
          "empty",
          [](StreamObject &s, nb::handle shape, nb::handle dtype) {
            return empty_tensor(s.runtime, shape, dtype, &s.stream);
          },
          "shape"_a, "dtype"_a = "f32",
          nb::sig("def empty(self, shape: int | tuple[int, ...], dtype: object = 'f32') -> Tensor"),
          "An uninitialized tensor allocated on this stream: usable at once by its work.")
      .def(
          "tensor",
          [](StreamObject &s, nb::handle object, std::optional<bool> copy) {
            if (nb::isinstance<TensorObject>(object))
              fail(rt::ErrorKind::InvalidArgument,
                   "Stream.tensor: give a NumPy array, torch tensor or DLPack producer (a "
                   "cubecc.Tensor is already on the device)");
            return TensorObject{import_tensor(*s.runtime, object, copy, "Stream.tensor", &s.stream),
                                s.runtime};
          },
          "data"_a, "copy"_a = nb::none(),
          "Runtime.tensor, with a copy allocated and written on this stream (ordered before the "
          "stream's later work).")
      .def("synchronize",
           [](StreamObject &s) {
             nb::gil_scoped_release release;
             s.stream.synchronize();
           })
      .def(
          "record", [](StreamObject &s) { return s.stream.record(); },
          "An Event done when the work queued so far is.")
      .def(
          "wait", [](StreamObject &s, const rt::Event &e) { s.stream.wait(e); }, "event"_a,
          "Work queued from now on starts after the event.");

  nb::class_<RuntimeObject>(m, "Runtime", "The context of one device, for every thread.")
      .def(
          "__init__",
          [](RuntimeObject *self, const std::string &device) {
            rt::Runtime opened = [&] {
              nb::gil_scoped_release release;
              return rt::Runtime::open(device);
            }();
            new (self) RuntimeObject{std::make_shared<rt::Runtime>(std::move(opened))};
          },
          "device"_a = "",
          "Opens a device: \"vulkan\", \"cuda\", \"hip\", \"cpu\", \"interp\", or \"\" for "
          "$CUBECC_DEVICE or the best one present. Raises NoDeviceError saying why none opens.")
      .def_prop_ro("device", [](const RuntimeObject &r) { return r.runtime->info(); })
      .def(
          "use_environment",
          [](RuntimeObject &r, const std::string &path, bool strict, bool require_signature,
             std::vector<std::string> trusted_keys) {
            rt::EnvironmentOptions options;
            options.fallback_to_jit = !strict;
            options.require_signature = require_signature;
            options.trusted_keys = std::move(trusted_keys);
            nb::gil_scoped_release release;
            r.runtime->use_environment(path, options);
          },
          "path"_a, nb::kw_only(), "strict"_a = false, "require_signature"_a = false,
          "trusted_keys"_a = std::vector<std::string>{},
          "Loads kernels from an environment bundle before compiling them. strict: a bundle "
          "that does not open, and a kernel it does not hold, raise EnvironmentBundleError "
          "instead of compiling. require_signature / trusted_keys (64 hex digits or .pub "
          "files): only a bundle signed by a trusted key is used.")
      .def(
          "kernel",
          [](RuntimeObject &r, nb::handle library, const std::string &name,
             std::optional<std::string> configuration) {
            std::shared_ptr<LibraryObject> opened;
            const LibraryObject *l = nullptr;
            if (nb::isinstance<LibraryObject>(library)) {
              l = nb::cast<const LibraryObject *>(library);
            } else if (nb::isinstance<nb::str>(library) || nb::hasattr(library, "__fspath__")) {
              opened = open_library(nb::cast<std::string>(nb::str(library)));
              l = opened.get();
            } else {
              fail(rt::ErrorKind::InvalidArgument,
                   "Runtime.kernel: the library is a KernelLibrary or a path");
            }
            return library_kernel(r.runtime, *l, name, configuration);
          },
          "library"_a, "name"_a, "configuration"_a = nb::none(),
          nb::sig("def kernel(self, library: KernelLibrary | str | os.PathLike, name: str, "
                  "configuration: str | None = None) -> Kernel"),
          "The kernel `name` of a kernel library (a KernelLibrary or its path) for this device: "
          "from the environment bundle when it holds it, else traced and compiled (strict "
          "bundles: EnvironmentBundleError). configuration picks one (\"width=4\"); None the "
          "first.")
      .def(
          "kernel_from_environment",
          [](RuntimeObject &r, const std::string &library, const std::string &name,
             const std::string &configuration) {
            KernelObject k;
            k.runtime = r.runtime;
            nb::gil_scoped_release release;
            k.handle = r.runtime->kernel_from_environment(library, name, configuration);
            return k;
          },
          "library"_a, "name"_a, "configuration"_a = "",
          "The kernel `name` of kernel library `library` (\"cubecc_examples\" for "
          "libcubecc_examples.so, \"mykernels\" for mykernels.cpp, as `cubecc env build` "
          "recorded it; `cubecc env inspect` lists them) from the environment bundle, without the "
          "library: nothing is traced or compiled. configuration must be the registered text "
          "exactly (\"\": registered without one).")
      .def(
          "empty",
          [](RuntimeObject &r, nb::handle shape, nb::handle dtype) {
            return empty_tensor(r.runtime, shape, dtype);
          },
          "shape"_a, "dtype"_a = "f32",
          nb::sig("def empty(self, shape: int | tuple[int, ...], dtype: object = 'f32') -> Tensor"),
          "An uninitialized row-major tensor; dtype: f32, float32, numpy.float32, torch.float32, "
          "...")
      .def(
          "tensor",
          [](RuntimeObject &r, nb::handle object, std::optional<bool> copy) {
            TensorObject *t =
                nb::isinstance<TensorObject>(object) ? nb::inst_ptr<TensorObject>(object) : nullptr;
            if (t && !copy.value_or(false)) {
              if (t->runtime != r.runtime)
                fail(rt::ErrorKind::InvalidArgument,
                     "Runtime.tensor: the tensor belongs to another Runtime (copy=True copies "
                     "it through the host)");
              return *t;
            }
            if (t) // a copy of a cubecc tensor: through the host
              return TensorObject{import_tensor(*r.runtime, to_numpy(*t), true, "Runtime.tensor"),
                                  r.runtime};
            return TensorObject{import_tensor(*r.runtime, object, copy, "Runtime.tensor"),
                                r.runtime};
          },
          "data"_a, "copy"_a = nb::none(),
          "A Tensor of `data` (a NumPy array, a torch.Tensor, any DLPack producer). copy=None: "
          "shares the memory when the device reaches it (host memory on interp and cpu, CUDA "
          "memory on cuda, ...) and copies host memory otherwise; copy=False: shares or raises "
          "UnsupportedError; copy=True: always copies.")
      .def(
          "from_dlpack",
          [](RuntimeObject &r, nb::handle object) {
            return TensorObject{import_tensor(*r.runtime, object, false, "Runtime.from_dlpack"),
                                r.runtime};
          },
          "data"_a, "Shares the memory of a DLPack producer without copying, or raises.")
      .def(
          "launch",
          [](RuntimeObject &r, const KernelObject &k, nb::handle grid, nb::args args) {
            launch_on(*r.runtime, *r.runtime, k, grid, args);
          },
          "kernel"_a, "grid"_a, "args"_a,
          nb::sig("def launch(self, kernel: Kernel, grid: int | tuple[int, ...], *args: object) "
                  "-> None"),
          "Queues a launch of grid workgroups (an int, or a tuple for x, y, z) with one "
          "argument per kernel parameter: a Tensor (or a NumPy array or torch tensor the device "
          "reaches) for a Tensor or Array, a number for a scalar, a tuple for a vector. Checked "
          "against the kernel's signature; errors name the parameter.")
      .def(
          "synchronize",
          [](RuntimeObject &r) {
            nb::gil_scoped_release release;
            r.runtime->synchronize();
          },
          "Waits for the queued work; raises DeviceFailureError when a launch failed.")
      .def(
          "last_launch_times_ns",
          [](RuntimeObject &r) { return r.runtime->last_launch_times_ns(); },
          nb::call_guard<nb::gil_scoped_release>(),
          "Device time of each launch completed by the last synchronize, in nanoseconds.")
      .def(
          "statistics", [](RuntimeObject &r) { return statistics_of(*r.runtime); },
          nb::call_guard<nb::gil_scoped_release>())
      .def(
          "_cpp_launches",
          [](RuntimeObject &r, const KernelObject &k, size_t iterations, nb::handle grid,
             nb::args args) { return cpp_launches(*r.runtime, k, iterations, grid, args); },
          "kernel"_a, "iterations"_a, "grid"_a, "args"_a,
          "For benchmarks: seconds to queue `iterations` launches from C++ (arguments bound "
          "once) and synchronize.")
      .def(
          "create_stream",
          [](RuntimeObject &r) {
            rt::Stream stream = [&] {
              nb::gil_scoped_release release;
              return r.runtime->create_stream();
            }();
            return StreamObject{std::move(stream), r.runtime};
          },
          "A new in-order queue on this device.")
      .def(
          "trim", [](RuntimeObject &r) { r.runtime->trim(); },
          nb::call_guard<nb::gil_scoped_release>(),
          "Gives the memory pool's cached blocks back to the device.")
      .def("__repr__", [](const RuntimeObject &r) {
        return "<cubecc.Runtime " + r.runtime->info().backend + ": " + r.runtime->info().name + ">";
      });
}
