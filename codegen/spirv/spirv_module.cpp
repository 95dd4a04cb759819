//===- spirv_module.cpp - Sections, deduplicated types and constants, the final layout
//---------===//
#include "spirv_module.h"

namespace cubecc::codegen::spirv {

Id ModuleBuilder::glsl_std_450() {
  if (!glsl_)
    glsl_ = id();
  return glsl_;
}

Id ModuleBuilder::debug_printf() {
  if (!debug_printf_) {
    debug_printf_ = id();
    extension("SPV_KHR_non_semantic_info");
  }
  return debug_printf_;
}

Id ModuleBuilder::type_lookup(spv::Op op, const Words &operands) {
  Words key = operands;
  key.insert(key.begin(), static_cast<uint32_t>(op));
  auto [it, inserted] = types_.try_emplace(std::move(key), 0);
  if (inserted) {
    it->second = id();
    Words ops = operands;
    ops.insert(ops.begin(), it->second);
    append(globals_, op, ops);
  }
  return it->second;
}

Id ModuleBuilder::type_void() {
  return type_lookup(spv::Op::OpTypeVoid, {});
}
Id ModuleBuilder::type_bool() {
  return type_lookup(spv::Op::OpTypeBool, {});
}
Id ModuleBuilder::type_int(unsigned bits, bool is_signed) {
  return type_lookup(spv::Op::OpTypeInt, {bits, is_signed ? 1u : 0u});
}
Id ModuleBuilder::type_float(unsigned bits) {
  return type_lookup(spv::Op::OpTypeFloat, {bits});
}
Id ModuleBuilder::type_vector(Id element, unsigned lanes) {
  return type_lookup(spv::Op::OpTypeVector, {element, lanes});
}
Id ModuleBuilder::type_pointer(spv::StorageClass storage, Id pointee) {
  return type_lookup(spv::Op::OpTypePointer, {static_cast<uint32_t>(storage), pointee});
}
Id ModuleBuilder::type_array(Id element, uint32_t count, uint32_t stride) {
  Id length = constant(type_int(32, false), count, 32);
  // A stride is part of the type's identity: the key carries it.
  auto [it, inserted] = types_.try_emplace(
      Words{static_cast<uint32_t>(spv::Op::OpTypeArray), element, length, stride}, 0);
  if (inserted) {
    it->second = id();
    append(globals_, spv::Op::OpTypeArray, {it->second, element, length});
    if (stride)
      decorate(it->second, spv::Decoration::ArrayStride, {stride});
  }
  return it->second;
}
Id ModuleBuilder::type_runtime_array(Id element, uint32_t stride) {
  auto [it, inserted] = types_.try_emplace(
      Words{static_cast<uint32_t>(spv::Op::OpTypeRuntimeArray), element, stride}, 0);
  if (inserted) {
    it->second = id();
    append(globals_, spv::Op::OpTypeRuntimeArray, {it->second, element});
    decorate(it->second, spv::Decoration::ArrayStride, {stride});
  }
  return it->second;
}
Id ModuleBuilder::type_function_void() {
  return type_lookup(spv::Op::OpTypeFunction, {type_void()});
}
Id ModuleBuilder::type_struct(const Words &members) {
  Id t = id();
  Words ops = members;
  ops.insert(ops.begin(), t);
  append(globals_, spv::Op::OpTypeStruct, ops);
  return t;
}

Id ModuleBuilder::constant(Id type, uint64_t bits, unsigned bits_width) {
  auto [it, inserted] = constants_.try_emplace({type, bits}, 0);
  if (inserted) {
    it->second = id();
    if (bits_width == 64)
      append(globals_, spv::Op::OpConstant,
             {type, it->second, static_cast<uint32_t>(bits), static_cast<uint32_t>(bits >> 32)});
    else
      append(globals_, spv::Op::OpConstant, {type, it->second, static_cast<uint32_t>(bits)});
  }
  return it->second;
}

Id ModuleBuilder::constant_bool(bool value) {
  Id t = type_bool();
  auto [it, inserted] = constants_.try_emplace({t, value ? 1 : 0}, 0);
  if (inserted) {
    it->second = id();
    append(globals_, value ? spv::Op::OpConstantTrue : spv::Op::OpConstantFalse, {t, it->second});
  }
  return it->second;
}

Id ModuleBuilder::undef(Id type) {
  auto [it, inserted] = undefs_.try_emplace(type, 0);
  if (inserted) {
    it->second = id();
    append(globals_, spv::Op::OpUndef, {type, it->second});
  }
  return it->second;
}

Id ModuleBuilder::global_variable(Id pointer_type, spv::StorageClass storage) {
  Id v = id();
  append(globals_, spv::Op::OpVariable, {pointer_type, v, static_cast<uint32_t>(storage)});
  return v;
}

void ModuleBuilder::name(Id target, std::string_view name) {
  Words ops = {target};
  append_string(ops, name);
  append(debug_names_, spv::Op::OpName, ops);
}
void ModuleBuilder::member_name(Id type, uint32_t member, std::string_view name) {
  Words ops = {type, member};
  append_string(ops, name);
  append(debug_names_, spv::Op::OpMemberName, ops);
}
void ModuleBuilder::decorate(Id target, spv::Decoration d, std::initializer_list<uint32_t> lits) {
  Words ops = {target, static_cast<uint32_t>(d)};
  ops.insert(ops.end(), lits.begin(), lits.end());
  append(annotations_, spv::Op::OpDecorate, ops);
}
void ModuleBuilder::member_decorate(Id type, uint32_t member, spv::Decoration d,
                                    std::initializer_list<uint32_t> lits) {
  Words ops = {type, member, static_cast<uint32_t>(d)};
  ops.insert(ops.end(), lits.begin(), lits.end());
  append(annotations_, spv::Op::OpMemberDecorate, ops);
}
Id ModuleBuilder::string(std::string_view s) {
  auto it = strings_.find(s);
  if (it != strings_.end())
    return it->second;
  Id sid = id();
  Words ops = {sid};
  append_string(ops, s);
  append(debug_strings_, spv::Op::OpString, ops);
  strings_.emplace(std::string(s), sid);
  return sid;
}

Words ModuleBuilder::finish(Id entry_function, const Words &interface, uint32_t local_size[3],
                            const std::vector<Block> &blocks, Id function_type) {
  Words function;
  append(function, spv::Op::OpFunction,
         {type_void(), entry_function, static_cast<uint32_t>(spv::FunctionControlMask::MaskNone),
          function_type});
  for (const Block &b : blocks) {
    append(function, spv::Op::OpLabel, {b.label});
    function.insert(function.end(), b.phis.begin(), b.phis.end());
    function.insert(function.end(), b.body.begin(), b.body.end());
  }
  append(function, spv::Op::OpFunctionEnd, {});

  Words out = {spv::MagicNumber, 0x00010500 /* SPIR-V 1.5 */, 0 /* generator */, next_id_, 0};
  for (uint32_t c : capabilities_)
    append(out, spv::Op::OpCapability, {c});
  for (const std::string &e : extensions_) {
    Words ops;
    append_string(ops, e);
    append(out, spv::Op::OpExtension, ops);
  }
  if (glsl_) {
    Words ops = {glsl_};
    append_string(ops, "GLSL.std.450");
    append(out, spv::Op::OpExtInstImport, ops);
  }
  if (debug_printf_) {
    Words ops = {debug_printf_};
    append_string(ops, "NonSemantic.DebugPrintf");
    append(out, spv::Op::OpExtInstImport, ops);
  }
  append(out, spv::Op::OpMemoryModel,
         {static_cast<uint32_t>(spv::AddressingModel::Logical),
          static_cast<uint32_t>(spv::MemoryModel::GLSL450)});
  Words entry = {static_cast<uint32_t>(spv::ExecutionModel::GLCompute), entry_function};
  append_string(entry, "main");
  entry.insert(entry.end(), interface.begin(), interface.end());
  append(out, spv::Op::OpEntryPoint, entry);
  append(out, spv::Op::OpExecutionMode,
         {entry_function, static_cast<uint32_t>(spv::ExecutionMode::LocalSize), local_size[0],
          local_size[1], local_size[2]});
  for (const Words &mode : execution_modes_) {
    Words ops = {entry_function};
    ops.insert(ops.end(), mode.begin(), mode.end());
    append(out, spv::Op::OpExecutionMode, ops);
  }
  out.insert(out.end(), debug_strings_.begin(), debug_strings_.end());
  out.insert(out.end(), debug_names_.begin(), debug_names_.end());
  out.insert(out.end(), annotations_.begin(), annotations_.end());
  out.insert(out.end(), globals_.begin(), globals_.end());
  out.insert(out.end(), function.begin(), function.end());
  out[3] = next_id_; // the bound, after every id was handed out
  return out;
}

} // namespace cubecc::codegen::spirv
