//===- tensor.h - Host-side tensors: a buffer, an element type, a shape and strides -----------===//
//
//   runtime::Tensor x = rt.upload(host_x);                       // 1-D, contiguous
//   runtime::Tensor m(rt.allocate<float>(rows * cols), {rows, cols});  // row-major
//   runtime::Tensor t = m.transpose(0, 1);                       // a view: same storage
//   runtime::Tensor row = m.slice(0, 3, 4);                      // row 3: offset 3 * cols
//
// A Tensor is what a launch takes for a DSL Tensor<T, Rank> parameter (cubecc/launch.hpp binds
// it: the buffer from `offset`, then the shape, then the strides). It shares its Buffer: copies
// and views keep the memory alive, and the memory goes back when the last of them is gone.
// Shapes, strides and the offset count elements, not bytes; dimension 0 is the outermost (a
// row-major rows x cols tensor has strides {cols, 1}). The element type and the rank are run-time
// values here; TypedTensor (cubecc/launch.hpp) makes them part of the C++ type so that a launch
// checks them at compile time.
//
// grid_for() computes a launch's workgroup count from the invocations it needs and the kernel's
// workgroup size.
//
// This header is the runtime's: it knows buffers and kernels, not the DSL.
//
//===-----------------------------------------------------------------------------------------===//
#pragma once

#include "cubecc/runtime/runtime.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace cubecc::runtime {

/// A strided view of a Buffer's elements. Cheap to copy (the storage is shared).
class Tensor {
public:
  /// The most dimensions a tensor has (as the DSL's Tensor<T, Rank>).
  static constexpr size_t kMaxRank = 8;

  Tensor() = default;
  /// All of `buffer`, as a 1-D contiguous tensor. Implicit, so that `Tensor x = rt.upload(v)`
  /// works.
  Tensor(Buffer &&buffer) // NOLINT(google-explicit-constructor)
      : Tensor(std::make_shared<Buffer>(std::move(buffer))) {}
  explicit Tensor(std::shared_ptr<Buffer> storage) : storage_(std::move(storage)) {
    if (!storage_ || !storage_->valid())
      throw Error(ErrorKind::InvalidArgument,
                  "Tensor: the buffer is empty (moved from or default-constructed)");
    shape_ = {storage_->size()};
    strides_ = {1};
  }
  /// The first product(shape) elements of `buffer`, contiguous and row-major.
  Tensor(Buffer &&buffer, std::vector<uint64_t> shape)
      : Tensor(std::make_shared<Buffer>(std::move(buffer)), std::move(shape)) {}
  Tensor(std::shared_ptr<Buffer> storage, std::vector<uint64_t> shape)
      : Tensor(std::move(storage), shape, contiguous_strides(shape), 0) {}
  /// Any strided view of `storage`: element (i0, i1, ...) is storage[offset + sum(i_d *
  /// strides[d])]. Throws Error (InvalidArgument) when the ranks differ, the rank is not 1 to 8,
  /// or an element lies outside the buffer.
  Tensor(std::shared_ptr<Buffer> storage, std::vector<uint64_t> shape,
         std::vector<uint64_t> strides, uint64_t offset)
      : storage_(std::move(storage)), shape_(std::move(shape)), strides_(std::move(strides)),
        offset_(offset) {
    check();
  }

  bool valid() const { return storage_ != nullptr; }
  ir::Scalar element() const { return buffer().element(); }
  size_t rank() const { return shape_.size(); }
  std::span<const uint64_t> shape() const { return shape_; }
  std::span<const uint64_t> strides() const { return strides_; }
  uint64_t shape(size_t d) const { return shape_.at(d); }
  uint64_t stride(size_t d) const { return strides_.at(d); }
  /// Where element (0, 0, ...) is in the buffer, in elements.
  uint64_t offset() const { return offset_; }
  /// The element count: the product of the shape.
  uint64_t size() const {
    uint64_t n = 1;
    for (uint64_t s : shape_)
      n *= s;
    return n;
  }
  /// The elements from offset() that the tensor spans: 1 + sum((shape[d] - 1) * strides[d]),
  /// 0 for an empty tensor.
  uint64_t extent() const {
    if (size() == 0)
      return 0;
    uint64_t last = 0;
    for (size_t d = 0; d < shape_.size(); ++d)
      last += (shape_[d] - 1) * strides_[d];
    return last + 1;
  }
  /// Row-major and without gaps (a view made by transpose() or slice() may not be).
  bool contiguous() const { return strides_ == contiguous_strides(shape_); }

