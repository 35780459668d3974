"""Event query for buffer reuse across threads (guide 03-05 "Event管理": Event查询).

A pool of device buffers (each with a pinned staging buffer) is shared by two threads:

    producer thread   takes a free buffer, fills its staging buffer, queues
                      staging -> device -> result copies on the stream and records the
                      buffer's event after them; hands (buffer, job) to the consumer
    consumer thread   asks acl.rt.query_event_status(event) -- a non-blocking query --
                      and returns the buffer to the pool only once the event is COMPLETE,
                      i.e. every task that read or wrote the buffer has finished

The producer never blocks on the device; the consumer never synchronises a stream.

    python examples/event_query_buffer_reuse.py
"""

import queue
import sys
import threading
import time

import mdev.acl as acl

NPY_UINT8 = 2                  # NumPy type number, as acl.util.ptr_to_numpy takes it
DEVICE_ID = 0
BUFFERS = 4
JOBS = 24
SIZE = 8 << 20                 # bytes per buffer
RESULT = 64 << 10              # bytes of each job copied back as its result


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


class Pool:
    def __init__(self, stream):
        self.stream = stream
        self.devs, self.stagings, self.events = [], [], []
        for _ in range(BUFFERS):
            dev, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
            check(ret, "malloc")
            staging, ret = acl.rt.malloc_host(SIZE)
            check(ret, "malloc_host")
            event, ret = acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_CAPTURE_STREAM_PROGRESS)
            check(ret, "create_event_ex_with_flag")
            self.devs.append(dev)
            self.stagings.append(staging)
            self.events.append(event)
        self.results, ret = acl.rt.malloc_host(RESULT * JOBS)
        check(ret, "malloc_host")
        self.free = queue.Queue()
        for i in range(BUFFERS):
            self.free.put(i)
        self.in_flight = queue.Queue()
        self.not_ready = 0
        self.errors = []

    def release(self):
        for dev, staging, event in zip(self.devs, self.stagings, self.events):
            check(acl.rt.destroy_event(event), "destroy_event")
            check(acl.rt.free_host(staging), "free_host")
            check(acl.rt.free(dev), "free")
        check(acl.rt.free_host(self.results), "free_host")


def producer(pool, context):
    check(acl.rt.set_context(context), "set_context")
    for job in range(JOBS):
        i = pool.free.get()                      # a buffer whose last use has finished
        # safe to overwrite: the consumer saw the event of the buffer's last use COMPLETE
        acl.util.ptr_to_numpy(pool.stagings[i], (SIZE,), NPY_UINT8)[:] = job + 1
        check(acl.rt.memcpy_async(pool.devs[i], SIZE, pool.stagings[i], SIZE, acl.ACL_MEMCPY_HOST_TO_DEVICE,
                                  pool.stream), "memcpy_async H2D")
        check(acl.rt.memcpy_async(pool.results + job * RESULT, RESULT, pool.devs[i] + SIZE - RESULT, RESULT,
                                  acl.ACL_MEMCPY_DEVICE_TO_HOST, pool.stream), "memcpy_async D2H")
        check(acl.rt.record_event(pool.events[i], pool.stream), "record_event")
        pool.in_flight.put((i, job))
    pool.in_flight.put(None)


def consumer(pool, context):
    check(acl.rt.set_context(context), "set_context")
    while (item := pool.in_flight.get()) is not None:
        i, job = item
        while True:
            status, ret = acl.rt.query_event_status(pool.events[i])
            check(ret, "query_event_status")
            if status == acl.ACL_EVENT_RECORDED_STATUS_COMPLETE:
                break
            pool.not_ready += 1                  # still in use by the device: not yet
            time.sleep(0.001)
        if not (acl.util.ptr_to_numpy(pool.results + job * RESULT, (RESULT,), NPY_UINT8) == job + 1).all():
            pool.errors.append(job)
        pool.free.put(i)                         # the buffer may be reused now


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(DEVICE_ID), "set_device")
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    pool = Pool(stream)
    context, ret = acl.rt.get_context()          # both threads work in this thread's context
    check(ret, "get_context")

    t0 = time.perf_counter()
    threads = [threading.Thread(target=role, args=(pool, context), name=role.__name__) for role in (producer, consumer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")

    print(f"{JOBS} jobs of {SIZE >> 20} MiB through {BUFFERS} device buffers in {elapsed * 1e3:.0f} ms")
    print(f"the consumer found a buffer still in use (NOT_READY) {pool.not_ready} times and "
          f"waited for COMPLETE before reusing it")
    pool.release()
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(DEVICE_ID), "reset_device")
    check(acl.finalize(), "finalize")
    verdict = f"jobs {pool.errors} read back wrong data" if pool.errors else "all results verified: OK"
    print(f"event_query_buffer_reuse: {JOBS} jobs, {BUFFERS} buffers reused after query_event_status, {verdict}")
    return 1 if pool.errors else 0


if __name__ == "__main__":
    sys.exit(main())
