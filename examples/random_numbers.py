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

DEVICE_ID = 0
N = 100_000
SEED = 2024


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def value(v):
    """aclrtRandomParaInfo holding an immediate value."""
    return {"isAddr": 0, "valueOrAddr": v}


def download(ptr, n, dtype):
    out = np.zeros(n, dtype=dtype)
    check(acl.rt.memcpy(acl.util.numpy_to_ptr(out), out.nbytes, ptr, out.nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST),
          "memcpy")
    return out


def generate(func_type, param_info, result, counter, stream):
    """One random_num_async task of N float32 into ``result``; returns them and the counter after."""
    task = {"dataType": acl.ACL_FLOAT,
            "randomNumFuncParaInfo": {"funcType": func_type, "paramInfo": param_info},
            "randomParaAddr": 0,
            "randomResultAddr": result,
            "randomCounterAddr": counter,
            "randomSeed": value(SEED),
            "randomNum": value(N)}
    check(acl.rt.random_num_async(task, stream, None), "random_num_async")
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    return download(result, N, np.float32), int(download(counter, 2, np.uint64)[0])


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(DEVICE_ID), "set_device")
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    result, ret = acl.rt.malloc(N * 4, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    counter, ret = acl.rt.malloc(16, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    check(acl.rt.memset(counter, 16, 0, 16), "memset")

    # (funcType, paramInfo) of two distributions
    uniform = (acl.ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS, {"uniformDisInfo": {"min": value(-1.0), "max": value(1.0)}})
    normal = (acl.ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS,
              {"normalDisInfo": {"mean": value(10.0), "stddev": value(2.0)}})
    runs = [generate(*dist, result, counter, stream) for dist in (uniform, uniform, normal)]
    (u1, c1), (u2, c2), (g, c3) = runs
    print(f"uniform [-1, 1): min {u1.min():.4f} max {u1.max():.4f} mean {u1.mean():+.4f}; counter -> {c1}")
    print(f"again:           first values {u1[:3]} then {u2[:3]}; counter -> {c2}")
    print(f"normal (10, 2):  mean {g.mean():.3f} stddev {g.std():.3f}; counter -> {c3}")

    # put the counter back: the first run again, value for value
    check(acl.rt.memset(counter, 16, 0, 16), "memset")
    same = np.array_equal(generate(*uniform, result, counter, stream)[0], u1)
    print(f"counter reset to 0: same {N} numbers as the first run: {same}")

    for ptr in (result, counter):
        check(acl.rt.free(ptr), "free")
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(DEVICE_ID), "reset_device")
    check(acl.finalize(), "finalize")
    ok = (same and not np.array_equal(u1, u2) and -1 <= u1.min() and u1.max() < 1 and (c1, c2, c3) == (N, 2 * N, 3 * N)
          and abs(g.mean() - 10) < 0.05 and abs(g.std() - 2) < 0.05)
    print(f"random_numbers: uniform and normal, {N} values each, reproducible from seed and counter: "
          f"{'OK' if ok else 'UNEXPECTED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
