//===- ir.h - cubecc IR: values, operations, regions, kernels, modules -----------------------===//
//
// The IR is SSA with structured control flow. A Module holds Kernels; a Kernel has parameters, a
// workgroup size, attributes and a body Region. A Region is a single block: arguments plus an
// ordered list of Operations ending in a terminator. Operations own their results and regions;
// each Value knows its users through an intrusive list of Uses (one per operand slot, kept inside
// the using op, as MLIR's OpOperand), so adding or removing a use is O(1), replacing all uses of a
// value is linear in its uses, and destroying a module is linear in its size.
//
// Storage: an operation is one block of memory, the op followed by its results, its regions and
// its operand slots (as MLIR's trailing objects); ops built into a module take that block from
// the module's Arena (arena.h), so building IR costs no malloc per op, and destroying a module
// frees its arena at once without unlinking a single use.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/ir/arena.h"
#include "cubecc/ir/diagnostic.h"
#include "cubecc/ir/ops.h"
#include "cubecc/ir/types.h"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace cubecc::ir {

class Kernel;
class Module;
class Operation;
class Region;

/// Where an op came from: a file (interned in the module), line and column; all zero when unknown.
struct Location {
  uint32_t file = 0; ///< index into Module::file_name(); 0 means no file
  uint32_t line = 0;
  uint32_t col = 0;
  bool known() const { return file != 0; }
  friend bool operator==(const Location &, const Location &) = default;
};

/// An attribute value: an integer (constants keep their bit pattern here) or a string.
using AttributeValue = std::variant<int64_t, std::string>;
struct NamedAttribute {
  std::string name;
  AttributeValue value;
  friend bool operator==(const NamedAttribute &, const NamedAttribute &) = default;
};

/// Attributes kept sorted by name, so that equal sets compare, print and hash equal. Most ops
/// carry none or one (a constant's value, a lane), so a single attribute is kept inline and only
/// a second one moves the list to the heap: building a constant allocates nothing.
class AttributeList {
public:
  std::span<const NamedAttribute> entries() const {
    if (!many_.empty())
      return many_;
    return one_ ? std::span<const NamedAttribute>(&*one_, 1) : std::span<const NamedAttribute>();
  }
  bool empty() const { return !one_ && many_.empty(); }
  const AttributeValue *find(std::string_view name) const;
  std::optional<int64_t> get_int(std::string_view name) const;
  /// Inserts or replaces.
  void set(std::string name, AttributeValue value);
  /// Replaces the whole list with `attributes` (a later entry of one name wins).
  void assign(std::vector<NamedAttribute> attributes);
  bool remove(std::string_view name);
  /// Equal sets have equal representations: one entry is always inline, two or more never.
  friend bool operator==(const AttributeList &, const AttributeList &) = default;

private:
  std::optional<NamedAttribute> one_; ///< the only entry, when there is exactly one
  std::vector<NamedAttribute> many_;  ///< all the entries, when there are two or more
};

/// One operand slot of an operation, linked into the use list of the value it reads. Owned by
/// the operation; values only point at it.
class Use {
public:
  Use() = default;
  /// The operation whose operand this is.
  Operation *user() const { return user_; }
  /// The next use of the same value (in no particular order), or null.
  Use *next() const { return next_; }
  /// Which operand of user() this is.
  unsigned operand_number() const;

private:
  friend class Operation;
  friend class Value;
  Operation *user_ = nullptr;
  Use *next_ = nullptr;
  Use **prev_link_ = nullptr; ///< the pointer that points at this use (O(1) unlinking)
};

/// An SSA value: the result of an operation or an argument of a region.
class Value {
public:
  Value(const Value &) = delete;
  Value &operator=(const Value &) = delete;
  ~Value();

  Type type() const { return type_; }
  void set_type(Type t) { type_ = t; }
  /// The name hint from the DSL or the text form; empty when the printer should number it.
  const std::string &name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  /// The op that defines this value, or null for a region argument.
  Operation *defining_op() const { return def_op_; }
  /// The region whose argument this is, or null for an op result.
  Region *owner_region() const { return owner_region_; }
  /// Result number or argument number.
  unsigned index() const { return index_; }

