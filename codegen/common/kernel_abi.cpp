//===- kernel_abi.cpp - The parameter layout shared by every backend and device --------------===//
#include "cubecc/codegen/kernel_abi.h"
#include "cubecc/codegen/target.h"

#include "cubecc/ir/ir.h"

#include <fmt/format.h>

#include <cstring>
#include <utility>

namespace cubecc::codegen {

KernelAbi KernelAbi::of(const ir::Kernel &kernel) {
  KernelAbi abi;
  abi.name = kernel.name();
  abi.workgroup_size = kernel.workgroup_size();
  uint32_t offset = 0;
  for (unsigned i = 0; i < kernel.num_parameters(); ++i) {
    ParamSlot slot;
    slot.type = kernel.parameter(i)->type();
    if (slot.type.kind() == ir::TypeKind::Buffer) {
      slot.kind = ParamSlot::Buffer;
      slot.binding = abi.num_buffers++;
    } else {
      slot.kind = ParamSlot::Value;
      slot.lane_bytes = ir::scalar_bits(slot.type.element()) == 64 ? 8 : 4;
      offset = (offset + slot.lane_bytes - 1) / slot.lane_bytes * slot.lane_bytes;
      slot.offset = offset;
      offset += slot.lane_bytes * slot.type.lanes();
    }
    abi.params.push_back(slot);
  }
  abi.param_block_bytes = (offset + 3) / 4 * 4;
  for (const ir::Operation *op : kernel.body()) { // shared.alloc is only at the top level
    if (op->opcode() == ir::Opcode::SharedAlloc)
      abi.shared_bytes += padded_shared_bytes(op->result()->type());
  }
  return abi;
}

std::string launch_shape_difference(const KernelAbi &actual, std::string_view actual_name,
                                    const KernelAbi &expected, std::string_view expected_name) {
  const auto &a = actual.workgroup_size, &e = expected.workgroup_size;
  if (a != e)
    return fmt::format("{}'s workgroup size ({}, {}, {}) is not {}'s ({}, {}, {})", actual_name,
                       a[0], a[1], a[2], expected_name, e[0], e[1], e[2]);
  // The first difference, named: a parameter's type or place, then the counts.
  auto slot = [](const ParamSlot &p) {
    return p.kind == ParamSlot::Buffer ? fmt::format("{} at binding {}", p.type.str(), p.binding)
                                       : fmt::format("{} at byte {} ({} bytes a lane)",
                                                     p.type.str(), p.offset, p.lane_bytes);
  };
  for (size_t i = 0; i < std::min(actual.params.size(), expected.params.size()); ++i) {
    const ParamSlot &p = actual.params[i], &q = expected.params[i];
    if (p.kind != q.kind || p.type != q.type || p.binding != q.binding || p.offset != q.offset ||
        p.lane_bytes != q.lane_bytes)
      return fmt::format("{}'s parameter {} is {}, {}'s is {}", actual_name, i, slot(p),
                         expected_name, slot(q));
  }
  if (actual.params.size() != expected.params.size() ||
      actual.num_buffers != expected.num_buffers ||
      actual.param_block_bytes != expected.param_block_bytes)
    return fmt::format("{}'s parameters ({}: {} buffers, {} bytes of values) are not {}'s ({}: "
                       "{} buffers, {} bytes)",
                       actual_name, actual.params.size(), actual.num_buffers,
                       actual.param_block_bytes, expected_name, expected.params.size(),
                       expected.num_buffers, expected.param_block_bytes);
  return {};
}

void pack_value(const ParamSlot &slot, const uint64_t *bits, uint8_t *block) {
  for (uint32_t lane = 0; lane < slot.type.lanes(); ++lane) {
    uint8_t *dst = block + slot.offset + lane * slot.lane_bytes;
    if (slot.lane_bytes == 8) {
      uint64_t v = bits[lane];
      std::memcpy(dst, &v, 8);
    } else {
      uint32_t v = static_cast<uint32_t>(bits[lane]);
      std::memcpy(dst, &v, 4);
    }
  }
}

bool check_target_support(const ir::Kernel &kernel, const TargetFeatures &features,
                          std::vector<ir::Diagnostic> &errors) {
  bool ok = true;
  std::optional<int64_t> required = kernel.attributes().get_int(ir::kSubgroupSizeAttribute);
  if (required && features.subgroup_size != 0 &&
      static_cast<uint64_t>(*required) != features.subgroup_size) {
    errors.push_back(ir::Diagnostic{
        "",
        0,
        0,
        fmt::format("kernel '{}' needs subgroups of {} invocations (its subgroup_size attribute), "
                    "which target '{}' does not support (its subgroups have {}); use a variant "
                    "of the kernel made for {}",
                    kernel.name(), *required, features.target, features.subgroup_size,
                    features.subgroup_size),
        {}});
    ok = false;
  }
  bool no_matrices_said = false, partial_subgroups_said = false;
  uint32_t shapes_said = 0; // one error per missing shape: its first op
  const auto &wg = kernel.workgroup_size();
  const uint64_t invocations = uint64_t(wg[0]) * wg[1] * wg[2];

  kernel.walk([&](const ir::Operation *op) {
    if (!ir::is_matrix_op(op->opcode()))
      return;
    auto refuse = [&](const std::string &what) {
      errors.push_back(ir::diagnostic_at(
          *kernel.module(), op,
          fmt::format("kernel '{}': op '{}' needs {}", kernel.name(), op->name(), what)));
      ok = false;
    };
    if (features.matrix_shapes == 0) {
      if (!std::exchange(no_matrices_said, true)) // one error says it for the kernel
        refuse(fmt::format("matrix ops, which target '{}' does not support: {}", features.target,
                           features.matrix_note));
      return;
    }
    // A matrix belongs to a whole subgroup (a 32-wide workgroup is half a 64-wide wavefront).
    if (features.subgroup_size != 0 && invocations % features.subgroup_size != 0 &&
        !std::exchange(partial_subgroups_said, true))
      refuse(fmt::format("whole subgroups (the workgroup has {} invocations, not a multiple of the "
                         "subgroup size {}), which target '{}' does not support",
                         invocations, features.subgroup_size, features.target));
    if (op->opcode() != ir::Opcode::MatrixMma)
      return;
    // (the verifier has checked that the shape is one of matrix_shapes())
    size_t index = ir::matrix_shape_index(op->operand(0)->type(), op->operand(1)->type(),
                                          op->operand(2)->type())
                       .value_or(0);
    if ((features.matrix_shapes | shapes_said) >> index & 1)
      return;
    shapes_said |= 1u << index;
    refuse(fmt::format("the matrix shape {}, which target '{}' does not support (it has {}; {})",
                       ir::matrix_shapes()[index].str(), features.target,
                       ir::matrix_shapes_text(features.matrix_shapes), features.matrix_note));
  });
  return ok;
}

bool check_target_limits(const ir::Kernel &kernel, const TargetFeatures &features,
                         std::vector<ir::Diagnostic> &errors) {
  bool ok = true;
  const auto &wg = kernel.workgroup_size();
  const uint64_t invocations = uint64_t(wg[0]) * wg[1] * wg[2];
  // Shared memory: located at the largest array (in a DSL kernel, its Shared<T, N> line).
  uint64_t shared_bytes = 0, largest_bytes = 0;
  const ir::Operation *largest = nullptr;
  kernel.walk([&](const ir::Operation *op) {
    if (op->opcode() != ir::Opcode::SharedAlloc)
      return;
    uint64_t bytes = KernelAbi::padded_shared_bytes(op->result()->type());
    shared_bytes += bytes;
    if (bytes > largest_bytes) {
      largest_bytes = bytes;
      largest = op;
    }
  });
  if (shared_bytes > features.max_shared_bytes) {
    errors.push_back(ir::diagnostic_at(
        *kernel.module(), largest,
        fmt::format("kernel '{}' uses {} bytes of shared memory; target '{}' has {} (the largest "
                    "array, here, has {} bytes): use smaller tiles or fewer arrays{}",
                    kernel.name(), shared_bytes, features.target, features.max_shared_bytes,
                    largest_bytes,
                    features.max_shared_bytes < 227 * 1024
                        ? ", or a target with more (CUDA sm_90 has 227 KiB)"
                        : "")));
    ok = false;
  }
  if (invocations > features.max_workgroup_invocations || wg[0] > features.max_workgroup_size[0] ||
      wg[1] > features.max_workgroup_size[1] || wg[2] > features.max_workgroup_size[2]) {
    ir::Diagnostic d;
    if (kernel.location().known()) {
      d.file = std::string(kernel.module()->file_name(kernel.location().file));
      d.line = kernel.location().line;
      d.col = kernel.location().col;
    }
    d.message = fmt::format("kernel '{}' has workgroup({}, {}, {}); target '{}' allows at most {} "
                            "invocations and ({}, {}, {}): declare a smaller workgroup",
                            kernel.name(), wg[0], wg[1], wg[2], features.target,
                            features.max_workgroup_invocations, features.max_workgroup_size[0],
                            features.max_workgroup_size[1], features.max_workgroup_size[2]);
    errors.push_back(std::move(d));
    ok = false;
  }
  return ok;
}

} // namespace cubecc::codegen
