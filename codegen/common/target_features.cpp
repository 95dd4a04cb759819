//===- target_features.cpp - The targets' feature sets, their fingerprints and their matching
//---===//
//
// Apart from the backends: the bundle reader compares what a stored binary relies on with a
// device's features (environments/, whose fuzz build links no backend).
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/codegen/target.h"

#include "cubecc/ir/types.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <charconv>

namespace cubecc::codegen {

TargetFeatures TargetFeatures::vulkan_baseline() {
  TargetFeatures f; // lavapipe (Mesa 22.3, Vulkan 1.3): what CI and the tests run on
  f.float32_atomic_add = true;
  f.float32_atomics = true;
  f.float32_atomic_min_max = true;
  f.matrix_note = "lavapipe offers no cooperative matrices; cubecc writes them with "
                  "VK_NV_cooperative_matrix for a device that lists the shape (offline: target "
                  "vulkan:nvidia)";
  return f;
}

TargetFeatures TargetFeatures::vulkan_nvidia() {
  TargetFeatures f = vulkan_baseline();
  f.target = "vulkan:nvidia";
  f.fused_fma = true; // GLSL.std.450 Fma is one fused operation on NVIDIA GPUs
  f.subgroup_size = 32;
  f.linear_subgroups = true;
  f.max_shared_bytes = 49152;
  f.matrix_shapes = ir::matrix_shape_mask(
      [](const ir::MatrixShape &s) { return s.a == ir::Scalar::F16 && s.b == ir::Scalar::F16; });
  f.matrix_note = "VK_NV_cooperative_matrix has f16 operands here (SPIR-V 1.5 has no bf16 or "
                  "fp8 type)";
  return f;
}

TargetFeatures TargetFeatures::metal_baseline() {
  TargetFeatures f;
  f.target = "vulkan (for MSL)";
  f.float64 = false;
  f.int64_atomics = false;
  f.fused_fma = true;
  f.subgroup_size = 32; // Apple GPUs' SIMD groups, consecutive thread indices
  f.linear_subgroups = true;
  f.max_param_block_bytes = 4096; // SPIRV-Cross passes push constants as a constant buffer
  return f;
}

namespace {

/// The flags of TargetFeatures in fingerprint order, with what a kernel relying on one needs.
struct FlagField {
  bool TargetFeatures::*member;
  const char *needs;
};
constexpr FlagField kFlagFields[] = {
    {&TargetFeatures::int8, "8-bit integers"},
    {&TargetFeatures::int16, "16-bit integers"},
    {&TargetFeatures::int64, "64-bit integers"},
    {&TargetFeatures::float16, "f16"},
    {&TargetFeatures::bfloat16, "bf16 storage"},
    {&TargetFeatures::float64, "f64"},
    {&TargetFeatures::int64_atomics, "64-bit atomics"},
    {&TargetFeatures::float32_atomic_add, "f32 atomic add"},
    {&TargetFeatures::float32_atomics, "f32 atomic exchange"},
    {&TargetFeatures::float64_atomic_add, "f64 atomic add"},
    {&TargetFeatures::narrow_atomics, "8- and 16-bit atomics"},
    {&TargetFeatures::float32_atomic_min_max, "f32 atomic min and max"},
    {&TargetFeatures::fused_fma, "a fused fma"},
    {&TargetFeatures::signed_zero_inf_nan_preserve, "signed zeros, infinities and NaNs kept"},
    {&TargetFeatures::subgroup_arithmetic, "subgroup arithmetic"},
    {&TargetFeatures::subgroup_extended_types, "subgroup ops on 8-, 16- and 64-bit types"},
    {&TargetFeatures::subgroup_shuffle, "subgroup shuffles"},
    {&TargetFeatures::subgroup_ballot, "subgroup ballots and votes"},
    {&TargetFeatures::linear_subgroups, "subgroups of consecutive invocations"},
    {&TargetFeatures::async_copy, "asynchronous copies"},
};

/// The numeric fields in fingerprint order (const or not, as `f` is).
template <class Features> auto numeric_fields(Features &f) {
  return std::array{&f.subgroup_size,
                    &f.matrix_shapes,
                    &f.max_shared_bytes,
                    &f.max_param_block_bytes,
                    &f.max_workgroup_invocations,
                    &f.max_workgroup_size[0],
                    &f.max_workgroup_size[1],
                    &f.max_workgroup_size[2]};
}

} // namespace

std::string TargetFeatures::fingerprint() const {
  // Every field codegen reads, in declaration order; `target` (a name for errors) is left out.
  std::string s;
  for (const FlagField &flag : kFlagFields)
    s += this->*flag.member ? '1' : '0';
  for (const uint32_t *n : numeric_fields(*this))
    s += "." + std::to_string(*n);
  return s;
}

std::optional<TargetFeatures> TargetFeatures::from_fingerprint(std::string_view text) {
  TargetFeatures f;
  constexpr size_t kFlags = std::size(kFlagFields);
  if (text.size() < kFlags)
    return std::nullopt;
  for (size_t i = 0; i < kFlags; ++i) {
    if (text[i] != '0' && text[i] != '1')
      return std::nullopt;
    f.*kFlagFields[i].member = text[i] == '1';
  }
  text.remove_prefix(kFlags);
  for (uint32_t *n : numeric_fields(f)) {
    if (text.empty() || text[0] != '.')
      return std::nullopt;
    text.remove_prefix(1);
    const char *end = text.data() + text.size();
    auto [next, error] = std::from_chars(text.data(), end, *n);
    // fingerprint() writes plain decimals: no sign, no leading zeros, no empty number
    if (error != std::errc() || next == text.data() || (*n != 0 && text[0] == '0') ||
        (*n == 0 && next - text.data() != 1))
      return std::nullopt;
    text.remove_prefix(static_cast<size_t>(next - text.data()));
  }
  if (!text.empty() || uint64_t(f.matrix_shapes) >> ir::matrix_shapes().size() != 0)
    return std::nullopt;
  return f;
}

namespace {

/// What `relies` needs and `device` lacks, or everything it needs without a device.
std::string needs_of(const TargetFeatures &relies, const TargetFeatures *device) {
  std::vector<std::string> needs;
  for (const FlagField &flag : kFlagFields)
    if (relies.*flag.member && !(device && device->*flag.member))
      needs.emplace_back(flag.needs);
  if (relies.subgroup_size != 0 && !device)
    needs.push_back(fmt::format("subgroups of {} invocations", relies.subgroup_size));
  else if (relies.subgroup_size != 0 && device->subgroup_size != relies.subgroup_size)
    needs.push_back(fmt::format("subgroups of {} invocations (the device's have {})",
                                relies.subgroup_size,
                                device->subgroup_size ? std::to_string(device->subgroup_size)
                                                      : std::string("no fixed size")));
  if (uint32_t shapes = relies.matrix_shapes & ~(device ? device->matrix_shapes : 0u))
    needs.push_back(fmt::format("the matrix shapes {}", ir::matrix_shapes_text(shapes)));
  return fmt::format("{}", fmt::join(needs, "; "));
}

} // namespace

std::string TargetFeatures::unmet_on(const TargetFeatures &device) const {
  return needs_of(*this, &device);
}

std::string TargetFeatures::needs() const {
  return needs_of(*this, nullptr);
}

} // namespace cubecc::codegen
