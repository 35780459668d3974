"""Random numbers on the device (guide 03-04 "系统任务", aclrtRandomNumAsync).

The task fills device memory with random values of a distribution (uniform, normal,
truncated normal, or a dropout bitmask).  It is reproducible: the numbers depend only on
the seed and on a 16-byte counter in device memory, which the task advances by the
number of values it made -- run it again and you get fresh numbers; put the counter back
and you get the same ones.

    python examples/random_numbers.py
"""

import sys

import numpy as np

import mdev.acl as acl

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_FLOAT = 0
ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS = 1
ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS = 2

DEVICE_ID = 0
N = 100_000
SEED = 2024


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def value(v):
    """aclrtRandomParaInfo holding an immediate value."""
    return {"isAddr": 0, "valueOrAddr": v}


def task_info(func_type, param_info, result, counter):
    return {"dataType": ACL_FLOAT,
            "randomNumFuncParaInfo": {"funcType": func_type, "paramInfo": param_info},
            "randomParaAddr": 0,
            "randomResultAddr": result,
            "randomCounterAddr": counter,
            "randomSeed": value(SEED),
            "randomNum": value(N)}


def download(ptr, n, dtype):
    out = np.zeros(n, dtype=dtype)
    check_ret("acl.rt.memcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(out), out.nbytes, ptr, out.nbytes,
                                             ACL_MEMCPY_DEVICE_TO_HOST))
    return out


def main():
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    result, ret = acl.rt.malloc(N * 4, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    counter, ret = acl.rt.malloc(16, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    check_ret("acl.rt.memset", acl.rt.memset(counter, 16, 0, 16))

    uniform = {"uniformDisInfo": {"min": value(-1.0), "max": value(1.0)}}
    normal = {"normalDisInfo": {"mean": value(10.0), "stddev": value(2.0)}}
    runs = []
    for func_type, params in ((ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS, uniform),
                              (ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS, uniform),
                              (ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS, normal)):
        ret = acl.rt.random_num_async(task_info(func_type, params, result, counter), stream, None)
        check_ret("acl.rt.random_num_async", ret)
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
        runs.append((download(result, N, np.float32), int(download(counter, 2, np.uint64)[0])))
    (u1, c1), (u2, c2), (g, c3) = runs
    print(f"uniform [-1, 1): min {u1.min():.4f} max {u1.max():.4f} mean {u1.mean():+.4f}; counter -> {c1}")
    print(f"again:           first values {u1[:3]} then {u2[:3]}; counter -> {c2}")
    print(f"normal (10, 2):  mean {g.mean():.3f} stddev {g.std():.3f}; counter -> {c3}")

    # put the counter back: the first run again, value for value
    check_ret("acl.rt.memset", acl.rt.memset(counter, 16, 0, 16))
    ret = acl.rt.random_num_async(task_info(ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS, uniform, result, counter),
                                  stream, None)
    check_ret("acl.rt.random_num_async", ret)
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    replay = download(result, N, np.float32)
    same = np.array_equal(replay, u1)
    print(f"counter reset to 0: same {N} numbers as the first run: {same}")

    ok = (same and not np.array_equal(u1, u2) and -1 <= u1.min() and u1.max() < 1 and (c1, c2, c3) == (N, 2 * N, 3 * N)
          and abs(g.mean() - 10) < 0.05 and abs(g.std() - 2) < 0.05)
    for ptr in (result, counter):
        check_ret("acl.rt.free", acl.rt.free(ptr))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    if not ok:
        print("random_numbers: UNEXPECTED")
        return 1
    print(f"random_numbers: uniform and normal, {N} values each, reproducible from seed and counter: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
