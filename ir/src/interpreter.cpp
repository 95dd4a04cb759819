//===- interpreter.cpp - Lockstep execution of a workgroup over structured IR -----------------===//
#include "cubecc/ir/interpreter.h"

#include "cubecc/ir/semantics.h"
#include "cubecc/ir/subgroup_combine.h"

#include "cubecc/ir/float16.h"
#include "cubecc/ir/float_formats.h"
#include "cubecc/ir/print_format.h"
#include "cubecc/ir/printer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <unordered_map>

namespace cubecc::ir {
namespace {

/// Stops the run; carries the diagnostic.
struct Failure {
  Diagnostic diagnostic;
};

using Mask = std::vector<uint8_t>;

bool any(const Mask &m) {
  return std::find(m.begin(), m.end(), 1) != m.end();
}

/// A memory object: a kernel's buffer, a workgroup's shared array, or local arrays (one copy
/// per invocation).
struct Memory {
  Scalar element;
  uint64_t count; ///< elements per copy
  uint8_t *data;  ///< the first copy
  bool per_invocation;
  std::string what;
};

class Interpreter {
public:
  Interpreter(const Kernel &kernel, std::span<const Argument> args, const LaunchConfig &config)
      : kernel_(kernel), config_(config) {
    const auto &wg = kernel.workgroup_size();
    size_ = wg[0] * wg[1] * wg[2];
    for (unsigned i = 0; i < kernel.num_parameters(); ++i)
      bind_parameter(kernel.parameter(i), i < args.size() ? &args[i] : nullptr, i);
  }

  void run() {
    const auto &n = config_.num_workgroups;
    for (uint32_t z = 0; z < n[2]; ++z)
      for (uint32_t y = 0; y < n[1]; ++y)
        for (uint32_t x = 0; x < n[0]; ++x) {
          workgroup_ = {x, y, z};
          shared_storage_.clear();
          local_storage_.clear();
          async_.assign(size_, {}); // copies still in flight at the end are dropped
          in_flight_.clear();
          Mask all(size_, 1);
          exec_region(kernel_.body(), all);
        }
  }

private:
  //===- Errors ------------------------------------------------------------------------------===//

  [[noreturn]] void fail(const Operation *op, std::string message) {
    Diagnostic d =
        diagnostic_at(*kernel_.module(), op,
                      fmt::format("'{}' in kernel {} (workgroup ({}, {}, {})): {}",
                                  op ? op->name() : "kernel", format_symbol(kernel_.name()),
                                  workgroup_[0], workgroup_[1], workgroup_[2], message));
    throw Failure{std::move(d)};
  }

  //===- Values ------------------------------------------------------------------------------===//

  /// Slots a value takes per invocation: its lanes, or every element of a matrix (each
  /// invocation keeps the whole matrix; matrix ops check that the subgroup's copies agree).
  static unsigned slots(Type t) { return t.is_matrix() ? t.matrix_elements() : t.lanes(); }

  std::vector<uint64_t> &lanes_of(const Value *v) {
    auto &slot = values_[v];
    size_t need = static_cast<size_t>(size_) * slots(v->type());
    if (slot.size() != need)
      slot.assign(need, 0);
    return slot;
  }
  uint64_t get(const Value *v, unsigned inv, unsigned lane = 0) {
    return lanes_of(v)[inv * slots(v->type()) + lane];
  }
  void set(const Value *v, unsigned inv, unsigned lane, uint64_t bits) {
    lanes_of(v)[inv * slots(v->type()) + lane] = bits;
  }
  void copy_value(const Value *to, const Value *from, unsigned inv) {
    for (unsigned l = 0; l < slots(to->type()); ++l)
      set(to, inv, l, get(from, inv, l));
  }

  void bind_parameter(const Value *p, const Argument *arg, unsigned index) {
    Type t = p->type();
    if (t.kind() == TypeKind::Buffer) {
      if (!arg || !arg->buffer)
        fail(nullptr, fmt::format("parameter {} ({}) needs a buffer argument", index, t.str()));
      if (arg->buffer->element != t.element())
        fail(nullptr, fmt::format("parameter {} is {}, but the buffer holds {}", index, t.str(),
                                  scalar_name(arg->buffer->element)));
      memory_[p] =
          Memory{t.element(), arg->buffer->size(), arg->buffer->bytes.data(), false,
                 p->name().empty() ? fmt::format("buffer parameter {}", index)
                                   : fmt::format("buffer parameter {} ('{}')", index, p->name())};
      return;
    }
    if (!arg || arg->bits.size() != t.lanes())
      fail(nullptr, fmt::format("parameter {} ({}) needs {} value(s)", index, t.str(), t.lanes()));
    for (unsigned inv = 0; inv < size_; ++inv)
      for (unsigned l = 0; l < t.lanes(); ++l)
        set(p, inv, l, arg->bits[l] & width_mask(scalar_bits(t.element())));
  }

  //===- Memory ------------------------------------------------------------------------------===//

