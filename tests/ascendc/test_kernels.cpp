// mdev's own Ascend C test kernels (tests/test_ascendc.py builds them with ascendc_fatbin_library).
#include "kernel_operator.h"
using namespace AscendC;

constexpr int32_t N = 256;      // elements per block

// z = op(x, y) on N elements per block; op: 0 Add 1 Sub 2 Mul 3 Div 4 Max 5 Min 6 Adds(y[0]) 7 Muls(y[0])
// 8 Exp 9 Abs 10 Relu 11 Duplicate(y[0]) 12 Ln 13 Sqrt
template <typename T> __aicore__ void Compute(GM_ADDR x, GM_ADDR y, GM_ADDR z, int32_t op) {
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> inX, inY;
    TQue<QuePosition::VECOUT, 1> out;
    pipe.InitBuffer(inX, 1, N * sizeof(T));
    pipe.InitBuffer(inY, 1, N * sizeof(T));
    pipe.InitBuffer(out, 1, N * sizeof(T));
    GlobalTensor<T> gx, gy, gz;
    gx.SetGlobalBuffer((__gm__ T*)x + N * GetBlockIdx(), N);
    gy.SetGlobalBuffer((__gm__ T*)y + N * GetBlockIdx(), N);
    gz.SetGlobalBuffer((__gm__ T*)z + N * GetBlockIdx(), N);
    LocalTensor<T> a = inX.AllocTensor<T>(), b = inY.AllocTensor<T>();
    DataCopy(a, gx, N);
    DataCopy(b, gy, N);
    inX.EnQue(a);
    inY.EnQue(b);
    a = inX.DeQue<T>();
    b = inY.DeQue<T>();
    LocalTensor<T> c = out.AllocTensor<T>();
    T s = b.GetValue(0);
    switch (op) {
        case 0: Add(c, a, b, N); break;
        case 1: Sub(c, a, b, N); break;
        case 2: Mul(c, a, b, N); break;
        case 3: Div(c, a, b, N); break;
        case 4: Max(c, a, b, N); break;
        case 5: Min(c, a, b, N); break;
        case 6: Adds(c, a, s, N); break;
        case 7: Muls(c, a, s, N); break;
        case 8: Exp(c, a, N); break;
        case 9: Abs(c, a, N); break;
        case 10: Relu(c, a, N); break;
        case 11: Duplicate(c, s, N); break;
        case 12: Ln(c, a, N); break;
        case 13: Sqrt(c, a, N); break;
    }
    out.EnQue(c);
    inX.FreeTensor(a);
    inY.FreeTensor(b);
    c = out.DeQue<T>();
    DataCopy(gz, c, N);
    out.FreeTensor(c);
}

extern "C" __global__ __aicore__ void compute_half(GM_ADDR x, GM_ADDR y, GM_ADDR z, int32_t op) { Compute<half>(x, y, z, op); }
extern "C" __global__ __aicore__ void compute_float(GM_ADDR x, GM_ADDR y, GM_ADDR z, int32_t op) { Compute<float>(x, y, z, op); }
extern "C" __global__ __aicore__ void compute_bf16(GM_ADDR x, GM_ADDR y, GM_ADDR z, int32_t op) { Compute<bfloat16_t>(x, y, z, op); }

// sum and max of N floats per block, and the halves of x cast to float (Cast)
extern "C" __global__ __aicore__ void reduce_cast(GM_ADDR x, GM_ADDR h, GM_ADDR out) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, N * sizeof(float) * 2 + N * sizeof(half) + 64);
    LocalTensor<float> all = buf.Get<float>();
    LocalTensor<float> v = all[0], w = all[N], r = all[2 * N];
    LocalTensor<half> hv = all[2 * N + 16].ReinterpretCast<half>();
    GlobalTensor<float> gx, go;
    GlobalTensor<half> gh;
    gx.SetGlobalBuffer((__gm__ float*)x, N);
    gh.SetGlobalBuffer((__gm__ half*)h, N);
    go.SetGlobalBuffer((__gm__ float*)out, N + 8);
    DataCopy(v, gx, N);
    ReduceSum(r, v, w, N);
    go.SetValue(0, r.GetValue(0));
    ReduceMax(r, v, w, N);
    go.SetValue(1, r.GetValue(0));
    DataCopy(hv, gh, N);
    Cast(v, hv, RoundMode::CAST_NONE, N);
    DataCopy(go[8], v, N);
}

