//===- c_emitter.cpp - IR kernels to CUDA C++ and HIP C++ -------------------------------------===//
//
// One emitter, two dialects (CUDA, HIP) that differ only in the prelude (c_prelude.h), the
// warp width and a few names. The IR's structure maps onto C++ directly:
//   - every value is a `const` local named after the DSL's name (or v<N>); a vector is a
//     cubecc_vec<T, N> written lane by lane;
//   - `if` results are variables declared before the `if` and assigned by each `yield`;
//   - `for` is a C `for` whose carried values are variables assigned by `yield`/`continue`, whose
//     increment cannot wrap around (docs/ir.md §5.3), and whose results are those variables;
//     `while` is `for (;;)` with the before region, a `break` when the condition fails, then the
//     do region; IR `break`/`continue` assign and then `break;`/`continue;`.
//   - The emitter sees legalized IR (passes/legalize.h, run by emit_c_family on a copy of the
//     kernel): integer division never sees a zero divisor (or -1), shift amounts are in range,
//     float-to-int casts are in range. What C++ leaves open beyond that is pinned here: integer
//     arithmetic wraps (done in unsigned), f16 and bf16 compute in f32 and round once per op
//     (through the vendor's conversion intrinsics), no contraction (NVRTC --fmad=false, hipRTC
//     -ffp-contract=off).
//   - Each statement is preceded, when the source line changes, by a `// file:line` comment.
//
//===-----------------------------------------------------------------------------------------===//
#include "common/c_emitter.h"

#include "c_prelude.h"

#include "cubecc/ir/clone.h"
#include "cubecc/ir/ir.h"
#include "cubecc/ir/print_format.h"
#include "cubecc/ir/semantics.h"
#include "cubecc/ir/subgroup_combine.h"
#include "cubecc/ir/uniformity.h"
#include "cubecc/passes/legalize.h"

#include <fmt/format.h>

#include <cmath>
#include <set>
#include <sstream>
#include <unordered_map>
#include <utility>

namespace cubecc::codegen {
namespace {

/// The most shared memory a CUDA kernel may declare statically (`__shared__`); beyond it, the
/// kernel's shared memory is dynamic and opted in to at load (up to the device's limit).
constexpr uint64_t kStaticSharedBytes = 48 * 1024;

} // namespace

namespace {

using ir::Opcode;
using ir::Scalar;
using ir::Type;

/// The register type of a scalar (f16/bf16 live in f32).
std::string reg(Scalar s) {
  s = ir::register_scalar(s);
  switch (s) {
  case Scalar::Bool:
    return "bool";
  case Scalar::F16:
  case Scalar::BF16:
    return "f32";
  default:
    return std::string(ir::scalar_name(s));
  }
}
/// The memory type of an element.
std::string storage(Scalar s) {
  if (s == Scalar::F16)
    return "cubecc_f16_storage";
  if (s == Scalar::BF16)
    return "cubecc_bf16_storage";
  return reg(s);
}
std::string unsigned_of(Scalar s) {
  switch (ir::scalar_bits(s)) {
  case 8:
    return "u8";
  case 16:
    return "u16";
  case 64:
    return "u64";
  default:
    return "u32";
  }
}
/// The type integer arithmetic is done in (wide enough not to overflow int promotion).
std::string wide_of(Scalar s) {
  return ir::scalar_bits(s) == 64 ? "u64" : "u32";
}
bool half_like(Scalar s) {
  return s == Scalar::F16 || s == Scalar::BF16;
}

class CEmitter {
public:
  CEmitter(const ir::Kernel &kernel, const TargetFeatures &features, bool hip,
           std::vector<ir::Diagnostic> &errors)
      : kernel_(kernel), features_(features), hip_(hip), errors_(errors) {}

  std::optional<CSource> run();
  /// What run() checks before it writes: the target's support, each op's needs and the limits.
  bool check_kernel();

private:
  const ir::Kernel &kernel_;
  const TargetFeatures &features_;
  bool hip_;
  /// CUDA kernels with more shared memory than a static __shared__ declaration may hold (48 KiB)
  /// carve their arrays from one `extern __shared__` block that the runtime sizes at launch (and
  /// opts in to beyond 48 KiB); `shared_offset_` is the next array's place in it.
  bool dynamic_shared_ = false;
  uint64_t shared_offset_ = 0;
  std::vector<ir::Diagnostic> &errors_;
  std::ostringstream body_;
  int indent_ = 1;
  std::unordered_map<const ir::Value *, std::string> names_;
  std::set<std::string> used_;
  unsigned next_ = 0;
  uint32_t last_line_ = 0, last_file_ = 0;
  std::vector<std::vector<std::string>> loop_results_; ///< per enclosing loop: its variables
  std::vector<std::vector<std::string>> loop_carried_;
  std::vector<std::vector<std::string>> if_results_;
  std::unique_ptr<ir::UniformityAnalysis> uniformity_;
  int divergent_ = 0;    ///< > 0 inside control flow that may differ between lanes of a warp
  bool refused_ = false; ///< an op was refused during emission (errors_ says which)
  bool divergent_matrix_refused_ = false;
  /// The ldmatrix branch of a matrix.load from shared memory (CUDA, 16-bit 'a' and 'b'), opened
  /// with `if (aligned) {` and left open; false when the load cannot take it.
  bool emit_ldmatrix(const ir::Operation &op, Type t, bool col_major, const std::string &lane);
  /// The C expression of a matrix.load/store's element index for the element at (row, col).
  std::string matrix_element_index(const ir::Operation &op, const std::string &row,
                                   const std::string &col, bool col_major);

  bool varying(const ir::Value *v) const { return uniformity_->of(v) == ir::Uniformity::Varying; }
  /// The active set of a warp collective: every existing lane where control flow is uniform.
  std::string mask() {
    auto wg = kernel_.workgroup_size();
    if (divergent_ == 0)
      return fmt::format("cubecc_full_mask({}u, {})", wg[0] * wg[1] * wg[2], local_index());
    return "cubecc_active()";
  }
  /// Whether a loop's body may run for some lanes of a warp and not others.
  bool divergent_loop(const ir::Operation &loop) {
    bool exits = false;
    for (unsigned i = 0; i < loop.num_regions(); ++i)
      for (const ir::Operation *op : loop.region(i))
        op->walk([&](const ir::Operation *inner) {
          exits |= inner->opcode() == Opcode::Break || inner->opcode() == Opcode::Continue;
        });
    if (exits)
      return true;
    if (loop.opcode() == Opcode::For)
      return varying(loop.operand(0)) || varying(loop.operand(1)) || varying(loop.operand(2));
    const ir::Operation *condition = loop.region(0).terminator();
    return !condition || varying(condition->operand(0));
  }

  //===--- Diagnostics, names, lines --------------------------------------------------===//

  bool refuse(const ir::Operation &op, const std::string &what) {
    errors_.push_back(ir::diagnostic_at(
        *kernel_.module(), &op,
        fmt::format("kernel '{}': op '{}' needs {}, which target '{}' does not support",
                    kernel_.name(), op.name(), what, features_.target)));
    return false;
  }
  bool check(const ir::Operation &op);

  std::string fresh(std::string base) {
    std::string clean;
    for (char c : base)
      clean += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
    if (clean.empty() || std::isdigit(static_cast<unsigned char>(clean[0])))
      clean = "v" + clean;
    static const std::set<std::string> reserved = {
        "int", "float", "double", "char", "short", "long", "unsigned", "bool", "if", "else", "for",
        "while", "do", "break", "continue", "return", "const", "auto", "new", "delete", "this",
        "true", "false", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64",
        "signed", "void", "static", "struct", "class",
        // C++'s alternative tokens, and names CUDA/HIP headers declare with C linkage
        "and", "or", "xor", "not", "and_eq", "or_eq", "xor_eq", "not_eq", "bitand", "bitor",
        "compl", "main", "select", "sin", "cos", "tan", "exp", "exp2", "log", "log2", "pow", "sqrt",
        "rsqrt", "fma", "floor", "ceil", "round", "erf", "tanh", "min", "max", "abs", "fabs",
        "fmin", "fmax", "fmod", "signbit", "isnan", "isinf", "clamp", "asin", "acos", "atan",
        "atan2", "sinh", "cosh", "asinh", "acosh", "atanh", "expm1", "log1p", "hypot", "trunc",
        "printf", "malloc", "free", "memcpy", "memset", "assert", "threadIdx", "blockIdx",
        "blockDim", "gridDim", "warpSize"};
    std::string name = clean;
    for (unsigned k = 1; reserved.count(name) || used_.count(name) || name.rfind("cubecc", 0) == 0;
         ++k)
      name = fmt::format("{}_{}", clean, k);
    used_.insert(name);
    return name;
  }
  std::string name_of(const ir::Value *v) {
    auto it = names_.find(v);
    if (it != names_.end())
      return it->second;
    std::string n = fresh(v->name().empty() ? fmt::format("v{}", next_++) : v->name());
    names_[v] = n;
    return n;
  }
  /// Lane k of a value (its name for a scalar).
  std::string lane(const ir::Value *v, unsigned k) {
    return v->type().is_vector() ? fmt::format("{}.v[{}]", name_of(v), k) : name_of(v);
  }
  std::string type_of(Type t) {
    if (t.is_matrix())
      return fmt::format("cubecc_frag<{}, {}>", fragment_element(t.element()), per_lane(t));
    return t.is_vector() ? fmt::format("cubecc_vec<{}, {}>", reg(t.element()), t.lanes())
                         : reg(t.element());
  }
  /// A fragment holds f32 as f32 and every narrower float as its bits.
  static std::string fragment_element(Scalar s) {
    return s == Scalar::F32           ? "f32"
           : s == Scalar::I32         ? "i32"
           : ir::scalar_bits(s) == 16 ? "u16"
                                      : "u8";
  }
  /// Elements of a matrix each invocation holds.
  uint32_t per_lane(Type t) const { return t.matrix_elements() / features_.subgroup_size; }
  /// A fragment element from a register value of `s`, and the register value of one.
  static std::string fragment_bits(Scalar s, const std::string &v) {
    return s == Scalar::F16    ? "cubecc_f16_bits(cubecc_f32_to_f16(" + v + "))"
           : s == Scalar::BF16 ? "cubecc_bf16_bits(cubecc_f32_to_bf16(" + v + "))"
                               : v;
  }
  static std::string fragment_value(Scalar s, const std::string &bits) {
    return s == Scalar::F16    ? "cubecc_f16_to_f32(cubecc_f16_from_bits(" + bits + "))"
           : s == Scalar::BF16 ? "cubecc_bf16_to_f32(cubecc_bf16_from_bits(" + bits + "))"
                               : bits;
  }

