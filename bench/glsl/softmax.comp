// Row-wise stable softmax, one workgroup per row, three strided sweeps with workgroup reductions:
// the GLSL twin of examples/kernels/softmax.cpp (softmax).
#version 450
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer In { float in_data[]; };
layout(set = 0, binding = 1) buffer Out { float out_data[]; };
layout(push_constant) uniform Parameters {
  uint in_shape0, in_shape1, in_stride0, in_stride1;
  uint out_shape0, out_shape1, out_stride0, out_stride1;
};
shared float scratch[256];

float workgroup_max(float v) {
  float partial = subgroupMax(v);
  if (gl_SubgroupInvocationID == 0u)
    scratch[gl_SubgroupID] = partial;
  barrier();
  float acc = -1.0 / 0.0;
  for (uint s = gl_SubgroupInvocationID; s < gl_NumSubgroups; s += gl_SubgroupSize)
    acc = max(acc, scratch[s]);
  float total = subgroupMax(acc);
  barrier();
  return total;
}

float workgroup_sum(float v) {
  float partial = subgroupAdd(v);
  if (gl_SubgroupInvocationID == 0u)
    scratch[gl_SubgroupID] = partial;
  barrier();
  float acc = 0.0;
  for (uint s = gl_SubgroupInvocationID; s < gl_NumSubgroups; s += gl_SubgroupSize)
    acc += scratch[s];
  float total = subgroupAdd(acc);
  barrier();
  return total;
}

void main() {
  uint row = gl_WorkGroupID.x;
  uint cols = in_shape1;
  if (row < in_shape0) {
    float running_max = -1.0 / 0.0;
    for (uint c = gl_LocalInvocationIndex; c < cols; c += 256u)
      running_max = max(running_max, in_data[row * in_stride0 + c * in_stride1]);
    float row_max = workgroup_max(running_max);
    float running_sum = 0.0;
    for (uint c = gl_LocalInvocationIndex; c < cols; c += 256u)
      running_sum += exp(in_data[row * in_stride0 + c * in_stride1] - row_max);
    float row_sum = workgroup_sum(running_sum);
    for (uint c = gl_LocalInvocationIndex; c < cols; c += 256u)
      out_data[row * out_stride0 + c * out_stride1] =
          exp(in_data[row * in_stride0 + c * in_stride1] - row_max) / row_sum;
  }
}