  /// The byte address of element `index` (+ `lanes` consecutive) for invocation `inv`.
  uint8_t *address(const Operation *op, const Value *mem_value, unsigned inv, uint64_t index_bits,
                   Type index_type, unsigned lanes) {
    Memory &mem = memory_.at(mem_value);
    int64_t index = is_signed(index_type.element())
                        ? sign_extend(index_bits, scalar_bits(index_type.element()))
                        : static_cast<int64_t>(index_bits);
    if (index < 0 || static_cast<uint64_t>(index) + lanes > mem.count)
      fail(op, fmt::format("index {} is out of bounds of {} ({} elements{}) in invocation {}",
                           index, mem.what, mem.count,
                           lanes > 1 ? fmt::format(", accessing {}", lanes) : "", inv));
    if (lanes > 1 && index % lanes != 0)
      fail(op, fmt::format("vector access of {} lanes at index {}, which is not a multiple of {}",
                           lanes, index, lanes));
    if (!in_flight_.empty())
      check_not_in_flight(op, mem_value, static_cast<uint64_t>(index), lanes, inv);
    size_t bytes = scalar_bits(mem.element) / 8;
    size_t copy = mem.per_invocation ? static_cast<size_t>(inv) * mem.count : 0;
    return mem.data + (copy + static_cast<size_t>(index)) * bytes;
  }

  //===- Asynchronous copies (docs/ir.md §4.14) ----------------------------------------------===//
  //
  // async.copy reads its source when it is issued and writes the shared array only when an
  // async.wait of its invocation lets its group complete: the latest moment the IR allows, so a
  // kernel that reads the destination too early reads the old contents. Any access to a shared
  // element with a copy still in flight (not yet landed by its invocation's wait) is refused: on
  // a GPU it would race with the copy.

  struct AsyncCopyRecord {
    const Value *memory;
    uint64_t index;
    unsigned lanes;
    std::array<uint64_t, 16> bits; ///< what the source held (zeros where not read)
  };
  struct AsyncState {
    std::vector<AsyncCopyRecord> open;               ///< issued since the last commit
    std::deque<std::vector<AsyncCopyRecord>> groups; ///< committed, oldest first
  };

  void check_not_in_flight(const Operation *op, const Value *memory, uint64_t index, unsigned lanes,
                           unsigned inv) {
    auto it = in_flight_.find(memory);
    if (it == in_flight_.end())
      return;
    for (unsigned l = 0; l < lanes; ++l)
      if (it->second[index + l] != 0)
        fail(op, fmt::format("invocation {} touches element {} of {} while an async.copy into "
                             "it is in flight; wait for its group (async.wait) and then a barrier "
                             "before using the copied data or overwriting it",
                             inv, index + l, memory_.at(memory).what));
  }

  void exec_async_copy(const Operation &op, unsigned inv) {
    const unsigned lanes = static_cast<unsigned>(op.attributes().get_int("lanes").value_or(1));
    const Scalar s = op.operand(0)->type().element();
    const size_t bytes = scalar_bits(s) / 8;
    AsyncCopyRecord copy{op.operand(0), 0, lanes, {}};
    // The destination is checked (bounds, alignment, no copy in flight) when issued.
    uint8_t *dst =
        address(&op, op.operand(0), inv, get(op.operand(1), inv), op.operand(1)->type(), lanes);
    copy.index = static_cast<uint64_t>(dst - memory_.at(op.operand(0)).data) / bytes;
    if (get(op.operand(4), inv) != 0) {
      const uint8_t *src =
          address(&op, op.operand(2), inv, get(op.operand(3), inv), op.operand(3)->type(), lanes);
      for (unsigned l = 0; l < lanes; ++l)
        copy.bits[l] = read_element(src + l * bytes, s);
    }
    std::vector<uint32_t> &flight = in_flight_[op.operand(0)];
    flight.resize(memory_.at(op.operand(0)).count);
    for (unsigned l = 0; l < lanes; ++l)
      ++flight[copy.index + l];
    async_[inv].open.push_back(copy);
  }

  /// async.wait {pending = N}: the invocation's committed groups but the N newest land.
  void exec_async_wait(const Operation &op, unsigned inv) {
    const auto pending = static_cast<size_t>(op.attributes().get_int("pending").value_or(0));
    auto &groups = async_[inv].groups;
    while (groups.size() > pending) {
      for (const AsyncCopyRecord &copy : groups.front()) {
        Memory &mem = memory_.at(copy.memory);
        std::vector<uint32_t> &flight = in_flight_.at(copy.memory);
        const size_t bytes = scalar_bits(mem.element) / 8;
        for (unsigned l = 0; l < copy.lanes; ++l) {
          write_element(mem.data + (copy.index + l) * bytes, mem.element, copy.bits[l]);
          --flight[copy.index + l];
        }
      }
      groups.pop_front();
    }
  }

  static uint64_t read_element(const uint8_t *p, Scalar s) {
    uint64_t v = 0;
    std::memcpy(&v, p, scalar_bits(s) / 8);
    return v;
  }
  static void write_element(uint8_t *p, Scalar s, uint64_t v) {
    std::memcpy(p, &v, scalar_bits(s) / 8);
  }

  //===- Regions and control flow ------------------------------------------------------------===//

  struct LoopFrame {
    const Operation *loop;
    size_t depth; ///< mask stack size at the body's mask
    Mask exited;  ///< lanes that left by break
    Mask continued;
    std::vector<std::vector<uint64_t>> exit_values;     ///< per result: invocation * lanes
    std::vector<std::vector<uint64_t>> continue_values; ///< per carried value
  };

  void exec_region(const Region &region, Mask &mask) {
    masks_.push_back(&mask);
    for (Operation *op : region) {
      if (!any(mask))
        break;
      exec_op(*op, mask);
    }
    masks_.pop_back();
  }

