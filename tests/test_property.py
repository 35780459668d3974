"""Bad input, property-based: random sequences of API calls with random and hostile
arguments against a small board.  After every call and every sequence:

    * the call returned an aclError (an int, or a tuple whose last item is one), never raised
    * no call failed with an internal error (507000 / 500000 / 507899 with an "internal
      error" message: that is an exception the runtime caught, i.e. a bug)
    * every device process of the board is still alive
    * after the sequence (and the process detaching), HBM use of every device and the
      board's /dev/shm segments are back where they started

Arguments: negative, zero, huge and wrongly typed sizes, stale handles (freed, destroyed),
double frees, pointers into the middle of allocations, handles of another process, handles
of the wrong kind.  Pageable host memory is only used within its bounds: the runtime can
check that a pageable pointer is mapped, not how large the user's buffer is (as the real
runtime), so an overrun there would corrupt this test process, not find a bug.

A second machine runs batches of calls from 2-3 threads at once on a 2-device board of its
own and SIGKILLs device processes (between batches or while a batch runs), recovering them
with reset_device_force: calls still return aclErrors, the surviving device lives, round
trips that succeed return intact bytes, and after recovery and detaching, HBM use, free
memory (get_mem_info) and /dev/shm are back where they started.

Bounded by default (``MDEV_PROPERTY_EXAMPLES``, default 100 of up to 40 calls, and
``MDEV_PROPERTY_FAULT_EXAMPLES``, default 20 of up to 10 batches or kills; derandomized);
``MDEV_PROPERTY_RANDOM=1`` draws new sequences on every run.
"""

from __future__ import annotations

import os
import re
import threading
import time

import numpy as np
import psutil
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition, rule,
                                 run_state_machine_as_test)

from helpers import MiB, attached, extra_board, kill, shm_entries, wait_until
from mdev.board import launcher
from mdev.memory import address
from peer import Peer

EXAMPLES = int(os.environ.get("MDEV_PROPERTY_EXAMPLES", "100"))
INTERNAL = {507000, 500000, 507899}
HOST_BUF = 64 * 1024

# filled in by the test: the board, its starting accounting, another process's handles
CTX: dict = {}

hostile_ints = st.one_of(
    st.integers(-2**64, 2**64),
    st.sampled_from([-1, 0, 1, 7, 4095, 4096, 2 * MiB + 1, 1 << 34, 1 << 62, 2**63, 2**64 + 5]),
)
wrong_types = st.one_of(st.none(), st.text(max_size=3), st.floats(allow_nan=True), st.just(b"\x00"),
                        st.just([1]), st.booleans())
# valid values most of the time, so that sequences build state and reach deep paths
sizes = st.one_of(*[st.integers(1, 2 * MiB)] * 3, st.integers(1, 4096), hostile_ints, wrong_types)
small_sizes = st.one_of(*[st.integers(0, 4096)] * 3, st.integers(0, 64 * 1024),
                        st.sampled_from([-1, 1 << 40, 2**64]), wrong_types)
devices = st.one_of(*[st.integers(0, 3)] * 4, st.integers(-2, 5), wrong_types)
kinds = st.one_of(*[st.integers(0, 4)] * 4, st.integers(-1, 5), wrong_types)


def _unmapped_ints():
    """Addresses that are never mapped in a host process: page zero, above user space, or
    device / VMM ranges (where the runtime's own tables decide)."""
    return st.one_of(st.integers(1, 65535), st.integers(1 << 47, (1 << 47) + (1 << 40)),
                     st.integers(address.device_base(0), address.device_base(0) + (1 << 32)),
                     st.integers(-2**63, -1), st.integers(2**64, 2**65))


class ApiMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        import mdev.acl as acl
        self.acl = acl
        self.host = np.zeros(HOST_BUF, np.uint8)
        self.dev: list[tuple[int, int]] = []        # (ptr, size) live device allocations
        self.pinned: list[tuple[int, int]] = []
        self.dead: list[int] = []                   # freed device pointers, destroyed handles
        # freed pinned pointers: only freed again, never copied to (the address may be mapped
        # again by anything in this process, which is then pageable memory)
        self.dead_pinned: list[int] = []
        self.streams: list[int] = []
        self.events: list[int] = []
        self.keys: list[str] = []
        self.contexts: list[int] = []
        self.notifies: list[int] = []
        self.reserved: list[int] = []          # VMM reservations
        self.physical: list[int] = []          # VMM physical handles
        self.failures: list[str] = []

    # -- helpers
    def call(self, name: str, *args):
        fn = getattr(self.acl.rt, name)
        try:
            result = fn(*args)
        except BaseException as exc:   # noqa: BLE001 - any escape is the failure we look for
            self.failures.append(f"{name}{args!r} raised {exc!r}")
            raise AssertionError(f"acl.rt.{name}{args!r} raised {exc!r}") from exc
        code = result[-1] if isinstance(result, tuple) else result
        assert isinstance(code, int) and not isinstance(code, bool), f"{name}{args!r} returned {result!r}"
        if code in INTERNAL:
            message = self.acl.get_recent_err_msg() or ""
            assert "internal error" not in message and "failed:" not in message, \
                f"acl.rt.{name}{args!r} hit an internal error: {message}"
        return result

    def pointer(self, data, pageable_ok: bool, count: int | None = None):
        """A pointer to use: live, in the middle, stale, another process's, or wild."""
        choices = ["wild", "other", "stale"]
        if self.dev:
            choices += ["dev"] * 5 + ["mid"] * 2
        if self.pinned:
            choices += ["pin"] * 2 + ["pin_mid"]
        if pageable_ok:
            choices += ["host"] * 2
        which = data.draw(st.sampled_from(choices))
        if which == "dev":
            return data.draw(st.sampled_from(self.dev))[0]
        if which == "mid":
            ptr, size = data.draw(st.sampled_from(self.dev))
            return ptr + data.draw(st.integers(0, max(0, size - 1)))
        if which == "pin":
            return data.draw(st.sampled_from(self.pinned))[0]
        if which == "pin_mid":
            ptr, size = data.draw(st.sampled_from(self.pinned))
            return ptr + data.draw(st.integers(0, max(0, size - 1)))
        if which == "host":
            return self.acl.util.numpy_to_ptr(self.host) + data.draw(st.integers(0, HOST_BUF - (count or 0)))
        if which == "stale" and self.dead:
            return data.draw(st.sampled_from(self.dead))
        if which == "other":
            return data.draw(st.sampled_from(CTX["other_ptrs"]))
        return data.draw(st.one_of(_unmapped_ints(), wrong_types))

    def stream(self, data):
        pool = [0, None] + self.streams + self.dead + CTX["other_handles"] + self.events
        good = st.sampled_from([0] + self.streams)
        return data.draw(st.one_of(good, good, good, st.sampled_from(pool), hostile_ints, wrong_types))

    # -- rules
    @initialize()
    def start(self):
        self.call("set_device", 0)

    @rule(device=devices)
    def set_device(self, device):
        self.call("set_device", device)

    @rule(device=devices, force=st.booleans())
    def reset_device(self, device, force):
        self.call("reset_device_force" if force else "reset_device", device)

    @rule(size=sizes, policy=st.one_of(st.sampled_from([0, 1, 2, 3, 0x100]), hostile_ints, wrong_types))
    def malloc(self, size, policy):
        ptr, ret = self.call("malloc", size, policy)
        if ret == 0:
            assert ptr and isinstance(size, int) and size > 0
            self.dev.append((ptr, size))

    # pinned memory is committed at once: a hostile size must fail fast (> /dev/shm), never
    # take gigabytes of this machine's RAM for a moment
    @rule(size=st.one_of(st.integers(1, 256 * 1024), st.integers(-2**64, 0), st.integers(1 << 50, 2**65),
                         wrong_types))
    def malloc_host(self, size):
        ptr, ret = self.call("malloc_host", size)
        if ret == 0:
            self.pinned.append((ptr, size))

    @rule(data=st.data())
    def free(self, data):
        if self.dead_pinned and data.draw(st.booleans()):
            ptr = data.draw(st.sampled_from(self.dead_pinned))      # a double free
        else:
            ptr = self.pointer(data, pageable_ok=True)
        host = data.draw(st.booleans())
        ret = self.call("free_host" if host else "free", ptr)
        if ret == 0:
            pool = self.pinned if host else self.dev
            for entry in [e for e in pool if e[0] == ptr]:
                pool.remove(entry)
                (self.dead_pinned if host else self.dead).append(ptr)

    @rule(data=st.data(), kind=kinds, asynchronous=st.booleans())
    def memcpy(self, data, kind, asynchronous):
        count = data.draw(small_sizes)
        bounded = isinstance(count, int) and 0 <= count <= HOST_BUF
        dst = self.pointer(data, bounded, count if bounded else None)
        src = self.pointer(data, bounded, count if bounded else None)
        dest_max = data.draw(st.one_of(st.just(count), small_sizes))
        if not bounded or not isinstance(dest_max, int) or dest_max > HOST_BUF:
            host_lo = self.acl.util.numpy_to_ptr(self.host)
            if any(isinstance(p, int) and host_lo <= p < host_lo + HOST_BUF for p in (dst, src)):
                dest_max = count
        if asynchronous:
            self.call("memcpy_async", dst, dest_max, src, count, kind, self.stream(data))
        else:
            self.call("memcpy", dst, dest_max, src, count, kind)

    @rule(data=st.data(), asynchronous=st.booleans())
    def valid_copy(self, data, asynchronous):
        """A well-formed copy between live buffers (so that sequences reach deep states)."""
        buffers = self.dev + self.pinned + [(self.acl.util.numpy_to_ptr(self.host), HOST_BUF)]
        (dst, dsize), (src, ssize) = data.draw(st.sampled_from(buffers)), data.draw(st.sampled_from(buffers))
        count = data.draw(st.integers(0, min(dsize, ssize, HOST_BUF)))
        if asynchronous:
            self.call("memcpy_async", dst, dsize, src, count, 4, self.stream(data))   # ACL_MEMCPY_DEFAULT
        else:
            self.call("memcpy", dst, dsize, src, count, 4)

    @rule(data=st.data(), device=st.integers(0, 3), granules=st.integers(1, 2))
    def valid_vmm(self, data, device, granules):
        prop = dict(handleType=0, allocationType=0, memAttr=4, location=dict(type=1, id=device), reserve=0)
        handle, ret = self.call("malloc_physical", granules * 2 * MiB, prop, 0)
        if ret != 0:
            return
        self.physical.append(handle)
        va, ret = self.call("reserve_mem_address", granules * 2 * MiB, 0, 0, 0)
        if ret == 0:
            self.reserved.append(va)
            if self.call("map_mem", va, granules * 2 * MiB, 0, handle, 0) == 0 and data.draw(st.booleans()):
                self.dev.append((va, granules * 2 * MiB))      # usable like device memory

    @rule(data=st.data(), value=st.one_of(st.integers(0, 255), hostile_ints, wrong_types),
          asynchronous=st.booleans())
    def memset(self, data, value, asynchronous):
        count = data.draw(small_sizes)
        bounded = isinstance(count, int) and 0 <= count <= HOST_BUF
        ptr = self.pointer(data, bounded, count if bounded else None)
        max_count = count if not bounded else data.draw(st.one_of(st.just(count), st.integers(count, HOST_BUF)))
        if asynchronous:
            self.call("memset_async", ptr, max_count, value, count, self.stream(data))
        else:
            self.call("memset", ptr, max_count, value, count)

    @rule(priority=st.one_of(st.integers(0, 7), st.integers(-3, 10), wrong_types),
          flag=st.one_of(st.just(0), st.just(0), st.sampled_from([0, 1, 2, 8]), hostile_ints))
    def create_stream(self, priority, flag):
        handle, ret = self.call("create_stream_with_config", priority, flag)
        if ret == 0:
            self.streams.append(handle)

    @rule(data=st.data(), force=st.booleans())
    def destroy_stream(self, data, force):
        stream = self.stream(data)
        if self.call("destroy_stream_force" if force else "destroy_stream", stream) == 0 and stream in self.streams:
            self.streams.remove(stream)
            self.dead.append(stream)

    @rule(data=st.data(), timeout=st.one_of(st.sampled_from([-1, 0, 1, 100]), hostile_ints))
    def synchronize(self, data, timeout):
        stream = self.stream(data)
        if data.draw(st.booleans()):
            self.call("synchronize_stream", stream)
        else:
            self.call("synchronize_stream_with_timeout", stream, timeout)
        self.call("stream_query", stream)

    @rule()
    def synchronize_device(self):
        self.call("synchronize_device")

    @rule(flag=st.one_of(st.sampled_from([1, 8, 9]), st.sampled_from([0, 1, 2, 8]), hostile_ints, wrong_types))
    def create_event(self, flag):
        handle, ret = self.call("create_event_ex_with_flag", flag)
        if ret == 0:
            self.events.append(handle)

    @rule(data=st.data(), op=st.sampled_from(["record_event", "stream_wait_event", "reset_event"]))
    def event_on_stream(self, data, op):
        pool = self.events + self.dead + self.streams + CTX["other_handles"] + [0, None]
        good = st.sampled_from(self.events or [0])
        event = data.draw(st.one_of(good, good, st.sampled_from(pool), hostile_ints))
        stream = self.stream(data)
        if op == "stream_wait_event":
            self.call(op, stream, event)
        else:
            self.call(op, event, stream)

    @rule(data=st.data(), op=st.sampled_from(["destroy_event", "synchronize_event", "query_event_status"]))
    def event_call(self, data, op):
        pool = self.events + self.dead + self.streams + CTX["other_handles"] + [0, None]
        good = st.sampled_from(self.events or [0])
        event = data.draw(st.one_of(good, good, st.sampled_from(pool), hostile_ints, wrong_types))
        if self.call(op, event) == 0 and op == "destroy_event" and event in self.events:
            self.events.remove(event)
            self.dead.append(event)

    @rule(data=st.data(), size=small_sizes, flags=st.one_of(st.sampled_from([0, 1]), hostile_ints))
    def ipc_export(self, data, size, flags):
        key, ret = self.call("ipc_mem_get_export_key", self.pointer(data, False), size, 65, flags)
        if ret == 0:
            self.keys.append(key)

    @rule(data=st.data(), flag=st.one_of(st.sampled_from([0, 1]), hostile_ints))
    def ipc_import(self, data, flag):
        key = data.draw(st.one_of(st.sampled_from(self.keys + [CTX["other_key"], "mdev-mem-00"]), st.text(max_size=8),
                                  wrong_types))
        ptr, ret = self.call("ipc_mem_import_by_key", key, flag)
        if ret == 0:
            self.dead.append(ptr)        # never freed through the table: a close releases it
        if data.draw(st.booleans()):
            self.call("ipc_mem_close", key)

    @rule(data=st.data(), kind=kinds, asynchronous=st.booleans())
    def memcpy2d(self, data, kind, asynchronous):
        # device and pinned memory only: a 2-D span over pageable memory is the user's to size
        dst, src = self.pointer(data, False), self.pointer(data, False)
        dims = [data.draw(small_sizes) for _ in range(4)]      # dpitch, spitch, width, height
        args = (dst, dims[0], src, dims[1], dims[2], dims[3], kind)
        if asynchronous:
            self.call("memcpy2d_async", *args, self.stream(data))
        else:
            self.call("memcpy2d", *args)

    @rule(data=st.data(), value=st.one_of(st.integers(0, 2**64 - 1), hostile_ints, wrong_types),
          flag=st.one_of(st.just(0), st.just(0), st.just(0), hostile_ints))
    def value_write(self, data, value, flag):
        self.call("value_write", self.pointer(data, False), value, flag, self.stream(data))

    @rule(data=st.data(), blocks=st.one_of(st.integers(-1, 48), hostile_ints, wrong_types),
          n=small_sizes, dtype=st.one_of(st.integers(-1, 30), wrong_types))
    def kernel(self, data, blocks, n, dtype):
        from mdev import ops
        ptr, stream = self.pointer(data, False), self.stream(data)
        try:
            launch = ops.fill[blocks, stream]
        except BaseException as exc:   # noqa: BLE001 - the launch-config syntax may refuse
            assert isinstance(exc, (TypeError, ValueError)), f"fill[{blocks!r}, {stream!r}] raised {exc!r}"
            return
        try:
            ret = launch(ptr, 1.5, n, dtype)
        except BaseException as exc:   # noqa: BLE001
            raise AssertionError(f"fill[{blocks!r}, {stream!r}]({ptr!r}, 1.5, {n!r}, {dtype!r}) raised {exc!r}")
        assert isinstance(ret, int), ret
        if ret in INTERNAL:
            message = self.acl.get_recent_err_msg() or ""
            assert "internal error" not in message, message

    @rule(data=st.data(), device=devices, op=st.sampled_from(["create", "destroy", "set"]))
    def context(self, data, device, op):
        if op == "create":
            handle, ret = self.call("create_context", device)
            if ret == 0:
                self.contexts.append(handle)
            return
        pool = self.contexts + self.dead + CTX["other_handles"] + [0, None]
        handle = data.draw(st.one_of(st.sampled_from(pool), hostile_ints, wrong_types))
        if self.call("destroy_context" if op == "destroy" else "set_context", handle) == 0 and op == "destroy":
            self.contexts.remove(handle)
            self.dead.append(handle)

    @rule(data=st.data(), op=st.sampled_from(["create", "record", "destroy"]))
    def notify(self, data, op):
        if op == "create":
            handle, ret = self.call("create_notify", data.draw(st.one_of(st.just(0), hostile_ints, wrong_types)))
            if ret == 0:
                self.notifies.append(handle)
            return
        pool = self.notifies + self.events + self.dead + [0, None]
        handle = data.draw(st.one_of(st.sampled_from(pool), hostile_ints, wrong_types))
        if op == "record":
            self.call("record_notify", handle, self.stream(data))
        elif self.call("destroy_notify", handle) == 0 and handle in self.notifies:
            self.notifies.remove(handle)
            self.dead.append(handle)

    @rule(data=st.data(), mode=st.one_of(st.integers(-1, 2), wrong_types))
    def failure_mode(self, data, mode):
        self.call("set_stream_failure_mode", self.stream(data), mode)

    @rule(data=st.data(), device=devices, size=st.one_of(st.just(2 * MiB), st.just(4 * MiB), sizes),
          op=st.sampled_from(["reserve", "physical", "map", "unmap", "free", "release"]))
    def vmm(self, data, device, size, op):
        if op == "reserve":
            va, ret = self.call("reserve_mem_address", size, 0, data.draw(st.one_of(st.just(0), hostile_ints)), 0)
            if ret == 0:
                self.reserved.append(va)
        elif op == "physical":
            prop = dict(handleType=0, allocationType=0, memAttr=data.draw(st.one_of(st.just(4), st.integers(-1, 8))),
                        location=dict(type=1, id=device), reserve=0)
            if data.draw(st.integers(0, 4)) == 0:
                prop = data.draw(st.one_of(wrong_types, st.just({}), st.just(dict(prop, location=None))))
            handle, ret = self.call("malloc_physical", size, prop, 0)
            if ret == 0:
                self.physical.append(handle)
        else:
            va = data.draw(st.one_of(st.sampled_from(self.reserved or [0]), hostile_ints, wrong_types))
            if isinstance(va, int) and not isinstance(va, bool) and va:
                va += data.draw(st.sampled_from([0, 0, 2 * MiB, 4096]))
            handle = data.draw(st.one_of(st.sampled_from(self.physical + self.dead or [0]), hostile_ints))
            if op == "map":
                self.call("map_mem", va, size, data.draw(st.one_of(st.just(0), st.just(2 * MiB), hostile_ints)),
                          handle, 0)
            elif op == "unmap":
                self.call("unmap_mem", va)
            elif op == "free":
                if self.call("free_physical", handle) == 0 and handle in self.physical:
                    self.physical.remove(handle)
                    self.dead.append(handle)
            elif self.call("release_mem_address", va) == 0 and va in self.reserved:
                self.reserved.remove(va)

    @rule(device=devices, attr=st.one_of(st.integers(-1, 120), wrong_types))
    def device_info(self, device, attr):
        self.call("get_device_info", device, attr)

    @rule(attr=st.one_of(st.integers(-1, 8), wrong_types))
    def get_mem_info(self, attr):
        self.call("get_mem_info", attr)

    @invariant()
    def devices_alive(self):
        for pid in CTX["device_pids"]:
            assert psutil.Process(pid).status() != psutil.STATUS_ZOMBIE, f"device process {pid} died"

    def teardown(self):
        from mdev.runtime.devices.lifecycle import detach
        detach()
        board = CTX["board"]
        devs = launcher.status(board)["devices"]
        assert all(d["state"] == "ok" for d in devs), devs

        def settled():
            return [d["hbm_used"] for d in launcher.status(board)["devices"]] == CTX["hbm_used"]

        assert wait_until(settled, timeout=5), \
            ([d["hbm_used"] for d in launcher.status(board)["devices"]], CTX["hbm_used"])
        assert wait_until(lambda: sorted(shm_entries(board)) == CTX["segments"], timeout=5), \
            (shm_entries(board), CTX["segments"])