  void line(const std::string &text) {
    for (int i = 0; i < indent_; ++i)
      body_ << "  ";
    body_ << text << "\n";
  }
  /// Text safe inside a // comment: control characters shown as '?'.
  static std::string printable(std::string_view s) {
    std::string out;
    for (char c : s)
      out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
    return out;
  }
  void locate(const ir::Operation &op) {
    ir::Location loc = op.location();
    if (!loc.known() || (loc.line == last_line_ && loc.file == last_file_))
      return;
    last_line_ = loc.line;
    last_file_ = loc.file;
    line(fmt::format("// {}:{}", printable(kernel_.module()->file_name(loc.file)), loc.line));
  }

  /// Defines a result: `const T name = e;` for scalars, lane by lane for vectors.
  template <class F> void define(const ir::Value *v, F &&lane_expr) {
    Type t = v->type();
    if (!t.is_vector()) {
      line(fmt::format("const {} {} = {};", type_of(t), name_of(v), lane_expr(0u)));
      return;
    }
    line(fmt::format("{} {};", type_of(t), name_of(v)));
    for (unsigned k = 0; k < t.lanes(); ++k)
      line(fmt::format("{}.v[{}] = {};", name_of(v), k, lane_expr(k)));
  }

  //===--- Scalar semantics -----------------------------------------------------------===//

  std::string constant(Scalar s, uint64_t bits);
  std::string round(Scalar s, const std::string &e) {
    if (s == Scalar::F16)
      return "cubecc_round_f16(" + e + ")";
    if (s == Scalar::BF16)
      return "cubecc_round_bf16(" + e + ")";
    return e;
  }
  std::string wrap(Scalar s, const std::string &a, const char *op, const std::string &b) {
    // Integer arithmetic wraps: done in unsigned types (wide enough that promotion to int cannot
    // overflow), converted back.
    unsigned bits = ir::scalar_bits(s);
    if (bits >= 32 && !ir::is_signed(s))
      return fmt::format("({} {} {})", a, op, b);
    if (bits >= 32)
      return fmt::format("({})(({}){} {} ({}){})", reg(s), unsigned_of(s), a, op, unsigned_of(s),
                         b);
    return fmt::format("({})((u32)({}){} {} (u32)({}){})", reg(s), unsigned_of(s), a, op,
                       unsigned_of(s), b);
  }
  /// local_index as an expression over threadIdx (terms for dimensions of size 1 dropped).
  std::string local_index() {
    auto wg = kernel_.workgroup_size();
    std::string e = "threadIdx.x";
    if (wg[1] > 1)
      e += fmt::format(" + threadIdx.y * {}u", wg[0]);
    if (wg[2] > 1)
      e += fmt::format(" + threadIdx.z * {}u", wg[0] * wg[1]);
    return "(u32)(" + e + ")";
  }
  std::string math_fn(const char *name, Scalar s) {
    return s == Scalar::F64 ? name : std::string(name) + "f";
  }
  std::string binary(Opcode op, Scalar s, const std::string &a, const std::string &b);
  std::string unary(Opcode op, Scalar s, const std::string &a);
  std::string bit_count(Opcode op, Scalar s, const std::string &a);
  std::string compare(Opcode op, const std::string &a, const std::string &b);
  std::string cast(Scalar from, Scalar to, const std::string &x);
  std::string load_element(const ir::Value *memory, const std::string &index);
  /// A register value from a memory element (`ref`, an lvalue of storage(s)).
  std::string from_storage(Scalar s, const std::string &ref);
  /// The index of lane k of a vector access at `index`.
  static std::string plus_lane(const std::string &index, unsigned k) {
    return k ? fmt::format("{} + {}", index, k) : index;
  }
  std::string element_ref(const ir::Value *memory, const std::string &index) {
    return fmt::format("{}[{}]", name_of(memory), index);
  }
  std::string store_value(Scalar s, const std::string &v) {
    if (s == Scalar::F16)
      return "cubecc_f32_to_f16(" + v + ")";
    if (s == Scalar::BF16)
      return "cubecc_f32_to_bf16(" + v + ")";
    return v;
  }
  std::string identity(Opcode op, Scalar s);
  /// The bits of a register value as an unsigned integer of its width, and back.
  std::string bits_of(Scalar s, const std::string &x) {
    switch (s) {
    case Scalar::F16:
      return "(u32)cubecc_f16_bits(cubecc_f32_to_f16(" + x + "))";
    case Scalar::BF16:
      return "(u32)cubecc_bf16_bits(cubecc_f32_to_bf16(" + x + "))";
    case Scalar::F32:
      return "__float_as_uint(" + x + ")";
    case Scalar::F64:
      return "(u64)__double_as_longlong(" + x + ")";
    default:
      return "(" + unsigned_of(s) + ")(" + x + ")";
    }
  }
  std::string from_bits(Scalar s, const std::string &b) {
    switch (s) {
    case Scalar::F16:
      return "cubecc_f16_to_f32(cubecc_f16_from_bits((u16)(" + b + ")))";
    case Scalar::BF16:
      return "cubecc_bf16_to_f32(cubecc_bf16_from_bits((u16)(" + b + ")))";
    case Scalar::F32:
      return "__uint_as_float((u32)(" + b + "))";
    case Scalar::F64:
      return "__longlong_as_double((i64)(" + b + "))";
    default:
      return "(" + reg(s) + ")(" + unsigned_of(s) + ")(" + b + ")";
    }
  }
  std::string combiner(Opcode op, Scalar s);

  //===--- Emission -------------------------------------------------------------------===//

