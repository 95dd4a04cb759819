//===- random_ir.cpp - The random kernel generator --------------------------------------------===//
#include "random_ir.h"

#include <fmt/format.h>

#include <map>
#include <random>
#include <vector>

namespace cubecc::test {
namespace {

const char *const kTypes[] = {"i32", "u32", "f32", "bool"};

class Generator {
public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  std::string kernel() {
    out_ = fmt::format("module @random {{\n  kernel @random(%in_i: buffer<i32, read>, %in_f: "
                       "buffer<f32, read>, %out: buffer<u32, readwrite>, %n: i32) "
                       "workgroup({}, 1, 1) {{\n",
                       kRandomWorkgroup);
    scopes_.push_back({});
    indent_ = 2;
    bool shared = chance(0.4);
    if (shared)
      line("%sh = shared.alloc : shared<u32, {}>", kRandomWorkgroup);
    line("%li = local_index : u32");
    define("u32", "%li");
    define("i32", "%n");
    // Values that differ between invocations, so that branches and loops diverge.
    line("%xi = load %in_i, %li : i32");
    define("i32", "%xi");
    line("%xf = load %in_f, %li : f32");
    define("f32", "%xf");
    line("%lf = cast %li : f32");
    define("f32", "%lf");
    declare_locals();
    constant("u32", "7");
    constant("u32", fmt::format("{}", kRandomInputs - 1));
    statements(0, 4 + pick(8));
    if (shared) {
      // Exchange a value between invocations through shared memory (uniform control flow).
      line("store %sh, %li, {}", any("u32"));
      line("barrier");
      std::string k = constant("u32", fmt::format("{}", 1 + pick(kRandomWorkgroup - 1)));
      std::string sum = fresh();
      line("{} = add %li, {} : u32", sum, k);
      std::string mask = constant("u32", fmt::format("{}", kRandomWorkgroup - 1));
      std::string idx = fresh();
      line("{} = and {}, {} : u32", idx, sum, mask);
      std::string v = fresh();
      line("{} = load %sh, {} : u32", v, idx);
      define("u32", v);
      statements(0, 2 + pick(4));
    }
    // Make (nearly) every value observable: hash all top-level values, the locals' final
    // contents among them, into the slots.
    for (const Local &l : locals_)
      for (uint32_t i = 0; i < l.count; ++i)
        define(l.type, load_local(l, element_index(l, i)));
    fold_scope(0, {"i32", "u32"});
    fold_scope(1, {"f32"});
    fold_scope(2, {"bool"});
    store_slot(3, pick_type());
    line("return");
    out_ += "  }\n}\n";
    return out_;
  }

private:
  //===- Helpers -----------------------------------------------------------------------------===//