  /// Removes `inv` from every mask of the current loop body (and the ifs inside it).
  void leave(unsigned inv, const LoopFrame &frame) {
    for (size_t d = frame.depth; d < masks_.size(); ++d)
      (*masks_[d])[inv] = 0;
  }

  void store_lanes(std::vector<uint64_t> &out, const Value *v, unsigned inv) {
    unsigned lanes = slots(v->type());
    if (out.size() < static_cast<size_t>(size_) * lanes)
      out.resize(static_cast<size_t>(size_) * lanes);
    for (unsigned l = 0; l < lanes; ++l)
      out[inv * lanes + l] = get(v, inv, l);
  }

  void load_lanes(const Value *to, const std::vector<uint64_t> &from, unsigned inv) {
    unsigned lanes = slots(to->type());
    for (unsigned l = 0; l < lanes; ++l)
      set(to, inv, l, from[inv * lanes + l]);
  }

  /// Copies the terminator's operands (from `first`) of each invocation still in `mask` to
  /// `targets` (values or stored lanes).
  void take_yield(const Region &region, const Mask &mask, size_t first,
                  const std::function<void(unsigned, size_t, const Value *)> &to) {
    Operation *term = region.terminator();
    if (!term || (term->opcode() != Opcode::Yield && term->opcode() != Opcode::Condition))
      return;
    for (unsigned inv = 0; inv < size_; ++inv)
      if (mask[inv])
        for (size_t i = first; i < term->num_operands(); ++i)
          to(inv, i - first, term->operand(static_cast<unsigned>(i)));
  }

  void exec_if(const Operation &op, Mask &mask) {
    Mask then_mask(size_, 0), else_mask(size_, 0);
    for (unsigned inv = 0; inv < size_; ++inv)
      if (mask[inv])
        (get(op.operand(0), inv) ? then_mask : else_mask)[inv] = 1;
    for (unsigned r = 0; r < 2; ++r) {
      Mask &m = r == 0 ? then_mask : else_mask;
      if (!any(m))
        continue;
      exec_region(op.region(r), m);
      take_yield(op.region(r), m, 0, [&](unsigned inv, size_t i, const Value *v) {
        copy_value(op.result(static_cast<unsigned>(i)), v, inv);
      });
    }
  }

  void exec_for(const Operation &op, Mask &mask) {
    const Region &body = op.region(0);
    Type iv_type = op.operand(0)->type();
    Scalar s = iv_type.element();
    unsigned w = scalar_bits(s);
    Mask in_loop = mask;
    std::vector<uint64_t> iv(size_);
    for (unsigned inv = 0; inv < size_; ++inv) {
      if (!in_loop[inv])
        continue;
      iv[inv] = get(op.operand(0), inv);
      uint64_t step = get(op.operand(2), inv);
      if (is_signed(s) ? sign_extend(step, w) <= 0 : step == 0)
        fail(&op,
             fmt::format("the step is {} in invocation {}; a for loop's step must be positive",
                         is_signed(s) ? std::to_string(sign_extend(step, w)) : std::to_string(step),
                         inv));
      for (unsigned c = 0; c + 3 < op.num_operands(); ++c)
        copy_value(body.argument(c + 1), op.operand(c + 3), inv);
    }
    while (any(in_loop)) {
      Mask body_mask(size_, 0);
      for (unsigned inv = 0; inv < size_; ++inv) {
        if (!in_loop[inv])
          continue;
        uint64_t hi = get(op.operand(1), inv);
        bool more = is_signed(s) ? sign_extend(iv[inv], w) < sign_extend(hi, w) : iv[inv] < hi;
        if (more) {
          body_mask[inv] = 1;
          set(body.argument(0), inv, 0, iv[inv]);
        } else {
          in_loop[inv] = 0;
          for (unsigned c = 0; c < op.num_results(); ++c)
            copy_value(op.result(c), body.argument(c + 1), inv);
        }
      }
      if (!any(body_mask))
        break;
      run_loop_body(op, body, body_mask, in_loop);
      for (unsigned inv = 0; inv < size_; ++inv)
        if (in_loop[inv]) {
          uint64_t next = (iv[inv] + get(op.operand(2), inv)) & width_mask(w);
          // Stepping past the type's range ends the loop (no wrap-around).
          bool wrapped =
              is_signed(s) ? sign_extend(next, w) < sign_extend(iv[inv], w) : next < iv[inv];
          if (wrapped) {
            in_loop[inv] = 0;
            for (unsigned c = 0; c < op.num_results(); ++c)
              copy_value(op.result(c), body.argument(c + 1), inv);
          }
          iv[inv] = next;
        }
    }
  }

