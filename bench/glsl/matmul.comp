// C = A * B with 16 x 16 shared tiles of A and B, one element of C per invocation, fma in the
// inner loop: the GLSL twin of examples/kernels/matmul.cpp (matmul_16x16x16).
#version 450
layout(local_size_x = 16, local_size_y = 16) in;
layout(set = 0, binding = 0) readonly buffer A { float a_data[]; };
layout(set = 0, binding = 1) readonly buffer B { float b_data[]; };
layout(set = 0, binding = 2) buffer C { float c_data[]; };
layout(push_constant) uniform Parameters {
  uint a_shape0, a_shape1, a_stride0, a_stride1;
  uint b_shape0, b_shape1, b_stride0, b_stride1;
  uint c_shape0, c_shape1, c_stride0, c_stride1;
};
shared float a_tile[16 * 16];
shared float b_tile[16 * 16];
void main() {
  uint m = a_shape0, k_size = a_shape1, n = b_shape1;
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  uint index = gl_LocalInvocationIndex;
  uint row0 = gl_WorkGroupID.y * 16u, col0 = gl_WorkGroupID.x * 16u;
  float acc = 0.0;
  uint k_tiles = (k_size + 15u) / 16u;
  for (uint t = 0u; t < k_tiles; ++t) {
    uint k0 = t * 16u;
    uint ar = row0 + index / 16u, ac = k0 + index % 16u;
    a_tile[index] = ar < a_shape0 && ac < a_shape1 ? a_data[ar * a_stride0 + ac * a_stride1] : 0.0;
    uint br = k0 + index / 16u, bc = col0 + index % 16u;
    b_tile[index] = br < b_shape0 && bc < b_shape1 ? b_data[br * b_stride0 + bc * b_stride1] : 0.0;
    barrier();
    for (uint k = 0u; k < 16u; ++k)
      acc = fma(a_tile[ty * 16u + k], b_tile[tx + k * 16u], acc);
    barrier();
  }
  uint row = row0 + ty, col = col0 + tx;
  if (row < m && col < n)
    c_data[row * c_stride0 + col * c_stride1] = acc;
}
