/* mdev: the two sides of an Ascend C kernel that are not the Ascend C API.
 *
 * In a device image (MDEV_ASCENDC_DEVICE_IMAGE): MDEV_ASCENDC_KERNEL(K) lists kernel K in the
 * image's table, with an entry that unpacks the launch's 8-byte argument slots into K's
 * parameters on the block's thread.
 *
 * In host code: ascendc.cmake rewrites `K<<<blockDim, l2ctrl, stream>>>(args)` into
 * `::mdev_ascendc::launcher<decltype(&K)>(image, "K", blockDim, l2ctrl, stream)(args)`, which
 * converts each argument to K's parameter type, packs them into slots and launches K of the
 * image linked into the program through the public runtime API (aclrtBinaryLoadFromData once
 * per device, aclrtBinaryGetFunction, aclrtLaunchKernelWithHostArgs).  Like <<<>>>, a failure
 * is reported through the thread's last error (aclrtGetLastError).
 *
 * Written for mdev; no part of CANN's headers or sources is used.
 */
#ifndef MDEV_ASCENDC_LAUNCH_H
#define MDEV_ASCENDC_LAUNCH_H

#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "mdev_ascendc_abi.h"

namespace mdev_ascendc {

template <typename T> inline uint64_t to_slot(T value) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "a kernel parameter takes one 8-byte slot");
    uint64_t slot = 0;
    std::memcpy(&slot, &value, sizeof(T));
    return slot;
}

template <typename T> inline T from_slot(uint64_t slot) {
    T value;
    std::memcpy(&value, &slot, sizeof(T));
    return value;
}

template <typename F> struct signature;
template <typename... P> struct signature<void (*)(P...)> {
    static constexpr uint32_t count = sizeof...(P);
    static constexpr uint64_t pointers() {
        uint64_t mask = 0, bit = 1;
        ((mask |= std::is_pointer_v<P> ? bit : 0, bit <<= 1), ...);
        return mask;
    }
    template <auto K, size_t... I> static void call(const uint64_t* slots, std::index_sequence<I...>) {
        K(from_slot<P>(slots[I])...);
    }
    template <typename... A> static void pack(uint64_t* slots, A&&... args) {
        size_t i = 0;
        ((slots[i++] = to_slot<P>(static_cast<P>(std::forward<A>(args)))), ...);
    }
};

// the type of parameter I of a kernel (declared only: for decltype)
template <size_t I, typename... P> std::tuple_element_t<I, std::tuple<P...>> param_of(void (*)(P...));

#ifdef MDEV_ASCENDC_DEVICE_IMAGE
template <auto K> void enter_block(const mdev_block* block, const uint64_t* slots) {
    using S = signature<decltype(K)>;
    current = block;
    ub_used = 0;
    block_idx = block->idx;
    block_num = block->num;
    S::template call<K>(slots, std::make_index_sequence<S::count>{});
    current = nullptr;
}

struct registry {
    const mdev_kernel_info* items[256];
    uint32_t count = 0;
};
inline registry& kernels() {
    static registry table;
    return table;
}
struct registrar {
    explicit registrar(const mdev_kernel_info* info) {
        registry& table = kernels();
        if (table.count < 256) table.items[table.count++] = info;
    }
};

#define MDEV_ASCENDC_KERNEL(K)                                                                                 \
    static const mdev_kernel_info mdev_info_##K = {                                                            \
        #K, ::mdev_ascendc::signature<decltype(&K)>::count, ::mdev_ascendc::signature<decltype(&K)>::pointers(), \
        &::mdev_ascendc::enter_block<&K>};                                                                      \
    static const ::mdev_ascendc::registrar mdev_registrar_##K(&mdev_info_##K);