  /// Runs a loop body for `body_mask`; afterwards, lanes that reached the yield or a continue
  /// carry their new values into the loop's carried arguments, and lanes that
  /// broke out leave `in_loop` with their results set.
  void run_loop_body(const Operation &loop, const Region &body, Mask &body_mask, Mask &in_loop) {
    const Region &carried = loop.opcode() == Opcode::For ? body : loop.region(0);
    unsigned carried_first = loop.opcode() == Opcode::For ? 1 : 0;
    frames_.push_back(LoopFrame{&loop, masks_.size(), Mask(size_, 0), Mask(size_, 0), {}, {}});
    frames_.back().exit_values.resize(loop.num_results());
    frames_.back().continue_values.resize(carried.num_arguments());
    Mask reached = body_mask;
    exec_region(body, reached);
    LoopFrame frame = std::move(frames_.back());
    frames_.pop_back();
    // The yield's values are read now (they may be the body's own values).
    std::vector<std::vector<uint64_t>> next(carried.num_arguments() - carried_first);
    take_yield(body, reached, 0,
               [&](unsigned inv, size_t i, const Value *v) { store_lanes(next[i], v, inv); });
    for (unsigned inv = 0; inv < size_; ++inv) {
      if (!body_mask[inv])
        continue;
      if (frame.exited[inv]) {
        in_loop[inv] = 0;
        for (unsigned c = 0; c < loop.num_results(); ++c)
          load_lanes(loop.result(c), frame.exit_values[c], inv);
      } else if (frame.continued[inv]) {
        for (unsigned c = carried_first; c < carried.num_arguments(); ++c)
          load_lanes(carried.argument(c), frame.continue_values[c - carried_first], inv);
      } else if (reached[inv]) {
        for (unsigned c = carried_first; c < carried.num_arguments(); ++c)
          load_lanes(carried.argument(c), next[c - carried_first], inv);
      }
    }
  }

  void exec_while(const Operation &op, Mask &mask) {
    const Region &before = op.region(0), &after = op.region(1);
    Mask in_loop = mask;
    for (unsigned inv = 0; inv < size_; ++inv)
      if (in_loop[inv])
        for (unsigned c = 0; c < op.num_operands(); ++c)
          copy_value(before.argument(c), op.operand(c), inv);
    while (any(in_loop)) {
      Mask m = in_loop;
      exec_region(before, m);
      Operation *cond = before.terminator();
      Mask body_mask(size_, 0);
      for (unsigned inv = 0; inv < size_; ++inv) {
        if (!m[inv])
          continue;
        bool go = get(cond->operand(0), inv) != 0;
        for (unsigned c = 1; c < cond->num_operands(); ++c)
          copy_value(go ? after.argument(c - 1) : op.result(c - 1), cond->operand(c), inv);
        if (go)
          body_mask[inv] = 1;
        else
          in_loop[inv] = 0;
      }
      if (!any(body_mask))
        break;
      run_loop_body(op, after, body_mask, in_loop);
    }
  }

  void exec_exit(const Operation &op, Mask &mask) {
    LoopFrame &frame = frames_.back();
    bool is_break = op.opcode() == Opcode::Break;
    for (unsigned inv = 0; inv < size_; ++inv) {
      if (!mask[inv])
        continue;
      for (unsigned i = 0; i < op.num_operands(); ++i)
        store_lanes(is_break ? frame.exit_values[i] : frame.continue_values[i], op.operand(i), inv);
      (is_break ? frame.exited : frame.continued)[inv] = 1;
      leave(inv, frame);
    }
  }

  //===- Ops ---------------------------------------------------------------------------------===//

  uint32_t builtin(Opcode op, unsigned inv, unsigned lane) {
    const auto &wg = kernel_.workgroup_size();
    uint32_t local[3] = {inv % wg[0], (inv / wg[0]) % wg[1], inv / (wg[0] * wg[1])};
    switch (op) {
    case Opcode::GlobalId:
      return workgroup_[lane] * wg[lane] + local[lane];
    case Opcode::LocalId:
      return local[lane];
    case Opcode::WorkgroupId:
      return workgroup_[lane];
    case Opcode::WorkgroupSize:
      return wg[lane];
    case Opcode::NumWorkgroups:
      return config_.num_workgroups[lane];
    case Opcode::LocalIndex:
      return inv;
    case Opcode::SubgroupId:
      return inv / config_.subgroup_size;
    case Opcode::SubgroupSize:
      return config_.subgroup_size;
    case Opcode::SubgroupLane:
      return inv % config_.subgroup_size;
    case Opcode::NumSubgroups:
      return (size_ + config_.subgroup_size - 1) / config_.subgroup_size;
    default:
      return 0;
    }
  }