  /// The operations that use this value, one entry per operand slot (an op that uses the value
  /// twice appears twice), in no particular order.
  class UserRange {
  public:
    class iterator {
    public:
      using value_type = Operation *;
      using difference_type = std::ptrdiff_t;
      iterator() = default;
      explicit iterator(const Use *use) : use_(use) {}
      Operation *operator*() const { return use_->user(); }
      iterator &operator++() {
        use_ = use_->next();
        return *this;
      }
      iterator operator++(int) {
        iterator old = *this;
        ++*this;
        return old;
      }
      friend bool operator==(iterator, iterator) = default;

    private:
      const Use *use_ = nullptr;
    };
    explicit UserRange(const Use *first) : first_(first) {}
    iterator begin() const { return iterator(first_); }
    iterator end() const { return iterator(nullptr); }

  private:
    const Use *first_;
  };
  UserRange users() const { return UserRange(first_use_); }
  /// The first use in this value's use list (walk on with Use::next), or null.
  const Use *first_use() const { return first_use_; }
  /// How many operand slots use this value.
  size_t num_uses() const { return num_uses_; }
  bool has_uses() const { return first_use_ != nullptr; }
  /// Makes every user use `other` instead. Linear in the number of uses.
  void replace_all_uses_with(Value *other);

private:
  friend class Operation;
  friend class Region;
  Value(Type t, Operation *def, Region *owner, unsigned index)
      : type_(t), def_op_(def), owner_region_(owner), index_(index) {}
  /// Destroys a value whose users are being destroyed with it (module teardown).
  void forget_uses() {
    first_use_ = nullptr;
    num_uses_ = 0;
  }

  Type type_;
  std::string name_;
  Operation *def_op_;
  Region *owner_region_;
  unsigned index_;
  bool in_arena_ = false; ///< a region argument whose storage is its module's arena
  Use *first_use_ = nullptr;
  size_t num_uses_ = 0;
};

/// A single-block region: arguments and an ordered list of operations.
class Region {
public:
  Region(Operation *parent_op, Kernel *parent_kernel)
      : parent_op_(parent_op), parent_kernel_(parent_kernel) {}
  Region(const Region &) = delete;
  Region &operator=(const Region &) = delete;
  ~Region();

  /// The op owning this region (null for a kernel body).
  Operation *parent_op() const { return parent_op_; }
  /// The kernel this region belongs to, found through the parents.
  Kernel *kernel() const;

  Value *add_argument(Type t, std::string name = {});
  unsigned num_arguments() const { return num_args_; }
  Value *argument(unsigned i) const { return args_[i]; }

  class iterator {
  public:
    using value_type = Operation *;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    explicit iterator(Operation *op) : op_(op) {}
    Operation *operator*() const { return op_; }
    iterator &operator++();
    iterator operator++(int) {
      iterator old = *this;
      ++*this;
      return old;
    }
    friend bool operator==(iterator, iterator) = default;

  private:
    Operation *op_ = nullptr;
  };
  iterator begin() const { return iterator(first_); }
  iterator end() const { return iterator(nullptr); }
  bool empty() const { return first_ == nullptr; }
  size_t size() const { return size_; }
  Operation *front() const { return first_; }
  Operation *back() const { return last_; }
  /// The last op if it is a terminator, else null.
  Operation *terminator() const;

  Operation *push_back(std::unique_ptr<Operation> op);
  /// Inserts `op` before `before` (at the end when `before` is null).
  Operation *insert(Operation *before, std::unique_ptr<Operation> op);
  /// Unlinks `op` and hands it back.
  std::unique_ptr<Operation> take(Operation *op);
  /// Unlinks and destroys `op`; its results must have no uses left.
  void erase(Operation *op);
  /// Makes every op in this region (nested ones too) drop its operands, so that the region can
  /// be destroyed in any order, even when it holds malformed IR.
  void drop_all_references();

private:
  friend class Operation;
  friend class Module;
  /// The arena of the module this region is in, or null while it is detached.
  Arena *arena() const;
  /// Destroys every op and argument without unlinking uses: only when everything they could use
  /// or be used by dies too (module teardown).
  void discard_contents();

