// A squeeze-and-excite head in one launch, for the OpenCL backend's CPU devices: kernels/excite.h
// (what it computes, and its #defines) as a kernel of its own, one work-group. As three launches
// (kernels/column_sum.cl, two GEMMs) MobileNet v3's nine heads were 27 of its 68 launches, each
// a few microseconds of work after a few of waiting for the one before.
// The compiler specialises it per use with #defines before this text: NAME, and excite.h's.
// Launch: global = local = GROUP.
#include "vectors.h"
#include "kahan.h"
#include "excite.h"

__kernel __attribute__((reqd_work_group_size(GROUP, 1, 1)))
void NAME(__global const float* restrict x, __global const float* restrict w1, __global const float* restrict b1
          FIRST_PARAMS SECOND_PARAMS EXCITE_PARAMS, __global float* restrict out) {
    __local float scratch[EXCITE_SCRATCH];
    excite_head(x, w1, b1 FIRST_ARGS SECOND_ARGS EXCITE_ARGS, out, scratch);
}