  void exec_subgroup(const Operation &op, const Mask &mask) {
    unsigned sg = config_.subgroup_size;
    Type t = op.result()->type();
    Scalar s = t.element();
    for (unsigned base = 0; base < size_; base += sg) {
      unsigned end = std::min(size_, base + sg);
      for (unsigned inv = base; inv < end; ++inv) {
        if (!mask[inv])
          continue;
        switch (op.opcode()) {
        case Opcode::SubgroupElect: {
          unsigned first = base;
          while (!mask[first])
            ++first;
          set(op.result(), inv, 0, inv == first);
          break;
        }
        case Opcode::SubgroupBallot: {
          uint32_t words[4] = {0, 0, 0, 0};
          for (unsigned j = base; j < end; ++j)
            if (mask[j] && get(op.operand(0), j))
              words[(j - base) / 32] |= 1u << ((j - base) % 32);
          for (unsigned l = 0; l < 4; ++l)
            set(op.result(), inv, l, words[l]);
          break;
        }
        case Opcode::SubgroupAll:
        case Opcode::SubgroupAny: {
          bool all = true, some = false;
          for (unsigned j = base; j < end; ++j)
            if (mask[j]) {
              bool b = get(op.operand(0), j) != 0;
              all &= b;
              some |= b;
            }
          set(op.result(), inv, 0, op.opcode() == Opcode::SubgroupAll ? all : some);
          break;
        }
        case Opcode::SubgroupBroadcast:
        case Opcode::SubgroupShuffle:
        case Opcode::SubgroupShuffleXor:
        case Opcode::SubgroupShuffleUp:
        case Opcode::SubgroupShuffleDown: {
          uint32_t arg = static_cast<uint32_t>(get(op.operand(1), inv));
          uint32_t lane = inv - base;
          int64_t src = op.opcode() == Opcode::SubgroupShuffleXor    ? lane ^ arg
                        : op.opcode() == Opcode::SubgroupShuffleUp   ? int64_t{lane} - arg
                        : op.opcode() == Opcode::SubgroupShuffleDown ? int64_t{lane} + arg
                                                                     : int64_t{arg};
          bool relative = op.opcode() == Opcode::SubgroupShuffleUp ||
                          op.opcode() == Opcode::SubgroupShuffleDown;
          // Outside the subgroup (docs/ir.md §4.12): the invocation's own value. A lane inside
          // it that does not exist or is inactive is unspecified: the relative shuffles keep
          // their own value there too (what the CPU and CUDA do), the others are reported.
          bool outside = src < 0 || src >= static_cast<int64_t>(sg);
          if (op.opcode() != Opcode::SubgroupBroadcast &&
              (outside || (relative && src >= static_cast<int64_t>(end - base))))
            src = lane;
          if (src < 0 || src >= static_cast<int64_t>(end - base) || !mask[base + src])
            fail(&op, fmt::format("invocation {} reads lane {}, which is not an active lane of "
                                  "its subgroup",
                                  inv, src));
          copy_lanes_from(op.result(), op.operand(0), inv, base + static_cast<unsigned>(src));
          break;
        }
        default: { // reductions and scans
          Opcode o = op.opcode();
          const SubgroupCombine how = subgroup_combine(o);
          const Opcode combine = how.combine;
          const bool inclusive = how.scan == SubgroupCombine::Scan::Inclusive;
          const bool exclusive = how.scan == SubgroupCombine::Scan::Exclusive;
          unsigned last = inclusive ? inv + 1 : exclusive ? inv : end;
          for (unsigned l = 0; l < t.lanes(); ++l) {
            uint64_t acc = identity(combine, s);
            for (unsigned j = base; j < last; ++j)
              if (mask[j])
                acc = evaluate_lane(combine, s, acc, get(op.operand(0), j, l), 0);
            set(op.result(), inv, l, acc);
          }
          break;
        }
        }
      }
    }
  }

  static uint64_t identity(Opcode combine, Scalar s) {
    unsigned w = scalar_bits(s);
    switch (combine) {
    case Opcode::Add:
    case Opcode::Or:
    case Opcode::Xor:
      return is_float(s) ? from_double(s, 0.0) : 0;
    case Opcode::And:
      return width_mask(w);
    case Opcode::Mul:
      return is_float(s) ? from_double(s, 1.0) : 1;
    case Opcode::Min:
      return is_float(s) ? from_double(s, INFINITY)
                         : (is_signed(s) ? width_mask(w - 1) : width_mask(w));
    case Opcode::Max:
      return is_float(s) ? from_double(s, -INFINITY) : (is_signed(s) ? uint64_t{1} << (w - 1) : 0);
    default:
      return 0;
    }
  }

  void copy_lanes_from(const Value *to, const Value *from, unsigned to_inv, unsigned from_inv) {
    for (unsigned l = 0; l < to->type().lanes(); ++l)
      set(to, to_inv, l, get(from, from_inv, l));
  }

  void exec_op(const Operation &op, Mask &mask) {
    ops_executed_ += size_;
    if (ops_executed_ > config_.op_limit)
      fail(&op, fmt::format("stopped after {} operations (a runaway loop?); raise "
                            "LaunchConfig::op_limit if the kernel really needs more",
                            config_.op_limit));
    Opcode o = op.opcode();
    const OpInfo &info = op.info();
    switch (info.signature) {
    case Signature::If:
      return exec_if(op, mask);
    case Signature::For:
      return exec_for(op, mask);
    case Signature::While:
      return exec_while(op, mask);
    case Signature::Break:
    case Signature::Continue:
      return exec_exit(op, mask);
    case Signature::Yield:
    case Signature::Condition:
    case Signature::Return:
      return; // read by the enclosing op
    case Signature::SharedAlloc:
    case Signature::LocalAlloc: {
      Type t = op.result()->type();
      bool local = o == Opcode::LocalAlloc;
      auto &storage = (local ? local_storage_ : shared_storage_)[&op];
      uint64_t bytes = t.array_bytes() * (local ? size_ : 1);
      // Fresh contents are unspecified. Shared arrays get a recognisable pattern; local arrays
      // get zeros, the value `promote-locals` gives a load before any store, so that promoting
      // a local never changes what the interpreter computes.
      storage.assign(bytes, local ? 0x00 : 0xCD);
      memory_[op.result()] = Memory{t.element(), t.count(), storage.data(), local,
                                    fmt::format("{} array of {} {}", local ? "local" : "shared",
                                                t.count(), scalar_name(t.element()))};
      return;
    }
    case Signature::Sync:
      if (o == Opcode::Barrier) {
        unsigned active = static_cast<unsigned>(std::count(mask.begin(), mask.end(), 1));
        if (active != size_)
          fail(&op, fmt::format("reached by {} of the workgroup's {} invocations; every "
                                "invocation must reach each barrier",
                                active, size_));
      }
      if (o == Opcode::SubgroupBarrier) {
        const unsigned sg = config_.subgroup_size;
        for (unsigned base = 0; base < size_; base += sg) {
          const unsigned end = std::min(size_, base + sg);
          const auto active =
              static_cast<unsigned>(std::count(mask.begin() + base, mask.begin() + end, 1));
          if (active != 0 && active != end - base)
            fail(&op, fmt::format("reached by {} of the {} invocations of subgroup {}; every "
                                  "invocation of the subgroup must reach each subgroup.barrier",
                                  active, end - base, base / sg));
        }
      }
      return; // lockstep execution already orders memory
    default:
      break;
    }
    if (is_matrix_op(o))
      return exec_matrix(op, mask);
    if (op.has_flag(Subgroup))
      return exec_subgroup(op, mask);
    for (unsigned inv = 0; inv < size_; ++inv)
      if (mask[inv])
        exec_lane(op, inv);
  }