  Operation *parent_op_;
  Kernel *parent_kernel_;
  Value **args_ = nullptr;
  unsigned num_args_ = 0;
  unsigned args_capacity_ = 0;
  bool args_in_arena_ = false;
  Operation *first_ = nullptr;
  Operation *last_ = nullptr;
  size_t size_ = 0;
};

/// One operation. Create with Operation::create or, more conveniently, with Builder. The op, its
/// results, regions and operand slots are one block of memory (see the file comment).
class Operation {
public:
  /// A detached op. Its storage comes from `arena` when given (then the op must not outlive the
  /// arena's module, nor move to another module except with Module::adopt_kernels), else from
  /// the heap.
  static std::unique_ptr<Operation> create(Opcode opcode, std::span<Value *const> operands,
                                           std::span<const Type> result_types,
                                           unsigned num_regions = 0, Location loc = {},
                                           Arena *arena = nullptr);
  Operation(const Operation &) = delete;
  Operation &operator=(const Operation &) = delete;
  /// `delete op` destroys the op and frees its block unless the block is in an arena.
  void operator delete(Operation *op, std::destroying_delete_t);
  /// Called by `delete` only (public because std::unique_ptr names it); never call it directly.
  ~Operation();

  Opcode opcode() const { return opcode_; }
  const OpInfo &info() const { return op_info(opcode_); }
  std::string_view name() const { return info().name; }
  bool has_flag(OpFlag f) const { return (info().flags & f) != 0; }
  bool is_terminator() const { return has_flag(Terminator); }

  Location location() const { return loc_; }
  void set_location(Location loc) { loc_ = loc; }

  unsigned num_operands() const { return num_operands_; }
  Value *operand(unsigned i) const { return operands_[i]; }
  std::span<Value *const> operands() const { return {operands_, num_operands_}; }
  void set_operand(unsigned i, Value *v);
  /// Adds an operand slot (the first beyond the slots the op was created with moves them all
  /// out of line).
  void append_operand(Value *v);
  /// Replaces every operand slot that holds `from` with `to`.
  void replace_uses_of(Value *from, Value *to);

  unsigned num_results() const { return num_results_; }
  Value *result(unsigned i = 0) const { return results_begin() + i; }

  unsigned num_regions() const { return num_regions_; }
  Region &region(unsigned i) const { return regions_begin()[i]; }

  AttributeList &attributes() { return attrs_; }
  const AttributeList &attributes() const { return attrs_; }

  /// The region holding this op (null while detached).
  Region *parent_region() const { return parent_; }
  /// The op whose region holds this op (null at kernel level or detached).
  Operation *parent_op() const { return parent_ ? parent_->parent_op() : nullptr; }
  Operation *next() const { return next_; }
  Operation *prev() const { return prev_; }

  /// Calls `fn` on this op and every op nested in its regions, parents before children.
  void walk(const std::function<void(Operation *)> &fn);
  void walk(const std::function<void(const Operation *)> &fn) const;
  /// Removes every operand of this op and of the ops nested in it.
  void drop_all_references();

private:
  friend class Region;
  friend class Use;
  Operation(Opcode opcode, Location loc, unsigned num_results, unsigned num_regions,
            unsigned num_operands, bool in_arena);
  Value *results_begin() const {
    return reinterpret_cast<Value *>(const_cast<Operation *>(this) + 1);
  }
  Region *regions_begin() const {
    return reinterpret_cast<Region *>(results_begin() + num_results_);
  }
  void link_use(unsigned i);
  void unlink_use(unsigned i);
  /// Destroys this op and everything nested in it without unlinking any use (module teardown).
  void discard();

