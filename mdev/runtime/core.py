"""Process-wide runtime state and the per-thread state of the calling thread.

One ``Runtime`` per host process holds the board attachment, the init and set-device
reference counts, contexts, streams and the memory table; each family module keeps its own
state (``Runtime.family``), which the runtime makes afresh with itself at finalize and fork.

Device numbers: the API takes and returns the device ids of this process's cluster node
(0..n-1); inside the runtime a device is its board index (``check_device`` turns the one
into the other, ``local_device`` turns it back), which is what links, pointers, contexts,
streams and tasks carry.  On node 0, and on every one-node board, the two are equal.  Each thread has its own
current context (hence current device), last error and error messages, as the CANN
runtime specifies.  Handles given to users are integers that are never reused, so a stale
handle is recognised instead of aliasing a newer object.
"""

from __future__ import annotations

import itertools
import os
import threading
from dataclasses import dataclass, field

from typing import Callable

from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev.runtime import hooks
from mdev.runtime.board_client import BoardClient
from mdev.runtime.memtable import MemoryTable

# handle ranges, one per kind, so a handle of the wrong kind is rejected, not confused
STREAM_HANDLES = 0x5_0000_0000
CONTEXT_HANDLES = 0xC_0000_0000


@dataclass(eq=False)
class Stream:
    handle: int
    device: int
    slot: int
    stream_id: int
    context: "Context"
    priority: int = 0
    flags: int = 0
    seq: int = 0                       # seq of the last task submitted (guarded by link.lock)
    failure_mode: int = C.ACL_CONTINUE_ON_FAILURE
    attributes: dict = field(default_factory=dict)
    res_limits: dict = field(default_factory=dict)   # aclrtDevResLimitType -> cores
    destroyed: bool = False
    recorder: object = None            # mdev.runtime.capture: its tasks are stored, not run
    # what mdev.runtime.trace.before_submit told about the host threads that submit to it
    host_floor: float = 0.0            # the latest host clock its tasks were submitted under (modelled)
    floor_rows: int = 0                # host_floor rows written for it
    host_marks: dict = field(default_factory=dict)   # host thread -> its latest record a task follows
    gen: int = 0                       # the slot's generation it was made at (control page stream_gen)

    @property
    def is_default(self) -> bool:
        return self.context.default_stream is self


@dataclass(eq=False)
class Context:
    handle: int
    device: int
    is_default: bool
    default_stream: Stream | None = None
    streams: set = field(default_factory=set)       # explicit streams
    sys_params: dict = field(default_factory=dict)
    destroyed: bool = False

    stop_on_failure: bool = False     # any stream of the context set ACL_STOP_ON_FAILURE


class ThreadState(threading.local):
    def __init__(self) -> None:
        self.context: Context | None = None
        self.last_error = 0
        self.messages: list[str] = []
        self.res_stream: Stream | None = None   # stream whose core limits the thread adopted
        self.capture_mode = 0                   # aclmdlRICaptureThreadExchangeMode (GLOBAL)
        self.last_task = 0                      # id of its last task on an explicit stream


class FamilyState:
    """The state one family module keeps: an attribute per maker, each made by calling it."""

    def __init__(self, makers: dict[str, Callable[[], object]]) -> None:
        self._makers = makers
        self.reset()

    def reset(self) -> None:
        for name, make in self._makers.items():
            setattr(self, name, make())