#define MDEV_ASCENDC_IMAGE_ENTRY                                                                               \
    extern "C" __attribute__((visibility("default"))) const mdev_image_info* mdev_ascendc_image(void) {       \
        static mdev_image_info info;                                                                           \
        info.abi = MDEV_ASCENDC_ABI;                                                                           \
        info.count = ::mdev_ascendc::kernels().count;                                                          \
        info.kernels = ::mdev_ascendc::kernels().items;                                                        \
        return &info;                                                                                          \
    }

struct Image;
inline int launch(Image*, const char* kernel, uint32_t, void*, void*, const uint64_t*, size_t) {
    fault("kernel code cannot launch kernel %s (<<<>>> runs on the host)", kernel);
}
#define MDEV_ASCENDC_IMAGE_REF nullptr

#else   // host code

}  // namespace mdev_ascendc
#include <map>
#include <mutex>
#include "acl/acl.h"
namespace mdev_ascendc {

// the device image linked into the program (ascendc_library): its bytes, loaded per device
struct Image {
    const unsigned char* start;
    const unsigned char* end;
    std::mutex lock;
    std::map<int32_t, aclrtBinHandle> loaded;
    Image(const unsigned char* s, const unsigned char* e) : start(s), end(e) {}
};

inline aclError function_of(Image* image, const char* kernel, aclrtFuncHandle* fn) {
    int32_t device = 0;
    aclError ret = aclrtGetDevice(&device);
    if (ret != ACL_SUCCESS) return ret;
    std::lock_guard<std::mutex> hold(image->lock);
    for (int attempt = 0; attempt < 2; ++attempt) {
        auto it = image->loaded.find(device);
        if (it == image->loaded.end()) {
            aclrtBinHandle handle = nullptr;
            ret = aclrtBinaryLoadFromData(image->start, static_cast<size_t>(image->end - image->start), nullptr,
                                          &handle);
            if (ret != ACL_SUCCESS) return ret;
            it = image->loaded.emplace(device, handle).first;
        }
        ret = aclrtBinaryGetFunction(it->second, kernel, fn);
        if (ret == ACL_SUCCESS || attempt == 1) return ret;
        image->loaded.erase(it);       // the device was reset since: load the image again
    }
    return ret;
}

inline aclError launch(Image* image, const char* kernel, uint32_t blocks, void*, void* stream,
                       const uint64_t* slots, size_t count) {
    aclrtFuncHandle fn = nullptr;
    aclError ret = function_of(image, kernel, &fn);
    if (ret != ACL_SUCCESS) return ret;
    return aclrtLaunchKernelWithHostArgs(fn, blocks, stream, nullptr, const_cast<uint64_t*>(slots),
                                         count * sizeof(uint64_t), nullptr, 0);
}

#ifdef MDEV_ASCENDC_IMAGE_NAME
}  // namespace mdev_ascendc
extern ::mdev_ascendc::Image MDEV_ASCENDC_IMAGE_NAME;
namespace mdev_ascendc {
#define MDEV_ASCENDC_IMAGE_REF (&MDEV_ASCENDC_IMAGE_NAME)
#else
#define MDEV_ASCENDC_IMAGE_REF nullptr
#endif
#define MDEV_ASCENDC_KERNEL(K)
#endif

template <typename F> struct launcher;
template <typename... P> struct launcher<void (*)(P...)> {
    Image* image;
    const char* kernel;
    uint32_t blocks;
    void* l2ctrl;
    void* stream;
    launcher(Image* i, const char* k, uint32_t b, void* l2, void* s) : image(i), kernel(k), blocks(b), l2ctrl(l2), stream(s) {}
    template <typename... A> int operator()(A&&... args) const {
        static_assert(sizeof...(A) == sizeof...(P), "<<<>>>: wrong number of kernel arguments");
        uint64_t slots[sizeof...(P) + 1] = {};
        signature<void (*)(P...)>::pack(slots, std::forward<A>(args)...);
        return launch(image, kernel, blocks, l2ctrl, stream, slots, sizeof...(P));
    }
};

}  // namespace mdev_ascendc
#endif