  Opcode opcode_;
  bool in_arena_;             ///< the block is in a module's arena (never freed on its own)
  bool operands_out_of_line_; ///< append_operand moved the slots to a heap array
  unsigned num_results_;
  unsigned num_regions_;
  unsigned num_operands_;
  unsigned operand_capacity_;
  Location loc_;
  Value **operands_; ///< operands_[i] is the value operand slot i reads
  Use *uses_;        ///< uses_[i] links operand i into operands_[i]'s use list
  AttributeList attrs_;
  Region *parent_ = nullptr;
  Operation *prev_ = nullptr;
  Operation *next_ = nullptr;
  // Followed in the same block by: Value results[num_results_], Region regions[num_regions_],
  // Use uses[n], Value *operands[n] (n: the operand count at creation).
};

inline Operation *Region::terminator() const {
  return last_ && last_->is_terminator() ? last_ : nullptr;
}

/// The kernel attribute that requires subgroups of exactly that many invocations (a kernel
/// whose layout of work assumes a warp of 32, say): targets with another subgroup size refuse
/// it, and the interpreter refuses a launch with another (docs/ir.md §3.1).
inline constexpr const char *kSubgroupSizeAttribute = "subgroup_size";

/// A GPU kernel: parameters (the body's arguments), workgroup size, attributes and a body.
class Kernel {
public:
  Kernel(Module *module, std::string name) : module_(module), name_(std::move(name)) {}
  Kernel(const Kernel &) = delete;
  Kernel &operator=(const Kernel &) = delete;

  Module *module() const { return module_; }
  const std::string &name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  Value *add_parameter(Type t, std::string name = {}) {
    return body_.add_argument(t, std::move(name));
  }
  unsigned num_parameters() const { return body_.num_arguments(); }
  Value *parameter(unsigned i) const { return body_.argument(i); }

  const std::array<uint32_t, 3> &workgroup_size() const { return workgroup_size_; }
  void set_workgroup_size(std::array<uint32_t, 3> size) { workgroup_size_ = size; }

  AttributeList &attributes() { return attrs_; }
  const AttributeList &attributes() const { return attrs_; }

  Location location() const { return loc_; }
  void set_location(Location loc) { loc_ = loc; }

  Region &body() { return body_; }
  const Region &body() const { return body_; }

  /// Calls `fn` on every op of the body, parents before children.
  void walk(const std::function<void(Operation *)> &fn);
  void walk(const std::function<void(const Operation *)> &fn) const;

private:
  friend class Module;
  Module *module_;
  std::string name_;
  std::array<uint32_t, 3> workgroup_size_ = {1, 1, 1};
  AttributeList attrs_;
  Location loc_;
  Region body_{nullptr, this};
};

/// A compilation unit: kernels plus the table of file names that locations point into.
class Module {
public:
  explicit Module(std::string name = "module") : name_(std::move(name)) {}
  ~Module();
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;

  const std::string &name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  Kernel &add_kernel(std::string name);
  /// Removes and destroys `kernel` (a kernel of this module).
  void remove_kernel(const Kernel *kernel);
  /// Moves every kernel of `other` to the end of this module (locations keep their files).
  void adopt_kernels(Module &&other);
  std::span<const std::unique_ptr<Kernel>> kernels() const { return kernels_; }
  Kernel *find_kernel(std::string_view name) const;

  /// Returns the id of `file` in this module's file table (0 is reserved for "no file").
  uint32_t intern_file(std::string_view file);
  /// The file name for an id; empty for 0 or an unknown id.
  std::string_view file_name(uint32_t id) const;
  Location location(std::string_view file, uint32_t line, uint32_t col) {
    return Location{intern_file(file), line, col};
  }

  /// Where the ops and region arguments built into this module keep their storage.
  Arena &arena() { return arena_; }

private:
  Arena arena_; ///< declared first: destroyed last, after every kernel
  std::string name_;
  std::vector<std::unique_ptr<Kernel>> kernels_;
  std::vector<std::string> files_;
};

/// A diagnostic at `op`'s source location in `module` (none when unknown or `op` is null).
Diagnostic diagnostic_at(const Module &module, const Operation *op, std::string message);

} // namespace cubecc::ir
