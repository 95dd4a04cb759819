//===- spirv_interface.cpp - A SPIR-V module from outside, against its metadata ---------------===//
#include "spirv_interface.h"

#include "cubecc/ir/types.h"

#include <fmt/format.h>
#include <spirv/unified1/spirv.hpp11>

#include <map>
#include <optional>
#include <set>
#include <vector>

namespace cubecc::runtime {

namespace {

using spv::Op;

/// What the check needs of a module: one pass over its words.
struct ModuleFacts {
  struct EntryPoint {
    uint32_t model = 0, function = 0;
    std::string name;
  };
  struct Variable {
    uint32_t id = 0, pointer_type = 0, storage = 0;
  };
  std::vector<EntryPoint> entry_points;
  /// (function, execution mode) -> operands.
  std::multimap<std::pair<uint32_t, uint32_t>, std::vector<uint32_t>> modes;
  /// (id, decoration) -> first operand.
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> decorations;
  /// (struct, member) -> Offset.
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> member_offsets;
  /// Type and constant instructions by result id: the opcode and the operands after the id.
  std::map<uint32_t, std::pair<Op, std::vector<uint32_t>>> definitions;
  std::vector<Variable> variables; ///< at module scope
  bool workgroup_size_builtin = false;
  bool local_size_id = false;
};

/// A literal string's bytes from `words` (nul-terminated, padded to words).
std::string literal_string(std::span<const uint32_t> words) {
  std::string s;
  for (uint32_t w : words)
    for (int b = 0; b < 4; ++b) {
      char c = static_cast<char>((w >> (8 * b)) & 0xff);
      if (c == '\0')
        return s;
      s += c;
    }
  return s;
}

std::optional<ModuleFacts> read_facts(std::span<const uint32_t> words, std::string &error) {
  ModuleFacts facts;
  bool in_function = false;
  for (size_t i = 5; i < words.size();) {
    uint32_t count = words[i] >> 16;
    auto op = static_cast<Op>(words[i] & 0xffff);
    if (count == 0 || i + count > words.size()) {
      error = fmt::format("malformed SPIR-V at word {}", i);
      return std::nullopt;
    }
    std::span<const uint32_t> operands = words.subspan(i + 1, count - 1);
    i += count;
    switch (op) {
    case Op::OpEntryPoint:
      if (operands.size() >= 3)
        facts.entry_points.push_back(
            {operands[0], operands[1], literal_string(operands.subspan(2))});
      break;
    case Op::OpExecutionMode:
      if (operands.size() >= 2)
        facts.modes.emplace(std::pair{operands[0], operands[1]},
                            std::vector<uint32_t>(operands.begin() + 2, operands.end()));
      break;
    case Op::OpExecutionModeId:
      if (operands.size() >= 2 &&
          operands[1] == static_cast<uint32_t>(spv::ExecutionMode::LocalSizeId))
        facts.local_size_id = true;
      break;
    case Op::OpDecorate:
      if (operands.size() >= 2) {
        facts.decorations[{operands[0], operands[1]}] = operands.size() >= 3 ? operands[2] : 0;
        if (operands[1] == static_cast<uint32_t>(spv::Decoration::BuiltIn) &&
            operands.size() >= 3 &&
            operands[2] == static_cast<uint32_t>(spv::BuiltIn::WorkgroupSize))
          facts.workgroup_size_builtin = true;
      }
      break;
    case Op::OpMemberDecorate:
      if (operands.size() >= 4 && operands[2] == static_cast<uint32_t>(spv::Decoration::Offset))
        facts.member_offsets[{operands[0], operands[1]}] = operands[3];
      break;
    case Op::OpTypeBool:
    case Op::OpTypeInt:
    case Op::OpTypeFloat:
    case Op::OpTypeVector:
    case Op::OpTypeArray:
    case Op::OpTypeRuntimeArray:
    case Op::OpTypeStruct:
    case Op::OpTypePointer:
      if (!operands.empty())
        facts.definitions[operands[0]] = {op, {operands.begin() + 1, operands.end()}};
      break;
    case Op::OpConstant:
    case Op::OpSpecConstant:
      if (operands.size() >= 3) { // the type, then the value's words
        std::vector<uint32_t> value{operands[0]};
        value.insert(value.end(), operands.begin() + 2, operands.end());
        facts.definitions[operands[1]] = {op, std::move(value)};
      }
      break;
    case Op::OpVariable:
      if (!in_function && operands.size() >= 3)
        facts.variables.push_back({operands[1], operands[0], operands[2]});
      break;
    case Op::OpFunction:
      in_function = true;
      break;
    case Op::OpFunctionEnd:
      in_function = false;
      break;
    default:
      break;
    }
  }
  return facts;
}

const char *storage_class_name(uint32_t storage) {
  switch (static_cast<spv::StorageClass>(storage)) {
  case spv::StorageClass::UniformConstant:
    return "UniformConstant";
  case spv::StorageClass::Input:
    return "Input";
  case spv::StorageClass::Uniform:
    return "Uniform";
  case spv::StorageClass::Output:
    return "Output";
  case spv::StorageClass::Workgroup:
    return "Workgroup";
  case spv::StorageClass::PushConstant:
    return "PushConstant";
  case spv::StorageClass::StorageBuffer:
    return "StorageBuffer";
  default:
    return "another storage class";
  }
}

class InterfaceCheck {
public:
  InterfaceCheck(const ModuleFacts &facts, const codegen::KernelAbi &abi)
      : facts_(facts), abi_(abi) {}

