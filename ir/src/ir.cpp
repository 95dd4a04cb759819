//===- ir.cpp - Values, operations, regions, kernels, modules ---------------------------------===//
#include "cubecc/ir/ir.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <cstring>

namespace cubecc::ir {

//===- Arena ---------------------------------------------------------------------------------===//

Arena::~Arena() {
  while (chunks_) {
    Chunk *next = chunks_->next;
    std::free(chunks_);
    chunks_ = next;
  }
}

void *Arena::allocate_slow(size_t bytes) {
  // Chunks double from 4 KiB to 64 KiB. A request of more than a quarter of that gets a chunk of
  // its own, linked behind the current one, so that the rest of the current chunk is still used.
  constexpr size_t header = (sizeof(Chunk) + 15) & ~size_t{15};
  size_t last = chunks_ ? chunks_->size : 0;
  size_t size = std::min<size_t>(std::max<size_t>(4096, 2 * last), 65536);
  bool dedicated = bytes > size / 4;
  if (dedicated)
    size = header + bytes;
  auto *chunk = static_cast<Chunk *>(std::malloc(size));
  if (!chunk)
    throw std::bad_alloc();
  chunk->size = size;
  reserved_ += size;
  char *storage = reinterpret_cast<char *>(chunk) + header;
  if (dedicated && chunks_) {
    chunk->next = chunks_->next;
    chunks_->next = chunk;
    return storage;
  }
  chunk->next = chunks_;
  chunks_ = chunk;
  cursor_ = storage + bytes;
  end_ = storage + (size - header);
  return storage;
}

void Arena::adopt(Arena &other) {
  if (!other.chunks_)
    return;
  Chunk *last = other.chunks_;
  while (last->next)
    last = last->next;
  // Behind the current chunk, so that this arena keeps bumping where it was.
  if (chunks_) {
    last->next = chunks_->next;
    chunks_->next = other.chunks_;
  } else {
    last->next = nullptr;
    chunks_ = other.chunks_;
    cursor_ = other.cursor_;
    end_ = other.end_;
  }
  reserved_ += other.reserved_;
  other.chunks_ = nullptr;
  other.cursor_ = other.end_ = nullptr;
  other.reserved_ = 0;
}

//===- AttributeList -------------------------------------------------------------------------===//

const AttributeValue *AttributeList::find(std::string_view name) const {
  std::span<const NamedAttribute> all = entries();
  auto it =
      std::lower_bound(all.begin(), all.end(), name,
                       [](const NamedAttribute &a, std::string_view n) { return a.name < n; });
  return it != all.end() && it->name == name ? &it->value : nullptr;
}

std::optional<int64_t> AttributeList::get_int(std::string_view name) const {
  const AttributeValue *v = find(name);
  if (!v || !std::holds_alternative<int64_t>(*v))
    return std::nullopt;
  return std::get<int64_t>(*v);
}

void AttributeList::set(std::string name, AttributeValue value) {
  if (many_.empty()) {
    if (!one_) {
      one_.emplace(NamedAttribute{std::move(name), std::move(value)});
      return;
    }
    if (one_->name == name) {
      one_->value = std::move(value);
      return;
    }
    many_.reserve(2);
    many_.push_back(std::move(*one_));
    one_.reset();
  }
  auto it =
      std::lower_bound(many_.begin(), many_.end(), name,
                       [](const NamedAttribute &a, const std::string &n) { return a.name < n; });
  if (it != many_.end() && it->name == name)
    it->value = std::move(value);
  else
    many_.insert(it, NamedAttribute{std::move(name), std::move(value)});
}

void AttributeList::assign(std::vector<NamedAttribute> attributes) {
  one_.reset();
  many_.clear();
  for (NamedAttribute &a : attributes)
    set(std::move(a.name), std::move(a.value));
}

bool AttributeList::remove(std::string_view name) {
  if (many_.empty()) {
    if (!one_ || one_->name != name)
      return false;
    one_.reset();
    return true;
  }
  auto it = std::find_if(many_.begin(), many_.end(),
                         [&](const NamedAttribute &a) { return a.name == name; });
  if (it == many_.end())
    return false;
  many_.erase(it);
  if (many_.size() == 1) {
    one_.emplace(std::move(many_[0]));
    many_.clear();
  }
  return true;
}

//===- Value ---------------------------------------------------------------------------------===//

Value::~Value() {
  assert(!first_use_ && "destroying a value that still has users");
}

void Value::replace_all_uses_with(Value *other) {
  if (other == this)
    return;
  while (first_use_) {
    Use *use = first_use_;
    use->user_->set_operand(use->operand_number(), other);
  }
}

unsigned Use::operand_number() const {
  return static_cast<unsigned>(this - user_->uses_);
}

//===- Region --------------------------------------------------------------------------------===//

Region::~Region() {
  // Drop every use first: malformed IR (a use before its definition, a value from another
  // kernel) must still be destroyable.
  drop_all_references();
  while (last_)
    take(last_).reset();
  for (unsigned i = 0; i < num_args_; ++i) {
    bool in_arena = args_[i]->in_arena_;
    args_[i]->~Value();
    if (!in_arena)
      ::operator delete(args_[i]);
  }
  if (!args_in_arena_)
    ::operator delete(args_);
}

void Region::discard_contents() {
  for (Operation *op = first_; op;) {
    Operation *next = op->next_;
    op->discard();
    op = next;
  }
  first_ = last_ = nullptr;
  size_ = 0;
  for (unsigned i = 0; i < num_args_; ++i)
    args_[i]->forget_uses();
}

void Region::drop_all_references() {
  for (Operation *op : *this)
    op->drop_all_references();
}

Kernel *Region::kernel() const {
  if (parent_kernel_)
    return parent_kernel_;
  if (parent_op_ && parent_op_->parent_region())
    return parent_op_->parent_region()->kernel();
  return nullptr;
}

Arena *Region::arena() const {
  Kernel *k = kernel();
  return k && k->module() ? &k->module()->arena() : nullptr;
}

Value *Region::add_argument(Type t, std::string name) {
  Arena *arena = this->arena();
  if (num_args_ == args_capacity_) {
    unsigned capacity = std::max(4u, 2 * args_capacity_);
    size_t bytes = capacity * sizeof(Value *);
    auto **grown = static_cast<Value **>(arena ? arena->allocate(bytes) : ::operator new(bytes));
    if (num_args_)
      std::memcpy(grown, args_, num_args_ * sizeof(Value *));
    if (!args_in_arena_)
      ::operator delete(args_);
    args_ = grown;
    args_capacity_ = capacity;
    args_in_arena_ = arena != nullptr;
  }
  void *storage = arena ? arena->allocate(sizeof(Value)) : ::operator new(sizeof(Value));
  Value *v = new (storage) Value(t, nullptr, this, num_args_);
  v->in_arena_ = arena != nullptr;
  v->set_name(std::move(name));
  args_[num_args_++] = v;
  return v;
}

Region::iterator &Region::iterator::operator++() {
  op_ = op_->next();
  return *this;
}

Operation *Region::push_back(std::unique_ptr<Operation> op) {
  return insert(nullptr, std::move(op));
}

Operation *Region::insert(Operation *before, std::unique_ptr<Operation> op) {
  assert(op && !op->parent_ && "inserting an op that already has a parent");
  assert((!before || before->parent_ == this) && "insertion point is in another region");
  Operation *raw = op.release();
  raw->parent_ = this;
  raw->next_ = before;
  raw->prev_ = before ? before->prev_ : last_;
  if (raw->prev_)
    raw->prev_->next_ = raw;
  else
    first_ = raw;
  if (before)
    before->prev_ = raw;
  else
    last_ = raw;
  ++size_;
  return raw;
}

std::unique_ptr<Operation> Region::take(Operation *op) {
  assert(op->parent_ == this);
  if (op->prev_)
    op->prev_->next_ = op->next_;
  else
    first_ = op->next_;
  if (op->next_)
    op->next_->prev_ = op->prev_;
  else
    last_ = op->prev_;
  op->prev_ = op->next_ = nullptr;
  op->parent_ = nullptr;
  --size_;
  return std::unique_ptr<Operation>(op);
}

void Region::erase(Operation *op) {
  take(op).reset();
}

//===- Operation -----------------------------------------------------------------------------===//

Operation::Operation(Opcode opcode, Location loc, unsigned num_results, unsigned num_regions,
                     unsigned num_operands, bool in_arena)
    : opcode_(opcode), in_arena_(in_arena), operands_out_of_line_(false), num_results_(num_results),
      num_regions_(num_regions), num_operands_(0), operand_capacity_(num_operands), loc_(loc) {
  auto *regions = regions_begin();
  uses_ = reinterpret_cast<Use *>(regions + num_regions);
  operands_ = reinterpret_cast<Value **>(uses_ + num_operands);
}

std::unique_ptr<Operation> Operation::create(Opcode opcode, std::span<Value *const> operands,
                                             std::span<const Type> result_types,
                                             unsigned num_regions, Location loc, Arena *arena) {
  static_assert(alignof(Operation) <= 16 && alignof(Value) <= alignof(Operation) &&
                alignof(Region) <= alignof(Value) && alignof(Use) <= alignof(Region) &&
                alignof(Value *) <= alignof(Use));
  static_assert(sizeof(Operation) % alignof(Value) == 0 && sizeof(Value) % alignof(Region) == 0 &&
                sizeof(Region) % alignof(Use) == 0 && sizeof(Use) % alignof(Value *) == 0);
  size_t bytes = sizeof(Operation) + result_types.size() * sizeof(Value) +
                 num_regions * sizeof(Region) + operands.size() * (sizeof(Use) + sizeof(Value *));
  void *storage = arena ? arena->allocate(bytes) : ::operator new(bytes);
  auto *op =
      new (storage) Operation(opcode, loc, static_cast<unsigned>(result_types.size()), num_regions,
                              static_cast<unsigned>(operands.size()), arena != nullptr);
  for (unsigned i = 0; i < result_types.size(); ++i)
    new (op->results_begin() + i) Value(result_types[i], op, nullptr, i);
  for (unsigned i = 0; i < num_regions; ++i)
    new (op->regions_begin() + i) Region(op, nullptr);
  for (unsigned i = 0; i < operands.size(); ++i) {
    assert(operands[i] && "null operand");
    new (op->uses_ + i) Use();
    op->operands_[i] = operands[i];
    op->link_use(i);
  }
  op->num_operands_ = static_cast<unsigned>(operands.size());
  return std::unique_ptr<Operation>(op);
}

Operation::~Operation() {
  // Regions first: their ops may use this op's operands, never this op's results.
  for (unsigned r = num_regions_; r-- > 0;)
    regions_begin()[r].~Region();
  for (unsigned i = 0; i < num_operands_; ++i)
    unlink_use(i);
  for (unsigned i = 0; i < num_results_; ++i)
    results_begin()[i].~Value();
  if (operands_out_of_line_)
    ::operator delete(uses_);
}

void Operation::operator delete(Operation *op, std::destroying_delete_t) {
  bool in_arena = op->in_arena_;
  op->~Operation();
  if (!in_arena)
    ::operator delete(static_cast<void *>(op));
}

void Operation::discard() {
  for (unsigned r = 0; r < num_regions_; ++r) {
    regions_begin()[r].discard_contents();
    regions_begin()[r].~Region(); // empty now: nothing left to unlink
  }
  for (unsigned i = 0; i < num_results_; ++i) {
    results_begin()[i].forget_uses();
    results_begin()[i].~Value();
  }
  if (operands_out_of_line_)
    ::operator delete(uses_);
  attrs_.~AttributeList();
  if (!in_arena_)
    ::operator delete(static_cast<void *>(this));
}

void Operation::link_use(unsigned i) {
  Use &use = uses_[i];
  Value *v = operands_[i];
  use.user_ = this;
  use.next_ = v->first_use_;
  if (use.next_)
    use.next_->prev_link_ = &use.next_;
  use.prev_link_ = &v->first_use_;
  v->first_use_ = &use;
  ++v->num_uses_;
}

void Operation::unlink_use(unsigned i) {
  Use &use = uses_[i];
  *use.prev_link_ = use.next_;
  if (use.next_)
    use.next_->prev_link_ = use.prev_link_;
  use.next_ = nullptr;
  use.prev_link_ = nullptr;
  --operands_[i]->num_uses_;
}

void Operation::set_operand(unsigned i, Value *v) {
  assert(v && "null operand");
  unlink_use(i);
  operands_[i] = v;
  link_use(i);
}

void Operation::append_operand(Value *v) {
  assert(v && "null operand");
  if (num_operands_ == operand_capacity_) {
    // Growing moves the uses, and the lists point into them: take them out, move, put back.
    unsigned capacity = std::max(4u, 2 * operand_capacity_);
    auto *uses = static_cast<Use *>(::operator new(capacity *(sizeof(Use) + sizeof(Value *))));
    auto **operands = reinterpret_cast<Value **>(uses + capacity);
    for (unsigned i = 0; i < num_operands_; ++i)
      unlink_use(i);
    for (unsigned i = 0; i < capacity; ++i)
      new (uses + i) Use();
    std::copy(operands_, operands_ + num_operands_, operands);
    if (operands_out_of_line_)
      ::operator delete(uses_);
    uses_ = uses;
    operands_ = operands;
    operands_out_of_line_ = true;
    operand_capacity_ = capacity;
    for (unsigned i = 0; i < num_operands_; ++i)
      link_use(i);
  }
  operands_[num_operands_] = v;
  uses_[num_operands_] = Use();
  link_use(num_operands_++);
}

void Operation::replace_uses_of(Value *from, Value *to) {
  for (unsigned i = 0; i < num_operands_; ++i)
    if (operands_[i] == from)
      set_operand(i, to);
}

void Operation::drop_all_references() {
  for (unsigned i = 0; i < num_operands_; ++i)
    unlink_use(i);
  num_operands_ = 0;
  for (unsigned r = 0; r < num_regions_; ++r)
    region(r).drop_all_references();
}

void Operation::walk(const std::function<void(Operation *)> &fn) {
  fn(this);
  for (unsigned r = 0; r < num_regions_; ++r)
    for (Operation *op : region(r))
      op->walk(fn);
}

void Operation::walk(const std::function<void(const Operation *)> &fn) const {
  fn(this);
  for (unsigned r = 0; r < num_regions_; ++r)
    for (const Operation *op : region(r))
      op->walk(fn);
}

//===- Kernel and Module ---------------------------------------------------------------------===//

void Kernel::walk(const std::function<void(Operation *)> &fn) {
  for (Operation *op : body_)
    op->walk(fn);
}

void Kernel::walk(const std::function<void(const Operation *)> &fn) const {
  for (const Operation *op : body_)
    op->walk(fn);
}

Module::~Module() {
  // Every value an op of this module uses is in this module (ops of several kernels of one
  // module may even, wrongly, use each other's), and everything dies now: destroy it all
  // without unlinking a use.
  for (auto &k : kernels_)
    k->body().discard_contents();
}

Kernel &Module::add_kernel(std::string name) {
  kernels_.push_back(std::make_unique<Kernel>(this, std::move(name)));
  return *kernels_.back();
}

void Module::remove_kernel(const Kernel *kernel) {
  auto it = std::find_if(kernels_.begin(), kernels_.end(),
                         [&](const std::unique_ptr<Kernel> &k) { return k.get() == kernel; });
  if (it != kernels_.end()) {
    (*it)->body().drop_all_references();
    kernels_.erase(it);
  }
}

void Module::adopt_kernels(Module &&other) {
  auto remap = [&](Location loc) {
    if (loc.known())
      loc.file = intern_file(other.file_name(loc.file));
    return loc;
  };
  arena_.adopt(other.arena_);
  for (auto &k : other.kernels_) {
    k->module_ = this;
    k->set_location(remap(k->location()));
    k->walk([&](Operation *op) { op->set_location(remap(op->location())); });
    kernels_.push_back(std::move(k));
  }
  other.kernels_.clear();
}

Kernel *Module::find_kernel(std::string_view name) const {
  for (const auto &k : kernels_)
    if (k->name() == name)
      return k.get();
  return nullptr;
}

uint32_t Module::intern_file(std::string_view file) {
  if (file.empty())
    return 0;
  for (size_t i = 0; i < files_.size(); ++i)
    if (files_[i] == file)
      return static_cast<uint32_t>(i + 1);
  files_.emplace_back(file);
  return static_cast<uint32_t>(files_.size());
}

std::string_view Module::file_name(uint32_t id) const {
  if (id == 0 || id > files_.size())
    return {};
  return files_[id - 1];
}

Diagnostic diagnostic_at(const Module &module, const Operation *op, std::string message) {
  Diagnostic d;
  if (op && op->location().known()) {
    d.file = std::string(module.file_name(op->location().file));
    d.line = op->location().line;
    d.col = op->location().col;
  }
  d.message = std::move(message);
  return d;
}

} // namespace cubecc::ir
