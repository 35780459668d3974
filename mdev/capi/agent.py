"""The host agent: mdev's runtime serving one C program from a process of its own.

    C program (any threads; a Python program's GIL never involved)
      libmdev_client.so --slot per C thread, futex wake--> this process (mdev's interpreter)
                        --its ring of asynchronous calls-->  control thread: a thread per slot
                        <--grants (what they may assume)--   slot thread: the ring, then the call:
                                                               adapter.entry(name)(*args)
                                                               --> mdev.runtime --> board
      the program's memory <------ process_vm_readv/writev -- (structures, strings, pageable copies)
      pinned segments      <------ mapped at one address in both (the program's reserved window)
      service threads      <------ host callbacks, run in the program (a service request)

Started by the C library (``python -E -s -c ... ROOT PID LIBRARY``, fd 3 the shared area,
fd 4 the lifeline; LIBRARY is libmdev_client.so, whose way of waiting it borrows): ``main``
serves until the lifeline reads EOF (the program exited or died), then runs the runtime's
exit work (releases, traces, reports) and exits.  The channel's layout is mdev.capi.channel;
which calls may return before they run, and why that is exact, mdev.capi.asynchronous.
"""

from __future__ import annotations

import ctypes
import faulthandler
import functools
import mmap
import os
import signal
import struct
import sys
import threading
import time
import traceback

from mdev import errors as E
from mdev.capi import asynchronous, embedding, local, signatures
from mdev.capi import channel as ch
from mdev.errors import AclError
from mdev.memory import futex
from mdev.memory.program import ProgramMemory, serve
from mdev.memory.segment import MAP_FIXED, MAP_NORESERVE, _libc
from mdev.runtime import hooks
from mdev.runtime.board_client import gathering

_MAP_FIXED_NOREPLACE = 0x100000
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")
_MASK = (1 << 64) - 1
_local = threading.local()         # .slot: the slot whose call this thread is running
# libmdev_client.so's mdev_wait_change and mdev_post: a C thread's next call usually comes
# within microseconds of the last answer, so a slot's thread watches its word that long before
# sleeping (yielding the CPU after the first microseconds), and says when it sleeps (the C
# side then wakes it); the same for the C side
_wait_change = _post = _grant_executor = None
SPIN_NS = 200_000


class Slot:
    """One slot of the shared area, seen from the agent."""

    def __init__(self, area: "Area", index: int) -> None:
        self.area, self.index = area, index
        self.offset = ch.slot_offset(index)
        self.state_address = area.address + self.offset + ch.S_STATE
        self._state = ctypes.c_uint32.from_buffer(area.mm, self.offset + ch.S_STATE)
        self.c_sleeps = area.address + self.offset + ch.S_C_SLEEPS
        self.agent_sleeps = area.address + self.offset + ch.S_AGENT_SLEEPS
        self.calls: Calls | None = None          # who runs this C thread's calls

    @property
    def state(self) -> int:
        return self._state.value

    @state.setter
    def state(self, value: int) -> None:
        """Store ``value``, waking the C thread if it sleeps on the slot."""
        _post(self.state_address, value, self.c_sleeps)

    def role(self) -> int:
        return _U32.unpack_from(self.area.mm, self.offset + ch.S_ROLE)[0]

    def wait_while(self, state: int) -> int:
        while True:
            now = self._state.value
            if now != state:
                return now
            _wait_change(self.state_address, now, SPIN_NS, 1000, self.agent_sleeps)   # without the GIL

    def text(self, at: int, size: int) -> str:
        raw = self.area.mm[self.offset + at:self.offset + at + size]
        return raw[:raw.index(0)].decode()

    def service(self, kind: int, args: tuple = (), data: bytes = b"", idle: int = ch.SERVED) -> int:
        """Ask the C thread of this slot for a service; its result."""
        mm, base = self.area.mm, self.offset
        _U64.pack_into(mm, base + ch.S_KIND, kind)
        for k, value in enumerate(args):
            _U64.pack_into(mm, base + ch.S_ARGS + 8 * k, (value or 0) & _MASK)
        mm[base + ch.S_DATA:base + ch.S_DATA + len(data)] = data
        self.state = ch.SERVICE
        while True:
            now = self.wait_while(ch.SERVICE)
            if now == ch.SERVED:
                return _U64.unpack_from(mm, base + ch.S_RESULT)[0]
            if now == ch.CALL and self.calls is not None:     # the C function calls the API
                self.calls.run()
            else:
                _wait_change(self.state_address, now, 0, 1000, self.agent_sleeps)