  void emit_region(const ir::Region &region);
  void emit_op(const ir::Operation &op);
  void emit_arith(const ir::Operation &op);
  void emit_conversion(const ir::Operation &op);
  void emit_memory(const ir::Operation &op);
  void emit_load_store(const ir::Operation &op);
  void emit_async(const ir::Operation &op);
  void emit_builtin(const ir::Operation &op);
  void emit_print(const ir::Operation &op);
  void emit_atomic(const ir::Operation &op);
  void emit_narrow_atomic(const ir::Operation &op);
  void emit_subgroup(const ir::Operation &op);
  void emit_matrix(const ir::Operation &op);
  bool check_matrix(const ir::Operation &op);
  void emit_if(const ir::Operation &op);
  void emit_for(const ir::Operation &op);
  void emit_while(const ir::Operation &op);
  void emit_terminator(const ir::Operation &op);
  void assign_all(const std::vector<std::string> &targets, std::span<ir::Value *const> values);
};

//===--- Feature checks -----------------------------------------------------------------===//

bool CEmitter::check(const ir::Operation &op) {
  const ir::OpInfo &info = op.info();
  if (info.signature == ir::Signature::AtomicLoad || info.signature == ir::Signature::AtomicStore) {
    Scalar e = op.operand(0)->type().element();
    if (ir::scalar_bits(e) < 32 && !features_.narrow_atomics)
      return refuse(op,
                    fmt::format("atomics on {} (32- and 64-bit atomics only)", ir::scalar_name(e)));
  }
  if (info.signature == ir::Signature::AtomicRmw ||
      info.signature == ir::Signature::AtomicCmpXchg) {
    Scalar e = op.result()->type().element();
    bool add = op.opcode() == Opcode::AtomicAdd;
    if (ir::scalar_bits(e) < 32 && !features_.narrow_atomics)
      return refuse(op,
                    fmt::format("atomics on {} (32- and 64-bit atomics only)", ir::scalar_name(e)));
    if (ir::scalar_bits(e) < 32)
      return true; // a compare-and-swap loop on the element's word: every op, every type
    if (e == Scalar::F32 && add && !features_.float32_atomic_add)
      return refuse(op, "atomic add on f32");
    bool min_max = op.opcode() == Opcode::AtomicMin || op.opcode() == Opcode::AtomicMax;
    if (ir::is_float(e) && min_max && !features_.float32_atomic_min_max)
      return refuse(op, "atomic min/max on floats");
    if (e == Scalar::F64 && !min_max && !(add && features_.float64_atomic_add))
      return refuse(op, fmt::format("atomic {} on f64", add ? "add" : "exchange"));
    if (ir::scalar_bits(e) == 64 && !ir::is_float(e) && !features_.int64_atomics)
      return refuse(op, "64-bit atomics");
  }
  if (op.opcode() == Opcode::AtomicXchg && op.result()->type().element() == Scalar::F32 &&
      !features_.float32_atomics)
    return refuse(op, "atomic exchange on f32");
  if (ir::is_matrix_op(op.opcode()) && !check_matrix(op))
    return false;
  for (unsigned i = 0; i < op.num_results(); ++i) {
    Scalar s = op.result(i)->type().element();
    if ((s == Scalar::F64 && !features_.float64) || (s == Scalar::F16 && !features_.float16) ||
        (s == Scalar::BF16 && !features_.bfloat16))
      return refuse(op, std::string(ir::scalar_name(s)));
  }
  return true;
}

//===--- Scalar semantics ---------------------------------------------------------------===//

std::string CEmitter::constant(Scalar s, uint64_t bits) {
  switch (s) {
  case Scalar::Bool:
    return bits ? "true" : "false";
  case Scalar::F32:
  case Scalar::F16:
  case Scalar::BF16: {
    double v = ir::to_double(s, bits);
    if (std::isnan(v) || std::isinf(v) || s != Scalar::F32) {
      uint32_t f = s == Scalar::F32 ? static_cast<uint32_t>(bits)
                                    : std::bit_cast<uint32_t>(static_cast<float>(v));
      if (std::isnan(v) && s != Scalar::F32)
        f = 0x7fc00000u;
      return fmt::format("__uint_as_float(0x{:08x}u)", f);
    }
    return fmt::format("{:a}f", static_cast<float>(v));
  }
  case Scalar::F64: {
    double v = std::bit_cast<double>(bits);
    if (std::isnan(v) || std::isinf(v))
      return fmt::format("__longlong_as_double((i64)0x{:016x}ull)", bits);
    return fmt::format("{:a}", v);
  }
  default:
    if (ir::is_signed(s)) {
      int64_t v = ir::sign_extend(bits, ir::scalar_bits(s));
      if (ir::scalar_bits(s) == 64 && v == INT64_MIN)
        return "(i64)(-9223372036854775807LL - 1)";
      return fmt::format("({}){}{}", reg(s), v, ir::scalar_bits(s) == 64 ? "LL" : "");
    }
    return fmt::format("({}){}u{}", reg(s), bits & ir::width_mask(ir::scalar_bits(s)),
                       ir::scalar_bits(s) == 64 ? "LL" : "");
  }
}

std::string CEmitter::binary(Opcode op, Scalar s, const std::string &a, const std::string &b) {
  bool f = ir::is_float(s);
  switch (op) {
  case Opcode::Add:
    return f ? round(s, fmt::format("({} + {})", a, b)) : wrap(s, a, "+", b);
  case Opcode::Sub:
    return f ? round(s, fmt::format("({} - {})", a, b)) : wrap(s, a, "-", b);
  case Opcode::Mul:
    return f ? round(s, fmt::format("({} * {})", a, b)) : wrap(s, a, "*", b);
  case Opcode::Div: // legalized: the divisor is neither 0 nor -1
    return f ? round(s, fmt::format("({} / {})", a, b))
             : fmt::format("({})({} / {})", reg(s), a, b);
  case Opcode::Rem:
    return f ? round(s, fmt::format("{}({}, {})", math_fn("fmod", s), a, b))
             : fmt::format("({})({} % {})", reg(s), a, b);
  case Opcode::Min:
    return f ? fmt::format("{}({}, {})", math_fn("fmin", s), a, b)
             : fmt::format("({0} < {1} ? {0} : {1})", a, b);
  case Opcode::Max:
    return f ? fmt::format("{}({}, {})", math_fn("fmax", s), a, b)
             : fmt::format("({0} > {1} ? {0} : {1})", a, b);
  case Opcode::And:
    return s == Scalar::Bool ? fmt::format("({} && {})", a, b)
                             : fmt::format("({})({} & {})", reg(s), a, b);
  case Opcode::Or:
    return s == Scalar::Bool ? fmt::format("({} || {})", a, b)
                             : fmt::format("({})({} | {})", reg(s), a, b);
  case Opcode::Xor:
    return s == Scalar::Bool ? fmt::format("({} != {})", a, b)
                             : fmt::format("({})({} ^ {})", reg(s), a, b);
  case Opcode::Shl: // legalized: the amount is below the width
    return fmt::format("({})(({})(({}){} << {}))", reg(s), unsigned_of(s), wide_of(s), a, b);
  case Opcode::Shr:
    return fmt::format("({})({} >> {})", reg(s), a, b);
  case Opcode::MulHi: {
    unsigned w = ir::scalar_bits(s);
    bool sgn = ir::is_signed(s);
    if (w == 64)
      return fmt::format("{}({}, {})", sgn ? "__mul64hi" : "__umul64hi", a, b);
    if (w == 32)
      return fmt::format("{}({}, {})", sgn ? "__mulhi" : "__umulhi", a, b);
    const char *wide = sgn ? "i32" : "u32"; // the exact product fits
    return fmt::format("({})((({}){} * ({}){}) >> {})", reg(s), wide, a, wide, b, w);
  }
  case Opcode::Pow:
    return round(s, fmt::format("{}({}, {})", math_fn("pow", s), a, b));
  case Opcode::Atan2:
    return round(s, fmt::format("{}({}, {})", math_fn("atan2", s), a, b));
  case Opcode::Hypot:
    return round(s, fmt::format("{}({}, {})", math_fn("hypot", s), a, b));
  default:
    throw std::logic_error("binary: not a binary op");
  }
}

/// popcount, clz, ctz, ffs and bitreverse through the 32- and 64-bit intrinsics that CUDA and
/// HIP share; narrower operands are zero-extended and the result corrected for the width.
std::string CEmitter::bit_count(Opcode op, Scalar s, const std::string &a) {
  unsigned w = ir::scalar_bits(s);
  std::string r = reg(s);
  if (w == 64) {
    switch (op) {
    case Opcode::Popcount:
      return fmt::format("({})__popcll((u64){})", r, a);
    case Opcode::Clz:
      return fmt::format("({})__clzll((i64){})", r, a);
    case Opcode::Ctz:
      return fmt::format("({})__clzll((i64)__brevll((u64){}))", r, a);
    case Opcode::Ffs:
      return fmt::format("({})__ffsll((i64){})", r, a);
    default:
      return fmt::format("({})__brevll((u64){})", r, a);
    }
  }
  std::string x = fmt::format("(u32)({}){}", unsigned_of(s), a); // zero-extended
  switch (op) {
  case Opcode::Popcount:
    return fmt::format("({})__popc({})", r, x);
  case Opcode::Clz:
    return fmt::format("({})(__clz((i32){}) - {})", r, x, 32 - w);
  case Opcode::Ctz: // __ffs is 1 + the index of the lowest set bit, 0 for 0
    return fmt::format("({})({} == 0u ? {} : __ffs((i32){}) - 1)", r, x, w, x);
  case Opcode::Ffs:
    return fmt::format("({})__ffs((i32){})", r, x);
  default:
    return fmt::format("({})(__brev({}) >> {})", r, x, 32 - w);
  }
}

std::string CEmitter::unary(Opcode op, Scalar s, const std::string &a) {
  bool f = ir::is_float(s);
  auto call = [&](const char *fn) { return round(s, fmt::format("{}({})", math_fn(fn, s), a)); };
  switch (op) {
  case Opcode::Neg:
    return f ? fmt::format("(-{})", a) : wrap(s, "0", "-", a);
  case Opcode::Abs:
    return f ? fmt::format("{}({})", math_fn("fabs", s), a)
             : fmt::format("({} < 0 ? {} : {})", a, wrap(s, "0", "-", a), a);
  case Opcode::Not:
    return s == Scalar::Bool ? fmt::format("(!{})", a) : fmt::format("({})(~{})", reg(s), a);
  case Opcode::Popcount:
  case Opcode::Clz:
  case Opcode::Ctz:
  case Opcode::Ffs:
  case Opcode::BitReverse:
    return bit_count(op, s, a);
  case Opcode::Sqrt:
    return call("sqrt");
  case Opcode::Rsqrt:
    return call("rsqrt");
  case Opcode::Exp:
    return call("exp");
  case Opcode::Exp2:
    return call("exp2");
  case Opcode::Log:
    return call("log");
  case Opcode::Log2:
    return call("log2");
  case Opcode::Sin:
    return call("sin");
  case Opcode::Cos:
    return call("cos");
  case Opcode::Tanh:
    return call("tanh");
  case Opcode::Erf:
    return call("erf");
  case Opcode::Floor:
    return call("floor");
  case Opcode::Ceil:
    return call("ceil");
  case Opcode::Round:
    return call("round");
  case Opcode::Trunc:
    return call("trunc");
  case Opcode::Tan:
    return call("tan");
  case Opcode::Asin:
    return call("asin");
  case Opcode::Acos:
    return call("acos");
  case Opcode::Atan:
    return call("atan");
  case Opcode::Sinh:
    return call("sinh");
  case Opcode::Cosh:
    return call("cosh");
  case Opcode::Asinh:
    return call("asinh");
  case Opcode::Acosh:
    return call("acosh");
  case Opcode::Atanh:
    return call("atanh");
  case Opcode::Expm1:
    return call("expm1");
  case Opcode::Log1p:
    return call("log1p");
  default:
    throw std::logic_error("unary: not a unary op");
  }
}

std::string CEmitter::compare(Opcode op, const std::string &a, const std::string &b) {
  const char *c = op == Opcode::Eq   ? "=="
                  : op == Opcode::Ne ? "!="
                  : op == Opcode::Lt ? "<"
                  : op == Opcode::Le ? "<="
                  : op == Opcode::Gt ? ">"
                                     : ">=";
  return fmt::format("({} {} {})", a, c, b);
}

std::string CEmitter::cast(Scalar from, Scalar to, const std::string &x) {
  if (from == to)
    return x;
  std::string t = reg(to);
  if (to == Scalar::Bool)
    return fmt::format("({} != 0)", x); // floats: -0.0 is false, NaN true (unordered !=)
  if (from == Scalar::Bool)
    return ir::is_float(to) ? fmt::format("({} ? 1.0f : 0.0f)", x)
                            : fmt::format("({})({} ? 1 : 0)", t, x);
  if (ir::is_integer(from) && ir::is_integer(to))
    return fmt::format("({})({})", t, x);
  if (ir::is_integer(from)) {
    if (to == Scalar::F64 || to == Scalar::F32)
      return fmt::format("({})({})", t, x);
    // f16/bf16: exact in f32 up to 16 bits; wider through f64 rounded to odd (one rounding;
    // a 64-bit value is rounded to odd in f64 too).
    if (ir::scalar_bits(from) <= 16)
      return round(to, fmt::format("(f32)({})", x));
    if (ir::scalar_bits(from) == 64)
      return round(to, fmt::format("cubecc_f64_to_f32_odd(cubecc_{}64_to_f64_odd({}))",
                                   ir::is_signed(from) ? "i" : "u", x));
    return round(to, fmt::format("cubecc_f64_to_f32_odd((f64)({}))", x));
  }
  if (ir::is_float(to)) {
    // Float to float: widening is exact; narrowing rounds once.
    if (to == Scalar::F64)
      return fmt::format("(f64)({})", x);
    if (to == Scalar::F32)
      return fmt::format("(f32)({})", x);
    if (from == Scalar::F64)
      return round(to, fmt::format("cubecc_f64_to_f32_odd({})", x));
    return round(to, x); // from f32/f16/bf16 registers
  }
  // Float to integer: legalized, so the value converts without saturating (docs/ir.md §4.6).
  return fmt::format("({})({})", t, x);
}

std::string CEmitter::load_element(const ir::Value *memory, const std::string &index) {
  return from_storage(memory->type().element(), element_ref(memory, index));
}

std::string CEmitter::from_storage(Scalar s, const std::string &ref) {
  if (s == Scalar::F16)
    return "cubecc_f16_to_f32(" + ref + ")";
  if (s == Scalar::BF16)
    return "cubecc_bf16_to_f32(" + ref + ")";
  return ref;
}

std::string CEmitter::identity(Opcode op, Scalar s) {
  bool f = ir::is_float(s);
  unsigned bits = ir::scalar_bits(s);
  switch (ir::subgroup_combine(op).combine) {
  case Opcode::Min:
    if (f)
      return constant(s == Scalar::F64 ? Scalar::F64 : Scalar::F32,
                      s == Scalar::F64 ? 0x7ff0000000000000ull : 0x7f800000u);
    return constant(s, ir::is_signed(s) ? ir::width_mask(bits) >> 1 : ir::width_mask(bits));
  case Opcode::Max:
    if (f)
      return constant(s == Scalar::F64 ? Scalar::F64 : Scalar::F32,
                      s == Scalar::F64 ? 0xfff0000000000000ull : 0xff800000u);
    return constant(s, ir::is_signed(s) ? (ir::width_mask(bits) >> 1) + 1 : 0);
  case Opcode::Mul:
    return f ? (s == Scalar::F64 ? "1.0" : "1.0f") : constant(s, 1);
  case Opcode::And:
    return s == Scalar::Bool ? "true" : constant(s, ir::width_mask(bits));
  default:
    return s == Scalar::Bool ? "false" : f ? (s == Scalar::F64 ? "0.0" : "0.0f") : constant(s, 0);
  }
}

std::string CEmitter::combiner(Opcode op, Scalar s) {
  Opcode base = ir::subgroup_combine(op).combine;
  // Float sums combine in f32 for f16/bf16 (rounded once at the end, like any order).
  Scalar c = half_like(s) ? Scalar::F32 : s;
  return fmt::format("[](const {0} &x, const {0} &y) -> {0} {{ return {1}; }}", reg(c),
                     binary(base, c, "x", "y"));
}

//===--- Emission -----------------------------------------------------------------------===//

void CEmitter::assign_all(const std::vector<std::string> &targets,
                          std::span<ir::Value *const> values) {
  // Parallel assignment: new values may read the old ones.
  if (values.size() == 1) {
    line(fmt::format("{} = {};", targets[0], name_of(values[0])));
    return;
  }
  std::vector<std::string> temps;
  for (size_t i = 0; i < values.size(); ++i) {
    temps.push_back(fresh("next"));
    line(fmt::format("const {} {} = {};", type_of(values[i]->type()), temps.back(),
                     name_of(values[i])));
  }
  for (size_t i = 0; i < values.size(); ++i)
    line(fmt::format("{} = {};", targets[i], temps[i]));
}

void CEmitter::emit_region(const ir::Region &region) {
  for (const ir::Operation *op : region) {
    locate(*op);
    emit_op(*op);
  }
}

/// One op: a short dispatch by op family.
void CEmitter::emit_op(const ir::Operation &op) {
  if (!passes::is_legal(op))
    passes::throw_not_legalized(op, "C-family");
  switch (op.info().signature) {
  case ir::Signature::Constant:
  case ir::Signature::Binary:
  case ir::Signature::Unary:
  case ir::Signature::Ternary:
  case ir::Signature::Compare:
  case ir::Signature::Classify:
  case ir::Signature::Select:
    return emit_arith(op);
  case ir::Signature::Cast:
  case ir::Signature::Bitcast:
  case ir::Signature::Splat:
  case ir::Signature::VecBuild:
  case ir::Signature::VecExtract:
  case ir::Signature::VecInsert:
    return emit_conversion(op);
  case ir::Signature::Load:
  case ir::Signature::Store:
  case ir::Signature::BufferSize:
  case ir::Signature::SharedAlloc:
  case ir::Signature::LocalAlloc:
    return emit_memory(op);
  case ir::Signature::Builtin3:
  case ir::Signature::Builtin1:
  case ir::Signature::Sync:
    return emit_builtin(op);
  case ir::Signature::AsyncCopy:
  case ir::Signature::AsyncGroup:
    return emit_async(op);
  case ir::Signature::Print:
    return emit_print(op);
  case ir::Signature::AtomicRmw:
  case ir::Signature::AtomicCmpXchg:
  case ir::Signature::AtomicLoad:
  case ir::Signature::AtomicStore:
    return emit_atomic(op);
  case ir::Signature::SubgroupUnary:
  case ir::Signature::SubgroupShuffle:
  case ir::Signature::SubgroupBallot:
  case ir::Signature::SubgroupVote:
  case ir::Signature::SubgroupElect:
    return emit_subgroup(op);
  case ir::Signature::MatrixFill:
  case ir::Signature::MatrixLoad:
  case ir::Signature::MatrixStore:
  case ir::Signature::MatrixMma:
  case ir::Signature::MatrixConvert:
    return emit_matrix(op);
  case ir::Signature::If:
    return emit_if(op);
  case ir::Signature::For:
    return emit_for(op);
  case ir::Signature::While:
    return emit_while(op);
  case ir::Signature::Yield:
  case ir::Signature::Condition:
  case ir::Signature::Break:
  case ir::Signature::Continue:
  case ir::Signature::Return:
    return emit_terminator(op);
  }
}

/// Constants, arithmetic, math, comparisons and select: one C expression per lane.
void CEmitter::emit_arith(const ir::Operation &op) {
  const Opcode opc = op.opcode();
  const ir::Value *r = op.num_results() ? op.result() : nullptr;
  Scalar rs = r ? r->type().element() : Scalar::U32;
  auto operand = [&](unsigned i, unsigned k) {
    const ir::Value *v = op.operand(i);
    return lane(v, v->type().is_vector() ? k : 0);
  };
  switch (op.info().signature) {
  case ir::Signature::Constant:
    line(fmt::format("const {} {} = {};", reg(rs), name_of(r),
                     constant(rs, static_cast<uint64_t>(*op.attributes().get_int("value")))));
    return;
  case ir::Signature::Binary:
    return define(r, [&](unsigned k) { return binary(opc, rs, operand(0, k), operand(1, k)); });
  case ir::Signature::Unary:
    return define(r, [&](unsigned k) { return unary(opc, rs, operand(0, k)); });
  case ir::Signature::Ternary:
    if (opc == Opcode::Fma)
      return define(r, [&](unsigned k) {
        if (half_like(rs)) // rounded to odd in f32, then once to the narrow type
          return round(rs, fmt::format("cubecc_half_fma_to_odd((f64){}, (f64){}, (f64){})",
                                       operand(0, k), operand(1, k), operand(2, k)));
        return fmt::format("{}({}, {}, {})", math_fn("fma", rs), operand(0, k), operand(1, k),
                           operand(2, k));
      });
    return define(r, [&](unsigned k) {
      return binary(Opcode::Min, rs, binary(Opcode::Max, rs, operand(0, k), operand(1, k)),
                    operand(2, k));
    });
  case ir::Signature::Compare:
    return define(r, [&](unsigned k) { return compare(opc, operand(0, k), operand(1, k)); });
  case ir::Signature::Classify: // f16 and bf16 values live in float registers
    return define(r, [&](unsigned k) {
      return fmt::format("{}({})", opc == Opcode::IsNan ? "isnan" : "isinf", operand(0, k));
    });
  case ir::Signature::Select:
    return define(r, [&](unsigned k) {
      return fmt::format("({} ? {} : {})", operand(0, k), operand(1, k), operand(2, k));
    });
  default:
    throw std::logic_error(fmt::format("emit_arith: op '{}' is not one", op.name()));
  }
}

/// Casts, bitcasts and the vector ops (splat, build, extract, insert).
void CEmitter::emit_conversion(const ir::Operation &op) {
  const ir::Value *r = op.num_results() ? op.result() : nullptr;
  Scalar rs = r ? r->type().element() : Scalar::U32;
  auto operand = [&](unsigned i, unsigned k) {
    const ir::Value *v = op.operand(i);
    return lane(v, v->type().is_vector() ? k : 0);
  };
  switch (op.info().signature) {
  case ir::Signature::Cast: {
    Scalar from = op.operand(0)->type().element();
    return define(r, [&](unsigned k) { return cast(from, rs, operand(0, k)); });
  }
  case ir::Signature::Bitcast: {
    // On the bits, lane 0 in the least significant ones (as the IR says): lanes are joined
    // or split with shifts in unsigned integers.
    const ir::Value *x = op.operand(0);
    Type from = x->type(), to = r->type();
    unsigned sb = ir::scalar_bits(from.element()), tb = ir::scalar_bits(to.element());
    std::string tu = tb == 64 ? "u64" : "u32";
    return define(r, [&](unsigned k) {
      std::string b;
      if (sb == tb) {
        b = bits_of(from.element(), lane(x, k));
      } else if (sb < tb) {
        unsigned ratio = tb / sb;
        for (unsigned i = 0; i < ratio; ++i)
          b += fmt::format("{}(({}){} << {}u)", i ? " | " : "", tu,
                           bits_of(from.element(), lane(x, k * ratio + i)), i * sb);
        b = "(" + b + ")";
      } else {
        unsigned ratio = sb / tb;
        b = fmt::format("({} >> {}u)", bits_of(from.element(), lane(x, k / ratio)),
                        (k % ratio) * tb);
      }
      return from_bits(to.element(), b);
    });
  }
  case ir::Signature::Splat:
    return define(r, [&](unsigned) { return lane(op.operand(0), 0); });
  case ir::Signature::VecBuild:
    return define(r, [&](unsigned k) { return lane(op.operand(k), 0); });
  case ir::Signature::VecExtract:
    return define(r, [&](unsigned) {
      return lane(op.operand(0), static_cast<unsigned>(*op.attributes().get_int("lane")));
    });
  case ir::Signature::VecInsert: {
    unsigned which = static_cast<unsigned>(*op.attributes().get_int("lane"));
    return define(r, [&](unsigned k) {
      return k == which ? lane(op.operand(1), 0) : lane(op.operand(0), k);
    });
  }
  default:
    throw std::logic_error(fmt::format("emit_conversion: op '{}' is not one", op.name()));
  }
}

/// Loads, stores, buffer sizes and shared/local arrays.
void CEmitter::emit_memory(const ir::Operation &op) {
  const ir::Value *r = op.num_results() ? op.result() : nullptr;
  Scalar rs = r ? r->type().element() : Scalar::U32;
  switch (op.info().signature) {
  case ir::Signature::Load:
  case ir::Signature::Store:
    return emit_load_store(op);
  case ir::Signature::BufferSize:
    line(fmt::format("const {} {} = ({}){}_count;", reg(rs), name_of(r), reg(rs),
                     name_of(op.operand(0))));
    return;
  case ir::Signature::SharedAlloc:
    // 16-byte aligned: vector accesses and ldmatrix rows need it at any element type.
    if (dynamic_shared_) {
      line(fmt::format("{} *const {} = reinterpret_cast<{} *>(cubecc_dynamic_shared + {});",
                       storage(rs), name_of(r), storage(rs), shared_offset_));
      shared_offset_ += KernelAbi::padded_shared_bytes(r->type());
      return;
    }
    line(fmt::format("__shared__ __align__(16) {} {}[{}];", storage(rs), name_of(r),
                     r->type().count()));
    return;
  case ir::Signature::LocalAlloc:
    line(fmt::format("{} {}[{}];", storage(rs), name_of(r), r->type().count()));
    return;
  default:
    throw std::logic_error(fmt::format("emit_memory: op '{}' is not one", op.name()));
  }
}

/// A load or a store. A vector access of a power-of-two size from 4 bytes on is one wide access
/// (cubecc_block: ld/st.v2/v4, 16 bytes each) where its address is aligned to its size (up to
/// 16): always in a shared array (declared 16-byte aligned; the IR requires the index of an
/// N-lane access to be a multiple of N, docs/ir.md §4.8), and in a buffer whose base address is,
/// checked at run time (adopted memory need only be element-aligned); element by element
/// otherwise.
void CEmitter::emit_load_store(const ir::Operation &op) {
  const bool is_load = op.opcode() == Opcode::Load;
  const ir::Value *memory = op.operand(0);
  const ir::Value *value = is_load ? op.result() : op.operand(2);
  const Scalar s = memory->type().element();
  const std::string index = name_of(op.operand(1));
  auto at = [&](unsigned k) { return plus_lane(index, k); };
  auto by_element = [&] {
    if (is_load) {
      for (unsigned k = 0; k < value->type().lanes(); ++k)
        line(fmt::format("{} = {};", lane(value, k), load_element(memory, at(k))));
      return;
    }
    for (unsigned k = 0; k < value->type().lanes(); ++k)
      line(fmt::format("{} = {};", element_ref(memory, at(k)), store_value(s, lane(value, k))));
  };
  const unsigned lanes = value->type().lanes();
  const unsigned bytes = lanes * ir::scalar_bits(s) / 8;
  const ir::TypeKind kind = memory->type().kind();
  if (lanes == 1 || !std::has_single_bit(bytes) || bytes < 4 || kind == ir::TypeKind::Local) {
    if (is_load)
      return define(value, [&](unsigned k) { return load_element(memory, at(k)); });
    return by_element();
  }
  const unsigned align = std::min(bytes, 16u);
  const std::string block = fmt::format("cubecc_block<{}, {}, {}>", storage(s), lanes, align);
  if (is_load)
    line(fmt::format("{} {};", type_of(value->type()), name_of(value)));
  const bool check = kind == ir::TypeKind::Buffer;
  line(check ? fmt::format("if ((((u64){}) & {}u) == 0u) {{", name_of(memory), align - 1) : "{");
  ++indent_;
  const std::string address = fmt::format("&{}", element_ref(memory, index));
  if (is_load) {
    line(fmt::format("const {0} cubecc_b = *(const {0} *){1};", block, address));
    for (unsigned k = 0; k < lanes; ++k)
      line(fmt::format("{} = {};", lane(value, k),
                       from_storage(s, fmt::format("cubecc_b.e[{}]", k))));
  } else {
    line(fmt::format("{} cubecc_b;", block));
    for (unsigned k = 0; k < lanes; ++k)
      line(fmt::format("cubecc_b.e[{}] = {};", k, store_value(s, lane(value, k))));
    line(fmt::format("*({} *){} = cubecc_b;", block, address));
  }
  --indent_;
  if (check) {
    line("} else {");
    ++indent_;
    by_element();
    --indent_;
  }
  line("}");
}

/// The asynchronous copies of docs/ir.md §4.14 on CUDA sm_80 and later (the legalize pass lowers
/// them everywhere else): cp.async, 16-byte copies bypassing L1 (.cg), smaller ones through it
/// (.ca). A copy not read from the source (operand 4 false) copies 0 bytes of it, so the
/// instruction fills the destination with zeros. cp.async needs both addresses aligned to the
/// copy's size: the shared array is (16-byte aligned, the index a multiple of the lanes); a
/// buffer's base address is checked at run time and, when it is not, the copy is done at once.
void CEmitter::emit_async(const ir::Operation &op) {
  if (hip_)
    throw std::logic_error(fmt::format("the HIP emitter met '{}', which the legalize pass lowers "
                                       "on HIP: a bug in cubecc",
                                       op.name()));
  switch (op.opcode()) {
  case Opcode::AsyncCopy: {
    const ir::Value *dst = op.operand(0), *src = op.operand(2);
    const std::string &dst_index = name_of(op.operand(1)), &src_index = name_of(op.operand(3));
    const std::string &inside = name_of(op.operand(4));
    const Scalar s = dst->type().element();
    const auto lanes = static_cast<unsigned>(op.attributes().get_int("lanes").value_or(1));
    const unsigned bytes = lanes * ir::scalar_bits(s) / 8;
    line(fmt::format("if ((((u64){}) & {}u) == 0u) {{", name_of(src), bytes - 1));
    ++indent_;
    line(fmt::format("asm volatile(\"cp.async.{}.shared.global [%0], [%1], {}, %2;\" :: "
                     "\"r\"((u32)__cvta_generic_to_shared(&{})), \"l\"({} ? &{} : {}), "
                     "\"r\"({} ? {}u : 0u) : \"memory\");",
                     bytes == 16 ? "cg" : "ca", bytes, element_ref(dst, dst_index), inside,
                     element_ref(src, src_index), name_of(src), inside, bytes));
    --indent_;
    line("} else {");
    ++indent_;
    for (unsigned k = 0; k < lanes; ++k)
      line(fmt::format("{} = {} ? {} : {};", element_ref(dst, plus_lane(dst_index, k)), inside,
                       element_ref(src, plus_lane(src_index, k)), storage(s) + "{}"));
    --indent_;
    line("}");
    return;
  }
  case Opcode::AsyncCommit:
    line("asm volatile(\"cp.async.commit_group;\" ::: \"memory\");");
    return;
  default:
    line(fmt::format("asm volatile(\"cp.async.wait_group {};\" ::: \"memory\");",
                     op.attributes().get_int("pending").value_or(0)));
    return;
  }
}

/// Builtins (ids, sizes, subgroup ids) and barriers/fences.
void CEmitter::emit_builtin(const ir::Operation &op) {
  const Opcode opc = op.opcode();
  const ir::Value *r = op.num_results() ? op.result() : nullptr;
  auto wg = kernel_.workgroup_size();
  const char *xyz[] = {"x", "y", "z"};
  switch (op.info().signature) {
  case ir::Signature::Builtin3:
    return define(r, [&](unsigned k) -> std::string {
      switch (opc) {
      case Opcode::GlobalId:
        return fmt::format("(u32)(blockIdx.{0} * blockDim.{0} + threadIdx.{0})", xyz[k]);
      case Opcode::LocalId:
        return fmt::format("(u32)threadIdx.{}", xyz[k]);
      case Opcode::WorkgroupId:
        return fmt::format("(u32)blockIdx.{}", xyz[k]);
      case Opcode::WorkgroupSize:
        return fmt::format("{}u", wg[k]);
      default:
        return fmt::format("(u32)gridDim.{}", xyz[k]);
      }
    });
  case ir::Signature::Builtin1: {
    std::string index = local_index();
    std::string e;
    switch (opc) {
    case Opcode::LocalIndex:
      e = index;
      break;
    case Opcode::SubgroupSize:
      e = "CUBECC_WARP";
      break;
    case Opcode::SubgroupId:
      e = index + " / CUBECC_WARP";
      break;
    case Opcode::SubgroupLane:
      e = index + " % CUBECC_WARP";
      break;
    default:
      e = fmt::format("({}u + CUBECC_WARP - 1) / CUBECC_WARP", wg[0] * wg[1] * wg[2]);
      break;
    }
    line(fmt::format("const u32 {} = {};", name_of(r), e));
    return;
  }
  case ir::Signature::Sync:
    line(opc == Opcode::Barrier           ? "__syncthreads();"
         : opc == Opcode::SubgroupBarrier ? "cubecc_subgroup_barrier();"
         : opc == Opcode::FenceWorkgroup  ? "__threadfence_block();"
                                          : "__threadfence();");
    return;
  default:
    throw std::logic_error(fmt::format("emit_builtin: op '{}' is not one", op.name()));
  }
}

namespace {

/// `text` as a C string literal: quotes, backslashes and bytes outside printable ASCII escaped
/// (three-digit octal, which never runs into the next character).
std::string c_string_literal(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\')
      out += {'\\', c};
    else if (u >= 0x20 && u < 0x7f)
      out += c;
    else
      out += fmt::format("\\{:03o}", u);
  }
  return out + '"';
}

} // namespace

/// printf with the format's conversions (docs/ir.md §4.15): each value widened as printf's
/// default promotions would not (to 64-bit integers and double), so every target prints alike.
void CEmitter::emit_print(const ir::Operation &op) {
  const ir::PrintFormat format = ir::print_format_of(op);
  std::string args;
  for (const ir::PrintArgument &a : format.args) {
    const char *cast = ir::print_class(a.type) == ir::PrintClass::Float    ? "(double)"
                       : ir::print_class(a.type) == ir::PrintClass::Signed ? "(long long)"
                                                                           : "(unsigned long long)";
    args += fmt::format(", {}({})", cast, lane(op.operand(a.operand), a.lane));
  }
  line(fmt::format("printf({}{});", c_string_literal(format.printf_string()), args));
}

/// Atomics, through the vendor functions (64-bit signed values as unsigned long long).
/// An atomic on an 8- or 16-bit element: a volatile access of its bits for load and store, the
/// prelude's compare-and-swap loop on its 32-bit word for the others, which computes the new
/// value with the same expression as the non-atomic op (so f16 and bf16 round as `add` does).
void CEmitter::emit_narrow_atomic(const ir::Operation &op) {
  const Opcode opc = op.opcode();
  const ir::Value *r = op.num_results() ? op.result() : nullptr;
  const Scalar s = op.operand(0)->type().element();
  const std::string bits = unsigned_of(s); // u8 or u16
  const std::string ref = "&" + element_ref(op.operand(0), name_of(op.operand(1)));
  if (opc == Opcode::AtomicLoad) {
    line(fmt::format("const {} {} = {};", reg(s), name_of(r),
                     from_bits(s, fmt::format("*(volatile {} *){}", bits, ref))));
    return;
  }
  const std::string v = name_of(op.operand(2));
  if (opc == Opcode::AtomicStore) {
    line(fmt::format("*(volatile {} *){} = ({})({});", bits, ref, bits, bits_of(s, v)));
    return;
  }
  const std::string old = from_bits(s, "cubecc_b");
  std::string next;
  switch (opc) {
  case Opcode::AtomicXchg:
    next = v;
    break;
  case Opcode::AtomicCmpXchg:
    next = fmt::format("({} == {} ? {} : {})", old, v, name_of(op.operand(3)), old);
    break;
  default:
    next = binary(ir::atomic_combine(opc), s, old, v);
    break;
  }
  line(fmt::format("const {} {} = {};", reg(s), name_of(r),
                   from_bits(s, fmt::format("cubecc_atomic_narrow<{0}>({1}, [&]({0} cubecc_b) {{ "
                                            "return ({0})({2}); }})",
                                            bits, ref, bits_of(s, next)))));
}

void CEmitter::emit_atomic(const ir::Operation &op) {
  const Opcode opc = op.opcode();
  const ir::Value *r = op.num_results() ? op.result() : nullptr;
  Scalar rs = r ? r->type().element() : Scalar::U32;
  if (ir::scalar_bits(op.operand(0)->type().element()) < 32)
    return emit_narrow_atomic(op);
  switch (op.info().signature) {
  case ir::Signature::AtomicLoad: // an aligned 32- or 64-bit access is one instruction
    line(fmt::format("const {} {} = *(volatile {} *)&{};", reg(rs), name_of(r), reg(rs),
                     element_ref(op.operand(0), name_of(op.operand(1)))));
    return;
  case ir::Signature::AtomicStore: {
    Scalar s = op.operand(2)->type().element();
    line(fmt::format("*(volatile {} *)&{} = {};", reg(s),
                     element_ref(op.operand(0), name_of(op.operand(1))), name_of(op.operand(2))));
    return;
  }
  case ir::Signature::AtomicRmw:
  case ir::Signature::AtomicCmpXchg: {
    std::string ref = "&" + element_ref(op.operand(0), name_of(op.operand(1)));
    std::string v = name_of(op.operand(2));
    // The vendor functions take int, unsigned int, unsigned long long, float and double;
    // 64-bit signed values go through unsigned long long (two's complement).
    bool wide = ir::scalar_bits(rs) == 64 && !ir::is_float(rs);
    std::string p = wide ? fmt::format("(unsigned long long *){}", ref) : ref;
    std::string val = wide ? fmt::format("(unsigned long long){}", v) : v;
    std::string call;
    switch (opc) {
    case Opcode::AtomicAdd:
      call = fmt::format("atomicAdd({}, {})", p, val);
      break;
    case Opcode::AtomicSub:
      call = wide ? fmt::format("atomicAdd({}, 0ull - {})", p, val)
                  : fmt::format("atomicSub({}, {})", p, val);
      break;
    case Opcode::AtomicMin:
    case Opcode::AtomicMax: {
      const char *fn = opc == Opcode::AtomicMin ? "atomicMin" : "atomicMax";
      if (ir::is_float(rs))
        call = fmt::format("cubecc_atomic_min_max<{}>({}, {})",
                           opc == Opcode::AtomicMax ? "true" : "false", ref, v);
      else if (wide && ir::is_signed(rs))
        call = fmt::format("(unsigned long long)cubecc_atomic_min_max_i64<{}>((long long *){}, "
                           "(long long){})",
                           opc == Opcode::AtomicMax ? "true" : "false", ref, v);
      else
        call = fmt::format("{}({}, {})", fn, p, val);
      break;
    }
    case Opcode::AtomicAnd:
      call = fmt::format("atomicAnd({}, {})", p, val);
      break;
    case Opcode::AtomicOr:
      call = fmt::format("atomicOr({}, {})", p, val);
      break;
    case Opcode::AtomicXor:
      call = fmt::format("atomicXor({}, {})", p, val);
      break;
    case Opcode::AtomicXchg:
      call = fmt::format("atomicExch({}, {})", p, val);
      break;
    default: {
      std::string desired = name_of(op.operand(3));
      call = fmt::format("atomicCAS({}, {}, {})", p, val,
                         wide ? fmt::format("(unsigned long long){}", desired) : desired);
      break;
    }
    }
    line(fmt::format("const {} {} = ({}){};", reg(rs), name_of(r), reg(rs), call));
    return;
  }
  default:
    throw std::logic_error(fmt::format("emit_atomic: op '{}' is not one", op.name()));
  }
}

/// Subgroup reductions, scans, shuffles, ballots, votes and elect (warp collectives).
void CEmitter::emit_subgroup(const ir::Operation &op) {
  const Opcode opc = op.opcode();
  const ir::Value *r = op.num_results() ? op.result() : nullptr;
  Scalar rs = r ? r->type().element() : Scalar::U32;
  auto operand = [&](unsigned i, unsigned k) {
    const ir::Value *v = op.operand(i);
    return lane(v, v->type().is_vector() ? k : 0);
  };
  switch (op.info().signature) {
  case ir::Signature::SubgroupUnary: {
    std::string lane_index = "(" + local_index() + " % CUBECC_WARP)";
    const ir::SubgroupCombine how = ir::subgroup_combine(opc);
    bool scan = how.scan != ir::SubgroupCombine::Scan::None;
    bool inclusive = how.scan == ir::SubgroupCombine::Scan::Inclusive;
    Scalar c = half_like(rs) ? Scalar::F32 : rs;
    return define(r, [&](unsigned k) {
      std::string e =
          scan ? fmt::format("cubecc_scan<{}>({}, {}, {}, {}, {}, {})", reg(c), mask(),
                             operand(0, k), identity(opc, rs), combiner(opc, rs), lane_index,
                             inclusive ? "true" : "false")
               : fmt::format("cubecc_reduce<{}>({}, {}, {}, {}, {})", reg(c), mask(), operand(0, k),
                             identity(opc, rs), combiner(opc, rs), lane_index);
      return round(rs, e);
    });
  }
  case ir::Signature::SubgroupShuffle: {
    std::string own = "(" + local_index() + " % CUBECC_WARP)";
    std::string src = name_of(op.operand(1));
    // A source lane outside the warp reads the invocation's own value (docs/ir.md §4.12):
    // __shfl_sync would wrap it around.
    std::string from =
        opc == Opcode::SubgroupShuffleXor
            ? fmt::format("(({0} ^ {1}) < CUBECC_WARP ? {0} ^ {1} : {0})", own, src)
        : opc == Opcode::SubgroupShuffleUp ? fmt::format("({1} <= {0} ? {0} - {1} : {0})", own, src)
        : opc == Opcode::SubgroupShuffleDown
            ? fmt::format("({1} < CUBECC_WARP - {0} ? {0} + {1} : {0})", own, src)
        : opc == Opcode::SubgroupShuffle ? fmt::format("({1} < CUBECC_WARP ? {1} : {0})", own, src)
                                         : src;
    return define(r, [&](unsigned k) {
      return fmt::format("cubecc_shfl<{}>({}, {}, {})", reg(rs), mask(), operand(0, k), from);
    });
  }
  case ir::Signature::SubgroupBallot: {
    std::string m = fresh("ballot");
    line(fmt::format("const cubecc_mask {} = cubecc_ballot({}, {});", m, mask(),
                     name_of(op.operand(0))));
    return define(r, [&](unsigned k) -> std::string {
      if (k == 0)
        return fmt::format("(u32){}", m);
      if (k == 1)
        return fmt::format("(u32)((u64){} >> 32)", m);
      return "0u";
    });
  }
  case ir::Signature::SubgroupVote:
    line(fmt::format("const bool {} = {}({}, {});", name_of(r),
                     opc == Opcode::SubgroupAll ? "cubecc_all" : "cubecc_any", mask(),
                     name_of(op.operand(0))));
    return;
  case ir::Signature::SubgroupElect:
    line(fmt::format("const bool {} = ({} % CUBECC_WARP) == cubecc_first_active({});", name_of(r),
                     local_index(), mask()));
    return;
  default:
    throw std::logic_error(fmt::format("emit_subgroup: op '{}' is not one", op.name()));
  }
}

/// yield, condition, break, continue and return: assignments to the variables of the enclosing if
/// or loop, then the C jump.
void CEmitter::emit_terminator(const ir::Operation &op) {
  switch (op.info().signature) {
  case ir::Signature::Yield: {
    const ir::Operation *parent = op.parent_op();
    if (parent->opcode() == Opcode::If) {
      for (unsigned i = 0; i < op.num_operands(); ++i)
        line(fmt::format("{} = {};", if_results_.back()[i], name_of(op.operand(i))));
      return;
    }
    if (op.num_operands())
      assign_all(loop_carried_.back(), op.operands());
    return; // a loop body's end: the next iteration
  }
  case ir::Signature::Condition: {
    line(fmt::format("if (!{}) {{", name_of(op.operand(0))));
    ++indent_;
    for (unsigned i = 1; i < op.num_operands(); ++i)
      line(fmt::format("{} = {};", loop_results_.back()[i - 1], name_of(op.operand(i))));
    line("break;");
    --indent_;
    line("}");
    // The do region's arguments are the forwarded values.
    const ir::Region &after = op.parent_op()->region(1);
    for (unsigned i = 0; i < after.num_arguments(); ++i)
      names_[after.argument(i)] = name_of(op.operand(1 + i));
    return;
  }
  case ir::Signature::Break:
    if (op.num_operands())
      assign_all(loop_results_.back(), op.operands());
    line("break;");
    return;
  case ir::Signature::Continue:
    if (op.num_operands())
      assign_all(loop_carried_.back(), op.operands());
    line("continue;");
    return;
  case ir::Signature::Return:
    return;
  default:
    throw std::logic_error(fmt::format("emit_terminator: op '{}' is not one", op.name()));
  }
}

//===--- Matrix fragments -----------------------------------------------------------===//

namespace {

/// The fragment layout of a matrix type: the role and packing `cubecc_frag_pos` takes.
struct FragmentLayout {
  int role; ///< 0 'a', 1 'b', 2 'acc'
  int p;    ///< elements per 32-bit register along k (2 for accumulators)
  int kb;   ///< k extent of a 'b' over 4p
};

FragmentLayout layout_of(Type t) {
  int role = t.role() == ir::MatrixRole::A ? 0 : t.role() == ir::MatrixRole::B ? 1 : 2;
  int p = role == 2 ? 2 : static_cast<int>(32 / ir::scalar_bits(t.element()));
  int kb = role == 1 ? static_cast<int>(t.rows()) / (4 * p) : 1;
  return {role, p, kb};
}

} // namespace

/// The fragment shapes the dialect's layouts cover (mma.sync m16n8k16/k32 blocks on CUDA, MFMA
/// 16x16x16 on HIP); everything else is refused by name.
bool CEmitter::check_matrix(const ir::Operation &op) {
  auto wg = kernel_.workgroup_size();
  uint32_t invocations = wg[0] * wg[1] * wg[2];
  if (invocations % features_.subgroup_size != 0)
    return false; // said by check_target_support, once for the kernel
  std::vector<Type> types;
  for (unsigned i = 0; i < op.num_operands(); ++i)
    types.push_back(op.operand(i)->type());
  for (unsigned i = 0; i < op.num_results(); ++i)
    types.push_back(op.result(i)->type());
  for (Type t : types) {
    if (!t.is_matrix())
      continue;
    bool fits;
    if (hip_) {
      fits =
          t.rows() == 16 && t.cols() == 16 &&
          (t.element() == Scalar::F16 || t.element() == Scalar::BF16 || t.element() == Scalar::F32);
    } else {
      // k: 8 for f32 (tf32) inputs, 16 for 16-bit ones, 32 for 8-bit ones
      uint32_t k = 256 / ir::scalar_bits(t.element());
      switch (t.role()) {
      case ir::MatrixRole::A:
        fits = t.rows() == 16 && t.cols() == k;
        break;
      case ir::MatrixRole::B:
        fits = t.rows() == k && (t.cols() == 8 || t.cols() == 16);
        break;
      default:
        fits = t.rows() == 16 && (t.cols() == 8 || t.cols() == 16);
        break;
      }
    }
    if (!fits)
      return refuse(op, fmt::format("the fragment {} (this target's fragments are {})", t.str(),
                                    hip_ ? "16x16 of f16, bf16 or f32"
                                         : "a 16x16 (tf32: 16x8, 8-bit: 16x32), b 16x8 or "
                                           "16x16 (tf32: 8 rows, 8-bit: 32 rows), acc 16x8 or "
                                           "16x16"));
    if (op.opcode() == Opcode::MatrixConvert && ir::is_storage_float(t.element()))
      return refuse(op, fmt::format("conversion of an fp8 fragment ({})", t.str()));
  }
  return true;
}

std::string CEmitter::matrix_element_index(const ir::Operation &op, const std::string &row,
                                           const std::string &col, bool col_major) {
  // matrix.load/store: element (row, col) at index + row * stride + col, or index + col * stride
  // + row when column-major (docs/ir.md §4.13), in the index's type.
  return fmt::format("({0})({1} + ({0}){2} * {3} + ({0}){4})", reg(op.operand(1)->type().element()),
                     name_of(op.operand(1)), col_major ? col : row, name_of(op.operand(2)),
                     col_major ? row : col);
}

bool CEmitter::emit_ldmatrix(const ir::Operation &op, Type t, bool col_major,
                             const std::string &lane) {
  // ldmatrix (sm_75+) loads 8x8 blocks of 16-bit elements (8 rows of 16 bytes) from shared memory
  // straight into the mma.sync fragment layout; lane l gives the address of one row of block
  // l / 8, and register i of each lane holds 4 bytes of block i's row l / 4. 16-bit operands: a
  // 16x16 'a' is four blocks (.x4), a 16x16 'b' four and a 16x8 'b' two. For a row-major 'a' the
  // rows are the matrix's (r = l % 16, c = 8 (l / 16)); a 'b' is stored k-major, so the blocks
  // are transposed on the way in (.trans); a column-major operand swaps both. fp8 operands (PTX's
  // m16n8k32 layouts hold 4 consecutive k of one row or column per register): a 16-byte row is
  // 16 elements along k, so a row-major 16x32 'a' and a column-major 32x8 or 32x16 'b' load
  // without transposing (.x4, .x2, .x4); ldmatrix cannot transpose 8-bit elements, so the other
  // layouts take the element-by-element load. Every row must be 16-byte aligned: the shared array
  // is (__align__(16)), and index and stride must be multiples of 16 bytes' elements, checked
  // here at run time (uniform across the subgroup, like the operands), with the
  // element-by-element load as the other branch.
  const ir::Value *memory = op.operand(0);
  ir::MatrixRole role = t.role();
  const bool fp8 = ir::scalar_bits(t.element()) == 8; // e4m3, e5m2, i8, u8: one layout
  const bool b16 = t.element() == Scalar::F16 || t.element() == Scalar::BF16;
  const uint32_t k = fp8 ? 32 : 16; // the k extent of the mma shapes
  bool fits = role == ir::MatrixRole::A ? t.rows() == 16 && t.cols() == k
                                        : t.rows() == k && (t.cols() == 16 || t.cols() == 8);
  bool trans = (role == ir::MatrixRole::B) != col_major;
  if (hip_ || memory->type().kind() != ir::TypeKind::Shared ||
      role == ir::MatrixRole::Accumulator || !(b16 || (fp8 && !trans)) || !fits)
    return false;
  const uint32_t bytes = fp8 ? 1 : 2, unit = 16 / bytes;        // elements in a 16-byte row
  const int blocks = static_cast<int>(per_lane(t) * bytes / 4); // 32-bit registers: 2 or 4
  // The row and column of the 16 bytes lane l points at (the second half of the lanes only
  // addresses blocks with .x4): along the contiguous direction the blocks are `unit` apart,
  // across it 8.
  std::string r =
      col_major ? fmt::format("(({} / 8u) & 1u) * {}u", lane, unit) : fmt::format("{} % 16u", lane);
  std::string c = col_major
                      ? fmt::format("({} & 7u){}", lane,
                                    blocks == 4 ? fmt::format(" + ({} / 16u) * 8u", lane) : "")
                  : blocks == 4 ? fmt::format("({} / 16u) * {}u", lane, unit)
                                : "0u";
  std::string index_type = reg(op.operand(1)->type().element());
  const std::string &index = name_of(op.operand(1)), &stride = name_of(op.operand(2));
  line(fmt::format("if (((({0}){1} | ({0}){2}) & {3}u) == 0u) {{", index_type, index, stride,
                   unit - 1));
  ++indent_;
  line(fmt::format("const u32 cubecc_lr = {}, cubecc_lc = {};", r, c));
  std::string at = matrix_element_index(op, "cubecc_lr", "cubecc_lc", col_major);
  // The shared window's address in 32 bits (base once, plus the byte offset), as nvcc's own
  // code computes it: 64-bit generic address arithmetic costs registers.
  line(fmt::format("const u32 cubecc_la = (u32)__cvta_generic_to_shared({}) + {}{};",
                   name_of(memory), at, bytes == 2 ? " * 2u" : ""));
  std::string frag = name_of(op.result());
  std::string outs, regs, names;
  for (int i = 0; i < blocks; ++i) {
    outs += fmt::format("{}\"=r\"(cubecc_l{})", i ? ", " : "", i);
    regs += fmt::format("{}%{}", i ? ", " : "", i);
    names += fmt::format("{}cubecc_l{}", i ? ", " : "", i);
  }
  line(fmt::format("u32 {};", names));
  line(fmt::format(
      "asm volatile(\"ldmatrix.sync.aligned.m8n8.x{}{}.shared.b16 {{{}}}, [%{}];\" : {} "
      ": \"r\"(cubecc_la));",
      blocks, trans ? ".trans" : "", regs, blocks, outs));
  // Register i holds elements 2i (low half) and 2i + 1 of the fragment's layout, or for fp8
  // elements 4i .. 4i + 3 from the low byte up.
  for (int i = 0; i < blocks; ++i) {
    if (bytes == 2) {
      line(fmt::format("{0}.x[{1}] = (u16)cubecc_l{2}; {0}.x[{3}] = (u16)(cubecc_l{2} >> 16);",
                       frag, 2 * i, i, 2 * i + 1));
      continue;
    }
    std::string parts;
    for (int j = 0; j < 4; ++j)
      parts += fmt::format("{}{}.x[{}] = (u8)(cubecc_l{} >> {}u);", j ? " " : "", frag, 4 * i + j,
                           i, 8 * j);
    line(parts);
  }
  --indent_;
  return true;
}

void CEmitter::emit_matrix(const ir::Operation &op) {
  if (divergent_ > 0) {
    // The first such op is named; the others would repeat it (a C++ loop in the kernel source
    // makes many ops of one line).
    if (!std::exchange(divergent_matrix_refused_, true))
      refuse(op, "the whole subgroup (it is under control flow that depends on the invocation)");
    refused_ = true;
    return;
  }
  const std::string lane = fmt::format("({} % CUBECC_WARP)", local_index());
  // `body` for each element e of the invocation's share of `t`; with `at`, (cubecc_r,
  // cubecc_c) is the element's row and column.
  auto each = [&](Type t, const std::string &body, bool at = true) {
    line("#pragma unroll");
    line(fmt::format("for (int cubecc_e = 0; cubecc_e < {}; ++cubecc_e) {{", per_lane(t)));
    ++indent_;
    if (at) {
      FragmentLayout l = layout_of(t);
      line("u32 cubecc_r, cubecc_c;");
      line(fmt::format("cubecc_frag_pos({}, {}, {}, {}, cubecc_e, cubecc_r, cubecc_c);", l.role,
                       l.p, l.kb, lane));
    }
    line(body);
    --indent_;
    line("}");
  };
  switch (op.opcode()) {
  case Opcode::MatrixFill: {
    Type t = op.result()->type();
    line(fmt::format("{} {};", type_of(t), name_of(op.result())));
    each(t,
         fmt::format("{}.x[cubecc_e] = {};", name_of(op.result()),
                     fragment_bits(t.element(), name_of(op.operand(0)))),
         /*at=*/false);
    return;
  }
  case Opcode::MatrixLoad:
  case Opcode::MatrixStore: {
    bool load = op.opcode() == Opcode::MatrixLoad;
    Type t = load ? op.result()->type() : op.operand(3)->type();
    Scalar s = t.element();
    bool col_major = op.attributes().get_int("col_major").value_or(0) != 0;
    std::string index = matrix_element_index(op, "cubecc_r", "cubecc_c", col_major);
    std::string ref = element_ref(op.operand(0), index);
    std::string frag = name_of(load ? op.result() : op.operand(3));
    if (load) {
      std::string value = s == Scalar::F16    ? "cubecc_f16_bits(" + ref + ")"
                          : s == Scalar::BF16 ? "cubecc_bf16_bits(" + ref + ")"
                                              : ref;
      line(fmt::format("{} {};", type_of(t), frag));
      bool ldmatrix = emit_ldmatrix(op, t, col_major, lane);
      if (ldmatrix) {
        line("} else {");
        ++indent_;
      }
      each(t, fmt::format("{}.x[cubecc_e] = {};", frag, value));
      if (ldmatrix) {
        --indent_;
        line("}");
      }
    } else {
      std::string value = s == Scalar::F16    ? "cubecc_f16_from_bits(" + frag + ".x[cubecc_e])"
                          : s == Scalar::BF16 ? "cubecc_bf16_from_bits(" + frag + ".x[cubecc_e])"
                                              : frag + ".x[cubecc_e]";
      each(t, fmt::format("{} = {};", ref, value));
    }
    return;
  }
  case Opcode::MatrixMma: {
    Type a = op.operand(0)->type(), b = op.operand(1)->type(), c = op.operand(2)->type();
    std::string fn = a.element() == b.element()
                         ? fmt::format("cubecc_mma_{}_{}", ir::scalar_name(a.element()),
                                       ir::scalar_name(c.element()))
                         : fmt::format("cubecc_mma_{}_{}_{}", ir::scalar_name(a.element()),
                                       ir::scalar_name(b.element()), ir::scalar_name(c.element()));
    std::string d = name_of(op.result());
    line(fmt::format("{} {};", type_of(c), d));
    // CUDA runs one m16n8 block per mma.sync; HIP's MFMA covers the whole 16x16.
    uint32_t blocks = hip_ ? 1 : c.cols() / 8;
    uint32_t b_per = per_lane(op.operand(1)->type()) / blocks, c_per = per_lane(c) / blocks;
    for (uint32_t nb = 0; nb < blocks; ++nb)
      line(fmt::format("{}({}.x, {}.x + {}, {}.x + {}, {}.x + {});", fn, name_of(op.operand(0)),
                       name_of(op.operand(1)), nb * b_per, name_of(op.operand(2)), nb * c_per, d,
                       nb * c_per));
    return;
  }
  case Opcode::MatrixConvert: {
    Type from = op.operand(0)->type(), to = op.result()->type();
    std::string src = name_of(op.operand(0)), dst = name_of(op.result());
    line(fmt::format("{} {};", type_of(to), dst));
    FragmentLayout lf = layout_of(from), lt = layout_of(to);
    bool same_place = lf.role == lt.role && lf.p == lt.p && lf.kb == lt.kb;
    // On CUDA an accumulator and a 16-bit 'a' of the same shape share their layout (the
    // FlashAttention register reuse); MFMA's differ.
    same_place |= !hip_ && lf.role == 2 && lt.role == 0 && lt.p == 2;
    if (same_place) {
      each(to,
           fmt::format(
               "{}.x[cubecc_e] = {};", dst,
               fragment_bits(to.element(), fragment_value(from.element(), src + ".x[cubecc_e]"))),
           /*at=*/false);
      return;
    }
    // Elsewhere each element comes from the lane that holds it, one shuffle per source slot.
    each(to,
         fmt::format(
             "u32 cubecc_src; int cubecc_slot; cubecc_frag_owner({}, {}, {}, cubecc_r, cubecc_c, "
             "cubecc_src, cubecc_slot); u32 cubecc_got = 0; for (int cubecc_j = 0; "
             "cubecc_j < {}; ++cubecc_j) {{ u32 cubecc_x = cubecc_shfl_raw32("
             "cubecc_active(), {}, cubecc_src); if (cubecc_j == cubecc_slot) "
             "cubecc_got = cubecc_x; }} {}.x[cubecc_e] = {};",
             lf.role, lf.p, lf.kb, per_lane(from),
             from.element() == Scalar::F32 ? "__float_as_uint(" + src + ".x[cubecc_j])"
                                           : "(u32)" + src + ".x[cubecc_j]",
             dst,
             fragment_bits(to.element(),
                           fragment_value(from.element(), from.element() == Scalar::F32
                                                              ? "__uint_as_float(cubecc_got)"
                                                              : "(u16)cubecc_got"))));
    return;
  }
  default:
    return;
  }
}

/// `if`: result variables declared before it, assigned by each branch's yield.
void CEmitter::emit_if(const ir::Operation &op) {
  std::vector<std::string> results;
  for (unsigned i = 0; i < op.num_results(); ++i) {
    results.push_back(name_of(op.result(i)));
    line(fmt::format("{} {};", type_of(op.result(i)->type()), results.back()));
  }
  if_results_.push_back(results);
  bool diverges = varying(op.operand(0));
  divergent_ += diverges;
  line(fmt::format("if ({}) {{", name_of(op.operand(0))));
  ++indent_;
  emit_region(op.region(0));
  --indent_;
  const ir::Region &else_region = op.region(1);
  bool empty_else = else_region.size() == 1 && else_region.front()->num_operands() == 0 &&
                    else_region.front()->opcode() == Opcode::Yield;
  if (!empty_else) {
    line("} else {");
    ++indent_;
    emit_region(else_region);
    --indent_;
  }
  line("}");
  divergent_ -= diverges;
  if_results_.pop_back();
}

/// `for`: a C for loop over the carried variables; the increment never wraps around.
void CEmitter::emit_for(const ir::Operation &op) {
  const ir::Region &body = op.region(0);
  std::string it = type_of(op.operand(0)->type());
  std::vector<std::string> carried;
  for (unsigned i = 0; i < op.num_results(); ++i) {
    carried.push_back(name_of(op.result(i)));
    line(fmt::format("{} {} = {};", type_of(op.result(i)->type()), carried.back(),
                     name_of(op.operand(3 + i))));
    names_[body.argument(1 + i)] = carried.back(); // the body reads the carried variables
  }
  std::string iv = name_of(body.argument(0)), hi = name_of(op.operand(1)),
              step = name_of(op.operand(2));
  // The increment never wraps around: a wrapped value ends the loop (docs/ir.md §5.3).
  Scalar is = op.operand(0)->type().element();
  std::string next = wrap(is, iv, "+", step);
  line(fmt::format("for ({0} {1} = {2}; {1} < {3}; {1} = {4} < {1} ? {3} : {4}) {{", it, iv,
                   name_of(op.operand(0)), hi, next));
  loop_results_.push_back(carried);
  loop_carried_.push_back(carried);
  bool diverges = divergent_loop(op);
  divergent_ += diverges;
  ++indent_;
  emit_region(body);
  --indent_;
  divergent_ -= diverges;
  loop_results_.pop_back();
  loop_carried_.pop_back();
  line("}");
}

/// `while`: `for (;;)` with the before region, a break when the condition fails, then the do
/// region.
void CEmitter::emit_while(const ir::Operation &op) {
  const ir::Region &before = op.region(0), &after = op.region(1);
  std::vector<std::string> carried, results;
  for (unsigned i = 0; i < before.num_arguments(); ++i) {
    carried.push_back(
        fresh(before.argument(i)->name().empty() ? "state" : before.argument(i)->name()));
    line(fmt::format("{} {} = {};", type_of(before.argument(i)->type()), carried.back(),
                     name_of(op.operand(i))));
    names_[before.argument(i)] = carried.back();
  }
  for (unsigned i = 0; i < op.num_results(); ++i) {
    results.push_back(name_of(op.result(i)));
    line(fmt::format("{} {};", type_of(op.result(i)->type()), results.back()));
  }
  line("for (;;) {");
  ++indent_;
  loop_results_.push_back(results);
  loop_carried_.push_back(carried);
  bool diverges = divergent_loop(op);
  divergent_ += diverges;
  emit_region(before); // ends with `condition`: leaves with the results or falls through
  emit_region(after);
  divergent_ -= diverges;
  loop_results_.pop_back();
  loop_carried_.pop_back();
  --indent_;
  line("}");
}

bool CEmitter::check_kernel() {
  bool ok = check_target_support(kernel_, features_, errors_);
  kernel_.walk([&](const ir::Operation *op) { ok &= check(*op); });
  return check_target_limits(kernel_, features_, errors_) && ok;
}

std::optional<CSource> CEmitter::run() {
  if (!check_kernel())
    return std::nullopt;
  bool matrices = false;
  kernel_.walk([&](const ir::Operation *op) { matrices |= ir::is_matrix_op(op->opcode()); });
  CSource out;
  out.abi = KernelAbi::of(kernel_);
  uniformity_ = std::make_unique<ir::UniformityAnalysis>(kernel_);
  dynamic_shared_ = !hip_ && out.abi.shared_bytes > kStaticSharedBytes;
  if (dynamic_shared_)
    line("extern __shared__ __align__(16) unsigned char cubecc_dynamic_shared[];");

  // The entry has C linkage, so it must not meet a C function of the vendor headers (sin, nan,
  // select, ...): the kernel's name with a `_kernel` suffix, which none of them has.
  out.entry = fresh(kernel_.name() + "_kernel");
  // Parameters in the launch ABI of cuda.h.
  std::vector<std::string> params, prologue;
  for (unsigned i = 0; i < kernel_.num_parameters(); ++i) {
    const ir::Value *p = kernel_.parameter(i);
    Type t = p->type();
    std::string name = name_of(p);
    if (t.kind() == ir::TypeKind::Buffer) {
      params.push_back(fmt::format("{}{} *__restrict__ {}",
                                   t.access() == ir::Access::Read ? "const " : "",
                                   storage(t.element()), name));
      params.push_back(fmt::format("unsigned long long {}_count", name));
      used_.insert(name + "_count");
      continue;
    }
    unsigned lane_bits = ir::scalar_bits(t.element()) == 64 ? 64 : 32;
    std::string slot = lane_bits == 64 ? "u64" : "u32";
    std::vector<std::string> lanes;
    for (unsigned k = 0; k < t.lanes(); ++k) {
      std::string raw = fresh(name + "_bits" + (t.is_vector() ? std::to_string(k) : ""));
      params.push_back(slot + " " + raw);
      Scalar s = t.element();
      std::string v;
      if (s == Scalar::Bool)
        v = raw + " != 0u";
      else
        v = from_bits(s, raw);
      lanes.push_back(v);
    }
    if (!t.is_vector()) {
      prologue.push_back(fmt::format("const {} {} = {};", reg(t.element()), name, lanes[0]));
    } else {
      prologue.push_back(fmt::format("{} {};", type_of(t), name));
      for (unsigned k = 0; k < t.lanes(); ++k)
        prologue.push_back(fmt::format("{}.v[{}] = {};", name, k, lanes[k]));
    }
  }
  for (const std::string &l : prologue)
    line(l);
  emit_region(kernel_.body());
  if (refused_)
    return std::nullopt;

  std::ostringstream text;
  text << fmt::format("// {} C++ for kernel '{}', written by cubecc.\n", hip_ ? "HIP" : "CUDA",
                      printable(kernel_.name()));
  if (hip_)
    text << "// hipRTC provides the HIP runtime and __half (hip_fp16.h) itself.\n";
  else
    text << "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n";
  text << (hip_ ? kCPreludeHip : kCPreludeCuda) << kCPreludeCommon << "\n";
  if (matrices)
    text << kCPreludeMatrixCommon << (hip_ ? kCPreludeMatrixHip : kCPreludeMatrixCuda) << "\n";
  auto wg = kernel_.workgroup_size();
  text << fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}(",
                      wg[0] * wg[1] * wg[2], out.entry);
  for (size_t i = 0; i < params.size(); ++i)
    text << (i ? ",\n    " : "") << params[i];
  text << ") {\n" << body_.str() << "}\n";
  out.text = text.str();
  return out;
}

} // namespace

