/* mdev: a subset of the Ascend C kernel API, for kernels that run on mdev's emulated devices.
 *
 * Written for mdev from the public Ascend C documentation (the names, signatures and documented
 * behaviour of the API); no part of CANN's headers or sources is used.  Kernels compile with the
 * system g++ into a device image (mdev's ascendc.cmake) that the device's kernel runner loads;
 * every block runs on a thread of its own with its own block_idx and Unified Buffer.
 *
 * Functional, not cycle-accurate: the pipes are synchronous (a DataCopy or a vector instruction
 * is done when it returns), so SetFlag / WaitFlag / PipeBarrier order nothing; there is no cube
 * unit.  What the hardware leaves undefined and mdev can see is a fault of the launch (the
 * runtime's kernel exception at the next synchronisation): a DataCopy of a length that is not a
 * whole number of 32-byte blocks, a Unified Buffer overflow, a GlobalTensor access outside the
 * size given to SetGlobalBuffer or outside the memory the launch's pointer arguments reach.
 *
 * Lines starting with "//@api" list the API and its semantics; the README table is made from them.
 */
#ifndef MDEV_ASCENDC_KERNEL_OPERATOR_H
#define MDEV_ASCENDC_KERNEL_OPERATOR_H

#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

#include "mdev_ascendc_abi.h"

//@api __global__, __aicore__ | kernel function qualifiers (no effect on the host compiler)
#define __global__
#define __aicore__
//@api __gm__ | global-memory address-space qualifier (no effect: device addresses are translated at launch)
#define __gm__
//@api GM_ADDR | `__gm__ uint8_t*`, the usual kernel parameter type
#define GM_ADDR __gm__ uint8_t*
#ifndef __NPU_ARCH__
#define __NPU_ARCH__ 2201
#endif

//@api half | IEEE fp16 (`_Float16`): arithmetic in float, rounded to half (as numpy.float16)
using half = _Float16;

