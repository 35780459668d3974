"""Helpers of the asynchronous-task tests (events, notifies, values, callbacks, priorities).

    ok(acl, ret)                 assert ret == ACL_SUCCESS, with the thread's error text
    Gate(acl, stream)            a host func that holds ``stream`` until ``gate.open()``
    device_buffer(acl, nbytes)   device allocation, zeroed
    pinned(acl, nbytes)          a malloc_host buffer and a numpy view of it
    stream_done(acl, stream)     the stream's work is done (stream_query)

(Copies to and from device memory and polling with a deadline: tests/helpers.py.)
"""

from __future__ import annotations

import threading

import numpy as np


def ok(acl, ret) -> None:
    assert ret == acl.ACL_SUCCESS, f"ret={ret}: {acl.get_recent_err_msg()}"


def out(acl, result):
    """Unpack ``(value..., ret)``; assert success; return the value(s)."""
    *values, ret = result
    ok(acl, ret)
    return values[0] if len(values) == 1 else tuple(values)


class Gate:
    """Holds a stream: a blocking host func that returns when the test opens the gate.

    Host funcs of one device run on one host thread, so a closed gate also delays the
    host funcs of the device's other streams (never the device's other tasks).
    """

    def __init__(self, acl, stream, timeout: float = 30.0) -> None:
        self._event = threading.Event()
        self.entered = threading.Event()
        self.timeout = timeout
        ok(acl, acl.rt.launch_host_func(stream, self._hold, None))

    def _hold(self, _args) -> None:
        self.entered.set()
        self._event.wait(self.timeout)

    def open(self) -> None:
        self._event.set()


def device_buffer(acl, nbytes: int) -> int:
    ptr = out(acl, acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST))
    ok(acl, acl.rt.memset(ptr, nbytes, 0, nbytes))
    return ptr


def pinned(acl, nbytes: int, dtype=np.uint8) -> tuple[int, np.ndarray]:
    """A malloc_host buffer and a live numpy view of it (zeroed)."""
    ptr = out(acl, acl.rt.malloc_host(nbytes))
    view = acl.util.ptr_to_numpy(ptr, (nbytes,), 2)   # NPY_UBYTE
    view[:] = 0
    return ptr, view.view(dtype)


def stream_done(acl, stream) -> bool:
    return out(acl, acl.rt.stream_query(stream)) == acl.ACL_STREAM_STATUS_COMPLETE
