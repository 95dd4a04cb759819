// One partial sum per workgroup over a grid-strided loop, subgroup sums, per-subgroup partials in
// shared memory: the GLSL twin of examples/kernels/reduce.cpp (reduce_sum).
#version 450
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer In { float in_data[]; };
layout(set = 0, binding = 1) buffer Out { float out_data[]; };
layout(push_constant) uniform Parameters { uint in_shape0, in_stride0, out_shape0, out_stride0; };
shared float partials[256];
void main() {
  uint n = in_shape0;
  uint stride = gl_NumWorkGroups.x * 256u;
  float acc = 0.0;
  for (uint i = gl_GlobalInvocationID.x; i < n; i += stride)
    acc += in_data[i * in_stride0];
  float mine = subgroupAdd(acc);
  if (gl_SubgroupInvocationID == 0u)
    partials[gl_SubgroupID] = mine;
  barrier();
  if (gl_SubgroupID == 0u) {
    float total = 0.0;
    for (uint s = gl_SubgroupInvocationID; s < gl_NumSubgroups; s += gl_SubgroupSize)
      total += partials[s];
    float result = subgroupAdd(total);
    if (gl_SubgroupInvocationID == 0u)
      out_data[gl_WorkGroupID.x * out_stride0] = result;
  }
}