namespace {

/// `kernel` legalized for `dialect` on a target with `features`, in a module of its own.
std::unique_ptr<ir::Module> legalized(const ir::Kernel &kernel, const TargetFeatures &features,
                                      CDialect dialect) {
  // The vendors' libraries (libdevice, ocml) have erf and C's pow.
  passes::LegalizeTarget target;
  target.name = dialect == CDialect::Hip ? "hip" : "cuda";
  target.native_erf = true;
  target.c_pow = true;
  target.native_libm = true;
  target.native_bit_ops = true; // the __popc, __clz, __brev, __mulhi ... intrinsics (CUDA and HIP)
  target.async_copy = dialect == CDialect::Cuda && features.async_copy; // cp.async
  std::unique_ptr<ir::Module> legal = ir::copy_kernel(kernel);
  passes::legalize(*legal, target);
  return legal;
}

} // namespace

std::optional<CSource> emit_c_family(const ir::Kernel &kernel, const TargetFeatures &features,
                                     CDialect dialect, std::vector<ir::Diagnostic> &errors) {
  std::unique_ptr<ir::Module> legal = legalized(kernel, features, dialect);
  return CEmitter(*legal->kernels().front(), features, /*hip=*/dialect == CDialect::Hip, errors)
      .run();
}

bool check_c_family(const ir::Kernel &kernel, const TargetFeatures &features, CDialect dialect,
                    std::vector<ir::Diagnostic> &errors) {
  std::unique_ptr<ir::Module> legal = legalized(kernel, features, dialect);
  return CEmitter(*legal->kernels().front(), features, /*hip=*/dialect == CDialect::Hip, errors)
      .check_kernel();
}

} // namespace cubecc::codegen