//@api bfloat16_t | bf16 storage; arithmetic in float, rounded to nearest even on store
struct bfloat16_t {
    uint16_t bits = 0;
    bfloat16_t() = default;
    bfloat16_t(float f) {
        uint32_t u;
        std::memcpy(&u, &f, 4);
        if ((u & 0x7fffffffu) > 0x7f800000u) { bits = 0x7fc0; return; }
        u += 0x7fffu + ((u >> 16) & 1u);
        bits = static_cast<uint16_t>(u >> 16);
    }
    operator float() const {
        uint32_t u = static_cast<uint32_t>(bits) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
};

namespace mdev_ascendc {
inline thread_local const mdev_block* current = nullptr;
inline thread_local uint32_t ub_used = 0;     // bytes of this block's Unified Buffer handed out

[[noreturn]] inline void fault(const char* format, ...) __attribute__((format(printf, 1, 2)));
inline void fault(const char* format, ...) {
    char text[512];
    va_list ap;
    va_start(ap, format);
    std::vsnprintf(text, sizeof text, format, ap);
    va_end(ap);
    if (current != nullptr) current->hooks->fault(text);
    std::fprintf(stderr, "mdev: Ascend C kernel code ran outside a device: %s\n", text);
    __builtin_trap();
}

[[noreturn]] inline void trap(const char* file, int line) {
    if (current != nullptr) current->hooks->trap(file, line);
    __builtin_trap();
}

inline size_t gm_extent(const void* p) { return current != nullptr ? current->hooks->gm_extent(p) : 0; }

inline uint32_t ub_take(uint32_t bytes, const char* what) {
    uint32_t size = (bytes + 31u) & ~31u;
    if (ub_used + size > MDEV_ASCENDC_UB_SIZE)
        fault("%s: %u bytes of Unified Buffer asked, %u of %u are in use (UB overflow)", what, size, ub_used,
              MDEV_ASCENDC_UB_SIZE);
    uint32_t at = ub_used;
    ub_used += size;
    return at;
}
}  // namespace mdev_ascendc

//@api block_idx, block_num | this block's index and the launch's block count (per-thread variables)
inline thread_local int64_t block_idx = 0;
inline thread_local int64_t block_num = 0;

//@api asm("trap") | rewritten by ascendc.cmake to a trap of the block: the launch fails with the vector-core exception
#define __mdev_trap() ::mdev_ascendc::trap(__FILE__, __LINE__)

namespace AscendC {

//@api GetBlockIdx(), GetBlockNum() | block_idx and block_num
inline int64_t GetBlockIdx() { return block_idx; }
inline int64_t GetBlockNum() { return block_num; }

//@api SyncAll() | a barrier of all the launch's blocks (they run concurrently once it waits; a block that faults releases the others with a fault)
inline void SyncAll() {
    if (mdev_ascendc::current == nullptr) mdev_ascendc::fault("SyncAll outside a kernel");
    mdev_ascendc::current->hooks->sync_all();
}

//@api printf(fmt, ...) | C printf formatting; the text appears on the host's stdout at the synchronisation
inline void printf(const char* format, ...) __attribute__((format(printf, 1, 2)));
inline void printf(const char* format, ...) {
    char text[4096];
    va_list ap;
    va_start(ap, format);
    int n = std::vsnprintf(text, sizeof text, format, ap);
    va_end(ap);
    if (n < 0) return;
    size_t len = static_cast<size_t>(n) < sizeof text ? static_cast<size_t>(n) : sizeof text - 1;
    if (mdev_ascendc::current != nullptr) mdev_ascendc::current->hooks->print(text, len);
}
#define PRINTF printf

//@api TPosition / QuePosition (GM, VECIN, VECOUT, VECCALC, A1..CO2) | where a buffer lives; all Unified Buffer here
enum class TPosition : int32_t { GM, A1, A2, B1, B2, C1, C2, CO1, CO2, VECIN, VECOUT, VECCALC, LCM, SPM, SHM, TSCM,
                                 C2PIPE2GM, MAX };
using QuePosition = TPosition;

//@api PipeBarrier<pipe>(), SetFlag<HardEvent>(id), WaitFlag<HardEvent>(id) | no effect: every pipe is synchronous
enum pipe_t : int32_t { PIPE_S, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_ALL, PIPE_V2, PIPE_FIX };
enum class HardEvent : int32_t { MTE2_MTE1, MTE1_MTE2, MTE1_M, M_MTE1, MTE2_V, V_MTE2, MTE3_V, V_MTE3, M_V, V_M,
                                 V_V, MTE3_MTE1, MTE1_MTE3, MTE1_V, MTE2_M, M_MTE2, V_MTE1, M_FIX, FIX_M,
                                 MTE3_MTE2, MTE2_MTE3, S_V, V_S, S_MTE2, MTE2_S, S_MTE3, MTE3_S, MTE2_FIX,
                                 FIX_MTE2, FIX_S, M_S, FIX_MTE3, MAX };
template <pipe_t pipe = PIPE_ALL> inline void PipeBarrier() {}
template <HardEvent event> inline void SetFlag(int32_t) {}
template <HardEvent event> inline void WaitFlag(int32_t) {}

//@api GlobalTensor<T> | SetGlobalBuffer(ptr, n), operator[](offset), GetValue, SetValue, GetPhyAddr, GetSize; every access checked against n and against the memory the launch reaches
template <typename T> class GlobalTensor {
public:
    using PrimType = T;
    void SetGlobalBuffer(__gm__ T* buffer, uint64_t bufferSize) {
        addr_ = buffer;
        size_ = bufferSize;
    }
    void SetGlobalBuffer(__gm__ T* buffer) {
        addr_ = buffer;
        size_ = mdev_ascendc::gm_extent(buffer) / sizeof(T);
    }
    GlobalTensor operator[](uint64_t offset) const {
        check(offset, 0, "GlobalTensor::operator[]");
        GlobalTensor sub;
        sub.addr_ = addr_ + offset;
        sub.size_ = size_ - offset;
        return sub;
    }
    T GetValue(uint64_t offset) const {
        check(offset, 1, "GlobalTensor::GetValue");
        return addr_[offset];
    }
    void SetValue(uint64_t offset, T value) {
        check(offset, 1, "GlobalTensor::SetValue");
        addr_[offset] = value;
    }
    __gm__ T* GetPhyAddr() const { return addr_; }
    __gm__ T* GetPhyAddr(uint64_t offset) const { return addr_ + offset; }
    uint64_t GetSize() const { return size_; }

    // count elements from offset: inside SetGlobalBuffer's size and inside reachable memory
    void check(uint64_t offset, uint64_t count, const char* what) const {
        if (addr_ == nullptr) mdev_ascendc::fault("%s: the GlobalTensor has no buffer (SetGlobalBuffer)", what);
        if (offset + count > size_)
            mdev_ascendc::fault("%s: elements [%llu, %llu) outside the GlobalTensor's %llu (out of bounds)", what,
                                (unsigned long long)offset, (unsigned long long)(offset + count),
                                (unsigned long long)size_);
        size_t reach = mdev_ascendc::gm_extent(addr_ + offset);
        if (reach < count * sizeof(T)) {
            char text[400];
            std::snprintf(text, sizeof text, "%s: %llu bytes, but only %zu bytes from there are memory the launch "
                          "reaches (out of bounds of its allocation, or an address read from device memory, "
                          "which mdev cannot translate)", what, (unsigned long long)(count * sizeof(T)), reach);
            if (mdev_ascendc::current != nullptr)
                mdev_ascendc::current->hooks->gm_fault(addr_ + offset, count * sizeof(T), text);
            mdev_ascendc::fault("%s", text);
        }
    }

private:
    __gm__ T* addr_ = nullptr;
    uint64_t size_ = 0;
};

//@api LocalTensor<T> | a Unified Buffer tensor: operator[](offset), GetValue, SetValue, GetSize, GetPhyAddr, ReinterpretCast<U>()
template <typename T> class LocalTensor {
public:
    using PrimType = T;
    LocalTensor() = default;
    LocalTensor(T* addr, uint32_t size, int32_t buffer = -1) : addr_(addr), size_(size), buffer_(buffer) {}
    LocalTensor operator[](uint32_t offset) const {
        check(offset, 0, "LocalTensor::operator[]");
        return LocalTensor(addr_ + offset, size_ - offset);
    }
    T GetValue(uint32_t offset) const {
        check(offset, 1, "LocalTensor::GetValue");
        return addr_[offset];
    }
    void SetValue(uint32_t offset, T value) const {
        check(offset, 1, "LocalTensor::SetValue");
        addr_[offset] = value;
    }
    T& operator()(uint32_t offset) const {
        check(offset, 1, "LocalTensor::operator()");
        return addr_[offset];
    }
    uint32_t GetSize() const { return size_; }
    T* GetPhyAddr() const { return addr_; }
    template <typename U> LocalTensor<U> ReinterpretCast() const {
        return LocalTensor<U>(reinterpret_cast<U*>(addr_), static_cast<uint32_t>(size_ * sizeof(T) / sizeof(U)),
                              buffer_);
    }
    int32_t buffer() const { return buffer_; }

    void check(uint64_t offset, uint64_t count, const char* what) const {
        if (addr_ == nullptr) mdev_ascendc::fault("%s: the LocalTensor has no buffer", what);
        if (offset + count > size_)
            mdev_ascendc::fault("%s: elements [%llu, %llu) outside the LocalTensor's %u", what,
                                (unsigned long long)offset, (unsigned long long)(offset + count), size_);
    }

private:
    T* addr_ = nullptr;
    uint32_t size_ = 0;
    int32_t buffer_ = -1;
};

class TPipe;

//@api TQue<pos, depth> | AllocTensor<T>(), EnQue(t), DeQue<T>(), FreeTensor(t) over the buffers TPipe::InitBuffer gave it; a FIFO, checked (no free buffer, empty queue, a foreign tensor are faults)
template <TPosition pos, int32_t depth> class TQue {
public:
    static constexpr int32_t MAX_BUFFERS = 8;
    template <typename T> LocalTensor<T> AllocTensor() {
        for (int32_t i = 0; i < num_; ++i)
            if (!busy_[i]) {
                busy_[i] = true;
                return LocalTensor<T>(reinterpret_cast<T*>(base_ + i * len_), len_ / sizeof(T), i);
            }
        mdev_ascendc::fault("TQue::AllocTensor: all %d buffers of the queue are allocated", num_);
    }
    template <typename T> void FreeTensor(LocalTensor<T>& tensor) {
        int32_t i = owned(tensor.GetPhyAddr(), "TQue::FreeTensor");
        if (!busy_[i]) mdev_ascendc::fault("TQue::FreeTensor: buffer %d is not allocated", i);
        busy_[i] = false;
    }
    template <typename T> bool EnQue(const LocalTensor<T>& tensor) {
        owned(tensor.GetPhyAddr(), "TQue::EnQue");
        if (count_ >= depth && count_ >= num_) mdev_ascendc::fault("TQue::EnQue: the queue is full (depth %d)", depth);
        fifo_[(head_ + count_) % MAX_BUFFERS] = reinterpret_cast<unsigned char*>(tensor.GetPhyAddr());
        ++count_;
        return true;
    }
    template <typename T> LocalTensor<T> DeQue() {
        if (count_ == 0) mdev_ascendc::fault("TQue::DeQue: the queue is empty");
        unsigned char* p = fifo_[head_];
        head_ = (head_ + 1) % MAX_BUFFERS;
        --count_;
        return LocalTensor<T>(reinterpret_cast<T*>(p), len_ / sizeof(T), static_cast<int32_t>((p - base_) / len_));
    }
    bool VacantInQue() const { return count_ < depth; }
    bool HasTensorInQue() const { return count_ > 0; }

private:
    friend class TPipe;
    template <typename T> int32_t owned(T* p, const char* what) const {
        unsigned char* b = reinterpret_cast<unsigned char*>(p);
        if (base_ == nullptr || b < base_ || b >= base_ + num_ * len_ || (b - base_) % len_ != 0)
            mdev_ascendc::fault("%s: the tensor is not a buffer of this queue", what);
        return static_cast<int32_t>((b - base_) / len_);
    }
    unsigned char* base_ = nullptr;
    uint32_t len_ = 0;
    int32_t num_ = 0;
    bool busy_[MAX_BUFFERS] = {};
    unsigned char* fifo_[MAX_BUFFERS] = {};
    int32_t head_ = 0, count_ = 0;
};

//@api TBuf<pos> | Get<T>(), Get<T>(count): one Unified Buffer area for temporaries
template <TPosition pos = TPosition::VECCALC> class TBuf {
public:
    template <typename T> LocalTensor<T> Get() { return Get<T>(len_ / sizeof(T)); }
    template <typename T> LocalTensor<T> Get(uint32_t count) {
        if (base_ == nullptr) mdev_ascendc::fault("TBuf::Get: the buffer has no memory (TPipe::InitBuffer)");
        if (count * sizeof(T) > len_) mdev_ascendc::fault("TBuf::Get: %u elements exceed its %u bytes", count, len_);
        return LocalTensor<T>(reinterpret_cast<T*>(base_), count);
    }

private:
    friend class TPipe;
    unsigned char* base_ = nullptr;
    uint32_t len_ = 0;
};

//@api TPipe | InitBuffer(que, num, len): num buffers of len bytes (32-byte aligned) from the block's 192 KiB Unified Buffer, overflow is a fault; InitBuffer(tbuf, len); Destroy()
class TPipe {
public:
    template <TPosition pos, int32_t depth> bool InitBuffer(TQue<pos, depth>& que, uint8_t num, uint32_t len) {
        if (num == 0 || num > TQue<pos, depth>::MAX_BUFFERS)
            mdev_ascendc::fault("TPipe::InitBuffer: %u buffers (1..%d allowed)", num, TQue<pos, depth>::MAX_BUFFERS);
        uint32_t size = (len + 31u) & ~31u;
        que.base_ = unified_buffer() + mdev_ascendc::ub_take(size * num, "TPipe::InitBuffer");
        que.len_ = size;
        que.num_ = num;
        return true;
    }
    template <TPosition pos> bool InitBuffer(TBuf<pos>& buf, uint32_t len) {
        buf.base_ = unified_buffer() + mdev_ascendc::ub_take(len, "TPipe::InitBuffer");
        buf.len_ = (len + 31u) & ~31u;
        return true;
    }
    void Destroy() {}

private:
    static unsigned char* unified_buffer() {
        if (mdev_ascendc::current == nullptr) mdev_ascendc::fault("TPipe used outside a kernel");
        return mdev_ascendc::current->ub;
    }
};

namespace detail {
inline void whole_blocks(uint64_t bytes, const char* what) {
    if (bytes % 32 != 0)
        mdev_ascendc::fault("%s: %llu bytes is not a multiple of 32 bytes (DataCopy moves whole 32-byte blocks; "
                            "use DataCopyPad)", what, (unsigned long long)bytes);
}
}  // namespace detail

//@api DataCopy(dst, src, count) | GM->UB, UB->GM, UB->UB; count * sizeof(T) must be a multiple of 32 bytes; both sides bounds-checked
template <typename T> void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, uint32_t count) {
    detail::whole_blocks(uint64_t(count) * sizeof(T), "DataCopy GM->UB");
    dst.check(0, count, "DataCopy GM->UB (destination)");
    src.check(0, count, "DataCopy GM->UB (source)");
    std::memcpy(dst.GetPhyAddr(), src.GetPhyAddr(), size_t(count) * sizeof(T));
}
template <typename T> void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, uint32_t count) {
    detail::whole_blocks(uint64_t(count) * sizeof(T), "DataCopy UB->GM");
    src.check(0, count, "DataCopy UB->GM (source)");
    dst.check(0, count, "DataCopy UB->GM (destination)");
    std::memcpy(dst.GetPhyAddr(), src.GetPhyAddr(), size_t(count) * sizeof(T));
}
template <typename T> void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, uint32_t count) {
    detail::whole_blocks(uint64_t(count) * sizeof(T), "DataCopy UB->UB");
    src.check(0, count, "DataCopy UB->UB (source)");
    dst.check(0, count, "DataCopy UB->UB (destination)");
    std::memmove(dst.GetPhyAddr(), src.GetPhyAddr(), size_t(count) * sizeof(T));
}