class Area:
    """The shared area (fd 3) and the program's side of it."""

    def __init__(self, fd: int) -> None:
        self.mm = mmap.mmap(fd, ch.AREA_BYTES)
        self.address = ctypes.addressof(ctypes.c_char.from_buffer(self.mm))
        self.client_area = _U64.unpack_from(self.mm, ch.H_CLIENT_AREA)[0]
        self.slots = [Slot(self, i) for i in range(ch.SLOTS)]
        self._kept = ch.HEADER_BYTES + ch.SLOTS * ch.SLOT_BYTES
        self._kept_lock = threading.Lock()
        self.epoch = ctypes.c_uint32.from_buffer(self.mm, ch.H_EPOCH)
        self.epoch.value = 1              # a slot's grants stamped 0 are none
        self.callers: set[Calls] = set()      # the C threads being served
        self._services: list[Slot] = []
        self._service_lock = threading.Lock()
        self._spawn_lock = threading.Lock()

    def keep(self, data: bytes) -> int:
        """``data`` where the program can read it for as long as it runs: its address there."""
        with self._kept_lock:
            at = self._kept
            if at + len(data) > ch.LOCAL_AT:
                raise MemoryError("the agent's area for kept strings is full")
            self._kept = at + (len(data) + 7) // 8 * 8
        self.mm[at:at + len(data)] = data
        return self.client_area + at

    def thread_text(self, data: bytes) -> int:
        """``data`` in the calling C thread's text buffer (valid until its next call)."""
        slot = _local.slot
        data = data[:ch.TEXT_BYTES - 1] + b"\0"
        self.mm[slot.offset + ch.S_TEXT:slot.offset + ch.S_TEXT + len(data)] = data
        return self.client_area + slot.offset + ch.S_TEXT

    def service(self, kind: int, args: tuple = (), data: bytes = b"") -> int:
        """A service from the program: on the C thread whose call is running, else on a
        service thread (host callbacks from the runtime's own threads)."""
        slot = getattr(_local, "slot", None)
        if slot is not None:
            return slot.service(kind, args, data)
        worker = self._idle_service()
        try:
            result = worker.service(kind, args, data)
        finally:
            worker._state.value = ch.IDLE
            with self._service_lock:
                self._services.append(worker)
        return result

    def _idle_service(self) -> Slot:
        with self._service_lock:
            if self._services:
                return self._services.pop()
        with self._spawn_lock:
            spawner = next(s for s in self.slots if s.role() == ch.SPAWNER and s.state != ch.FREE)
            index = spawner.service(ch.K_SPAWN)
            spawner._state.value = ch.IDLE
        if index >= ch.SLOTS:
            raise OSError("the program cannot start a thread for host callbacks")
        return self.slots[index]