  //===- Matrix ops --------------------------------------------------------------------------===//

  /// Runs a matrix op once per subgroup (docs/ir.md §4.13): the whole subgroup must be active and
  /// pass the same operands; the result is every invocation's copy.
  void exec_matrix(const Operation &op, const Mask &mask) {
    const unsigned sg = config_.subgroup_size;
    for (unsigned base = 0; base < size_; base += sg) {
      const unsigned end = std::min(size_, base + sg);
      unsigned active = 0;
      for (unsigned inv = base; inv < end; ++inv)
        active += mask[inv];
      if (active == 0)
        continue;
      if (end - base < sg)
        fail(&op, fmt::format("subgroup {} has {} of {} invocations (the workgroup size is not a "
                              "multiple of the subgroup size); matrix ops need whole subgroups",
                              base / sg, end - base, sg));
      if (active != sg)
        fail(&op, fmt::format("reached by {} of the {} invocations of subgroup {}; every "
                              "invocation of the subgroup takes part in a matrix op",
                              active, sg, base / sg));
      for (unsigned i = 0; i < op.num_operands(); ++i) {
        const Value *v = op.operand(i);
        const unsigned n = slots(v->type());
        const uint64_t *copies = lanes_of(v).data();
        for (unsigned inv = base + 1; inv < end; ++inv)
          if (!std::equal(copies + size_t{inv} * n, copies + size_t{inv + 1} * n,
                          copies + size_t{base} * n))
            fail(&op, fmt::format("operand {} differs between invocations {} and {} of "
                                  "subgroup {}; a matrix op takes the same operands in every "
                                  "invocation of the subgroup",
                                  i, base, inv, base / sg));
      }
      exec_matrix_once(op, base);
      if (op.num_results()) {
        const unsigned n = slots(op.result()->type());
        uint64_t *copies = lanes_of(op.result()).data();
        for (unsigned inv = base + 1; inv < end; ++inv)
          std::copy(copies + size_t{base} * n, copies + size_t{base + 1} * n,
                    copies + size_t{inv} * n);
      }
    }
  }

  /// The memory index of element (r, c) of a matrix.load or matrix.store in invocation `inv`.
  uint64_t matrix_index(const Operation &op, unsigned inv, uint32_t r, uint32_t c) {
    Scalar s = op.operand(1)->type().element();
    auto value = [&](unsigned i) {
      uint64_t bits = get(op.operand(i), inv);
      return is_signed(s) ? static_cast<uint64_t>(sign_extend(bits, scalar_bits(s))) : bits;
    };
    bool col_major = op.attributes().get_int("col_major").value_or(0) != 0;
    uint64_t major = col_major ? c : r, minor = col_major ? r : c;
    return value(1) + major * value(2) + minor; // wraps; address() rejects what falls outside
  }