//@api DataCopyPad(dst, src, DataCopyExtParams, DataCopyPadExtParams) | blockCount runs of blockLen bytes (any length), srcStride / dstStride gaps; UB side in 32-byte blocks, GM side in bytes
struct DataCopyExtParams {
    uint16_t blockCount = 1;
    uint32_t blockLen = 0;      // bytes
    uint32_t srcStride = 0;
    uint32_t dstStride = 0;
    uint32_t rsv = 0;
};
using DataCopyParams = DataCopyExtParams;
template <typename T> struct DataCopyPadExtParams {
    bool isPad = false;
    uint8_t leftPadding = 0;
    uint8_t rightPadding = 0;
    T paddingValue = T();
};
template <typename T>
void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyExtParams& p,
                 const DataCopyPadExtParams<T>& pad = {}) {
    uint64_t ub_row = (uint64_t(p.blockLen) + 31) / 32 * 32;    // each run starts on a 32-byte block in UB
    for (uint32_t r = 0; r < p.blockCount; ++r) {
        uint64_t s = r * (uint64_t(p.blockLen) + p.srcStride), d = r * (ub_row + uint64_t(p.dstStride) * 32);
        if (s % sizeof(T) || p.blockLen % sizeof(T)) mdev_ascendc::fault("DataCopyPad: lengths must be whole elements");
        src.check(s / sizeof(T), p.blockLen / sizeof(T), "DataCopyPad GM->UB (source)");
        dst.check(d / sizeof(T), ub_row / sizeof(T), "DataCopyPad GM->UB (destination)");
        unsigned char* out = reinterpret_cast<unsigned char*>(dst.GetPhyAddr()) + d;
        std::memcpy(out, reinterpret_cast<const unsigned char*>(src.GetPhyAddr()) + s, p.blockLen);
        if (pad.isPad)
            for (uint64_t i = p.blockLen / sizeof(T); i < ub_row / sizeof(T); ++i)
                reinterpret_cast<T*>(out)[i] = pad.paddingValue;
    }
}
template <typename T>
void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& p) {
    uint64_t ub_row = (uint64_t(p.blockLen) + 31) / 32 * 32;
    for (uint32_t r = 0; r < p.blockCount; ++r) {
        uint64_t s = r * (ub_row + uint64_t(p.srcStride) * 32), d = r * (uint64_t(p.blockLen) + p.dstStride);
        if (d % sizeof(T) || p.blockLen % sizeof(T)) mdev_ascendc::fault("DataCopyPad: lengths must be whole elements");
        src.check(s / sizeof(T), p.blockLen / sizeof(T), "DataCopyPad UB->GM (source)");
        dst.check(d / sizeof(T), p.blockLen / sizeof(T), "DataCopyPad UB->GM (destination)");
        std::memcpy(reinterpret_cast<unsigned char*>(dst.GetPhyAddr()) + d,
                    reinterpret_cast<const unsigned char*>(src.GetPhyAddr()) + s, p.blockLen);
    }
}

