//===- tensor.cpp - A tensor bound to a kernel's Tensor or Array parameter --------------------===//
#include "cubecc/runtime/tensor.h"

#include <fmt/format.h>

namespace cubecc::runtime {

namespace {

[[noreturn]] void bind_error(const KernelHandle &kernel, size_t position,
                             const KernelParameter &param, const std::string &problem) {
  throw Error(ErrorKind::InvalidArgument,
              fmt::format("launch of kernel '{}': argument {} ({}): {}", kernel.name(), position,
                          param.describe(), problem));
}

uint32_t u32_of(const KernelHandle &kernel, size_t position, const KernelParameter &param,
                uint64_t value, const char *what, size_t d) {
  if (value > std::numeric_limits<uint32_t>::max())
    bind_error(kernel, position, param,
               fmt::format("the {} of dimension {} is {}, more than the kernel's u32 {}s hold",
                           what, d, value, what));
  return static_cast<uint32_t>(value);
}

} // namespace

void bind_tensor(const KernelHandle &kernel, size_t position, const KernelParameter &param,
                 const Tensor &tensor, std::vector<ArgumentValue> &values) {
  if (param.kind == KernelParameter::Kind::Value)
    bind_error(kernel, position, param,
               "the parameter is a value, not a tensor; got " + tensor.describe());
  if (!tensor.valid())
    bind_error(kernel, position, param, "the tensor is empty (default-constructed)");
  const ir::Scalar element = param.type.element();
  const bool is_tensor = param.kind == KernelParameter::Kind::Tensor;
  if (tensor.element() != element)
    bind_error(kernel, position, param,
               fmt::format("the kernel takes {} elements; got {}", ir::scalar_name(element),
                           tensor.describe()));
  const Buffer &buffer = tensor.buffer();
  if (!is_tensor) {
    if (!tensor.contiguous())
      bind_error(kernel, position, param,
                 "an Array parameter takes contiguous elements; got " + tensor.describe() +
                     " (copy it into a contiguous tensor first)");
    values.push_back(tensor.offset() == 0 && tensor.size() == buffer.size()
                         ? ArgumentValue(buffer)
                         : ArgumentValue::range(buffer, tensor.offset(), tensor.size()));
    return;
  }
  if (tensor.rank() != param.rank)
    bind_error(kernel, position, param,
               fmt::format("the kernel's tensor has {} dimension(s); got {}", param.rank,
                           tensor.describe()));
  if (!param.reads_strides && !tensor.contiguous())
    bind_error(kernel, position, param,
               "the kernel indexes this tensor by flat position alone (x[i], never its strides), "
               "so it takes a contiguous tensor; got " +
                   tensor.describe() +
                   " (copy it into a contiguous tensor first, or index it by position in the "
                   "kernel: x(i), x(i, j))");
  values.push_back(tensor.offset() == 0 ? ArgumentValue(buffer)
                                        : ArgumentValue::range(buffer, tensor.offset(),
                                                               ArgumentValue::kWholeBuffer));
  for (size_t d = 0; d < tensor.rank(); ++d)
    values.emplace_back(u32_of(kernel, position, param, tensor.shape(d), "size", d));
  for (size_t d = 0; d < tensor.rank(); ++d)
    values.emplace_back(u32_of(kernel, position, param, tensor.stride(d), "stride", d));
}

} // namespace cubecc::runtime