  std::string run(uint32_t max_shared_bytes) {
    if (std::string why = entry_point(); !why.empty())
      return why;
    uint32_t num_bindings = abi_.num_buffers + (abi_.param_block_in_buffer ? 1 : 0);
    bool push_constants = abi_.param_block_bytes > 0 && !abi_.param_block_in_buffer;
    std::set<uint32_t> bindings;
    size_t push_blocks = 0;
    uint64_t shared_bytes = 0;
    for (const ModuleFacts::Variable &v : facts_.variables) {
      uint32_t pointee = pointee_of(v.pointer_type);
      switch (static_cast<spv::StorageClass>(v.storage)) {
      case spv::StorageClass::Private:
        break;
      case spv::StorageClass::Input:
        if (!facts_.decorations.count({v.id, static_cast<uint32_t>(spv::Decoration::BuiltIn)}))
          return fmt::format("input variable %{} is not a built-in", v.id);
        break;
      case spv::StorageClass::Workgroup: {
        std::optional<uint64_t> bytes = size_of(pointee, 0);
        if (!bytes)
          return fmt::format("Workgroup variable %{} has a type of no fixed size", v.id);
        shared_bytes += *bytes;
        if (shared_bytes > max_shared_bytes)
          return fmt::format("its Workgroup variables need more than the device's {} bytes of "
                             "shared memory",
                             max_shared_bytes);
        break;
      }
      case spv::StorageClass::PushConstant:
        if (!push_constants || ++push_blocks > 1)
          return fmt::format("it declares push constants (%{}) the launch metadata does not "
                             "have",
                             v.id);
        if (std::string why = value_block(pointee, "the push-constant block"); !why.empty())
          return why;
        break;
      case spv::StorageClass::StorageBuffer: {
        auto set =
            facts_.decorations.find({v.id, static_cast<uint32_t>(spv::Decoration::DescriptorSet)});
        auto binding =
            facts_.decorations.find({v.id, static_cast<uint32_t>(spv::Decoration::Binding)});
        if (set == facts_.decorations.end() || binding == facts_.decorations.end() ||
            set->second != 0 || binding->second >= num_bindings)
          return fmt::format("storage buffer %{} is not one of the {} bindings of set 0 the "
                             "launch metadata has",
                             v.id, num_bindings);
        if (!bindings.insert(binding->second).second)
          return fmt::format("two storage buffers at binding {}", binding->second);
        std::string why = binding->second < abi_.num_buffers
                              ? buffer(pointee, binding->second)
                              : value_block(pointee, "the parameter block");
        if (!why.empty())
          return why;
        break;
      }
      default:
        return fmt::format("it declares a {} variable (%{}), a resource the pipeline does not "
                           "have",
                           storage_class_name(v.storage), v.id);
      }
    }
    return {};
  }

private:
  std::string entry_point() {
    if (facts_.entry_points.size() != 1)
      return fmt::format("{} entry points, not one", facts_.entry_points.size());
    const ModuleFacts::EntryPoint &e = facts_.entry_points.front();
    if (e.model != static_cast<uint32_t>(spv::ExecutionModel::GLCompute) || e.name != "main")
      return "its entry point is not the compute entry point 'main'";
    if (facts_.local_size_id)
      return "its workgroup size is given by LocalSizeId, not LocalSize";
    if (facts_.workgroup_size_builtin)
      return "a WorkgroupSize built-in overrides its LocalSize";
    auto [first, last] = facts_.modes.equal_range(
        {e.function, static_cast<uint32_t>(spv::ExecutionMode::LocalSize)});
    if (first == last || std::next(first) != last || first->second.size() != 3)
      return "it does not declare one LocalSize";
    const std::vector<uint32_t> &size = first->second;
    if (size[0] != abi_.workgroup_size[0] || size[1] != abi_.workgroup_size[1] ||
        size[2] != abi_.workgroup_size[2])
      return fmt::format("its LocalSize ({}, {}, {}) is not the launch metadata's workgroup size "
                         "({}, {}, {})",
                         size[0], size[1], size[2], abi_.workgroup_size[0], abi_.workgroup_size[1],
                         abi_.workgroup_size[2]);
    return {};
  }