// DataCopy of `count` floats (a count * 4 that is not a multiple of 32 faults)
extern "C" __global__ __aicore__ void copy_count(GM_ADDR x, GM_ADDR z, int32_t count, int32_t global_size) {
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> q;
    pipe.InitBuffer(q, 1, 4096 * sizeof(float));
    GlobalTensor<float> gx, gz;
    gx.SetGlobalBuffer((__gm__ float*)x, global_size);
    gz.SetGlobalBuffer((__gm__ float*)z, global_size);
    LocalTensor<float> t = q.AllocTensor<float>();
    DataCopy(t, gx, count);
    DataCopy(gz, t, count);
    q.FreeTensor(t);
}

// asks `bytes` of Unified Buffer
extern "C" __global__ __aicore__ void ub_ask(uint32_t bytes) {
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> q;
    pipe.InitBuffer(q, 2, bytes / 2);
}

extern "C" __global__ __aicore__ void wild(uint64_t address) { *(volatile int*)address = 1; }

extern "C" __global__ __aicore__ void trapper() { asm("trap"); }

// spins until *flag != 0 (a flag no one sets: stopped from the host)
extern "C" __global__ __aicore__ void spin(__gm__ volatile int32_t* flag) {
    while (*flag == 0) {
    }
}

// block b prints "block b line i" for i < lines, then writes b + 1 to out[b]
extern "C" __global__ __aicore__ void talk(__gm__ int32_t* out, int32_t lines) {
    for (int32_t i = 0; i < lines; ++i) AscendC::printf("block %ld line %d\n", (long)block_idx, i);
    out[block_idx] = (int32_t)block_idx + 1;
}

extern "C" __global__ __aicore__ void empty() {}

// DataCopyPad of rows x 5 floats (20 bytes, not a 32-byte multiple) each way, then Maxs / Mins /
// Reciprocal on the padded rows (8 floats each in UB; the 3 pad elements hold 1)
extern "C" __global__ __aicore__ void pad_rows(GM_ADDR x, GM_ADDR z, int32_t rows) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 3 * 64 * 8 * sizeof(float));
    LocalTensor<float> all = buf.Get<float>();
    LocalTensor<float> a = all[0], b = all[64 * 8], c = all[2 * 64 * 8];
    GlobalTensor<float> gx, gz;
    gx.SetGlobalBuffer((__gm__ float*)x, rows * 5);
    gz.SetGlobalBuffer((__gm__ float*)z, rows * 5 * 3);
    DataCopyExtParams p{static_cast<uint16_t>(rows), 5 * sizeof(float), 0, 0, 0};
    DataCopyPadExtParams<float> pad{true, 0, 3, 1.0f};
    DataCopyPad(a, gx, p, pad);
    Maxs(b, a, 2.0f, rows * 8);
    Mins(c, a, 2.0f, rows * 8);
    Reciprocal(a, a, rows * 8);
    DataCopyPad(gz, b, p);
    DataCopyPad(gz[rows * 5], c, p);
    DataCopyPad(gz[rows * 10], a, p);
}

// a[i] = 10 i; SyncAll; b[i] = a[(i + 1) % n]; with `trap_block` >= 0 that block traps first
extern "C" __global__ __aicore__ void rotate(__gm__ int32_t* a, __gm__ int32_t* b, int32_t trap_block) {
    if (block_idx == trap_block) asm("trap");
    a[block_idx] = (int32_t)block_idx * 10;
    AscendC::SyncAll();
    b[block_idx] = a[(block_idx + 1) % block_num];
}
