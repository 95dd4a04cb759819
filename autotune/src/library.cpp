//===- library.cpp - Tuning a kernel library's declared tunables ------------------------------===//
#include "cubecc/autotune/library.h"

#include "cubecc/ir/float16.h"
#include "cubecc/ir/float_formats.h"
#include "cubecc/ir/ir.h"

#include <fmt/format.h>

#include <cstring>

namespace cubecc::autotune {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <class T> void put(std::vector<uint8_t> &bytes, uint64_t i, T value) {
  std::memcpy(bytes.data() + i * sizeof(T), &value, sizeof(T));
}

} // namespace

std::vector<uint8_t> fill_bytes(ir::Scalar element, uint64_t count, uint64_t buffer) {
  const size_t element_bytes = std::max<size_t>(ir::scalar_bits(element) / 8, 1);
  std::vector<uint8_t> bytes(count * element_bytes);
  const uint64_t seed = splitmix64(buffer + 1) ^ 0x6375626563637475ull;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t x = splitmix64(seed + i);
    const double unit = static_cast<double>(x >> 11) * 0x1.0p-53; // [0, 1)
    const double symmetric = 2 * unit - 1;                        // [-1, 1)
    switch (element) {
    case ir::Scalar::F16:
      put(bytes, i, ir::float_to_f16_bits(static_cast<float>(symmetric)));
      break;
    case ir::Scalar::BF16:
      put(bytes, i, ir::float_to_bf16_bits(static_cast<float>(symmetric)));
      break;
    case ir::Scalar::F32:
      put(bytes, i, static_cast<float>(symmetric));
      break;
    case ir::Scalar::F64:
      put(bytes, i, symmetric);
      break;
    case ir::Scalar::Bool:
      bytes[i] = x & 1;
      break;
    case ir::Scalar::E4M3: // [-1, 1) rounded to fp8: never a NaN (integers would give some)
    case ir::Scalar::E5M2:
      bytes[i] = static_cast<uint8_t>(ir::storage_float_from_double(element, symmetric));
      break;
    default: {
      const int64_t value = ir::is_signed(element) ? static_cast<int64_t>(x % 129) - 64
                                                   : static_cast<int64_t>(x % 129);
      std::memcpy(bytes.data() + i * element_bytes, &value, element_bytes); // little-endian
    }
    }
  }
  return bytes;
}

Tunable make_tunable(const LibraryTunable &library) {
  std::vector<Variant> variants;
  for (size_t i = 0; i < library.variants.size(); ++i) {
    const LibraryTunable::Variant &v = library.variants[i];
    Variant variant;
    variant.configuration = v.configuration;
    variant.load = [&library, i](runtime::Runtime &rt) {
      const LibraryTunable::Variant &v = library.variants[i];
      std::string key = fmt::format("autotune:{}:{}:{}", library.name, v.kernel, v.configuration);
      return rt.kernel(key, [&]() -> std::unique_ptr<ir::Module> {
        std::unique_ptr<ir::Module> module = v.trace();
        if (!module || module->kernels().size() != 1)
          throw runtime::Error(runtime::ErrorKind::Compile,
                               fmt::format("tunable '{}': tracing variant '{}' gave no kernel",
                                           library.name, v.kernel));
        return module;
      });
    };
    variant.valid = [&library, i](const Problem &problem) {
      LaunchDescription launch;
      return library.describe(i, problem.shape, launch);
    };
    variants.push_back(std::move(variant));
  }
  return Tunable(library.name, library.dimensions, std::move(variants));
}

struct LibraryBenchmark::VariantState {
  LaunchDescription launch;
  std::vector<runtime::Buffer> buffers;
  std::vector<std::vector<uint8_t>> initial; ///< each buffer's contents before any run
  std::vector<bool> writable;
  std::vector<runtime::ArgumentValue> arguments; ///< in parameter order
};

LibraryBenchmark::LibraryBenchmark(const LibraryTunable &library) : library_(library) {}
LibraryBenchmark::~LibraryBenchmark() = default;

void LibraryBenchmark::prepare(runtime::Runtime &rt, const Problem &problem) {
  shape_ = problem.shape;
  states_.clear();
  states_.resize(library_.variants.size());
}

