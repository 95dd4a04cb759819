//===- ir_test.cpp - Building IR, use lists, editing regions ----------------------------------===//
#include "cubecc/ir/builder.h"
#include "cubecc/ir/dominance.h"
#include "cubecc/ir/parser.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/verifier.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <stdexcept>

using namespace cubecc::ir;

namespace {

/// kernel @axpy: y[i] = a * x[i] + y[i] when i < size(y), built with the Builder.
Kernel &build_axpy(Module &m) {
  Kernel &k = m.add_kernel("axpy");
  k.set_workgroup_size({256, 1, 1});
  Value *x = k.add_parameter(Type::buffer(Scalar::F32, Access::Read), "x");
  Value *y = k.add_parameter(Type::buffer(Scalar::F32, Access::ReadWrite), "y");
  Value *a = k.add_parameter(Type::scalar(Scalar::F32), "a");
  Builder b(m);
  b.set_insertion_point_to_end(k.body());
  b.set_location("axpy.cpp", 7, 12);
  Value *i = b.extract(b.op(Opcode::GlobalId, {}), 0);
  Value *n = b.create(Opcode::BufferSize, {y}, {Type::scalar(Scalar::U32)})->result();
  Value *in_range = b.op(Opcode::Lt, {i, n});
  Operation *branch = b.create_if(in_range, {});
  b.set_insertion_point_to_end(branch->region(0));
  Value *xi = b.load(x, i, Type::scalar(Scalar::F32));
  Value *yi = b.load(y, i, Type::scalar(Scalar::F32));
  b.store(y, i, b.op(Opcode::Fma, {a, xi, yi}));
  b.yield();
  b.set_insertion_point_to_end(branch->region(1));
  b.yield();
  b.set_insertion_point_to_end(k.body());
  b.ret();
  return k;
}

} // namespace