namespace detail {
template <typename T> using calc_t = std::conditional_t<std::is_floating_point_v<T> || std::is_same_v<T, half> ||
                                                            std::is_same_v<T, bfloat16_t>, float, T>;
template <typename T, typename F>
void binary(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, int32_t count, F f,
            const char* what) {
    if (count < 0) mdev_ascendc::fault("%s: count %d is negative", what, count);
    dst.check(0, count, what);
    a.check(0, count, what);
    b.check(0, count, what);
    T *d = dst.GetPhyAddr(), *x = a.GetPhyAddr(), *y = b.GetPhyAddr();
    for (int32_t i = 0; i < count; ++i) d[i] = static_cast<T>(f(calc_t<T>(x[i]), calc_t<T>(y[i])));
}
template <typename T, typename F>
void unary(const LocalTensor<T>& dst, const LocalTensor<T>& a, int32_t count, F f, const char* what) {
    if (count < 0) mdev_ascendc::fault("%s: count %d is negative", what, count);
    dst.check(0, count, what);
    a.check(0, count, what);
    T *d = dst.GetPhyAddr(), *x = a.GetPhyAddr();
    for (int32_t i = 0; i < count; ++i) d[i] = static_cast<T>(f(calc_t<T>(x[i])));
}
}  // namespace detail

