//===- ir_bench.cpp - Throughput of the IR's text form, verifier and structural hash ----------===//
//
// BM_build makes a kernel of `ops` ops with the Builder, as tracing does. The others work on the
// same generated module (a kernel of about `ops` operations: loads,
// arithmetic chains, branches and loops) and reports operations per second, so the stages can be
// compared side by side in one run. The use-list benchmarks build one value with N users (N adds
// of it) and report users per second for replacing all its uses, erasing every user, and
// destroying the module; a rate that holds from N = 10,000 to 1,000,000 shows linear cost:
//   build/bench/ir_bench --benchmark_format=json
//
//===-----------------------------------------------------------------------------------------===//
#include "cubecc/ir/builder.h"
#include "cubecc/ir/parser.h"
#include "cubecc/ir/printer.h"
#include "cubecc/ir/structural_hash.h"
#include "cubecc/ir/verifier.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <stdexcept>

using namespace cubecc::ir;

namespace {

/// A kernel of roughly `ops` ops: blocks of 8 arithmetic ops, every 4th block inside an `if`,
/// every 8th inside a `for` carrying a value.
std::string generate(int ops) {
  std::string s = "module @bench {\n  kernel @k(%in: buffer<f32, read>, %out: buffer<f32, "
                  "readwrite>, %n: u32) workgroup(256, 1, 1) {\n";
  s += "    %gid = global_id : u32x3\n    %i = vec.extract %gid {lane = 0} : u32\n";
  s += "    %one = const 1 : u32\n    %zero = const 0 : u32\n";
  s += "    %acc0 = load %in, %i : f32\n";
  int blocks = ops / 10;
  for (int b = 0; b < blocks; ++b) {
    std::string prev = fmt::format("%acc{}", b);
    std::string body;
    std::string indent = "    ";
    bool branch = b % 4 == 1, loop = b % 8 == 3;
    if (branch) {
      s += fmt::format("    %c{} = lt %i, %n : bool\n", b);
      s += fmt::format("    %acc{} = if %c{} : f32 {{\n", b + 1, b);
      indent = "      ";
    } else if (loop) {
      s += fmt::format("    %acc{} = for %zero, %n, %one, {} : f32 (%k{}: u32, %x{}: f32) {{\n",
                       b + 1, prev, b, b);
      prev = fmt::format("%x{}", b);
      indent = "      ";
    }
    for (int j = 0; j < 8; ++j) {
      std::string op = j % 3 == 0 ? "add" : j % 3 == 1 ? "mul" : "max";
      std::string next = fmt::format("%t{}_{}", b, j);
      s += fmt::format("{}{} = {} {}, {} : f32\n", indent, next, op, prev, prev);
      prev = next;
    }
    if (branch)
      s += fmt::format("      yield {}\n    }} else {{\n      yield %acc{}\n    }}\n", prev, b);
    else if (loop)
      s += fmt::format("      yield {}\n    }}\n", prev);
    else
      s += fmt::format("    %acc{} = sqrt {} : f32\n", b + 1, prev);
  }
  s += fmt::format("    store %out, %i, %acc{}\n    return\n  }}\n}}\n", blocks);
  return s;
}

int count_ops(const Module &m) {
  int n = 0;
  for (const auto &k : m.kernels())
    k->walk([&](Operation *) { ++n; });
  return n;
}

std::unique_ptr<Module> parse_or_throw(const std::string &text) {
  ParseResult r = parse_module(text, "bench.cir");
  if (!r.module)
    throw std::runtime_error(to_string(r.errors));
  return std::move(r.module);
}

void BM_parse(benchmark::State &state) {
  std::string text = generate(static_cast<int>(state.range(0)));
  int ops = count_ops(*parse_or_throw(text));
  for (auto _ : state)
    benchmark::DoNotOptimize(parse_module(text, "bench.cir"));
  state.SetItemsProcessed(state.iterations() * ops);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}

void BM_print(benchmark::State &state) {
  auto m = parse_or_throw(generate(static_cast<int>(state.range(0))));
  for (auto _ : state)
    benchmark::DoNotOptimize(to_string(*m));
  state.SetItemsProcessed(state.iterations() * count_ops(*m));
}

void BM_verify(benchmark::State &state) {
  auto m = parse_or_throw(generate(static_cast<int>(state.range(0))));
  if (!verify(*m).empty())
    throw std::runtime_error("generated module does not verify");
  for (auto _ : state)
    benchmark::DoNotOptimize(verify(*m));
  state.SetItemsProcessed(state.iterations() * count_ops(*m));
}

void BM_structural_hash(benchmark::State &state) {
  auto m = parse_or_throw(generate(static_cast<int>(state.range(0))));
  for (auto _ : state)
    benchmark::DoNotOptimize(structural_hash(*m));
  state.SetItemsProcessed(state.iterations() * count_ops(*m));
}

/// Builds a kernel of `ops` ops with the Builder (what tracing does): a chain of constants,
/// arithmetic and comparisons, with an `if` every 16 ops. Destroying the module is not timed.
void BM_build(benchmark::State &state) {
  const int ops = static_cast<int>(state.range(0));
  for (auto _ : state) {
    auto module = std::make_unique<Module>();
    Kernel &k = module->add_kernel("k");
    Value *x = k.add_parameter(Type::scalar(Scalar::F32), "x");
    Builder b(*module);
    b.set_insertion_point_to_end(k.body());
    int built = 0;
    while (built < ops) {
      Value *c = b.const_float(Type::scalar(Scalar::F32), 1.5);
      Value *sum = b.op(Opcode::Add, {x, c});
      Value *product = b.op(Opcode::Mul, {sum, x});
      Value *less = b.op(Opcode::Lt, {product, c});
      x = b.create(Opcode::Select, {less, product, sum}, {Type::scalar(Scalar::F32)})->result();
      built += 5;
      if (built % 16 < 5) {
        Operation *branch = b.create_if(less, {});
        b.set_insertion_point_to_end(branch->region(0));
        b.yield();
        b.set_insertion_point_to_end(branch->region(1));
        b.yield();
        b.set_insertion_point_to_end(k.body());
        built += 3;
      }
    }
    b.ret();
    state.PauseTiming();
    module.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * ops);
}

/// A module whose kernel has one parameter used twice by each of `users` adds.
struct ManyUsers {
  explicit ManyUsers(int users) : module(std::make_unique<Module>()) {
    Kernel &k = module->add_kernel("k");
    value = k.add_parameter(Type::scalar(Scalar::F32));
    other = k.add_parameter(Type::scalar(Scalar::F32));
    Builder b(*module);
    b.set_insertion_point_to_end(k.body());
    for (int i = 0; i < users; ++i)
      adds.push_back(b.op(Opcode::Add, {value, value})->defining_op());
  }
  std::unique_ptr<Module> module;
  Value *value = nullptr;
  Value *other = nullptr;
  std::vector<Operation *> adds;
};

void BM_replace_all_uses(benchmark::State &state) {
  const int users = static_cast<int>(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    ManyUsers m(users);
    state.ResumeTiming();
    m.value->replace_all_uses_with(m.other);
    state.PauseTiming();
    m.module.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * users);
}

void BM_erase_users(benchmark::State &state) {
  const int users = static_cast<int>(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    ManyUsers m(users);
    state.ResumeTiming();
    for (Operation *op : m.adds) // first user first: the worst order for a vector of users
      op->parent_region()->erase(op);
    state.PauseTiming();
    m.module.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * users);
}

void BM_destroy_users(benchmark::State &state) {
  const int users = static_cast<int>(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    ManyUsers m(users);
    state.ResumeTiming();
    m.module.reset();
  }
  state.SetItemsProcessed(state.iterations() * users);
}

} // namespace

BENCHMARK(BM_replace_all_uses)->Arg(10000)->Arg(40000)->Arg(1000000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_erase_users)->Arg(10000)->Arg(40000)->Arg(1000000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_destroy_users)->Arg(10000)->Arg(40000)->Arg(1000000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_build)->Arg(1000)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_parse)->Arg(1000)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_print)->Arg(1000)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_verify)->Arg(1000)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_structural_hash)->Arg(1000)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
