// ascendc_library test: a kernel launched with <<<>>> from a host wrapper in the same file,
// and through its generated aclrtlaunch_scale.h (ACLRT_LAUNCH_KERNEL).
#include "kernel_operator.h"

extern "C" __global__ __aicore__ void scale(__gm__ float* x, float factor)
{
    x[block_idx] *= factor;
    AscendC::printf("block %d of %d\n", (int)AscendC::GetBlockIdx(), (int)AscendC::GetBlockNum());
}

void Scale(uint32_t blocks, void* stream, float* x, float factor) { scale<<<blocks, nullptr, stream>>>(x, factor); }