def test_random_api_sequences_never_break_the_board(acl, board):
    # processes of earlier tests are gone (their cleanup may still be running)
    assert wait_until(lambda: not launcher.status(board)["clients"], timeout=15)
    with Peer(board) as other:
        other.do("""
            ok(acl.rt.set_device(0))
            p, ret = acl.rt.malloc(4096, 0); ok(ret)
            s, ret = acl.rt.create_stream(); ok(ret)
            e, ret = acl.rt.create_event(); ok(ret)
            h, ret = acl.rt.malloc_host(4096); ok(ret)
            key, ret = acl.rt.ipc_mem_get_export_key(p, 4096, 65, 1); ok(ret)
        """)
        CTX.update(board=board, other_ptrs=list(other.ev("[p, p + 100]")),
                   other_handles=list(other.ev("[s, e, p]")), other_key=other.ev("key"))
        CTX["hbm_used"] = [d["hbm_used"] for d in launcher.status(board)["devices"]]
        CTX["device_pids"] = [d["pid"] for d in launcher.status(board)["devices"]]
        CTX["segments"] = sorted(shm_entries(board))
        run_state_machine_as_test(ApiMachine, settings=settings(
            max_examples=EXAMPLES, stateful_step_count=40, deadline=None, database=None,
            derandomize=os.environ.get("MDEV_PROPERTY_RANDOM") != "1",
            suppress_health_check=list(HealthCheck)))
        # the other process was never disturbed
        assert other.ev("acl.rt.synchronize_stream(s)") == 0
        assert len(other.ev("get(p, 16).tolist()")) == 16