  const std::pair<Op, std::vector<uint32_t>> *definition(uint32_t id) const {
    auto it = facts_.definitions.find(id);
    return it == facts_.definitions.end() ? nullptr : &it->second;
  }

  uint32_t pointee_of(uint32_t pointer_type) const {
    const auto *d = definition(pointer_type);
    return d && d->first == Op::OpTypePointer && d->second.size() == 2 ? d->second[1] : 0;
  }

  /// The members of struct `id`, or null.
  const std::vector<uint32_t> *struct_members(uint32_t id) const {
    const auto *d = definition(id);
    return d && d->first == Op::OpTypeStruct ? &d->second : nullptr;
  }

  /// The width of integer or float type `id`, or 0.
  uint32_t scalar_width(uint32_t id) const {
    const auto *d = definition(id);
    if (!d || (d->first != Op::OpTypeInt && d->first != Op::OpTypeFloat) || d->second.empty())
      return 0;
    return d->second[0];
  }

  /// Bytes of a Workgroup variable of type `id` (bool counted as 4 bytes); nothing for types of
  /// no fixed size.
  std::optional<uint64_t> size_of(uint32_t id, int depth) const {
    const auto *d = definition(id);
    if (!d || depth > 16)
      return std::nullopt;
    const std::vector<uint32_t> &o = d->second;
    switch (d->first) {
    case Op::OpTypeBool:
      return 4;
    case Op::OpTypeInt:
    case Op::OpTypeFloat:
      return o.empty() ? std::nullopt : std::optional<uint64_t>(o[0] / 8);
    case Op::OpTypeVector: {
      auto element = o.size() == 2 ? size_of(o[0], depth + 1) : std::nullopt;
      return element ? std::optional<uint64_t>(*element * o[1]) : std::nullopt;
    }
    case Op::OpTypeArray: {
      const auto *length = o.size() == 2 ? definition(o[1]) : nullptr;
      if (!length || length->first != Op::OpConstant || length->second.size() < 2)
        return std::nullopt; // a specialization constant's length is not known here
      uint64_t n = length->second[1];
      if (length->second.size() >= 3)
        n |= uint64_t(length->second[2]) << 32;
      auto element = size_of(o[0], depth + 1);
      if (!element || (n > 0 && *element > (uint64_t(1) << 40) / n))
        return std::nullopt;
      return *element * n;
    }
    case Op::OpTypeStruct: {
      uint64_t total = 0;
      for (uint32_t member : o) {
        auto bytes = size_of(member, depth + 1);
        if (!bytes)
          return std::nullopt;
        total += *bytes;
      }
      return total;
    }
    default:
      return std::nullopt;
    }
  }