//@api Add, Sub, Mul, Div, Max, Min (dst, a, b, count) | element-wise on the first count elements (half: computed in float, rounded to half)
#define MDEV_BINARY(NAME, EXPR)                                                                              \
    template <typename T>                                                                                     \
    void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, const int32_t& count) { \
        detail::binary(dst, a, b, count, [](auto x, auto y) { return EXPR; }, #NAME);                        \
    }
MDEV_BINARY(Add, x + y)
MDEV_BINARY(Sub, x - y)
MDEV_BINARY(Mul, x * y)
MDEV_BINARY(Div, x / y)
MDEV_BINARY(Max, x > y ? x : y)
MDEV_BINARY(Min, x < y ? x : y)
#undef MDEV_BINARY

//@api Adds, Muls, Maxs, Mins (dst, src, scalar, count) | element-wise with a scalar
#define MDEV_SCALAR(NAME, EXPR)                                                                               \
    template <typename T>                                                                                      \
    void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& a, const T& scalar, const int32_t& count) {    \
        detail::calc_t<T> s = detail::calc_t<T>(scalar);                                                       \
        detail::unary(dst, a, count, [s](auto x) { return EXPR; }, #NAME);                                     \
    }
MDEV_SCALAR(Adds, x + s)
MDEV_SCALAR(Muls, x * s)
MDEV_SCALAR(Maxs, x > s ? x : s)
MDEV_SCALAR(Mins, x < s ? x : s)
#undef MDEV_SCALAR

//@api Exp, Ln, Abs, Relu, Sqrt, Reciprocal (dst, src, count) | element-wise
#define MDEV_UNARY(NAME, EXPR)                                                                               \
    template <typename T> void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& a, const int32_t& count) { \
        detail::unary(dst, a, count, [](auto x) { return EXPR; }, #NAME);                                    \
    }
MDEV_UNARY(Exp, std::exp(x))
MDEV_UNARY(Ln, std::log(x))
MDEV_UNARY(Abs, x < 0 ? -x : x)
MDEV_UNARY(Relu, x > 0 ? x : decltype(x)(0))
MDEV_UNARY(Sqrt, std::sqrt(x))
MDEV_UNARY(Reciprocal, decltype(x)(1) / x)
#undef MDEV_UNARY

//@api Duplicate(dst, scalar, count) | fill
template <typename T> void Duplicate(const LocalTensor<T>& dst, const T& scalar, const int32_t& count) {
    dst.check(0, count, "Duplicate");
    for (int32_t i = 0; i < count; ++i) dst.GetPhyAddr()[i] = scalar;
}

//@api Cast(dst, src, RoundMode, count) | conversion; CAST_NONE / CAST_RINT round to nearest even, CAST_FLOOR, CAST_CEIL, CAST_ROUND (half away from zero), CAST_TRUNC
enum class RoundMode : int32_t { CAST_NONE, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD };
template <typename D, typename S>
void Cast(const LocalTensor<D>& dst, const LocalTensor<S>& src, const RoundMode& mode, const uint32_t& count) {
    dst.check(0, count, "Cast");
    src.check(0, count, "Cast");
    for (uint32_t i = 0; i < count; ++i) {
        double v = static_cast<double>(static_cast<detail::calc_t<S>>(src.GetPhyAddr()[i]));
        if (std::is_integral_v<D>) {
            switch (mode) {
                case RoundMode::CAST_FLOOR: v = std::floor(v); break;
                case RoundMode::CAST_CEIL: v = std::ceil(v); break;
                case RoundMode::CAST_ROUND: v = std::round(v); break;
                case RoundMode::CAST_TRUNC: v = std::trunc(v); break;
                default: v = std::nearbyint(v); break;
            }
        }
        dst.GetPhyAddr()[i] = static_cast<D>(static_cast<detail::calc_t<D>>(v));
    }
}

//@api ReduceSum, ReduceMax (dst, src, work, count) | dst[0] = the sum / the maximum of the first count elements (sum accumulated in float for half)
template <typename T>
void ReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& work, const int32_t count) {
    (void)work;
    src.check(0, count, "ReduceSum");
    dst.check(0, 1, "ReduceSum");
    detail::calc_t<T> acc = 0;
    for (int32_t i = 0; i < count; ++i) acc += detail::calc_t<T>(src.GetPhyAddr()[i]);
    dst.GetPhyAddr()[0] = static_cast<T>(acc);
}
template <typename T>
void ReduceMax(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& work, const int32_t count) {
    (void)work;
    if (count <= 0) mdev_ascendc::fault("ReduceMax: count %d", count);
    src.check(0, count, "ReduceMax");
    dst.check(0, 1, "ReduceMax");
    T best = src.GetPhyAddr()[0];
    for (int32_t i = 1; i < count; ++i)
        if (src.GetPhyAddr()[i] > best) best = src.GetPhyAddr()[i];
    dst.GetPhyAddr()[0] = best;
}

}  // namespace AscendC

#include "mdev_ascendc_launch.h"

#endif
