// matmul.comp with the fma of docs/ir.md: a * b + c rounded once. GLSL's fma() only promises
// a * b + c, and lavapipe rounds it twice, so cubecc's SPIR-V writer computes fma exactly on such
// devices (codegen/spirv/spirv_writer.cpp, fma_through_f64: the product and sum in f64, then a
// round-to-odd fix of the halfway cases) and this twin does the same, step for step: the
// comparison then measures the code around it, not a different operation. The bench times both
// twins (matmul.comp, this one).
#version 450
#extension GL_ARB_gpu_shader_int64 : require
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

// a * b + c with one rounding: a * b is exact in f64, a * b + c rounded to f64 then to f32 is
// the correctly rounded result except when the f64 sum lies exactly halfway between two floats
// without being exact; then its last bit moves toward the exact sum. The fix is behind a branch,
// as cubecc's writer puts it (DontFlatten there; glslang keeps the if). `precise`: no contraction.
float fma_exact(float a, float b, float c) {
  double x = double(a), y = double(b), z = double(c);
  precise double xy = x * y;
  precise double r = xy + z;
  uint64_t bits = doubleBitsToUint64(r);
  if ((bits & 0x1fffffffUL) == 0x10000000UL) {
    precise double r_minus_xy = r - xy;
    precise double r_minus_z = r - z;
    bool exact = r_minus_xy == z && r_minus_z == xy;
    bool special = isnan(r) || isinf(r);
    bool negative = (bits >> 63) != 0UL;
    precise double err_a = (xy - r) + z;
    precise double err_b = (z - r) + xy;
    double err = negative == (z > xy) ? err_a : err_b;
    bool up = negative == (err < 0.0);
    uint64_t moved = up ? bits + 1UL : bits - 1UL;
    // An exact or infinite/NaN sum is kept, any other moves (a select, as the writer's OpSelect).
    bool keep = exact || special;
    r = keep ? r : uint64BitsToDouble(moved);
  }
  return float(r);
}

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
      acc = fma_exact(a_tile[ty * 16u + k], b_tile[tx + k * 16u], acc);
    barrier();
  }
  uint row = row0 + ty, col = col0 + tx;
  if (row < m && col < n)
    c_data[row * c_stride0 + col * c_stride1] = acc;
}
