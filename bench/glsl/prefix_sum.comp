// An inclusive prefix sum within each workgroup's block of 256 elements: subgroup scans, the
// subgroups' totals in shared memory, and each invocation adding the totals before its subgroup.
// The GLSL twin of examples/kernels/prefix_sum.cpp (prefix_sum_f32).
#version 450
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer In { float in_data[]; };
layout(set = 0, binding = 1) buffer Out { float out_data[]; };
layout(set = 0, binding = 2) buffer BlockSums { float block_sums[]; };
layout(push_constant) uniform Parameters {
  uint in_shape0, in_stride0, out_shape0, out_stride0, sums_shape0, sums_stride0;
};
shared float subgroup_totals[256];
void main() {
  uint n = in_shape0;
  uint local = gl_LocalInvocationIndex;
  uint i = gl_WorkGroupID.x * 256u + local;
  float x = 0.0;
  if (i < n)
    x = in_data[i * in_stride0];
  float within = subgroupInclusiveAdd(x);
  if (gl_SubgroupInvocationID == gl_SubgroupSize - 1u || local == 255u)
    subgroup_totals[gl_SubgroupID] = within;
  barrier();
  float before = 0.0;
  for (uint s = 0u; s < gl_SubgroupID; ++s)
    before += subgroup_totals[s];
  float inclusive = within + before;
  if (i < n)
    out_data[i * out_stride0] = inclusive;
  if (local == 255u)
    block_sums[gl_WorkGroupID.x * sums_stride0] = inclusive;
}