TEST(Builder, built_kernel_verifies_and_prints_readably) {
  Module m("examples");
  build_axpy(m);
  auto problems = verify(m);
  EXPECT_TRUE(problems.empty()) << to_string(problems);
  std::string text = to_string(m);
  EXPECT_NE(text.find("kernel @axpy(%x: buffer<f32, read>, %y: buffer<f32, readwrite>, %a: f32) "
                      "workgroup(256, 1, 1) {"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("%0 = global_id : u32x3 loc(\"axpy.cpp\":7:12)"), std::string::npos) << text;
  EXPECT_NE(text.find("%6 = fma %a, %4, %5 : f32"), std::string::npos) << text;
}

TEST(Builder, infers_result_types_from_the_op_table) {
  Module m;
  Kernel &k = m.add_kernel("k");
  Value *v = k.add_parameter(Type::vector(Scalar::F32, 4));
  Builder b(m);
  b.set_insertion_point_to_end(k.body());
  EXPECT_EQ(b.op(Opcode::Lt, {v, v})->type(), Type::vector(Scalar::Bool, 4));
  EXPECT_EQ(b.op(Opcode::Sqrt, {v})->type(), v->type());
  EXPECT_EQ(b.op(Opcode::SubgroupBallot, {b.const_bool(true)})->type(),
            Type::vector(Scalar::U32, 4));
  EXPECT_THROW(b.op(Opcode::Cast, {v}), std::logic_error);
  Value *i = k.add_parameter(Type::scalar(Scalar::I32));
  EXPECT_THROW(b.op(Opcode::Add, {v, i}), std::logic_error);
}

TEST(Builder, constants_keep_only_the_bits_of_their_width) {
  Module m;
  Kernel &k = m.add_kernel("k");
  Builder b(m);
  b.set_insertion_point_to_end(k.body());
  Value *c = b.const_int(Type::scalar(Scalar::I8), -1);
  EXPECT_EQ(c->defining_op()->attributes().get_int("value"), 0xff);
  b.ret();
  EXPECT_TRUE(verify(m).empty());
  EXPECT_NE(to_string(m).find("const -1 : i8"), std::string::npos);
}

TEST(UseLists, track_every_operand_slot) {
  Module m;
  Kernel &k = m.add_kernel("k");
  Value *p = k.add_parameter(Type::scalar(Scalar::I32));
  Value *q = k.add_parameter(Type::scalar(Scalar::I32));
  Builder b(m);
  b.set_insertion_point_to_end(k.body());
  Value *sum = b.op(Opcode::Add, {p, p});
  EXPECT_EQ(p->num_uses(), 2u);
  p->replace_all_uses_with(q);
  EXPECT_FALSE(p->has_uses());
  EXPECT_EQ(q->num_uses(), 2u);
  EXPECT_EQ(sum->defining_op()->operand(0), q);
  sum->defining_op()->set_operand(1, p);
  EXPECT_EQ(p->num_uses(), 1u);
  EXPECT_EQ(q->num_uses(), 1u);
  k.body().erase(sum->defining_op());
  EXPECT_FALSE(p->has_uses());
  EXPECT_FALSE(q->has_uses());
}

namespace {
/// The users a value's use list gives, sorted (the list has no order), counted by op.
std::map<const Operation *, int> users_of(const Value *v) {
  std::map<const Operation *, int> count;
  for (Operation *op : v->users())
    ++count[op];
  return count;
}
} // namespace

TEST(UseLists, stay_linked_when_an_op_grows_its_operand_list) {
  Module m;
  Kernel &k = m.add_kernel("k");
  Value *p = k.add_parameter(Type::scalar(Scalar::U32));
  Value *q = k.add_parameter(Type::scalar(Scalar::U32));
  Builder b(m);
  b.set_insertion_point_to_end(k.body());
  // Appending one operand at a time reallocates the op's uses several times; p and q alternate,
  // so each list threads through uses that all moved.
  std::unique_ptr<Operation> yield = Operation::create(Opcode::Yield, {}, {});
  for (int i = 0; i < 37; ++i)
    yield->append_operand(i % 2 ? q : p);
  EXPECT_EQ(p->num_uses(), 19u);
  EXPECT_EQ(q->num_uses(), 18u);
  EXPECT_EQ(users_of(p), (std::map<const Operation *, int>{{yield.get(), 19}}));
  for (const Use *use = q->first_use(); use; use = use->next())
    EXPECT_EQ(yield->operand(use->operand_number()), q);
  q->replace_all_uses_with(p);
  EXPECT_EQ(p->num_uses(), 37u);
  EXPECT_FALSE(q->has_uses());
  yield.reset();
  EXPECT_FALSE(p->has_uses());
}

TEST(UseLists, erasing_users_in_any_order_leaves_exactly_the_others) {
  Module m;
  Kernel &k = m.add_kernel("k");
  Value *p = k.add_parameter(Type::scalar(Scalar::F32));
  Builder b(m);
  b.set_insertion_point_to_end(k.body());
  std::vector<Operation *> users;
  for (int i = 0; i < 100; ++i)
    users.push_back(b.op(Opcode::Add, {p, p})->defining_op());
  // Erase every third user from the middle, then the first and the last.
  std::set<Operation *> erased;
  for (size_t i = 1; i < users.size() - 1; i += 3)
    erased.insert(users[i]);
  erased.insert(users.front());
  erased.insert(users.back());
  for (Operation *op : erased)
    k.body().erase(op);
  std::map<const Operation *, int> expected;
  for (Operation *op : users)
    if (!erased.count(op))
      expected[op] = 2;
  EXPECT_EQ(users_of(p), expected);
  EXPECT_EQ(p->num_uses(), 2 * expected.size());
}

// Issue 17 #12: destroying a module whose value has N users took O(N^2) (50 s for N = 10^6).
// Teardown now unlinks each use in O(1); this builds N = 2*10^5 users of one value and destroys
// the module (bench/ir_bench's BM_destroy_users measures the time at several N).
TEST(UseLists, a_module_with_200000_users_of_one_value_is_destroyed) {
  auto m = std::make_unique<Module>();
  Kernel &k = m->add_kernel("k");
  Value *p = k.add_parameter(Type::scalar(Scalar::F32));
  Builder b(*m);
  b.set_insertion_point_to_end(k.body());
  for (int i = 0; i < 200'000; ++i)
    b.op(Opcode::Add, {p, p});
  EXPECT_EQ(p->num_uses(), 400'000u);
  m.reset();
}

TEST(Regions, insert_take_and_erase_keep_the_list_linked) {
  Module m;
  Kernel &k = m.add_kernel("k");
  Builder b(m);
  b.set_insertion_point_to_end(k.body());
  b.ret();
  Operation *ret = k.body().back();
  b.set_insertion_point_before(ret);
  Operation *first = b.create(Opcode::Barrier, {});
  Operation *second = b.create(Opcode::FenceDevice, {});
  ASSERT_EQ(k.body().size(), 3u);
  EXPECT_EQ(k.body().front(), first);
  EXPECT_EQ(first->next(), second);
  EXPECT_EQ(second->next(), ret);
  EXPECT_EQ(ret->prev(), second);
  auto taken = k.body().take(first);
  EXPECT_EQ(k.body().front(), second);
  EXPECT_EQ(second->prev(), nullptr);
  k.body().insert(nullptr, std::move(taken));
  EXPECT_EQ(k.body().back(), first);
  k.body().erase(first);
  EXPECT_EQ(k.body().back(), ret);
  EXPECT_EQ(k.body().terminator(), ret);
  EXPECT_EQ(k.body().size(), 2u);
}

TEST(Regions, walk_visits_parents_before_children) {
  Module m;
  build_axpy(m);
  std::vector<std::string_view> names;
  m.kernels()[0]->walk([&](Operation *op) { names.push_back(op->name()); });
  std::vector<std::string_view> expected = {"global_id", "vec.extract", "buffer.size", "lt",
                                            "if",        "load",        "load",        "fma",
                                            "store",     "yield",       "yield",       "return"};
  EXPECT_EQ(names, expected);
}

TEST(Storage, ops_built_into_a_module_take_their_storage_from_its_arena) {
  Module m;
  EXPECT_EQ(m.arena().bytes_reserved(), 0u);
  Kernel &k = build_axpy(m);
  size_t reserved = m.arena().bytes_reserved();
  EXPECT_GT(reserved, 0u);
  // An op erased, and one taken out and destroyed, keep their blocks until the module dies; the
  // values they used lose exactly those uses.
  Operation *store = nullptr;
  k.walk([&](Operation *op) {
    if (op->opcode() == Opcode::Store)
      store = op;
  });
  ASSERT_NE(store, nullptr);
  Value *y = k.parameter(1);
  size_t uses = y->num_uses();
  store->parent_region()->erase(store);
  EXPECT_EQ(y->num_uses(), uses - 1);
  EXPECT_EQ(m.arena().bytes_reserved(), reserved);
}

TEST(Storage, adopting_kernels_takes_their_arena_so_they_outlive_their_first_module) {
  Module into;
  Kernel &kept = build_axpy(into);
  {
    Module from;
    Kernel &moved = build_axpy(from);
    moved.set_name("axpy2");
    into.adopt_kernels(std::move(from));
    EXPECT_EQ(from.arena().bytes_reserved(), 0u);
    // Ops built into `from` after the move come from a new arena of its own.
    Kernel &later = from.add_kernel("later");
    Builder b(from);
    b.set_insertion_point_to_end(later.body());
    b.ret();
    EXPECT_GT(from.arena().bytes_reserved(), 0u);
  } // `from` dies here; its kernel lives on in `into` (ASan would see a use after free)
  ASSERT_EQ(into.kernels().size(), 2u);
  EXPECT_TRUE(verify(into).empty()) << to_string(verify(into));
  EXPECT_EQ(to_string(into).find("axpy2") != std::string::npos, true);
  (void)kept;
}

TEST(Storage, detached_ops_live_on_the_heap_and_a_region_grows_its_arguments) {
  Module m;
  Kernel &k = m.add_kernel("k");
  Value *p = k.add_parameter(Type::scalar(Scalar::I32), "p");
  // Created without an arena: freed on its own when its unique_ptr dies.
  Value *operands[] = {p, p};
  Type types[] = {Type::scalar(Scalar::I32)};
  {
    std::unique_ptr<Operation> add = Operation::create(Opcode::Add, operands, types);
    EXPECT_EQ(p->num_uses(), 2u);
  }
  EXPECT_EQ(p->num_uses(), 0u);
  // Many region arguments (the argument array grows in the arena) keep their order and types.
  for (unsigned i = 0; i < 40; ++i)
    k.add_parameter(Type::scalar(i % 2 ? Scalar::F32 : Scalar::U32), "a" + std::to_string(i));
  ASSERT_EQ(k.num_parameters(), 41u);
  for (unsigned i = 0; i < 40; ++i) {
    EXPECT_EQ(k.parameter(i + 1)->name(), "a" + std::to_string(i));
    EXPECT_EQ(k.parameter(i + 1)->index(), i + 1);
    EXPECT_EQ(k.parameter(i + 1)->type(), Type::scalar(i % 2 ? Scalar::F32 : Scalar::U32));
  }
  EXPECT_EQ(k.parameter(0), p);
}

TEST(Storage, attribute_lists_keep_one_entry_inline_and_stay_sorted_and_comparable) {
  AttributeList a, b;
  EXPECT_TRUE(a.empty());
  a.set("value", 7);
  ASSERT_EQ(a.entries().size(), 1u);
  EXPECT_EQ(a.get_int("value"), 7);
  a.set("value", 8); // replaced, still one
  EXPECT_EQ(a.entries().size(), 1u);
  // A second and a third entry, inserted out of order: kept sorted by name.
  a.set("lane", 2);
  a.set("zeta", std::string("z"));
  std::vector<std::string> names;
  for (const NamedAttribute &n : a.entries())
    names.push_back(n.name);
  EXPECT_EQ(names, (std::vector<std::string>{"lane", "value", "zeta"}));
  EXPECT_EQ(a.get_int("value"), 8);
  // Built in another order, through assign: equal.
  b.assign({{"zeta", std::string("z")}, {"value", 1}, {"lane", 2}, {"value", 8}});
  EXPECT_EQ(a, b);
  // Back down to one entry and to none: equal to lists that never had more.
  EXPECT_TRUE(a.remove("zeta"));
  EXPECT_TRUE(a.remove("lane"));
  EXPECT_FALSE(a.remove("lane"));
  AttributeList one;
  one.set("value", 8);
  EXPECT_EQ(a, one);
  EXPECT_EQ(a.find("lane"), nullptr);
  EXPECT_TRUE(a.remove("value"));
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a, AttributeList());
  EXPECT_FALSE(a.remove("value"));
}

TEST(Module, interns_each_file_once) {
  Module m;
  uint32_t a = m.intern_file("a.cpp");
  EXPECT_EQ(m.intern_file("b.cpp"), a + 1);
  EXPECT_EQ(m.intern_file("a.cpp"), a);
  EXPECT_EQ(m.file_name(a), "a.cpp");
  EXPECT_EQ(m.intern_file(""), 0u);
  EXPECT_EQ(m.file_name(0), "");
  EXPECT_EQ(m.file_name(999), "");
}

TEST(Dominance, follows_the_region_structure) {
  ParseResult r = parse_module(R"(module @m {
  kernel @k(%c: bool, %n: u32) {
    %a = add %n, %n : u32
    %x = if %c : u32 {
      %b = add %a, %n : u32
      yield %b
    } else {
      yield %a
    }
    %d = add %x, %a : u32
    return
  }
})",
                               "d.cir");
  ASSERT_TRUE(r.module);
  Kernel &k = *r.module->kernels()[0];
  Operation *a = k.body().front();
  Operation *branch = a->next();
  Operation *b = branch->region(0).front();
  Operation *d = branch->next();
  EXPECT_TRUE(properly_dominates(a, b)); // nested after it
  EXPECT_TRUE(properly_dominates(a, d));
  EXPECT_FALSE(properly_dominates(d, a)); // later
  EXPECT_FALSE(properly_dominates(b, d)); // inside a region that ended
  EXPECT_FALSE(properly_dominates(a, a));
  EXPECT_TRUE(dominates(a->result(), b));
  EXPECT_TRUE(dominates(k.parameter(0), b));
  EXPECT_FALSE(dominates(b->result(), d));
  EXPECT_FALSE(dominates(branch->result(), b)); // a result is not visible in its own regions
  EXPECT_TRUE(dominates(branch->result(), d));
}