  void exec_matrix_once(const Operation &op, unsigned inv) {
    switch (op.opcode()) {
    case Opcode::MatrixFill:
      for (unsigned l = 0; l < slots(op.result()->type()); ++l)
        set(op.result(), inv, l, get(op.operand(0), inv));
      return;
    case Opcode::MatrixLoad:
    case Opcode::MatrixStore: {
      bool load = op.opcode() == Opcode::MatrixLoad;
      Type m = load ? op.result()->type() : op.operand(3)->type();
      for (uint32_t r = 0; r < m.rows(); ++r)
        for (uint32_t c = 0; c < m.cols(); ++c) {
          uint8_t *p = address(&op, op.operand(0), inv, matrix_index(op, inv, r, c),
                               Type::scalar(Scalar::I64), 1);
          if (load)
            set(op.result(), inv, r * m.cols() + c, read_element(p, m.element()));
          else
            write_element(p, m.element(), get(op.operand(3), inv, r * m.cols() + c));
        }
      return;
    }
    case Opcode::MatrixMma: {
      // Each product is exact in double (the inputs have at most 11 significant bits: f32
      // operands are rounded to tf32 first); the sum runs in double from C over k = 0, 1, ...
      // and is rounded once to the accumulator type. Integers: the exact sum, wrapped to the
      // 32-bit accumulator (mma.sync without .satfinite).
      Type a = op.operand(0)->type(), b = op.operand(1)->type(), c = op.operand(2)->type();
      const uint32_t m = c.rows(), n = c.cols(), k = a.cols();
      if (is_integer(c.element())) {
        auto value = [&](const Value *v, Scalar s, unsigned e) {
          uint64_t bits = get(v, inv, e);
          return is_signed(s) ? sign_extend(bits, scalar_bits(s)) : static_cast<int64_t>(bits);
        };
        for (uint32_t i = 0; i < m; ++i)
          for (uint32_t j = 0; j < n; ++j) {
            int64_t sum = value(op.operand(2), c.element(), i * n + j);
            for (uint32_t kk = 0; kk < k; ++kk)
              sum += value(op.operand(0), a.element(), i * k + kk) *
                     value(op.operand(1), b.element(), kk * n + j);
            set(op.result(), inv, i * n + j, static_cast<uint64_t>(sum) & 0xFFFFFFFFu);
          }
        return;
      }
      auto operand = [&](const Value *v, Scalar s, size_t e) {
        uint64_t bits = get(v, inv, static_cast<unsigned>(e));
        return to_double(s, s == Scalar::F32 ? round_to_tf32(static_cast<uint32_t>(bits)) : bits);
      };
      std::vector<double> av(size_t{m} * k), bv(size_t{k} * n);
      for (size_t e = 0; e < av.size(); ++e)
        av[e] = operand(op.operand(0), a.element(), e);
      for (size_t e = 0; e < bv.size(); ++e)
        bv[e] = operand(op.operand(1), b.element(), e);
      for (uint32_t i = 0; i < m; ++i)
        for (uint32_t j = 0; j < n; ++j) {
          double sum = to_double(c.element(), get(op.operand(2), inv, i * n + j));
          for (uint32_t kk = 0; kk < k; ++kk)
            sum += av[i * k + kk] * bv[kk * n + j];
          set(op.result(), inv, i * n + j, from_double(c.element(), sum));
        }
      return;
    }
    case Opcode::MatrixConvert: {
      Type from = op.operand(0)->type(), to = op.result()->type();
      for (unsigned l = 0; l < slots(to); ++l)
        set(op.result(), inv, l,
            convert_lane(from.element(), to.element(), get(op.operand(0), inv, l)));
      return;
    }
    default:
      fail(&op, "the interpreter does not implement this matrix op (a bug in cubecc)");
    }
  }

  void exec_lane(const Operation &op, unsigned inv) {
    Opcode o = op.opcode();
    const OpInfo &info = op.info();
    switch (info.signature) {
    case Signature::Constant:
      set(op.result(), inv, 0, static_cast<uint64_t>(*op.attributes().get_int("value")));
      return;
    case Signature::Unary:
    case Signature::Binary:
    case Signature::Ternary:
    case Signature::Compare:
    case Signature::Classify: {
      Type t = op.operand(0)->type();
      for (unsigned l = 0; l < t.lanes(); ++l) {
        uint64_t a = get(op.operand(0), inv, l);
        uint64_t b = op.num_operands() > 1 ? get(op.operand(1), inv, l) : 0;
        uint64_t c = op.num_operands() > 2 ? get(op.operand(2), inv, l) : 0;
        set(op.result(), inv, l, evaluate_lane(o, t.element(), a, b, c));
      }
      return;
    }
    case Signature::Select: {
      Type t = op.result()->type();
      Type ct = op.operand(0)->type();
      for (unsigned l = 0; l < t.lanes(); ++l) {
        bool c = get(op.operand(0), inv, ct.is_vector() ? l : 0) != 0;
        set(op.result(), inv, l, get(op.operand(c ? 1 : 2), inv, l));
      }
      return;
    }
    case Signature::Cast: {
      Type from = op.operand(0)->type(), to = op.result()->type();
      for (unsigned l = 0; l < to.lanes(); ++l)
        set(op.result(), inv, l,
            convert_lane(from.element(), to.element(), get(op.operand(0), inv, l)));
      return;
    }
    case Signature::Bitcast: {
      Type from = op.operand(0)->type(), to = op.result()->type();
      unsigned fw = scalar_bits(from.element()), tw = scalar_bits(to.element());
      // Concatenate the lanes (lane 0 least significant) and split them again.
      std::vector<uint8_t> bits(fw * from.lanes(), 0);
      for (unsigned l = 0; l < from.lanes(); ++l)
        for (unsigned b = 0; b < fw; ++b)
          bits[l * fw + b] = (get(op.operand(0), inv, l) >> b) & 1;
      for (unsigned l = 0; l < to.lanes(); ++l) {
        uint64_t v = 0;
        for (unsigned b = 0; b < tw; ++b)
          v |= uint64_t{bits[l * tw + b]} << b;
        set(op.result(), inv, l, v);
      }
      return;
    }
    case Signature::Splat:
      for (unsigned l = 0; l < op.result()->type().lanes(); ++l)
        set(op.result(), inv, l, get(op.operand(0), inv));
      return;
    case Signature::VecBuild:
      for (unsigned l = 0; l < op.num_operands(); ++l)
        set(op.result(), inv, l, get(op.operand(l), inv));
      return;
    case Signature::VecExtract:
      set(op.result(), inv, 0,
          get(op.operand(0), inv, static_cast<unsigned>(*op.attributes().get_int("lane"))));
      return;
    case Signature::VecInsert: {
      auto lane = static_cast<unsigned>(*op.attributes().get_int("lane"));
      copy_value(op.result(), op.operand(0), inv);
      set(op.result(), inv, lane, get(op.operand(1), inv));
      return;
    }
    case Signature::AsyncCopy:
      return exec_async_copy(op, inv);
    case Signature::AsyncGroup:
      if (op.opcode() == Opcode::AsyncCommit) {
        AsyncState &state = async_[inv];
        state.groups.push_back(std::move(state.open));
        state.open.clear();
        return;
      }
      return exec_async_wait(op, inv);
    case Signature::Load:
    case Signature::AtomicLoad: { // invocations run one op at a time: every access is atomic
      Type t = op.result()->type();
      uint8_t *p = address(&op, op.operand(0), inv, get(op.operand(1), inv), op.operand(1)->type(),
                           t.lanes());
      size_t bytes = scalar_bits(t.element()) / 8;
      for (unsigned l = 0; l < t.lanes(); ++l)
        set(op.result(), inv, l, read_element(p + l * bytes, t.element()));
      return;
    }
    case Signature::Store:
    case Signature::AtomicStore: {
      Type t = op.operand(2)->type();
      uint8_t *p = address(&op, op.operand(0), inv, get(op.operand(1), inv), op.operand(1)->type(),
                           t.lanes());
      size_t bytes = scalar_bits(t.element()) / 8;
      for (unsigned l = 0; l < t.lanes(); ++l)
        write_element(p + l * bytes, t.element(), get(op.operand(2), inv, l));
      return;
    }
    case Signature::BufferSize:
      set(op.result(), inv, 0,
          memory_.at(op.operand(0)).count & width_mask(scalar_bits(op.result()->type().element())));
      return;
    case Signature::Builtin3:
      for (unsigned l = 0; l < 3; ++l)
        set(op.result(), inv, l, builtin(o, inv, l));
      return;
    case Signature::Builtin1:
      set(op.result(), inv, 0, builtin(o, inv, 0));
      return;
    case Signature::AtomicRmw:
    case Signature::AtomicCmpXchg: {
      Type t = op.result()->type(); // a vector: one atomic per lane, lane l on element index + l
      Scalar s = t.element();
      uint8_t *base = address(&op, op.operand(0), inv, get(op.operand(1), inv),
                              op.operand(1)->type(), t.lanes());
      for (unsigned l = 0; l < t.lanes(); ++l) {
        uint8_t *p = base + l * (scalar_bits(s) / 8);
        uint64_t old = read_element(p, s);
        uint64_t v = get(op.operand(2), inv, l), next = old;
        if (o == Opcode::AtomicXchg)
          next = v;
        else if (o == Opcode::AtomicCmpXchg)
          next = old == v ? get(op.operand(3), inv, l) : old;
        else // integer and, or, xor act on the bits as the plain ops do
          next = evaluate_lane(atomic_combine(o), s, old, v, 0);
        write_element(p, s, next);
        set(op.result(), inv, l, old);
      }
      return;
    }
    case Signature::Print: {
      // Parsed once per op, not once per invocation.
      auto cached = print_formats_.try_emplace(&op);
      if (cached.second)
        cached.first->second = print_format_of(op);
      const PrintFormat &format = cached.first->second;
      std::string text = format.texts[0];
      for (size_t i = 0; i < format.args.size(); ++i) {
        const PrintArgument &a = format.args[i];
        text += format_print_value(a.type, get(op.operand(a.operand), inv, a.lane));
        text += format.texts[i + 1];
      }
      if (config_.print) {
        config_.print(text);
      } else {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
      }
      return;
    }
    default:
      fail(&op, "the interpreter does not implement this op (a bug in cubecc)");
    }
  }

