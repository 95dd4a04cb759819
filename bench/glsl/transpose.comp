// out = transpose(in) through a padded 32 x 33 shared tile, 32 x 8 invocations per workgroup:
// the GLSL twin of examples/kernels/transpose.cpp (transpose_32x8).
#version 450
layout(local_size_x = 32, local_size_y = 8) in;
layout(set = 0, binding = 0) readonly buffer In { float in_data[]; };
layout(set = 0, binding = 1) buffer Out { float out_data[]; };
layout(push_constant) uniform Parameters {
  uint in_shape0, in_shape1, in_stride0, in_stride1;
  uint out_shape0, out_shape1, out_stride0, out_stride1;
};
shared float tile[32 * 33];
void main() {
  uint rows = in_shape0, cols = in_shape1;
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  uint row0 = gl_WorkGroupID.y * 32u, col0 = gl_WorkGroupID.x * 32u;
  for (uint k = 0u; k < 32u; k += 8u) {
    uint r = row0 + ty + k, c = col0 + tx;
    if (r < rows && c < cols)
      tile[(ty + k) * 33u + tx] = in_data[r * in_stride0 + c * in_stride1];
  }
  barrier();
  for (uint k = 0u; k < 32u; k += 8u) {
    uint r = col0 + ty + k, c = row0 + tx;
    if (r < cols && c < rows)
      out_data[r * out_stride0 + c * out_stride1] = tile[tx * 33u + ty + k];
  }
}