class ClientProgram(ProgramMemory):
    """The C program's memory as the runtime sees it: pageable memory by the kernel's copy,
    pinned memory at one address in both processes (a window the program reserved)."""

    def __init__(self, pid: int, area: Area) -> None:
        super().__init__(pid)
        self.area = area
        self.window = _U64.unpack_from(area.mm, ch.H_WINDOW)[0]
        self.window_size = _U64.unpack_from(area.mm, ch.H_WINDOW_SIZE)[0]
        got = _libc.mmap(self.window, self.window_size, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_NORESERVE
                         | _MAP_FIXED_NOREPLACE, -1, 0)
        if got != self.window:
            raise OSError(f"cannot reserve the program's address window at {self.window:#x}")
        self._free = [(self.window, self.window_size)]          # (start, size), first fit
        self._lock = threading.Lock()
        self._views: dict[str, int] = {}

    def _place(self, size: int) -> int:
        size = -(-size // mmap.PAGESIZE) * mmap.PAGESIZE
        with self._lock:
            for k, (start, room) in enumerate(self._free):
                if room >= size:
                    self._free[k] = (start + size, room - size)
                    return start
        raise OSError("the program's pinned-memory window is full")

    def _ask(self, kind: int, at: int, size: int, name: str = "") -> None:
        err = self.area.service(kind, (at, size), name.lstrip("/").encode() + b"\0")
        if err:
            raise OSError(err, f"the program could not map {name or 'memory'} at {at:#x}: {os.strerror(err)}")

    def share(self, seg) -> int:
        at = self._place(seg.size)
        seg.map_over(at)
        self._ask(ch.K_MAP, at, seg.size, seg.name)
        return at

    def unshare(self, at: int, size: int) -> None:
        size = -(-size // mmap.PAGESIZE) * mmap.PAGESIZE
        _libc.mmap(at, size, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0)
        try:
            self._ask(ch.K_RESERVE, at, size)
        finally:
            with self._lock:
                self._free.append((at, size))

    def view(self, seg, size: int) -> int:
        """Where the program sees the first ``size`` bytes of segment ``seg`` (all of it is
        mapped there once, for as long as it runs: a device's control page, whose words it
        reads -- a later stream's word may lie further in than the first one asked for)."""
        if size > seg.size:
            raise OSError(f"{size} bytes of {seg.name}, which has {seg.size}")
        at = self._views.get(seg.name)
        if at is None:
            at = self._views[seg.name] = self._place(seg.size)
            self._ask(ch.K_MAP, at, -(-seg.size // mmap.PAGESIZE) * mmap.PAGESIZE, seg.name)
        return at

    def map_over(self, seg, at: int) -> None:
        self._ask(ch.K_MAP, at, seg.size, seg.name)

    def unmap_over(self, seg, at: int, size: int) -> None:
        self._ask(ch.K_PRIVATE, at, size)


@functools.cache
def c_function(address: int, restype, *argtypes):
    """A C function of the program as a Python callable: it runs on a C thread there."""
    def call(*args):
        result = AREA.service(ch.K_CALL, (address, *(_word(a) for a in args)))
        return None if restype is None else result
    return call


def _word(value) -> int:
    if value is None:
        return 0
    if isinstance(value, ctypes._SimpleCData):
        value = value.value or 0
    return int(value) & _MASK


# ---------------------------------------------------------------------------- calls
_SCALAR = {"i": "q", "u": "Q", "p": "Q", "f": "d"}


@functools.cache
def _plain(fmt: str) -> struct.Struct | None:
    """The arguments' layout when every one is a number (the common case): one unpack."""
    if all(letter in _SCALAR for letter in fmt):
        return struct.Struct("<" + "".join(_SCALAR[letter] for letter in fmt))
    return None


def _arguments(mm, base: int, fmt: str) -> list:
    plain = _plain(fmt)
    at = base + ch.S_DATA
    if plain is not None:
        return list(plain.unpack_from(mm, at))
    args = []
    for letter in fmt:
        if letter in _SCALAR:
            args.append(struct.unpack_from("<" + _SCALAR[letter], mm, at)[0])
            at += 8
            continue
        n = struct.unpack_from("<q", mm, at)[0]
        at += 8
        if n < 0:
            args.append(None)
            continue
        args.append(bytes(mm[at:at + n]))
        at += (n + 7) // 8 * 8
    return args


def _word_of(value, kind: str) -> int:
    if kind == "f":
        return _U64.unpack(struct.pack("<d", value))[0]
    return 0 if value is None else int(value) & _MASK


class Function:
    """A C function as the agent runs it: its callable, its arguments' layout, its kind."""

    def __init__(self, name: str, fmt: str, outputs: str) -> None:
        self.name, self.fmt, self.outputs = name, fmt, outputs
        self.call = _entry(name)
        self.plain = _plain(fmt)
        self.spec = asynchronous.spec(name) if not outputs else None
        self.makes_executor = name.startswith("aclnn") and name.endswith("GetWorkspaceSize")
        self.harmless = asynchronous.harmless(name)
        self.thread_local = name in asynchronous.THREAD_LOCAL
        self.unordered = name in asynchronous.UNORDERED
        self.synchronises = name in asynchronous.SYNCHRONISATIONS


_entry = None                 # adapter.entry: the callable behind a C function's name
_functions: dict[tuple[int, int], Function] = {}     # (face address, index): built once per process
_functions_lock = threading.Lock()
_epoch_lock = threading.Lock()
_RING_ENTRY = struct.Struct("<QI")
_U32_MASK = (1 << 32) - 1


def function(slot: Slot, face: int, index: int) -> Function:
    """The function a slot's call names (its name and letters read on its first call)."""
    fn = _functions.get((face, index))
    if fn is None:
        with _functions_lock:
            fn = _functions.get((face, index))
            if fn is None:
                fn = _functions[face, index] = Function(slot.text(ch.S_NAME, ch.NAME_BYTES),
                                                        slot.text(ch.S_FORMAT, ch.FORMAT_BYTES),
                                                        slot.text(ch.S_OUTPUTS, ch.OUTPUTS_BYTES))
    return fn


def grant_executor(executor: int, epoch: int) -> None:
    """Grant the executor an aclnnXGetWorkspaceSize just made to whichever thread queues its run
    (mdev.capi.asynchronous), stamped with ``epoch``, read before the call."""
    try:
        found = asynchronous.executor_device(executor)
    except AclError:
        return
    if found is not None:
        device, allocations = found
        _grant_executor(AREA.address, executor, device, epoch)
        local.grant_allocations(allocations, device, epoch)


def advance_epoch() -> None:
    """Void every grant given so far (mdev.capi.channel): a call that may make one false runs."""
    with _epoch_lock:
        AREA.epoch.value = (AREA.epoch.value + 1) & _U32_MASK or 1


class Calls:
    """The agent's side of one C thread: its calls and its ring, run on one Python thread."""

    def __init__(self, slot: Slot) -> None:
        self.slot = slot
        mm, base = AREA.mm, slot.offset
        self.doorbell = ctypes.c_uint32.from_buffer(mm, base + ch.S_DOORBELL)
        self.tail = ctypes.c_uint32.from_buffer(mm, base + ch.S_RING_TAIL)
        self.head = ctypes.c_uint32.from_buffer(mm, base + ch.S_RING_HEAD)
        self.failure = 0          # a ring entry's failure: the answer of the thread's next synchronisation
        self.granted_at = 0       # the epoch of the grants written into the slot (0: none)
        self.tables: list[list] = []      # the slot's grant tables as written (items or None)

    def serve(self) -> None:
        """The C thread's calls, for as long as it lives."""
        slot = self.slot
        slot.calls = self
        _local.slot = slot
        hooks.act_for(_U64.unpack_from(AREA.mm, slot.offset + ch.S_THREAD)[0])
        bell = AREA.address + slot.offset + ch.S_DOORBELL
        AREA.callers.add(self)
        try:
            while True:
                rung = self.doorbell.value
                state = slot.state
                if self.tail.value != self.head.value:     # appended before a CALL seen now: first
                    self.drain()
                if state == ch.CALL:
                    self.run()
                elif state == ch.CLOSED:
                    return
                else:
                    _wait_change(bell, rung, SPIN_NS, 1000, slot.agent_sleeps)      # without the GIL
        finally:
            AREA.callers.discard(self)
            slot.calls = None
            slot._state.value = ch.FREE

    def drain(self) -> None:
        """Run the ring's entries in order.  Their tasks are sent by this thread, together,
        when the ring is empty (not handed to the runtime's flusher thread one by one); the
        head moves after each run of entries seen at once (the C side then has room)."""
        mm, ring = AREA.mm, self.slot.offset + ch.S_RING
        entry, functions = _RING_ENTRY.unpack_from, _functions
        head, tail = self.head.value, self.tail.value
        with gathering():
            while head != tail:
                while head != tail:
                    at = ring + head % ch.RING_ENTRIES * ch.ENTRY_BYTES
                    fn = functions[entry(mm, at)]
                    try:
                        ret = fn.call(*fn.plain.unpack_from(mm, at + 16))
                    except BaseException:     # an mdev bug: said, and the thread's next synchronisation fails
                        print(f"mdev: {fn.name} failed inside the emulator:\n{traceback.format_exc()}",
                              file=sys.stderr, flush=True)
                        ret = E.ACL_ERROR_RT_INTERNAL_ERROR
                    if ret and not self.failure:
                        self.failure = ret
                    head = (head + 1) & _U32_MASK
                self.head.value = head
                tail = self.tail.value

    def others_drained(self) -> None:
        """Wait until the other threads' rings have run what they held: their calls returned
        before this one was made, so this one must see them."""
        for other in list(AREA.callers):
            if other is self:
                continue
            target = other.tail.value
            while (other.head.value - target) & _U32_MASK >= 1 << 31:
                time.sleep(0.00002)

    def run(self) -> None:
        """The call in the slot: its result written, DONE."""
        slot = self.slot
        mm, base = AREA.mm, slot.offset
        ok, stored = 1, 0
        fn = None
        try:
            fn = function(slot, _U64.unpack_from(mm, base + ch.S_FACE)[0], _U32.unpack_from(mm, base + ch.S_INDEX)[0])
            args = _arguments(mm, base, fn.fmt)
            if len(AREA.callers) > 1 and not fn.unordered:
                self.others_drained()
            epoch = AREA.epoch.value      # before the call: a change meanwhile voids its grants
            if fn.thread_local:
                self.void_grants()
            elif not fn.harmless:
                advance_epoch()
            value = fn.call(*args)
            if not (fn.harmless or fn.thread_local):
                advance_epoch()
            if isinstance(value, tuple):
                *values, ret = value
                for k, (v, kind) in enumerate(zip(values, fn.outputs)):
                    _U64.pack_into(mm, base + ch.S_OUT + 8 * k, _word_of(v, kind))
                stored = 1
            else:
                ret = value
            if ret == 0 and fn.spec is not None:
                self.grant(fn.spec, args)
            if fn.makes_executor:
                signed = ret == 0 and stored and signatures.signed(values[-1])
                _U32.pack_into(mm, base + ch.S_SIGNED, signed)
                if ret == 0 and stored:
                    grant_executor(values[-1], epoch)
            if ret == 0 and fn.synchronises and self.failure:
                ret, self.failure = self.failure, 0
            _U64.pack_into(mm, base + ch.S_RET, _word_of(ret, "i"))
        except BaseException:     # an mdev bug, not the caller's error: say so, fail the call
            name = fn.name if fn is not None else "a call"
            print(f"mdev: {name} failed inside the emulator:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
            ok = 0
        _U32.pack_into(mm, base + ch.S_STORED, stored)
        _U32.pack_into(mm, base + ch.S_OK, ok)
        slot.state = ch.DONE

    def void_grants(self) -> None:
        """This thread's grants no longer hold (its current context changes)."""
        _U32.pack_into(AREA.mm, self.slot.offset + ch.S_GRANT_EPOCH, 0)
        self.granted_at = 0

    def grant(self, spec: str, args: list) -> None:
        """Write into the slot what the call just showed valid (mdev.capi.asynchronous)."""
        epoch = AREA.epoch.value          # read first: a change while we look voids what we write
        try:
            found = asynchronous.grants(spec, args)
        except AclError:
            return
        if found is None:
            return
        mm, base = AREA.mm, self.slot.offset
        if self.granted_at != epoch:
            mm[base + ch.S_STREAMS:base + ch.S_RING] = bytes(ch.S_RING - ch.S_STREAMS)
            self.tables = [[None] * count for _, _, count, _ in _GRANT_TABLES]
        for t, items in enumerate(found):
            table = self.tables[t]
            at, size, count, layout = _GRANT_TABLES[t]
            for item in items:
                if item in table:
                    continue
                k = table.index(None) if None in table else hash(item) % count     # full: one makes room
                table[k] = item
                layout.pack_into(mm, base + at + size * k, *item[:-2], item[-2] + 1, item[-1])
                if at == ch.S_STREAMS:
                    _U64.pack_into(mm, base + ch.S_STOPS + 8 * k, _stop_address(item[0]))
        _U32.pack_into(mm, base + ch.S_GRANT_EPOCH, epoch)
        self.granted_at = epoch


# the slot's grant tables (mdev.capi.channel): where, entry size, entries, entry layout
# (an item's last two values are its device, stored + 1, and its flags)
def _stop_address(stream: int) -> int:
    """Where the program reads granted ``stream``'s failure word (0: its context does not
    stop on failure; mdev.capi.asynchronous.stop_word)."""
    found = asynchronous.stop_word(stream)
    if found is None:
        return 0
    segment, offset = found
    return PROGRAM.view(segment, offset + 8) + offset


_GRANT_TABLES = ((ch.S_STREAMS, 16, ch.STREAM_GRANTS, struct.Struct("<QII")),
                 (ch.S_RANGES, 24, ch.RANGE_GRANTS, struct.Struct("<QQII")),
                 (ch.S_EVENTS, 16, ch.EVENT_GRANTS, struct.Struct("<QII")))


def _control() -> None:
    """Start a thread for every slot the program opens (service slots join the pool)."""
    opened = ctypes.c_uint32.from_buffer(AREA.mm, ch.H_OPENED)
    address = AREA.address + ch.H_OPENED
    serving: dict[int, threading.Thread] = {}
    while True:
        seen = opened.value
        ending = False
        for slot in AREA.slots:
            if slot.state in (ch.FREE, ch.OPENING):
                continue
            if slot.index in serving and serving[slot.index].is_alive():
                # a thread past its serving (calls cleared) whose slot a new C thread took
                # already: that one's opening woke us before the thread ended, so look again soon
                ending |= slot.calls is None
                continue
            if slot.role() == ch.CALLER:
                serving[slot.index] = threading.Thread(target=Calls(slot).serve, daemon=True,
                                                       name=f"mdev-agent-slot-{slot.index}")
                serving[slot.index].start()
        futex.wait(address, seen, 0.001 if ending else 1.0)


AREA: Area | None = None
PROGRAM: ClientProgram | None = None


def main() -> None:
    global AREA, PROGRAM, _wait_change, _post, _grant_executor, _entry
    root, client, library = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    header = None
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)     # Ctrl-C is the program's; its exit ends us
        faulthandler.register(signal.SIGUSR1, all_threads=True)      # where is it stuck: kill -USR1
        # processes started from here (a board's supervisor) import this mdev, with this Python
        os.environ["PYTHONPATH"] = root
        os.environ.setdefault("MDEV_PYTHON", sys.executable)
        _wait_change = ctypes.CDLL(library).mdev_wait_change          # CDLL: no GIL while waiting
        _wait_change.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_long, ctypes.c_long, ctypes.c_void_p]
        _wait_change.restype = ctypes.c_uint32
        _post = ctypes.PyDLL(library).mdev_post                       # PyDLL: quick, the GIL kept
        _post.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p]
        _post.restype = None
        _grant_executor = ctypes.PyDLL(library).mdev_grant_executor               # quick too
        _grant_executor.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint32]
        _grant_executor.restype = ctypes.c_int
        AREA = Area(3)
        header = AREA.mm
        PROGRAM = ClientProgram(client, AREA)
        serve(PROGRAM)
        from mdev.capi import adapter, cmemory
        cmemory.serve(AREA, c_function)
        local.serve(AREA.mm, lambda face, index: _functions.get((face, index)))
        _entry = adapter.entry
        threading.Thread(target=_control, daemon=True, name="mdev-agent-control").start()
    except BaseException:
        why = f"the agent failed to start: {traceback.format_exc().strip().splitlines()[-1]}"
        print(f"mdev: {traceback.format_exc()}", file=sys.stderr, flush=True)
        if header is not None:
            data = why.encode()[:ch.ERROR_BYTES - 1] + b"\0"
            header[ch.H_ERROR:ch.H_ERROR + len(data)] = data
            _U32.pack_into(header, ch.H_READY, 2)
            futex.wake(AREA.address + ch.H_READY)
        os._exit(1)
    _U32.pack_into(header, ch.H_READY, 1)
    futex.wake(AREA.address + ch.H_READY)
    while os.read(4, 4096):          # nothing is ever written: EOF when the program is gone
        pass
    embedding.at_exit()
    os._exit(0)