# ============================================================================ threads and kills
# A second machine on a 2-device board of its own: batches of valid-ish calls from 2-3
# threads at once, device processes SIGKILLed between batches or in the middle of one, and
# recovery with reset_device_force.  Calls on a dead device return an aclError (507901 for
# most), never raise; the surviving device never dies; once every device is recovered and
# the process detached, HBM use, free memory and /dev/shm are back where they started.

LOST = 507901
BUF = 64 * 1024
FAULT: dict = {}       # filled in by the test: the board and its starting accounting

thread_ops = st.one_of(
    st.tuples(st.just("malloc"), st.integers(1, BUF)),
    st.tuples(st.just("free"), st.integers(0, 50)),
    st.tuples(st.just("h2d"), st.integers(0, 50), st.integers(0, BUF)),
    st.tuples(st.just("d2h"), st.integers(0, 50), st.integers(0, BUF)),
    st.tuples(st.just("d2d"), st.integers(0, 50), st.integers(0, 50), st.integers(0, BUF)),
    st.tuples(st.just("d2d_async"), st.integers(0, 50), st.integers(0, 50), st.integers(0, BUF)),
    st.tuples(st.just("synchronize_device")),
    st.tuples(st.just("round_trip"), st.integers(1, BUF)),
    st.tuples(st.just("memset_async"), st.integers(0, 50), st.integers(0, BUF)),
    st.tuples(st.just("event")),
    st.tuples(st.just("stream")),
    st.tuples(st.just("mem_info")),
    st.tuples(st.just("set_device"), st.integers(0, 1)),
)


class FaultMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        import mdev.acl as acl
        self.acl = acl
        self.lock = threading.Lock()
        self.dev: list[tuple[int, int]] = []        # (ptr, size), shared by all threads
        self.failures: list[str] = []
        self.pids = {d["id"]: d["pid"] for d in launcher.status(FAULT["board"])["devices"]}
        self.killed: set[int] = set()

    # -- helpers
    def call(self, name: str, *args):
        """One API call; an escape or a non-aclError result is recorded (from any thread)."""
        try:
            result = getattr(self.acl.rt, name)(*args)
        except BaseException as exc:   # noqa: BLE001 - any escape is the failure we look for
            self.failures.append(f"acl.rt.{name}{args!r} raised {exc!r}")
            return (None, -1) if name in ("malloc", "create_stream", "create_event") else -1
        code = result[-1] if isinstance(result, tuple) else result
        if not isinstance(code, int) or isinstance(code, bool):
            self.failures.append(f"acl.rt.{name}{args!r} returned {result!r}")
        elif code in INTERNAL:
            message = self.acl.get_recent_err_msg() or ""
            if "internal error" in message or "failed:" in message:
                self.failures.append(f"acl.rt.{name}{args!r} hit an internal error: {message}")
        return result

    def pick(self, index: int):
        with self.lock:
            return self.dev[index % len(self.dev)] if self.dev else None

    def run_ops(self, device: int, ops: list) -> None:
        """A thread's share of a batch: its own device, stream and host buffer."""
        acl = self.acl
        host = np.zeros(BUF, np.uint8)
        hptr = acl.util.numpy_to_ptr(host)
        self.call("set_device", device)
        stream, _ = self.call("create_stream")
        for op, *args in ops:
            if op == "malloc":
                ptr, ret = self.call("malloc", args[0], 0)
                if ret == 0:
                    with self.lock:
                        self.dev.append((ptr, args[0]))
            elif op == "free":
                with self.lock:
                    entry = self.dev.pop(args[0] % len(self.dev)) if self.dev else None
                if entry is not None:
                    self.call("free", entry[0])
            elif op in ("h2d", "d2h", "memset_async"):
                entry = self.pick(args[0])
                if entry is None:
                    continue
                ptr, size = entry
                n = min(args[1], size)
                if op == "h2d":
                    self.call("memcpy", ptr, size, hptr, n, 1)
                elif op == "d2h":
                    self.call("memcpy", hptr, BUF, ptr, n, 2)
                else:
                    self.call("memset_async", ptr, size, 0x5A, n, stream)
                    self.call("synchronize_stream", stream)
            elif op in ("d2d", "d2d_async"):
                # either device's memory: the copy may be P2P, run by this thread's device
                dst_entry, src_entry = self.pick(args[0]), self.pick(args[1])
                if dst_entry is None or src_entry is None:
                    continue
                (dst, dsize), (src, ssize) = dst_entry, src_entry
                if op == "d2d":
                    self.call("memcpy", dst, dsize, src, min(args[2], dsize, ssize), 3)
                else:
                    self.call("memcpy_async", dst, dsize, src, min(args[2], dsize, ssize), 3, stream)
                    self.call("synchronize_stream", stream)
            elif op == "synchronize_device":
                self.call("synchronize_device")
            elif op == "round_trip":
                # private memory: when every call succeeds, the bytes must come back intact
                ptr, ret = self.call("malloc", args[0], 0)
                if ret == 0:
                    pattern = np.random.default_rng(args[0]).integers(0, 256, args[0], dtype=np.uint8)
                    back = np.zeros(args[0], np.uint8)
                    if self.call("memcpy", ptr, args[0], acl.util.numpy_to_ptr(pattern), args[0], 1) == 0 and \
                            self.call("memcpy", acl.util.numpy_to_ptr(back), args[0], ptr, args[0], 2) == 0 and \
                            back.tobytes() != pattern.tobytes():
                        self.failures.append(f"round trip of {args[0]} bytes on device {device} corrupted")
                    self.call("free", ptr)
            elif op == "event":
                event, ret = self.call("create_event")
                if ret == 0:
                    self.call("record_event", event, stream)
                    self.call("synchronize_event", event)
                    self.call("destroy_event", event)
            elif op == "stream":
                extra, ret = self.call("create_stream")
                if ret == 0:
                    self.call("destroy_stream", extra)
            elif op == "mem_info":
                self.call("get_mem_info", 0)
            elif op == "set_device":
                self.call("set_device", args[0])
        if stream is not None:
            self.call("destroy_stream", stream)

    def kill(self, device: int) -> None:
        self.killed.add(device)
        kill(self.pids.pop(device))
        FAULT["kills"] = FAULT.get("kills", 0) + 1

    # -- rules
    @initialize()
    def start(self):
        for device, peer in ((0, 1), (1, 0)):
            assert self.call("set_device", device) == 0
            self.call("device_enable_peer_access", peer, 0)

    @rule(plans=st.lists(st.tuples(st.integers(0, 1), st.lists(thread_ops, min_size=1, max_size=8)),
                         min_size=2, max_size=3),
          kill=st.one_of(st.none(), st.tuples(st.integers(0, 1), st.floats(0, 0.1))))
    def batch(self, plans, kill):
        """2-3 threads run their calls at once; maybe a device is killed while they do."""
        threads = [threading.Thread(target=self.run_ops, args=plan, daemon=True) for plan in plans]
        for thread in threads:
            thread.start()
        if kill is not None and not self.killed:
            time.sleep(kill[1])
            self.kill(kill[0])
        for thread in threads:
            thread.join(30)
        assert not any(t.is_alive() for t in threads), "a call hangs"
        assert not self.failures, self.failures

    @precondition(lambda self: not self.killed)
    @rule(device=st.integers(0, 1))
    def kill_device(self, device):
        self.kill(device)
        ret = self.call("set_device", device)    # needs the device if it makes a default context
        if ret == 0:
            ret = self.call("malloc", 4096, 0)[1]
        assert ret == LOST, (ret, self.acl.get_recent_err_msg())

    @precondition(lambda self: self.killed)
    @rule()
    def recover(self):
        for device in sorted(self.killed):
            self.restart(device)

    def restart(self, device: int) -> None:
        """reset_device_force restarts the device; this process may first need to notice it
        died (set_device on a device it never reached)."""
        if self.call("reset_device_force", device) != 0:
            self.call("set_device", device)
            ret = self.call("reset_device_force", device)
            assert ret == 0, (ret, self.acl.get_recent_err_msg())
        info = launcher.status(FAULT["board"])["devices"][device]
        assert info["state"] == "ok", info
        self.pids[device] = info["pid"]
        self.killed.discard(device)
        with self.lock:
            self.dev = [(p, s) for p, s in self.dev if address.split(p)[0] != device]

    @invariant()
    def survivors_alive(self):
        assert not self.failures, self.failures
        for device, pid in self.pids.items():
            assert psutil.Process(pid).status() != psutil.STATUS_ZOMBIE, f"device {device} (pid {pid}) died"

    def teardown(self):
        from mdev.runtime.devices.lifecycle import detach
        for device in sorted(self.killed):
            self.restart(device)
        detach()
        board = FAULT["board"]
        assert wait_until(lambda: [d["hbm_used"] for d in launcher.status(board)["devices"]] == FAULT["hbm_used"],
                          timeout=5), ([d["hbm_used"] for d in launcher.status(board)["devices"]], FAULT["hbm_used"])
        assert _free_memory() == FAULT["free"]
        detach()
        # a restarted device names its segments anew (a random part per device process)
        assert wait_until(lambda: segment_kinds(shm_entries(board)) == FAULT["segments"], timeout=5), \
            (shm_entries(board), FAULT["segments"])
        assert not self.failures, self.failures


