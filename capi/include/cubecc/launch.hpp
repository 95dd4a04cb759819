//===- launch.hpp - Typed launches: arguments bound from the kernel function's signature ---===//
//
//   void layer_norm(dsl::Tensor<const float, 2> x, dsl::Tensor<const float> g,
//                   dsl::Tensor<const float> b, dsl::Tensor<float, 2> y, dsl::Scalar<float> eps);
//
//   cubecc::Tensor x(rt.upload(host_x), {rows, cols});
//   cubecc::Tensor y(rt.allocate<float>(rows * cols), {rows, cols});
//   cubecc::Tensor g = rt.upload(host_g), b = rt.upload(host_b);
//   auto ln = cubecc::kernel<layer_norm>(rt, "layer_norm", {.workgroup = {256, 1, 1}});
//   cubecc::launch(rt, ln, {rows, 1, 1}, x, g, b, y, 1e-5f);
//   cubecc::launch<layer_norm>(rt, {rows, 1, 1}, x, g, b, y, 1e-5f); // the registered kernel
//
// One argument per parameter of the C++ function, in its order; the launch lays them out as the
// kernel's IR parameters (dsl/memory.h: a Tensor<T, R> is its buffer, R u32 shapes, R u32
// strides). What each parameter takes:
//   dsl::Tensor<T, R>  a cubecc::Tensor (element type and rank checked at launch), a
//                      cubecc::TypedTensor<T, R> (checked at compile time), or, for R = 1, a
//                      Buffer (all of it, contiguous). The buffer is bound from the tensor's
//                      offset; shapes and strides must fit 32 bits.
//   dsl::Array<T>      a Buffer, a 1-D contiguous cubecc::Tensor, or a TypedTensor<T, 1>.
//   dsl::Scalar<T>     an arithmetic value of a type that converts to T without narrowing, as C++
//                      brace initialization `T{value}` allows for a variable (not a constant):
//                      float to Scalar<double> and int16_t to Scalar<int32_t> are fine, double or
//                      int to Scalar<float> and int to Scalar<uint32_t> are compile errors (write
//                      2.0f, 3u). Scalar<f16> and Scalar<bf16> take a float. Scalar<Vec<T, N>>
//                      takes a std::array of N such values.
// A wrong argument count, a tensor of another element type or rank, a narrowing scalar, or a
// value for a tensor is a compile error: a static_assert whose message starts with "cubecc:" and
// names the argument's position (0-based, as the runtime's messages count parameters); the lines
// "[with ... Parameter = ...; Argument = ...]" above it show the expected and the given type.
//
// Arguments are bound as runtime::ArgumentValues, so that graph capture records typed launches
// like any other. The queue is anything with the Runtime's launch surface (launch_values and
// kernel(key, trace)): a Runtime, or a Stream.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/dsl/memory.h"
#include "cubecc/dsl/registry.h"
#include "cubecc/runtime/tensor.h"

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace cubecc {

using runtime::grid_for;
using runtime::Tensor;

/// A host tensor whose element type and rank are part of its type, so that a launch checks them
/// at compile time. T is the element as the DSL spells it (float, uint32_t, dsl::f16, ...).
template <class T, int Rank = 1> class TypedTensor {
  static_assert(dsl::detail::ScalarTraits<T>::known && !std::is_same_v<T, bool>,
                "cubecc: TypedTensor<T, Rank> holds a scalar element type other than bool");
  static_assert(Rank >= 1 && Rank <= 8, "cubecc: tensors have 1 to 8 dimensions");

public:
  using element_type = T;
  static constexpr int rank = Rank;
  static constexpr ir::Scalar element = dsl::detail::ScalarTraits<T>::scalar;

  /// `tensor`, after checking its element type and rank: throws runtime::Error (InvalidArgument)
  /// naming both when they differ.
  explicit TypedTensor(Tensor tensor) : tensor_(std::move(tensor)) {
    if (tensor_.element() != element || tensor_.rank() != static_cast<size_t>(Rank))
      throw runtime::Error(runtime::ErrorKind::InvalidArgument,
                           "TypedTensor<" + std::string(ir::scalar_name(element)) + ", " +
                               std::to_string(Rank) + ">: got " + tensor_.describe());
  }
  /// All of `buffer` (Rank 1), or its first product(shape) elements, row-major.
  explicit TypedTensor(runtime::Buffer &&buffer) requires(Rank == 1)
      : TypedTensor(Tensor(std::move(buffer))) {}
  TypedTensor(runtime::Buffer &&buffer, const std::array<uint64_t, Rank> &shape)
      : TypedTensor(Tensor(std::move(buffer), std::vector<uint64_t>(shape.begin(), shape.end()))) {}

  const Tensor &tensor() const { return tensor_; }
  operator const Tensor &() const { return tensor_; } // NOLINT(google-explicit-constructor)
  const runtime::Buffer &buffer() const { return tensor_.buffer(); }
  runtime::Buffer &buffer() { return const_cast<runtime::Buffer &>(tensor_.buffer()); }
  std::span<const uint64_t> shape() const { return tensor_.shape(); }
  uint64_t size() const { return tensor_.size(); }

private:
  Tensor tensor_;
};

/// A kernel handle that remembers the DSL function it was traced from, for typed launches. It is
/// a KernelHandle too: Runtime::launch takes it as before.
template <auto F> class TypedKernel : public runtime::KernelHandle {
public:
  TypedKernel() = default;
  explicit TypedKernel(runtime::KernelHandle handle) : runtime::KernelHandle(std::move(handle)) {}
};

namespace detail {

/// Every option of a KernelOptions, spelled so that two different option sets never give the
/// same text (names are length-prefixed). Part of a kernel's cache key.
inline std::string kernel_options_key(const dsl::KernelOptions &options) {
  std::string key = "workgroup=" + std::to_string(options.workgroup[0]) + "," +
                    std::to_string(options.workgroup[1]) + "," +
                    std::to_string(options.workgroup[2]) + ";names=";
  for (const std::string &name : options.parameter_names)
    key += std::to_string(name.size()) + ":" + name;
  return key;
}

/// F's address as text: what tells two kernel functions apart in a cache key.
template <auto F> std::string function_key() {
  char text[2 + 2 * sizeof(uintptr_t) + 1];
  uintptr_t address = reinterpret_cast<uintptr_t>(F);
  text[0] = '0';
  text[1] = 'x';
  for (size_t i = 0; i < 2 * sizeof(uintptr_t); ++i)
    text[2 + i] = "0123456789abcdef"[(address >> (4 * (2 * sizeof(uintptr_t) - 1 - i))) & 0xf];
  text[sizeof(text) - 1] = '\0';
  return text;
}

//===- What a parameter is and what an argument is
//---------------------------------------------===//

template <class P> struct ParameterTraits {
  static constexpr bool tensor = false, array = false, scalar = false;
};
template <class E, int R> struct ParameterTraits<dsl::Tensor<E, R>> {
  static constexpr bool tensor = true, array = false, scalar = false;
  using element = std::remove_const_t<E>;
  static constexpr int rank = R;
  static constexpr size_t ir_parameters = 1 + 2 * static_cast<size_t>(R);
};
template <class E> struct ParameterTraits<dsl::Array<E>> {
  static constexpr bool tensor = false, array = true, scalar = false;
  using element = std::remove_const_t<E>;
  static constexpr int rank = 1;
  static constexpr size_t ir_parameters = 1;
};
template <class V> struct ParameterTraits<dsl::Scalar<V>> {
  static constexpr bool tensor = false, array = false, scalar = true;
  using value = V;
  static constexpr size_t ir_parameters = 1;
};

template <class A> struct IsTypedTensor : std::false_type {};
template <class T, int R> struct IsTypedTensor<TypedTensor<T, R>> : std::true_type {};
template <class A> struct IsStdArray : std::false_type {};
template <class T, size_t N> struct IsStdArray<std::array<T, N>> : std::true_type {};

/// Whether a variable of type From initializes a To by `To{from}` (no narrowing).
template <class To, class From>
concept ConvertsWithoutNarrowing = requires(From from) {
  To{from};
};

/// Whether an argument of type A can be the value of a Scalar<V> parameter.
template <class V, class A> constexpr bool scalar_accepts() {
  using S = dsl::scalar_of<V>;
  constexpr int lanes = dsl::lanes_of<V>;
  if constexpr (lanes == 1) {
    if constexpr (!std::is_arithmetic_v<A>)
      return false;
    else if constexpr (std::is_same_v<S, dsl::f16> || std::is_same_v<S, dsl::bf16>)
      return ConvertsWithoutNarrowing<float, A>;
    else
      return ConvertsWithoutNarrowing<S, A>;
  } else if constexpr (IsStdArray<A>::value) {
    return std::tuple_size_v<A> == static_cast<size_t>(lanes) &&
           scalar_accepts<S, typename A::value_type>();
  } else {
    return false;
  }
}

enum class Mismatch {
  None,
  ElementType,     ///< a TypedTensor of another element type
  Rank,            ///< a TypedTensor of another rank, or a Buffer for a tensor of rank > 1
  NotAMemory,      ///< a value, or something else, for a Tensor or Array parameter
  NotAValue,       ///< a tensor or buffer for a Scalar parameter
  NarrowingScalar, ///< a value whose type does not convert without narrowing
};

template <class P, class A> constexpr Mismatch mismatch() {
  using Traits = ParameterTraits<P>;
  if constexpr (Traits::tensor || Traits::array) {
    if constexpr (IsTypedTensor<A>::value) {
      if constexpr (!std::is_same_v<typename A::element_type, typename Traits::element>)
        return Mismatch::ElementType;
      else if constexpr (A::rank != Traits::rank)
        return Mismatch::Rank;
      else
        return Mismatch::None;
    } else if constexpr (std::is_same_v<A, runtime::Buffer>) {
      return Traits::rank == 1 ? Mismatch::None : Mismatch::Rank;
    } else if constexpr (std::is_same_v<A, Tensor>) {
      return Mismatch::None; // checked at launch
    } else {
      return Mismatch::NotAMemory;
    }
  } else {
    if constexpr (IsTypedTensor<A>::value || std::is_same_v<A, runtime::Buffer> ||
                  std::is_same_v<A, Tensor>)
      return Mismatch::NotAValue;
    else if constexpr (!scalar_accepts<typename Traits::value, A>())
      return Mismatch::NarrowingScalar;
    else
      return Mismatch::None;
  }
}

// The position in the message: a static_assert's message is a literal, so one per position.
#define CUBECC_LAUNCH_POSITION(n)                                                                  \
  static_assert(Position != n || m == Mismatch::None,                                              \
                "cubecc: launch argument " #n " does not fit kernel parameter " #n                 \
                " (the expected Parameter and the given Argument are in the [with ...] above)")

/// Compile-time check of the argument at `Position` for a parameter of type `Parameter`.
template <size_t Position, class Parameter, class Argument> constexpr bool check_argument() {
  constexpr Mismatch m = mismatch<Parameter, Argument>();
  CUBECC_LAUNCH_POSITION(0);
  CUBECC_LAUNCH_POSITION(1);
  CUBECC_LAUNCH_POSITION(2);
  CUBECC_LAUNCH_POSITION(3);
  CUBECC_LAUNCH_POSITION(4);
  CUBECC_LAUNCH_POSITION(5);
  CUBECC_LAUNCH_POSITION(6);
  CUBECC_LAUNCH_POSITION(7);
  CUBECC_LAUNCH_POSITION(8);
  CUBECC_LAUNCH_POSITION(9);
  CUBECC_LAUNCH_POSITION(10);
  CUBECC_LAUNCH_POSITION(11);
  CUBECC_LAUNCH_POSITION(12);
  CUBECC_LAUNCH_POSITION(13);
  CUBECC_LAUNCH_POSITION(14);
  CUBECC_LAUNCH_POSITION(15);
  static_assert(Position < 16 || m == Mismatch::None,
                "cubecc: a launch argument does not fit its kernel parameter (the Position, the "
                "expected Parameter and the given Argument are in the [with ...] above)");
  static_assert(m != Mismatch::ElementType,
                "cubecc: the tensor's element type is not the parameter's");
  static_assert(m != Mismatch::Rank, "cubecc: the tensor's rank is not the parameter's (a Buffer "
                                     "stands only for a tensor of rank 1)");
  static_assert(m != Mismatch::NotAMemory,
                "cubecc: a dsl::Tensor or dsl::Array parameter takes a cubecc::Tensor, a "
                "cubecc::TypedTensor or a Buffer, not a value");
  static_assert(m != Mismatch::NotAValue,
                "cubecc: a dsl::Scalar parameter takes a value, not a tensor or buffer");
  static_assert(m != Mismatch::NarrowingScalar,
                "cubecc: the scalar argument does not convert to the parameter's type without "
                "narrowing (pass a value of the parameter's type, e.g. 2.0f for a float, 3u for "
                "a uint32_t)");
  return m == Mismatch::None;
}
#undef CUBECC_LAUNCH_POSITION

template <class F> struct KernelSignature;
template <class... P> struct KernelSignature<void (*)(P...)> {
  using parameters = std::tuple<std::decay_t<P>...>;
  static constexpr size_t count = sizeof...(P);
  static constexpr size_t ir_parameters =
      (size_t{0} + ... + ParameterTraits<std::decay_t<P>>::ir_parameters);
};

[[noreturn]] inline void launch_error(const runtime::KernelHandle &kernel, size_t position,
                                      const std::string &what) {
  throw runtime::Error(runtime::ErrorKind::InvalidArgument,
                       "launch of kernel '" + (kernel.valid() ? kernel.name() : std::string()) +
                           "': argument " + std::to_string(position) + ": " + what);
}

inline uint32_t u32_of(const runtime::KernelHandle &kernel, size_t position, uint64_t value,
                       const char *what, size_t d) {
  if (value > std::numeric_limits<uint32_t>::max())
    launch_error(kernel, position,
                 std::string(what) + " " + std::to_string(d) + " is " + std::to_string(value) +
                     ", more than the kernel's u32 " + what + "s hold");
  return static_cast<uint32_t>(value);
}

/// Appends the IR arguments of one argument `a` for parameter P at `values[next...]`.
template <class P, class A>
void bind(const runtime::KernelHandle &kernel, size_t position, const A &a,
          runtime::ArgumentValue *values, size_t &next) {
  using Traits = ParameterTraits<P>;
  using runtime::ArgumentValue;
  if constexpr (Traits::tensor || Traits::array) {
    constexpr ir::Scalar element = dsl::detail::ScalarTraits<typename Traits::element>::scalar;
    const Tensor *tensor = nullptr;
    if constexpr (std::is_same_v<A, runtime::Buffer>) {
      values[next++] = ArgumentValue(a);
      if constexpr (Traits::tensor) {
        values[next++] = ArgumentValue(u32_of(kernel, position, a.size(), "shape", 0));
        values[next++] = ArgumentValue(uint32_t{1});
      }
      return;
    } else if constexpr (IsTypedTensor<A>::value) {
      tensor = &a.tensor();
    } else {
      tensor = &a;
      if (!tensor->valid())
        launch_error(kernel, position, "the tensor is empty (default-constructed)");
      if (tensor->element() != element || tensor->rank() != static_cast<size_t>(Traits::rank))
        launch_error(kernel, position,
                     std::string("the parameter is a ") + (Traits::tensor ? "Tensor" : "Array") +
                         " of " + std::string(ir::scalar_name(element)) + " with " +
                         std::to_string(Traits::rank) + " dimension(s); got " + tensor->describe());
    }
    const runtime::Buffer &buffer = tensor->buffer();
    if constexpr (Traits::array) {
      if (!tensor->contiguous())
        launch_error(kernel, position,
                     "an Array parameter takes contiguous elements; got " + tensor->describe());
      values[next++] = tensor->offset() == 0 && tensor->size() == buffer.size()
                           ? ArgumentValue(buffer)
                           : ArgumentValue::range(buffer, tensor->offset(), tensor->size());
    } else {
      values[next++] = tensor->offset() == 0 ? ArgumentValue(buffer)
                                             : ArgumentValue::range(buffer, tensor->offset(),
                                                                    ArgumentValue::kWholeBuffer);
      for (size_t d = 0; d < tensor->rank(); ++d)
        values[next++] = ArgumentValue(u32_of(kernel, position, tensor->shape(d), "shape", d));
      for (size_t d = 0; d < tensor->rank(); ++d)
        values[next++] = ArgumentValue(u32_of(kernel, position, tensor->stride(d), "stride", d));
    }
  } else {
    using V = typename Traits::value;
    using S = dsl::scalar_of<V>;
    using Host =
        std::conditional_t<std::is_same_v<S, dsl::f16> || std::is_same_v<S, dsl::bf16>, float, S>;
    if constexpr (dsl::lanes_of<V> == 1) {
      values[next++] = ArgumentValue(Host{a});
    } else {
      std::array<Host, std::tuple_size_v<A>> lanes{};
      for (size_t i = 0; i < lanes.size(); ++i)
        lanes[i] = Host{a[i]};
      values[next++] = ArgumentValue(lanes);
    }
  }
}

template <class Queue, class Signature, class... Args, size_t... I>
void launch_bound(Queue &queue, const runtime::KernelHandle &kernel, std::array<uint32_t, 3> grid,
                  std::index_sequence<I...>, const Args &...args) {
  constexpr size_t n = Signature::ir_parameters;
  std::array<runtime::ArgumentValue, n> values = [] {
    return [&]<size_t... J>(std::index_sequence<J...>) {
      return std::array<runtime::ArgumentValue, n>{((void)J, runtime::ArgumentValue(0u))...};
    }
    (std::make_index_sequence<n>{});
  }();
  size_t next = 0;
  (bind<std::tuple_element_t<I, typename Signature::parameters>>(kernel, I, args, values.data(),
                                                                 next),
   ...);
  queue.launch_values(kernel, grid, std::span<const runtime::ArgumentValue>(values));
}

/// The index in dsl::registered_kernels() of the one kernel registered for F.
template <auto F> size_t registered_index() {
  const auto trace = &dsl::detail::trace_registered<F>;
  const std::vector<dsl::RegisteredKernel> &kernels = dsl::registered_kernels();
  size_t found = kernels.size();
  std::string names;
  for (size_t i = 0; i < kernels.size(); ++i)
    if (kernels[i].trace == trace) {
      names += (names.empty() ? "'" : ", '") + kernels[i].name + "'";
      if (found == kernels.size())
        found = i;
      else
        throw runtime::Error(runtime::ErrorKind::InvalidArgument,
                             "cubecc::launch<F>: F is registered more than once (" + names +
                                 "): say which with cubecc::kernel<F>(rt, name, options) and "
                                 "cubecc::launch(rt, kernel, grid, ...)");
    }
  if (found == kernels.size())
    throw runtime::Error(runtime::ErrorKind::NotFound,
                         "cubecc::launch<F>: no kernel is registered for F (register it with "
                         "dsl::register_kernel<F>(name, configuration, options), or get it with "
                         "cubecc::kernel<F>(rt, name, options))");
  return found;
}

} // namespace detail

/// The kernel registered for F (dsl::register_kernel<F>) on `queue`: traced on the first request,
/// then found in the runtime's kernel cache. Throws runtime::Error: NotFound when nothing is
/// registered for F, InvalidArgument when F is registered more than once, Compile when it does
/// not trace.
template <auto F, class Queue> TypedKernel<F> registered_kernel(Queue &queue) {
  static const size_t index = detail::registered_index<F>();
  static const std::string key = [] {
    const dsl::RegisteredKernel &k = dsl::registered_kernels()[index];
    return "cubecc.hpp/registered/" + detail::function_key<F>() + "/" + k.name + "/" +
           k.configuration + "/" + detail::kernel_options_key(k.options);
  }();
  return TypedKernel<F>(queue.kernel(key, [&]() -> std::unique_ptr<ir::Module> {
    const dsl::RegisteredKernel &k = dsl::registered_kernels()[index];
    auto module = std::make_unique<ir::Module>();
    std::vector<ir::Diagnostic> errors;
    k.trace(*module, k, errors);
    if (!errors.empty())
      throw runtime::Error(runtime::ErrorKind::Compile,
                           "kernel '" + k.name + "' does not trace:\n" + ir::to_string(errors),
                           errors);
    return module;
  }));
}

/// Queues `kernel` (traced from F) on `queue` with `num_workgroups` workgroups, binding `args`
/// to F's parameters (see the top of this file). Throws runtime::Error (InvalidArgument) for
/// what only the launch can check, naming the kernel and the argument.
template <class Queue, auto F, class... Args>
void launch(Queue &queue, const TypedKernel<F> &kernel, std::array<uint32_t, 3> num_workgroups,
            const Args &...args) {
  using Signature = detail::KernelSignature<decltype(F)>;
  static_assert(sizeof...(Args) >= Signature::count,
                "cubecc: too few launch arguments: give one per parameter of the kernel function");
  static_assert(sizeof...(Args) <= Signature::count,
                "cubecc: too many launch arguments: give one per parameter of the kernel function");
  if constexpr (sizeof...(Args) == Signature::count) {
    constexpr bool fits = []<size_t... I>(std::index_sequence<I...>) {
      return (detail::check_argument<I, std::tuple_element_t<I, typename Signature::parameters>,
                                     std::decay_t<Args>>() &&
              ...);
    }
    (std::index_sequence_for<Args...>{});
    if constexpr (fits)
      detail::launch_bound<Queue, Signature>(queue, kernel, num_workgroups,
                                             std::index_sequence_for<Args...>{}, args...);
  }
}

/// The same with the kernel registered for F (registered_kernel<F>).
template <auto F, class Queue, class... Args>
void launch(Queue &queue, std::array<uint32_t, 3> num_workgroups, const Args &...args) {
  launch(queue, registered_kernel<F>(queue), num_workgroups, args...);
}

} // namespace cubecc