  const Kernel &kernel_;
  LaunchConfig config_;
  unsigned size_ = 1;
  std::array<uint32_t, 3> workgroup_ = {0, 0, 0};
  std::unordered_map<const Value *, std::vector<uint64_t>> values_;
  std::unordered_map<const Operation *, PrintFormat> print_formats_;
  std::unordered_map<const Value *, Memory> memory_;
  std::unordered_map<const Operation *, std::vector<uint8_t>> shared_storage_, local_storage_;
  std::vector<Mask *> masks_;
  std::vector<LoopFrame> frames_;
  std::vector<AsyncState> async_; ///< per invocation
  /// Per shared array with copies issued: per element, the copies into it not yet landed.
  std::unordered_map<const Value *, std::vector<uint32_t>> in_flight_;
  uint64_t ops_executed_ = 0;
};

} // namespace

std::vector<Diagnostic> interpret(const Kernel &kernel, std::span<const Argument> arguments,
                                  const LaunchConfig &config) {
  if (config.subgroup_size == 0 || config.subgroup_size > 128 ||
      (config.subgroup_size & (config.subgroup_size - 1)) != 0)
    return {Diagnostic{
        "",
        0,
        0,
        fmt::format("subgroup size {} is not a power of two from 1 to 128", config.subgroup_size),
        {}}};
  if (std::optional<int64_t> required = kernel.attributes().get_int(kSubgroupSizeAttribute);
      required && *required != config.subgroup_size)
    return {Diagnostic{"",
                       0,
                       0,
                       fmt::format("kernel {} needs subgroups of {} invocations (its "
                                   "subgroup_size attribute); this launch has subgroups of {}",
                                   format_symbol(kernel.name()), *required, config.subgroup_size),
                       {}}};
  if (arguments.size() != kernel.num_parameters())
    return {Diagnostic{"",
                       0,
                       0,
                       fmt::format("kernel {} takes {} arguments, {} were given",
                                   format_symbol(kernel.name()), kernel.num_parameters(),
                                   arguments.size()),
                       {}}};
  try {
    Interpreter interpreter(kernel, arguments, config);
    interpreter.run();
  } catch (const Failure &f) {
    return {f.diagnostic};
  }
  return {};
}

} // namespace cubecc::ir