def segment_kinds(entries: list[str]) -> list[str]:
    """The board's segments without the random part each device process adds to its HBM and
    control page names: what a restart must leave as it was."""
    return sorted(re.sub(r"\.(hbm|ctl)(\d+)\.[0-9a-f]+$", r".\1\2", e) for e in entries)


def _free_memory() -> list[int]:
    """get_mem_info free bytes of every device, each seen from a fresh default context."""
    import mdev.acl as acl
    free = []
    for device in (0, 1):
        assert acl.rt.set_device(device) == 0, acl.get_recent_err_msg()
        value, _, ret = acl.rt.get_mem_info(0)
        assert ret == 0
        free.append(value)
        assert acl.rt.reset_device(device) == 0
    return free


def test_threads_and_killed_devices_never_break_the_board(monkeypatch):
    with extra_board("prop-kill", "laptop2", hbm=64 * MiB) as name, attached(monkeypatch, name):
        FAULT.update(board=name)
        FAULT["free"] = _free_memory()
        from mdev.runtime.devices.lifecycle import detach
        detach()
        FAULT["hbm_used"] = [d["hbm_used"] for d in launcher.status(name)["devices"]]
        FAULT["segments"] = segment_kinds(shm_entries(name))
        run_state_machine_as_test(FaultMachine, settings=settings(
            max_examples=int(os.environ.get("MDEV_PROPERTY_FAULT_EXAMPLES", "20")), stateful_step_count=10,
            deadline=None, database=None, derandomize=os.environ.get("MDEV_PROPERTY_RANDOM") != "1",
            suppress_health_check=list(HealthCheck)))
        print(f"{FAULT.get('kills', 0)} device SIGKILLs survived (pytest -s shows it)")