  /// A storage buffer: a struct of one runtime array of parameter `binding`'s element width.
  std::string buffer(uint32_t type, uint32_t binding) const {
    const codegen::ParamSlot *slot = nullptr;
    for (const codegen::ParamSlot &p : abi_.params)
      if (p.kind == codegen::ParamSlot::Buffer && p.binding == binding)
        slot = &p;
    if (!slot)
      return fmt::format("binding {} is no buffer parameter of the launch metadata", binding);
    const std::vector<uint32_t> *members = struct_members(type);
    const auto *array = members && members->size() == 1 ? definition((*members)[0]) : nullptr;
    auto offset = facts_.member_offsets.find({type, 0});
    if (!array || array->first != Op::OpTypeRuntimeArray || array->second.size() != 1 ||
        offset == facts_.member_offsets.end() || offset->second != 0)
      return fmt::format("the storage buffer at binding {} is not a runtime array at offset 0",
                         binding);
    uint32_t bytes = ir::scalar_bits(slot->type.element()) / 8;
    auto stride = facts_.decorations.find(
        {(*members)[0], static_cast<uint32_t>(spv::Decoration::ArrayStride)});
    if (stride == facts_.decorations.end() || stride->second != bytes ||
        scalar_width(array->second[0]) != bytes * 8)
      return fmt::format("the storage buffer at binding {} does not hold {}-byte elements, as its "
                         "parameter's type does",
                         binding, bytes);
    return {};
  }

  /// The parameter block: one integer member per value lane, at its offset, of its width.
  std::string value_block(uint32_t type, const char *what) const {
    const std::vector<uint32_t> *members = struct_members(type);
    if (!members)
      return fmt::format("{} is not a struct", what);
    size_t j = 0;
    for (const codegen::ParamSlot &slot : abi_.params) {
      if (slot.kind != codegen::ParamSlot::Value)
        continue;
      for (uint32_t lane = 0; lane < slot.type.lanes(); ++lane, ++j) {
        auto offset = facts_.member_offsets.find({type, static_cast<uint32_t>(j)});
        if (j >= members->size() || offset == facts_.member_offsets.end() ||
            offset->second != slot.offset + lane * slot.lane_bytes ||
            scalar_width((*members)[j]) != slot.lane_bytes * 8)
          return fmt::format("{} is not laid out as the launch metadata's value parameters "
                             "(member {})",
                             what, j);
      }
    }
    if (j != members->size())
      return fmt::format("{} has {} members; the launch metadata has {} value lanes", what,
                         members->size(), j);
    return {};
  }

  const ModuleFacts &facts_;
  const codegen::KernelAbi &abi_;
};

} // namespace

std::string check_spirv_interface(std::span<const uint32_t> words, const codegen::KernelAbi &abi,
                                  uint32_t max_shared_bytes) {
  if (words.size() < 5 || words[0] != 0x07230203u)
    return "not a SPIR-V module";
  std::string error;
  std::optional<ModuleFacts> facts = read_facts(words, error);
  if (!facts)
    return error;
  return InterfaceCheck(*facts, abi).run(max_shared_bytes);
}

} // namespace cubecc::runtime