LibraryBenchmark::VariantState &LibraryBenchmark::state(runtime::Runtime &rt, size_t variant,
                                                        const runtime::KernelHandle &kernel) {
  std::unique_ptr<VariantState> &slot = states_.at(variant);
  if (slot)
    return *slot;
  auto s = std::make_unique<VariantState>();
  const std::string what = fmt::format("tunable '{}': variant '{}' (kernel '{}')", library_.name,
                                       library_.variants[variant].configuration, kernel.name());
  if (!library_.describe(variant, shape_, s->launch))
    throw runtime::Error(runtime::ErrorKind::InvalidArgument, what + ": not valid for this shape");
  const codegen::KernelAbi &abi = kernel.abi();
  size_t buffer_params = 0, value_params = 0;
  for (const codegen::ParamSlot &p : abi.params)
    (p.kind == codegen::ParamSlot::Buffer ? buffer_params : value_params)++;
  if (buffer_params != s->launch.buffer_elements.size() || value_params != s->launch.values.size())
    throw runtime::Error(runtime::ErrorKind::InvalidArgument,
                         fmt::format("{}: the kernel has {} buffer and {} value parameters, the "
                                     "tunable describes {} and {}",
                                     what, buffer_params, value_params,
                                     s->launch.buffer_elements.size(), s->launch.values.size()));
  s->buffers.reserve(buffer_params);
  for (const codegen::ParamSlot &p : abi.params) {
    if (p.kind != codegen::ParamSlot::Buffer)
      continue;
    const size_t b = s->buffers.size();
    const ir::Scalar element = p.type.element();
    const uint64_t count = s->launch.buffer_elements[b];
    // The library's numbers are not trusted: the bytes must fit the device before any is made.
    const uint64_t element_bytes = std::max<uint64_t>(ir::scalar_bits(element) / 8, 1);
    const uint64_t limit = rt.info().max_buffer_bytes;
    if (count > (limit ? limit : UINT64_MAX) / element_bytes || count > SIZE_MAX / element_bytes)
      throw runtime::Error(runtime::ErrorKind::InvalidArgument,
                           fmt::format("{}: buffer {} is described with {} elements of {} bytes, "
                                       "more than the device's largest buffer ({} bytes)",
                                       what, b, count, element_bytes, limit));
    s->initial.push_back(fill_bytes(element, count, b));
    s->buffers.push_back(rt.allocate(element, count));
    rt.write(s->buffers.back(), s->initial.back().data(), s->initial.back().size());
    s->writable.push_back(p.type.access() != ir::Access::Read);
  }
  size_t b = 0, v = 0;
  for (const codegen::ParamSlot &p : abi.params) {
    if (p.kind == codegen::ParamSlot::Buffer) {
      s->arguments.emplace_back(s->buffers[b++]);
    } else {
      if (p.type.lanes() != 1)
        throw runtime::Error(runtime::ErrorKind::Unsupported,
                             fmt::format("{}: value parameter {} is a vector; tunables describe "
                                         "scalar values only",
                                         what, v));
      s->arguments.push_back(s->launch.values[v++]);
    }
  }
  slot = std::move(s);
  return *slot;
}

void LibraryBenchmark::run(runtime::Runtime &rt, size_t variant,
                           const runtime::KernelHandle &kernel) {
  VariantState &s = state(rt, variant, kernel);
  rt.launch_values(kernel, s.launch.grid, s.arguments);
}

void LibraryBenchmark::reset(runtime::Runtime &rt, size_t variant) {
  if (VariantState *s = states_.at(variant).get())
    for (size_t b = 0; b < s->buffers.size(); ++b)
      rt.write(s->buffers[b], s->initial[b].data(), s->initial[b].size());
}

std::vector<Output> LibraryBenchmark::outputs(runtime::Runtime &rt, size_t variant) {
  std::vector<Output> out;
  if (VariantState *s = states_.at(variant).get())
    for (size_t b = 0; b < s->buffers.size(); ++b)
      if (s->writable[b]) {
        Output &o = out.emplace_back();
        o.element = s->buffers[b].element();
        o.bytes.resize(s->buffers[b].bytes());
        rt.read(s->buffers[b], o.bytes.data(), o.bytes.size());
      }
  return out;
}

std::vector<TuningRecord> tune_library(runtime::Runtime &rt, const LibraryTunable &library,
                                       const TuneOptions &options) {
  const Tunable tunable = make_tunable(library);
  TuneOptions o = options;
  o.relative_tolerance = library.relative_tolerance;
  std::vector<TuningRecord> records;
  for (const std::vector<uint64_t> &anchor : library.anchors) {
    LibraryBenchmark benchmark(library);
    records.push_back(tune(rt, tunable, Problem{anchor, library.element_types}, benchmark, o));
  }
  return records;
}

} // namespace cubecc::autotune