  uint32_t pick(uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  std::string pick_type() { return kTypes[pick(4)]; }
  std::string fresh() { return fmt::format("%v{}", next_++); }

  template <class... A> void line(fmt::format_string<A...> f, A &&...args) {
    out_.append(static_cast<size_t>(indent_) * 2, ' ');
    out_ += fmt::format(f, std::forward<A>(args)...);
    out_ += "\n";
  }

  void define(const std::string &type, const std::string &name) {
    scopes_.back()[type].push_back(name);
  }

  /// A visible value of `type` (making a constant when there is none).
  std::string any(const std::string &type) {
    std::vector<std::string> all;
    for (const auto &scope : scopes_) {
      auto it = scope.find(type);
      if (it != scope.end())
        all.insert(all.end(), it->second.begin(), it->second.end());
    }
    if (all.empty() || chance(0.1))
      return constant(type, random_literal(type));
    // Half the time a recent value (longer dependency chains), else any visible one.
    uint32_t n = static_cast<uint32_t>(all.size());
    uint32_t i = chance(0.5) ? n - 1 - std::min(pick(n), pick(std::min(n, 4u))) : pick(n);
    return all[i];
  }

  std::string random_literal(const std::string &type) {
    if (type == "bool")
      return chance(0.5) ? "true" : "false";
    if (type == "f32") {
      static const char *const floats[] = {"0.0",  "-0.0", "1.0",    "-1.0",  "0.5", "2.0",
                                           "3.25", "1e10", "-0.001", "100.0", "inf", "-2.5"};
      return floats[pick(std::size(floats))];
    }
    static const char *const ints[] = {"0",  "1",  "2",  "3",   "4",       "7",         "8",
                                       "16", "31", "32", "100", "1000000", "2147483647"};
    std::string v = ints[pick(std::size(ints))];
    if (type == "i32" && chance(0.3) && v != "0")
      v = "-" + v;
    return v;
  }

  std::string constant(const std::string &type, const std::string &literal) {
    std::string name = fresh();
    line("{} = const {} : {}", name, literal, type);
    define(type, name);
    return name;
  }

  //===- Statements --------------------------------------------------------------------------===//

  void statements(int depth, int count) {
    for (int i = 0; i < count; ++i)
      statement(depth);
  }

  void statement(int depth) {
    uint32_t kind = pick(depth < 3 ? 18 : 13);
    switch (kind) {
    case 0:
    case 1:
    case 2:
      return integer_op();
    case 3:
    case 4:
      return float_op();
    case 5:
      return compare();
    case 6:
      return select_or_logic();
    case 7:
      return cast();
    case 8:
      return load();
    case 9:
      return subgroup();
    case 10: {
      std::string type = pick_type();
      constant(type, random_literal(type));
      return;
    }
    case 11:
    case 12:
      return local_access();
    case 13:
    case 14:
      return if_op(depth);
    case 15:
    case 16:
      return for_op(depth);
    default:
      return while_op(depth);
    }
  }

  void integer_op() {
    static const char *const ops[] = {"add", "sub", "mul",   "div",     "rem",
                                      "and", "or",  "xor",   "shl",     "shr",
                                      "min", "max", "mulhi", "add_sat", "sub_sat"};
    std::string type = chance(0.5) ? "i32" : "u32";
    if (chance(0.15)) { // the bit counts (legalized into shifts and masks for SPIR-V)
      static const char *const unary[] = {"popcount", "clz", "ctz", "ffs", "bitreverse"};
      std::string name = fresh();
      line("{} = {} {} : {}", name, unary[pick(std::size(unary))], any(type), type);
      define(type, name);
      return;
    }
    std::string lhs = any(type);
    // A third of the time a constant on the right: the shapes that folding, identities and
    // strength reduction look for (0, 1, -1 and powers of two).
    static const char *const special[] = {"0", "1", "2", "4", "8", "16", "64", "-1"};
    std::string literal = special[pick(std::size(special))];
    if (type == "u32" && literal == "-1")
      literal = "4294967295";
    std::string rhs = chance(0.35) ? constant(type, literal) : any(type);
    std::string name = fresh();
    line("{} = {} {}, {} : {}", name, ops[pick(std::size(ops))], lhs, rhs, type);
    define(type, name);
  }

  void float_op() {
    std::string name = fresh();
    uint32_t k = pick(4);
    if (k == 0) {
      static const char *const ops[] = {"neg", "abs", "sqrt", "floor", "ceil", "round"};
      line("{} = {} {} : f32", name, ops[pick(std::size(ops))], any("f32"));
    } else if (k == 1) {
      line("{} = fma {}, {}, {} : f32", name, any("f32"), any("f32"), any("f32"));
    } else {
      static const char *const ops[] = {"add", "sub", "mul", "div", "min", "max"};
      line("{} = {} {}, {} : f32", name, ops[pick(std::size(ops))], any("f32"), any("f32"));
    }
    define("f32", name);
  }

  void compare() {
    static const char *const ops[] = {"eq", "ne", "lt", "le", "gt", "ge"};
    static const char *const types[] = {"i32", "u32", "f32"};
    std::string type = types[pick(3)];
    std::string name = fresh();
    line("{} = {} {}, {} : bool", name, ops[pick(std::size(ops))], any(type), any(type));
    define("bool", name);
  }

  void select_or_logic() {
    std::string name = fresh();
    if (chance(0.5)) {
      std::string type = pick_type();
      line("{} = select {}, {}, {} : {}", name, any("bool"), any(type), any(type), type);
      define(type, name);
    } else {
      static const char *const ops[] = {"and", "or", "xor"};
      line("{} = {} {}, {} : bool", name, ops[pick(3)], any("bool"), any("bool"));
      define("bool", name);
    }
  }

  void cast() {
    std::string from = pick_type(), to = pick_type();
    std::string name = fresh();
    line("{} = cast {} : {}", name, any(from), to);
    define(to, name);
  }

  void load() {
    if (chance(0.25)) { // four neighbours from an aligned base: work for the vectorizer
      std::string group = fresh(), base = fresh();
      line("{} = and {}, {} : u32", group, any("u32"),
           constant("u32", fmt::format("{}", kRandomInputs / 4 - 1)));
      line("{} = mul {}, {} : u32", base, group, constant("u32", "4"));
      bool is_float = chance(0.5);
      for (int k = 0; k < 4; ++k) {
        std::string index = base;
        if (k) {
          index = fresh();
          line("{} = add {}, {} : u32", index, base, constant("u32", fmt::format("{}", k)));
        }
        std::string name = fresh();
        line("{} = load {}, {} : {}", name, is_float ? "%in_f" : "%in_i", index,
             is_float ? "f32" : "i32");
        define(is_float ? "f32" : "i32", name);
      }
      return;
    }
    std::string index = fresh();
    line("{} = and {}, {} : u32", index, any("u32"), mask_of_inputs());
    std::string name = fresh();
    bool is_float = chance(0.5);
    line("{} = load {}, {} : {}", name, is_float ? "%in_f" : "%in_i", index,
         is_float ? "f32" : "i32");
    define(is_float ? "f32" : "i32", name);
  }

  //===- Locals (what a DSL Var traces to) ---------------------------------------------------===//

  /// A local array: `count` elements of `type`, accessed at constant indices, or at indices
  /// computed at run time (`dynamic`: it must stay in memory through promote-locals).
  struct Local {
    std::string name, type;
    uint32_t count = 1;
    bool dynamic = false;
  };

  /// Up to three locals at the top of the kernel (where local.alloc must be), most of them
  /// initialised there as a Var is; the others read zero until stored (the interpreter's fill).
  void declare_locals() {
    for (uint32_t i = pick(4); i > 0; --i) {
      Local l{fmt::format("%loc{}", locals_.size()), kTypes[pick(3)], chance(0.7) ? 1u : 2u,
              chance(0.2)};
      line("{} = local.alloc : local<{}, {}>", l.name, l.type, l.count);
      locals_.push_back(l);
      // Every element is stored first, at a constant index: a fresh local's contents are
      // unspecified (docs/ir.md), and these kernels also run on devices that do not zero them.
      for (uint32_t k = 0; k < l.count; ++k)
        line("store {}, {}, {}", l.name, constant("u32", fmt::format("{}", k)), any(l.type));
    }
  }

  /// The index of element `k` of `l`: a constant, or for a dynamic local an index in [0, k]
  /// computed at run time.
  std::string element_index(const Local &l, uint32_t k) {
    if (!l.dynamic)
      return constant(chance(0.8) ? "u32" : "i32", fmt::format("{}", k));
    std::string index = fresh();
    line("{} = and {}, {} : u32", index, any("u32"), constant("u32", fmt::format("{}", k)));
    return index;
  }

  std::string load_local(const Local &l, const std::string &index) {
    std::string name = fresh();
    line("{} = load {}, {} : {}", name, l.name, index, l.type);
    return name;
  }

  /// A read or a write of a random element of a random local, in whatever region we are in.
  void local_access() {
    if (locals_.empty())
      return integer_op();
    const Local &l = locals_[pick(static_cast<uint32_t>(locals_.size()))];
    std::string index = element_index(l, pick(l.count));
    if (chance(0.5))
      line("store {}, {}, {}", l.name, index, any(l.type));
    else
      define(l.type, load_local(l, index));
  }

  std::string mask_of_inputs() { return constant("u32", fmt::format("{}", kRandomInputs - 1)); }

  void subgroup() {
    static const char *const ops[] = {"subgroup.sum", "subgroup.max", "subgroup.inclusive_sum",
                                      "subgroup.exclusive_min"};
    std::string name = fresh();
    line("{} = {} {} : u32", name, ops[pick(std::size(ops))], any("u32"));
    define("u32", name);
  }

  /// Hashes every value of `types` defined in the innermost scope into one word and stores it
  /// to output slot `slot`: ((h * 31) + bits(v)) over the values in definition order.
  void fold_scope(uint32_t slot, std::vector<std::string> types, std::string index = {}) {
    std::string h = constant("u32", "17");
    std::string k31 = constant("u32", "31");
    std::map<std::string, std::vector<std::string>> scope = scopes_.back();
    for (const std::string &type : types) {
      for (const std::string &v : scope[type]) {
        std::string bits = v;
        if (type != "u32") {
          bits = fresh();
          line("{} = {} {} : u32", bits, type == "bool" ? "cast" : "bitcast", v);
        }
        std::string scaled = fresh(), next = fresh();
        line("{} = mul {}, {} : u32", scaled, h, k31);
        line("{} = add {}, {} : u32", next, scaled, bits);
        h = next;
      }
    }
    if (index.empty())
      index = slot_index(slot);
    line("store %out, {}, {}", index, h);
  }

  /// The index of this invocation's output slot `slot`, computed here.
  std::string slot_index(uint32_t slot) {
    std::string slots = constant("u32", fmt::format("{}", kRandomSlots));
    std::string base = fresh();
    line("{} = mul %li, {} : u32", base, slots);
    std::string offset = constant("u32", fmt::format("{}", slot));
    std::string index = fresh();
    line("{} = add {}, {} : u32", index, base, offset);
    return index;
  }

  void write_slot(uint32_t slot, const std::string &bits) {
    line("store %out, {}, {}", slot_index(slot), bits);
  }

  /// A store to one of this invocation's output slots (under whatever branch we are in).
  void store_slot(uint32_t slot, const std::string &type) {
    std::string value = any(type);
    std::string bits = value;
    if (type != "u32") {
      bits = fresh();
      line("{} = {} {} : u32", bits, type == "bool" ? "cast" : "bitcast", value);
    }
    write_slot(slot, bits);
  }

  std::vector<std::string> result_types(uint32_t max) {
    std::vector<std::string> types;
    for (uint32_t i = pick(max + 1); i > 0; --i)
      types.push_back(pick_type());
    return types;
  }

  std::string join(const std::vector<std::string> &v) {
    std::string s;
    for (const std::string &x : v)
      s += (s.empty() ? "" : ", ") + x;
    return s;
  }

  std::vector<std::string> values_of(const std::vector<std::string> &types) {
    std::vector<std::string> v;
    for (const std::string &t : types)
      v.push_back(any(t));
    return v;
  }

  void if_op(int depth) {
    std::vector<std::string> types = result_types(2);
    std::vector<std::string> results;
    for (size_t i = 0; i < types.size(); ++i)
      results.push_back(fresh());
    std::string cond = any("bool");
    // Sometimes both arms end with a store to one slot whose index is computed before the if
    // (what simplify-cf sinks below it).
    std::string common_index;
    uint32_t common_slot = 0;
    if (chance(0.25)) {
      common_slot = pick(kRandomSlots);
      common_index = slot_index(common_slot);
    }
    line("{}if {}{} {{", results.empty() ? "" : join(results) + " = ", cond,
         types.empty() ? "" : " : " + join(types));
    for (int branch = 0; branch < 2; ++branch) {
      ++indent_;
      scopes_.emplace_back();
      statements(depth + 1, 1 + pick(4));
      if (in_loop_ && chance(0.15)) {
        line("{}{}", chance(0.5) ? "break" : "continue", exit_values());
      } else {
        if (!common_index.empty())
          fold_scope(common_slot, {"i32", "u32", "f32", "bool"}, common_index);
        else if (chance(0.5))
          fold_scope(pick(kRandomSlots), {"i32", "u32", "f32", "bool"});
        std::vector<std::string> v = values_of(types);
        line("yield{}", v.empty() ? "" : " " + join(v));
      }
      scopes_.pop_back();
      --indent_;
      if (branch == 0)
        line("}} else {{");
      else
        line("}}");
    }
    for (size_t i = 0; i < types.size(); ++i)
      define(types[i], results[i]);
  }

  /// Operands for a break/continue of the innermost loop.
  std::string exit_values() {
    const std::vector<std::string> &types = loop_types_.back();
    std::vector<std::string> v = values_of(types);
    return v.empty() ? "" : " " + join(v);
  }

  void loop_body(int depth, const std::vector<std::string> &carried) {
    bool was_in_loop = in_loop_;
    in_loop_ = true;
    loop_types_.push_back(carried);
    statements(depth + 1, 1 + pick(5));
    if (chance(0.3))
      fold_scope(pick(kRandomSlots), {"i32", "u32", "f32", "bool"});
    std::vector<std::string> v = values_of(carried);
    line("yield{}", v.empty() ? "" : " " + join(v));
    loop_types_.pop_back();
    in_loop_ = was_in_loop;
  }

  void for_op(int depth) {
    std::string lo = constant("u32", chance(0.7) ? "0" : "1");
    std::string hi;
    if (chance(0.5)) {
      hi = constant("u32", fmt::format("{}", pick(5)));
    } else {
      hi = fresh();
      line("{} = and {}, {} : u32", hi, any("u32"), constant("u32", "3"));
    }
    std::string step = constant("u32", chance(0.8) ? "1" : "2");
    std::vector<std::string> types = result_types(2);
    std::vector<std::string> inits = values_of(types), results, args;
    for (size_t i = 0; i < types.size(); ++i) {
      results.push_back(fresh());
      args.push_back(fresh());
    }
    std::string iv = fresh();
    std::string arg_list = iv + ": u32";
    for (size_t i = 0; i < types.size(); ++i)
      arg_list += ", " + args[i] + ": " + types[i];
    static const char *const hints[] = {"", "", "", " {unroll = 1}", " {unroll = 4}"};
    line("{}for {}, {}, {}{}{}{} ({}) {{", results.empty() ? "" : join(results) + " = ", lo, hi,
         step, inits.empty() ? "" : ", " + join(inits), hints[pick(std::size(hints))],
         types.empty() ? "" : " : " + join(types), arg_list);
    ++indent_;
    scopes_.emplace_back();
    define("u32", iv);
    for (size_t i = 0; i < types.size(); ++i)
      define(types[i], args[i]);
    loop_body(depth, types);
    scopes_.pop_back();
    --indent_;
    line("}}");
    for (size_t i = 0; i < types.size(); ++i)
      define(types[i], results[i]);
  }

  /// A while loop whose first carried value counts up to a small bound (so it terminates).
  void while_op(int depth) {
    std::string bound = constant("u32", fmt::format("{}", pick(4)));
    std::vector<std::string> types = {"u32"};
    for (const std::string &t : result_types(1))
      types.push_back(t);
    std::vector<std::string> inits = {constant("u32", "0")};
    for (size_t i = 1; i < types.size(); ++i)
      inits.push_back(any(types[i]));
    std::vector<std::string> results, before, after;
    for (size_t i = 0; i < types.size(); ++i) {
      results.push_back(fresh());
      before.push_back(fresh());
      after.push_back(fresh());
    }
    auto args = [&](const std::vector<std::string> &names) {
      std::string s;
      for (size_t i = 0; i < names.size(); ++i)
        s += (i ? ", " : "") + names[i] + ": " + types[i];
      return s;
    };
    line("{} = while {} : {} ({}) {{", join(results), join(inits), join(types), args(before));
    ++indent_;
    std::string more = fresh();
    line("{} = lt {}, {} : bool", more, before[0], bound);
    line("condition {}, {}", more, join(before));
    --indent_;
    line("}} do ({}) {{", args(after));
    ++indent_;
    scopes_.emplace_back();
    for (size_t i = 0; i < types.size(); ++i)
      define(types[i], after[i]);
    bool was_in_loop = in_loop_;
    in_loop_ = false; // a break here would have to carry the counter: keep while bodies simple
    statements(depth + 1, 1 + pick(4));
    in_loop_ = was_in_loop;
    std::string one = constant("u32", "1");
    std::string next = fresh();
    line("{} = add {}, {} : u32", next, after[0], one);
    std::vector<std::string> yielded = {next};
    for (size_t i = 1; i < types.size(); ++i)
      yielded.push_back(any(types[i]));
    line("yield {}", join(yielded));
    scopes_.pop_back();
    --indent_;
    line("}}");
    for (size_t i = 0; i < types.size(); ++i)
      define(types[i], results[i]);
  }

  std::mt19937_64 rng_;
  std::string out_;
  int indent_ = 2;
  uint64_t next_ = 0;
  bool in_loop_ = false;
  std::vector<std::vector<std::string>> loop_types_;
  std::vector<Local> locals_;
  std::vector<std::map<std::string, std::vector<std::string>>> scopes_;
};

} // namespace

std::string random_kernel(uint64_t seed) {
  return Generator(seed).kernel();
}

RandomInputs random_inputs(uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x5eedULL);
  RandomInputs in;
  for (uint32_t i = 0; i < kRandomInputs; ++i) {
    auto v = static_cast<int32_t>(rng() % 2001) - 1000;
    if (rng() % 8 == 0)
      v = static_cast<int32_t>(rng()); // now and then a large one
    auto bits = static_cast<uint32_t>(v);
    in.ints.bytes.insert(in.ints.bytes.end(), reinterpret_cast<uint8_t *>(&bits),
                         reinterpret_cast<uint8_t *>(&bits) + 4);
    float f = static_cast<float>(static_cast<int>(rng() % 20001) - 10000) / 64.0f;
    in.floats.bytes.insert(in.floats.bytes.end(), reinterpret_cast<uint8_t *>(&f),
                           reinterpret_cast<uint8_t *>(&f) + 4);
  }
  in.n = static_cast<int32_t>(rng() % 100) - 20;
  return in;
}

} // namespace cubecc::test
