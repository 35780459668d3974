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

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_EVENT_CAPTURE_STREAM_PROGRESS = 0x2
ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
NPY_UINT8 = 2

DEVICE_ID = 0
BUFFERS = 4
JOBS = 24
SIZE = 8 << 20                 # bytes per buffer
RESULT = 64 << 10              # bytes of each job copied back as its result


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


class Pool:
    def __init__(self, stream):
        self.stream = stream
        self.devs, self.stagings, self.events = [], [], []
        for _ in range(BUFFERS):
            dev, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
            check_ret("acl.rt.malloc", ret)
            staging, ret = acl.rt.malloc_host(SIZE)
            check_ret("acl.rt.malloc_host", ret)
            event, ret = acl.rt.create_event_ex_with_flag(ACL_EVENT_CAPTURE_STREAM_PROGRESS)
            check_ret("acl.rt.create_event_ex_with_flag", ret)
            self.devs.append(dev)
            self.stagings.append(staging)
            self.events.append(event)
        self.results, ret = acl.rt.malloc_host(RESULT * JOBS)
        check_ret("acl.rt.malloc_host", ret)
        self.free = queue.Queue()
        for i in range(BUFFERS):
            self.free.put(i)
        self.in_flight = queue.Queue()
        self.not_ready = 0
        self.errors = []

    def release(self):
        for dev, staging, event in zip(self.devs, self.stagings, self.events):
            check_ret("acl.rt.destroy_event", acl.rt.destroy_event(event))
            check_ret("acl.rt.free_host", acl.rt.free_host(staging))
            check_ret("acl.rt.free", acl.rt.free(dev))
        check_ret("acl.rt.free_host", acl.rt.free_host(self.results))


def producer(pool, context):
    check_ret("acl.rt.set_context", acl.rt.set_context(context))
    for job in range(JOBS):
        i = pool.free.get()                      # a buffer whose last use has finished
        # safe to overwrite: the consumer saw the event of the buffer's last use COMPLETE
        acl.util.ptr_to_numpy(pool.stagings[i], (SIZE,), NPY_UINT8)[:] = job + 1
        ret = acl.rt.memcpy_async(pool.devs[i], SIZE, pool.stagings[i], SIZE,
                                  ACL_MEMCPY_HOST_TO_DEVICE, pool.stream)
        check_ret("acl.rt.memcpy_async H2D", ret)
        ret = acl.rt.memcpy_async(pool.results + job * RESULT, RESULT, pool.devs[i] + SIZE - RESULT,
                                  RESULT, ACL_MEMCPY_DEVICE_TO_HOST, pool.stream)
        check_ret("acl.rt.memcpy_async D2H", ret)
        check_ret("acl.rt.record_event", acl.rt.record_event(pool.events[i], pool.stream))
        pool.in_flight.put((i, job))
    pool.in_flight.put(None)


def consumer(pool, context):
    check_ret("acl.rt.set_context", acl.rt.set_context(context))
    while (item := pool.in_flight.get()) is not None:
        i, job = item
        while True:
            status, ret = acl.rt.query_event_status(pool.events[i])
            check_ret("acl.rt.query_event_status", ret)
            if status == ACL_EVENT_RECORDED_STATUS_COMPLETE:
                break
            pool.not_ready += 1                  # still in use by the device: not yet
            time.sleep(0.001)
        result = acl.util.ptr_to_numpy(pool.results + job * RESULT, (RESULT,), NPY_UINT8)
        if not (result == job + 1).all():
            pool.errors.append(job)
        del result
        pool.free.put(i)                         # the buffer may be reused now


def main():
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    context, ret = acl.rt.get_context()
    check_ret("acl.rt.get_context", ret)
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    pool = Pool(stream)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=producer, args=(pool, context), name="producer"),
               threading.Thread(target=consumer, args=(pool, context), name="consumer")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))

    print(f"{JOBS} jobs of {SIZE >> 20} MiB through {BUFFERS} device buffers in {elapsed * 1e3:.0f} ms")
    print(f"the consumer found a buffer still in use (NOT_READY) {pool.not_ready} times and "
          f"waited for COMPLETE before reusing it")
    pool.release()
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())

    if pool.errors:
        print(f"event_query_buffer_reuse: jobs {pool.errors} read back wrong data")
        return 1
    print(f"event_query_buffer_reuse: {JOBS} jobs, {BUFFERS} buffers reused after query_event_status, "
          f"all results verified: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
