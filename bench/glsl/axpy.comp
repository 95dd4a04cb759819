// y = a * x + y, one invocation per element: the GLSL twin of examples/kernels/axpy.cpp (axpy).
#version 450
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) buffer Y { float y[]; };
layout(push_constant) uniform Parameters {
  uint x_shape0, x_stride0, y_shape0, y_stride0;
  float a;
};
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < y_shape0)
    y[i] = a * x[i] + y[i];
}