  /// The buffer the tensor views (all of it, from element 0).
  const Buffer &buffer() const {
    if (!storage_)
      throw Error(ErrorKind::InvalidArgument, "Tensor: the tensor is empty (default-constructed)");
    return *storage_;
  }
  Buffer &buffer() { return const_cast<Buffer &>(static_cast<const Tensor &>(*this).buffer()); }
  /// The shared storage, to make other views of it.
  const std::shared_ptr<Buffer> &storage() const { return storage_; }

  /// The same elements with dimensions `a` and `b` swapped (no copy).
  Tensor transpose(size_t a, size_t b) const {
    check_dimension(a, "transpose");
    check_dimension(b, "transpose");
    Tensor t = *this;
    std::swap(t.shape_[a], t.shape_[b]);
    std::swap(t.strides_[a], t.strides_[b]);
    return t;
  }
  /// Indices [begin, end) of dimension `d` (no copy).
  Tensor slice(size_t d, uint64_t begin, uint64_t end) const {
    check_dimension(d, "slice");
    if (begin > end || end > shape_[d])
      throw Error(ErrorKind::InvalidArgument, "Tensor::slice: [" + std::to_string(begin) + ", " +
                                                  std::to_string(end) +
                                                  ") is not inside dimension " + std::to_string(d) +
                                                  " of size " + std::to_string(shape_[d]));
    Tensor t = *this;
    t.offset_ += begin * strides_[d];
    t.shape_[d] = end - begin;
    return t;
  }

  /// Row-major strides of `shape`: {shape[1] * shape[2] * ..., ..., 1}.
  static std::vector<uint64_t> contiguous_strides(std::span<const uint64_t> shape) {
    std::vector<uint64_t> strides(shape.size());
    uint64_t stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      strides[d] = stride;
      stride *= shape[d];
    }
    return strides;
  }

  /// "a tensor of f32 with shape [4, 8] and strides [8, 1]", for messages.
  std::string describe() const {
    auto list = [](std::span<const uint64_t> values) {
      std::string s = "[";
      for (size_t i = 0; i < values.size(); ++i)
        s += (i ? ", " : "") + std::to_string(values[i]);
      return s + "]";
    };
    if (!storage_)
      return "an empty tensor";
    return "a tensor of " + std::string(ir::scalar_name(element())) + " with shape " +
           list(shape_) + " and strides " + list(strides_) +
           (offset_ ? " from element " + std::to_string(offset_) : "");
  }

private:
  void check() const {
    const Buffer &b = buffer();
    if (!b.valid())
      throw Error(ErrorKind::InvalidArgument,
                  "Tensor: the buffer is empty (moved from or default-constructed)");
    if (shape_.empty() || shape_.size() > kMaxRank)
      throw Error(ErrorKind::InvalidArgument,
                  "Tensor: a tensor has 1 to 8 dimensions, not " + std::to_string(shape_.size()));
    if (strides_.size() != shape_.size())
      throw Error(ErrorKind::InvalidArgument,
                  "Tensor: " + std::to_string(shape_.size()) + " dimensions but " +
                      std::to_string(strides_.size()) + " strides (give one stride per dimension)");
    // The last element's index; a product or sum that wraps is a tensor past the buffer's end.
    uint64_t last = offset_;
    bool overflow = false;
    for (size_t d = 0; d < shape_.size() && size() != 0; ++d) {
      uint64_t step = 0;
      overflow |= __builtin_mul_overflow(shape_[d] - 1, strides_[d], &step);
      overflow |= __builtin_add_overflow(last, step, &last);
    }
    if (overflow || (size() != 0 && last >= b.size()) || offset_ > b.size())
      throw Error(ErrorKind::InvalidArgument,
                  "Tensor: " + describe() + " reaches past the end of its buffer of " +
                      std::to_string(b.size()) +
                      " elements (allocate a larger buffer, or fix the shape or strides)");
  }
  void check_dimension(size_t d, const char *what) const {
    if (d >= shape_.size())
      throw Error(ErrorKind::InvalidArgument, std::string("Tensor::") + what + ": dimension " +
                                                  std::to_string(d) +
                                                  " is out of range for a tensor of " +
                                                  std::to_string(shape_.size()) + " dimension(s)");
  }

  std::shared_ptr<Buffer> storage_;
  std::vector<uint64_t> shape_;
  std::vector<uint64_t> strides_;
  uint64_t offset_ = 0;
};

