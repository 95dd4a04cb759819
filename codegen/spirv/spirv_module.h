//===- spirv_module.h - A SPIR-V module under construction: sections, ids, types, constants
//----===//
//
// The writer's bookkeeping, free of any IR knowledge: instructions go to the section the
// specification's logical layout puts them in, types and constants are deduplicated, and the
// function body is a list of blocks so that phis can be completed after their block was opened
// (a loop header's phis learn their back-edge values only when the continue block is written).
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include <spirv/unified1/spirv.hpp11>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cubecc::codegen::spirv {

using Id = uint32_t;
using Words = std::vector<uint32_t>;

/// Appends one instruction (opcode, word count, operands) to `out`.
inline void append(Words &out, spv::Op op, std::initializer_list<uint32_t> operands) {
  out.push_back(static_cast<uint32_t>(operands.size() + 1) << 16 | static_cast<uint32_t>(op));
  out.insert(out.end(), operands.begin(), operands.end());
}
inline void append(Words &out, spv::Op op, const Words &operands) {
  out.push_back(static_cast<uint32_t>(operands.size() + 1) << 16 | static_cast<uint32_t>(op));
  out.insert(out.end(), operands.begin(), operands.end());
}
/// A string operand: UTF-8, nul-terminated, padded to whole words.
inline void append_string(Words &out, std::string_view s) {
  uint32_t word = 0;
  unsigned byte = 0;
  for (char c : s) {
    word |= static_cast<uint32_t>(static_cast<unsigned char>(c)) << (8 * byte);
    if (++byte == 4) {
      out.push_back(word);
      word = 0;
      byte = 0;
    }
  }
  out.push_back(word); // the terminating nul, and the padding
}

struct Block {
  Id label = 0;
  Words phis;
  Words body;
};

class ModuleBuilder {
public:
  Id id() { return next_id_++; }

  void capability(spv::Capability c) { capabilities_.insert(static_cast<uint32_t>(c)); }
  bool has_capability(spv::Capability c) const {
    return capabilities_.count(static_cast<uint32_t>(c)) != 0;
  }
  /// An execution mode of the entry point besides LocalSize (mode, then its literals).
  void execution_mode(spv::ExecutionMode mode, std::initializer_list<uint32_t> literals) {
    Words m = {static_cast<uint32_t>(mode)};
    m.insert(m.end(), literals.begin(), literals.end());
    execution_modes_.push_back(std::move(m));
  }
  void extension(std::string name) { extensions_.insert(std::move(name)); }
  Id glsl_std_450();
  /// The NonSemantic.DebugPrintf instruction set (and the SPV_KHR_non_semantic_info extension).
  Id debug_printf();

  // Types (deduplicated).
  Id type_void();
  Id type_bool();
  Id type_int(unsigned bits, bool is_signed);
  Id type_float(unsigned bits);
  Id type_vector(Id element, unsigned lanes);
  Id type_pointer(spv::StorageClass storage, Id pointee);
  Id type_array(Id element, uint32_t count, uint32_t stride /* 0: undecorated */);
  Id type_runtime_array(Id element, uint32_t stride);
  Id type_function_void();
  /// SPV_NV_cooperative_matrix's OpTypeCooperativeMatrixNV; scope, rows and columns are ids of
  /// 32-bit constants, defined before it.
  Id type_cooperative_matrix_nv(Id component, Id scope, Id rows, Id cols) {
    return type_lookup(spv::Op::OpTypeCooperativeMatrixNV, {component, scope, rows, cols});
  }
  /// A new (nominal) struct type; decorations are the caller's.
  Id type_struct(const Words &members);

  // Constants (deduplicated by type and bits).
  Id constant(Id type, uint64_t bits, unsigned bits_width);
  Id constant_bool(bool value);
  Id undef(Id type);

  /// A global variable (StorageBuffer, PushConstant, Workgroup, Input).
  Id global_variable(Id pointer_type, spv::StorageClass storage);

  void name(Id target, std::string_view name);
  void member_name(Id type, uint32_t member, std::string_view name);
  void decorate(Id target, spv::Decoration d, std::initializer_list<uint32_t> literals = {});
  void member_decorate(Id type, uint32_t member, spv::Decoration d,
                       std::initializer_list<uint32_t> literals = {});
  Id string(std::string_view s);

  /// The module: header, then the sections in the order of the specification's logical layout.
  Words finish(Id entry_function, const Words &interface, uint32_t local_size[3],
               const std::vector<Block> &blocks, Id function_type);

private:
  Id next_id_ = 1;
  std::set<uint32_t> capabilities_;
  std::set<std::string> extensions_;
  std::vector<Words> execution_modes_;
  Id glsl_ = 0, debug_printf_ = 0;
  Words debug_strings_, debug_names_, annotations_, globals_;
  std::map<std::vector<uint32_t>, Id> types_;
  std::map<std::pair<Id, uint64_t>, Id> constants_;
  std::map<Id, Id> undefs_;
  std::map<std::string, Id, std::less<>> strings_;
  Id type_lookup(spv::Op op, const Words &operands);
};

} // namespace cubecc::codegen::spirv
