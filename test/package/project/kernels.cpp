// The application's kernel library: `cubecc env build libscale_kernels.so --target ...`.
#include "scale.h"

static const bool registered = cubecc::dsl::register_kernel<consumer::scale_shift>(
    "scale_shift", "", consumer::kScaleShiftOptions);