/// Appends to `values` the launch arguments of `tensor` for the kernel parameter `param` of
/// `kernel` (KernelHandle::parameters()): for a Tensor parameter the buffer from the tensor's
/// offset, its shapes, then its strides; for an Array parameter its elements, which must be
/// contiguous. Throws Error (InvalidArgument) naming the kernel, the argument (`position`, from 0)
/// and the parameter when the element type or the rank is not the parameter's, the tensor is
/// empty, a size or stride does not fit the kernel's u32, or `param` is a value.
void bind_tensor(const KernelHandle &kernel, size_t position, const KernelParameter &param,
                 const Tensor &tensor, std::vector<ArgumentValue> &values);

/// The workgroups a launch needs so that `invocations` (x, then y, then z; at most 3) are all
/// covered by workgroups of `workgroup` invocations: ceil(invocations[d] / workgroup[d]) along
/// each. Throws Error (InvalidArgument) when a count does not fit 32 bits or a workgroup size is 0.
inline std::array<uint32_t, 3> grid_for(std::span<const uint64_t> invocations,
                                        std::array<uint32_t, 3> workgroup) {
  if (invocations.empty() || invocations.size() > 3)
    throw Error(ErrorKind::InvalidArgument,
                "grid_for: give the invocations along 1 to 3 axes (x, y, z), not " +
                    std::to_string(invocations.size()));
  std::array<uint32_t, 3> grid = {1, 1, 1};
  for (size_t d = 0; d < invocations.size(); ++d) {
    if (workgroup[d] == 0)
      throw Error(ErrorKind::InvalidArgument,
                  "grid_for: workgroup size " + std::to_string(d) + " is 0");
    uint64_t groups = invocations[d] / workgroup[d] + (invocations[d] % workgroup[d] != 0);
    if (groups > std::numeric_limits<uint32_t>::max())
      throw Error(ErrorKind::InvalidArgument,
                  "grid_for: " + std::to_string(invocations[d]) + " invocations along axis " +
                      std::to_string(d) + " need " + std::to_string(groups) +
                      " workgroups, more than a launch can have (2^32 - 1)");
    grid[d] = static_cast<uint32_t>(groups);
  }
  return grid;
}
inline std::array<uint32_t, 3> grid_for(std::initializer_list<uint64_t> invocations,
                                        std::array<uint32_t, 3> workgroup) {
  return grid_for(std::span<const uint64_t>(invocations.begin(), invocations.size()), workgroup);
}
/// As above with the workgroup size `kernel` was compiled with (its ABI).
inline std::array<uint32_t, 3> grid_for(std::initializer_list<uint64_t> invocations,
                                        const KernelHandle &kernel) {
  return grid_for(invocations, kernel.abi().workgroup_size);
}
/// One invocation per element of `tensor` along x, in workgroups of `kernel`'s size.
inline std::array<uint32_t, 3> grid_for(const Tensor &tensor, const KernelHandle &kernel) {
  return grid_for({tensor.size()}, kernel);
}
/// One invocation per element of `tensor` along x, in workgroups of `workgroup_x`.
inline std::array<uint32_t, 3> grid_for(const Tensor &tensor, uint32_t workgroup_x) {
  return grid_for({tensor.size()}, {workgroup_x, 1, 1});
}

} // namespace cubecc::runtime
