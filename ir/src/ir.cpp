//===- ir.cpp - Values, operations, regions, kernels, modules ---------------------------------===//
#include "cubecc/ir/ir.h"

#include <algorithm>
#include <cassert>

namespace cubecc::ir {

//===- AttributeList -------------------------------------------------------------------------===//

const AttributeValue *AttributeList::find(std::string_view name) const {
  auto it =
      std::lower_bound(entries_.begin(), entries_.end(), name,
                       [](const NamedAttribute &a, std::string_view n) { return a.name < n; });
  return it != entries_.end() && it->name == name ? &it->value : nullptr;
}

std::optional<int64_t> AttributeList::get_int(std::string_view name) const {
  const AttributeValue *v = find(name);
  if (!v || !std::holds_alternative<int64_t>(*v))
    return std::nullopt;
  return std::get<int64_t>(*v);
}

void AttributeList::set(std::string name, AttributeValue value) {
  auto it =
      std::lower_bound(entries_.begin(), entries_.end(), name,
                       [](const NamedAttribute &a, const std::string &n) { return a.name < n; });
  if (it != entries_.end() && it->name == name)
    it->value = std::move(value);
  else
    entries_.insert(it, NamedAttribute{std::move(name), std::move(value)});
}

bool AttributeList::remove(std::string_view name) {
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const NamedAttribute &a) { return a.name == name; });
  if (it == entries_.end())
    return false;
  entries_.erase(it);
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
  return static_cast<unsigned>(this - user_->uses_.data());
}

//===- Region --------------------------------------------------------------------------------===//

Region::~Region() {
  // Drop every use first: malformed IR (a use before its definition, a value from another
  // kernel) must still be destroyable.
  drop_all_references();
  while (last_)
    take(last_).reset();
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

Value *Region::add_argument(Type t, std::string name) {
  args_.push_back(std::unique_ptr<Value>(new Value(t, nullptr, this, num_arguments())));
  args_.back()->set_name(std::move(name));
  return args_.back().get();
}

Region::iterator &Region::iterator::operator++() {
  op_ = op_->next();
  return *this;
}

Operation *Region::terminator() const {
  return last_ && last_->is_terminator() ? last_ : nullptr;
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

std::unique_ptr<Operation> Operation::create(Opcode opcode, std::span<Value *const> operands,
                                             std::span<const Type> result_types,
                                             unsigned num_regions, Location loc) {
  std::unique_ptr<Operation> op(new Operation(opcode, loc));
  op->operands_.reserve(operands.size());
  op->uses_.reserve(operands.size());
  op->results_.reserve(result_types.size());
  for (Value *v : operands)
    op->append_operand(v);
  for (unsigned i = 0; i < result_types.size(); ++i)
    op->results_.push_back(
        std::unique_ptr<Value>(new Value(result_types[i], op.get(), nullptr, i)));
  for (unsigned i = 0; i < num_regions; ++i)
    op->regions_.push_back(std::make_unique<Region>(op.get(), nullptr));
  return op;
}

Operation::~Operation() {
  // Regions first: their ops may use this op's operands, never this op's results.
  while (!regions_.empty())
    regions_.pop_back();
  for (unsigned i = 0; i < uses_.size(); ++i)
    unlink_use(i);
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
  if (uses_.size() == uses_.capacity()) {
    // Growing moves the uses, and the lists point into them: take them out, move, put back.
    size_t capacity = std::max<size_t>(4, 2 * uses_.capacity());
    for (unsigned i = 0; i < uses_.size(); ++i)
      unlink_use(i);
    uses_.reserve(capacity);
    operands_.reserve(capacity);
    for (unsigned i = 0; i < uses_.size(); ++i)
      link_use(i);
  }
  operands_.push_back(v);
  uses_.emplace_back();
  link_use(static_cast<unsigned>(uses_.size() - 1));
}

void Operation::replace_uses_of(Value *from, Value *to) {
  for (unsigned i = 0; i < operands_.size(); ++i)
    if (operands_[i] == from)
      set_operand(i, to);
}

void Operation::drop_all_references() {
  for (unsigned i = 0; i < uses_.size(); ++i)
    unlink_use(i);
  uses_.clear();
  operands_.clear();
  for (auto &region : regions_)
    region->drop_all_references();
}

void Operation::walk(const std::function<void(Operation *)> &fn) {
  fn(this);
  for (auto &region : regions_)
    for (Operation *op : *region)
      op->walk(fn);
}

void Operation::walk(const std::function<void(const Operation *)> &fn) const {
  fn(this);
  for (auto &region : regions_)
    for (const Operation *op : *region)
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
  // Kernels may (wrongly) use each other's values; drop all uses before any value dies.
  for (auto &k : kernels_)
    k->body().drop_all_references();
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

} // namespace cubecc::ir