class Runtime:
    # aclInit's default device is opened implicitly by set_device, which mdev.runtime.devices.devices
    # (a module above this one) installs here
    open_default_device: Callable[[int], None] | None = None

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.thread = ThreadState()
        self.board = None
        self.init_count = 0
        self.finalized = False
        self.default_device: int | None = None
        self.device_refs: dict[int, int] = {}
        # what several families read stays here: peer access (memory, sync, devices, collectives),
        # the op wait timeout (sync, capture), the callback hub (execution makes it, finalize
        # in devices closes it), the error-message mode (boundary, devices)
        self.peer_access: set[tuple[int, int]] = set()   # (device, peer) pairs enabled
        self.default_contexts: dict[int, Context] = {}
        self.contexts: dict[int, Context] = {}
        self.streams: dict[int, Stream] = {}
        self.op_wait_timeout = 0          # seconds, 0 = waits never time out
        self.callbacks = None             # CallbackHub, made on first use
        self.messages_per_process = False    # aclInit err_msg_mode "1": one message list for all threads
        self.process_messages: list[str] = []
        self._handles = itertools.count(1)
        self.memory = MemoryTable(self)
        # each family's own state (Runtime.family), kept across a reset and made afresh by it
        self.families: list[FamilyState] = self.__dict__.get("families", [])
        for state in self.families:
            state.reset()

    def family(self, **makers: Callable[[], object]) -> FamilyState:
        """A family module's own state, one attribute per maker: made now, and made afresh
        whenever the runtime is (at finalize, in a forked child), so core knows none of it."""
        state = FamilyState(makers)
        self.families.append(state)     # at a module's import: no lock (an import may wait on one)
        return state

    # -- board
    def attach(self):
        if self.board is None:
            with self.lock:
                if self.board is None:
                    try:
                        self.board = BoardClient()
                    except AclError:
                        raise
                    except Exception as exc:
                        raise AclError(E.ACL_ERROR_RT_DRV_INTERNAL_ERROR, f"cannot attach to the board: {exc}") from exc
                    hooks.attached(self.board)     # tracing, checking (also of programs without init)
        return self.board

    def device_count(self) -> int:
        """Devices this process sees: its node's."""
        return len(self.attach().devices)

    def link(self, device: int):
        board = self.board
        if board is not None:
            link = board.links.get(device)      # every task asks: the dict first
            if link is not None:
                return link
        return self.attach().link(device)

    def check_device(self, device) -> int:
        """The board index of the user's device id ``device`` (of this process's node)."""
        if not isinstance(device, int) or isinstance(device, bool):
            raise AclError(E.ACL_ERROR_INVALID_PARAM, f"device id must be an int, got {device!r}")
        devices = self.attach().devices
        if not 0 <= device < len(devices):
            where = f"node {self.board.node.index} has" if self.board.topology.node_count > 1 else "board has"
            raise AclError(E.ACL_ERROR_RT_INVALID_DEVICEID, f"device {device} does not exist ({where} {len(devices)})")
        return devices[device]

    def local_device(self, device: int) -> int:
        """The user's device id of board device ``device`` (one of this process's node)."""
        return device - self.attach().devices.start

    def new_handle(self, base: int) -> int:
        return base + next(self._handles)

    def keep(self, table: dict, obj) -> int:
        """A new object: its handle names it from now on."""
        with self.lock:
            table[obj.handle] = obj
        return obj.handle

    def forget(self, table: dict, obj) -> None:
        """A destroyed object: its handle no longer names anything."""
        obj.destroyed = True
        with self.lock:
            table.pop(obj.handle, None)

    # -- per-thread context
    def current_context(self) -> Context:
        """The calling thread's context; the aclInit default device is set implicitly."""
        ctx = self.thread.context
        if ctx is None or ctx.destroyed:
            if self.default_device is not None and self.open_default_device is not None:
                self.open_default_device(self.default_device)
                return self.thread.context
            raise AclError(E.ACL_ERROR_RT_CONTEXT_NULL,
                           "no current context: call set_device (or create_context) on this thread first")
        return ctx

    def stream(self, handle, context: Context | None = None) -> Stream:
        """The stream a handle names; 0/None is the current context's default stream."""
        ctx = context or self.current_context()
        if handle is None or handle == 0:
            return ctx.default_stream
        stream = self.streams.get(handle) if isinstance(handle, int) else None
        if stream is None or stream.destroyed:
            raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{handle!r} is not a live stream handle")
        return stream

    def stream_in_context(self, handle) -> Stream:
        """A stream usable for submission from this thread (its context must be current)."""
        ctx = self.thread.context
        if ctx is None or ctx.destroyed:
            ctx = self.current_context()
        stream = self.streams.get(handle) if handle and type(handle) is int else None
        if stream is None or stream.destroyed:
            stream = self.stream(handle, ctx)       # the default stream, or what is wrong
        if stream.context is not ctx:
            raise AclError(E.ACL_ERROR_RT_STREAM_CONTEXT,
                           f"stream {handle:#x} belongs to a context of device {stream.device}, "
                           f"not the current context (device {ctx.device})")
        return stream

    def reset_after_fork(self) -> None:
        """A forked child starts unattached: the parent's sockets and handles are not its own."""
        board = self.board
        self.__init__()
        if board is not None:
            try:
                board.close_after_fork()
            except Exception:
                pass  # never fail a fork over it


def lookup(table: dict, handle, what: str, gone=lambda obj: getattr(obj, "destroyed", False),
           code: int = E.ACL_ERROR_RT_PARAM_INVALID):
    """The live object a user's handle names: NULL gives 100000, an unknown or dead handle
    ``code`` (handles are never reused, so a stale one cannot alias a newer object)."""
    obj = table.get(handle) if isinstance(handle, int) and not isinstance(handle, bool) else None
    if obj is None or gone(obj):
        raise AclError(E.ACL_ERROR_INVALID_PARAM if not handle else code, f"{handle!r} is not a live {what}")
    return obj


RUNTIME = Runtime()
os.register_at_fork(after_in_child=RUNTIME.reset_after_fork)


def _mark_process() -> None:
    """Say that this process runs mdev's runtime in Python: mdev's C library, loaded here too,
    then shares it instead of starting a host agent (its memory, streams, last error are
    this runtime's)."""
    os.environ["MDEV_RUNTIME_PID"] = str(os.getpid())


_mark_process()
os.register_at_fork(after_in_child=_mark_process)

