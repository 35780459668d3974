"""A rank's communicator: its scratch buffer, notifies, channels to its peers, side streams.

    config (HcclCommConfig as a dict, mdev.hccl_types.comm_config): Settings -- buffer size,
      exec timeout, name, deterministic, algorithm; the rest is checked and kept
    init (every rank, through a rendezvous):
      prepare   scratch (HCCL buffer) + notifies + pinned staging  --> "join" card
      share     IPC keys for the peers' processes (pid-checked)    --> "keys" card
      connect   import the peers' scratch and notifies             --> Channel / Inbox per peer
    operation:  mdev.runtime.collectives.plan queues tasks on the caller's stream and on the
                communicator's side streams; the devices run them (no host round trip)
    destroy:    ends its queued work, tells its peers (their error words), frees what it made
                (with the last of its ranks in this process: those write each other's buffers)

Scratch layout (device memory of the rank's device, shared with every peer):

    [0, 16)             error word: HcclResult that broke the communicator, the rank it names
    [64, 96)            operation descriptor, 2 words, of the two latest collectives (by parity)
    [128, 128 + 32 p)   point-to-point descriptors with each peer: our send to it, our receive from it
    [RUN, RUN + 128)    run words of whole collectives (mdev.board.collective_run; RUN: the
                        next multiple of 64)
    [HEADER, ...)       landing slots: SLOTS per peer (in rank order), ``slot_bytes`` each;
                        a whole collective of ranks of several processes uses their first
                        half as its IN area, the second as its OUT area (``area`` bytes each)

``slot_bytes`` comes from the configuration's hcclBufferSize or HCCL_BUFFSIZE (MB, default 200,
capped at 1/8 of the device's HBM so that small emulated boards work): the buffer holds 2
slots per peer.  An operation whose
transfers are larger than a slot runs in parts (as HCCL loops over its buffer).  Pairs
without peer access get, in the receiver's process, pinned staging slots of the same size.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from mdev import constants as C
from mdev.errors import AclError
from mdev.hccl_types import (HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET, HCCL_COMM_DEFAULT_BUFFSIZE,
                             HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET, HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET,
                             HCCL_E_PARA, HCCL_E_PTR, HCCL_EXEC_TIMEOUT_DEFAULT, HcclError, comm_config)
from mdev.memory import address
from mdev.runtime.devices import devices
from mdev.runtime.sync import ipc, notify
from mdev.runtime.memory import memops
from mdev.runtime import streams
from mdev.runtime.collectives import select
from mdev.runtime.collectives.transport import DIRECT, FABRIC, SLOTS, STAGED, Channel, Inbox, Signal, pair
from mdev.runtime.core import RUNTIME as rt
from mdev.taskspec import COMM_LEFT, RUN_BYTES
from mdev.runtime.core import Context, Stream
from mdev.runtime.memtable import Allocation, Operand


# this module's part of the runtime's state, made afresh with it (finalize, fork)
held = rt.family(comms=dict)

COMM_HANDLES = 0xCC_0000_0000
ERR, DESC, P2P_DESC = 0, 64, 128          # header offsets (bytes)
PAGE = address.NORMAL_PAGE
MIN_SLOT = 64 << 10


def env_seconds(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        raise HcclError(HCCL_E_PARA, f"{name}={value!r} is not a number of seconds") from None
    if seconds < 0:
        raise HcclError(HCCL_E_PARA, f"{name}={value!r} must not be negative")
    return seconds


@dataclass(frozen=True)
class Settings:
    """What a communicator takes from its HcclCommConfig (None: the environment's / default)."""
    buffer_mb: int | None = None
    timeout_s: float | None = None
    name: str = ""
    deterministic: int = 0
    algo: str | None = None
    window_bytes: int = 16 << 30               # hcclSymWinMaxMemSizePerRank (GB) per symmetric window


_TEXTS = {"hcclCommName": 128, "hcclUdi": 128, "hcclAlgo": 1600, "hcclRetryEnable": 50, "hcclRetryParams": 128,
          "hcclBufferName": 128}


def settings(config: dict | None) -> Settings:
    """The Settings of an HcclCommConfig (a dict of its field names; None: no configuration).
    Fields mdev cannot use (expansion mode, RDMA class and level, world rank, job, retry, QoS)
    are checked for their type and kept by no one: mdev runs every operation one way."""
    if config is None:
        return Settings()
    if not isinstance(config, dict):
        raise HcclError(HCCL_E_PARA, f"config must be an HcclCommConfig (a dict), got {type(config).__name__}")
    fields = comm_config()
    unknown = sorted(set(config) - set(fields))
    if unknown:
        raise HcclError(HCCL_E_PARA, f"config has no field {unknown[0]!r} (HcclCommConfig: {', '.join(fields)})")
    c = dict(fields, **config)
    for name, limit in _TEXTS.items():
        if not isinstance(c[name], str) or len(c[name].encode()) >= limit:
            raise HcclError(HCCL_E_PARA, f"config {name} must be a string of fewer than {limit} bytes")
    for name in set(fields) - set(_TEXTS):
        if isinstance(c[name], bool) or not isinstance(c[name], int):
            raise HcclError(HCCL_E_PARA, f"config {name} must be an integer, got {c[name]!r}")
    size, det, timeout = c["hcclBufferSize"], c["hcclDeterministic"], c["hcclExecTimeOut"]
    if size != HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET and size < 1:
        raise HcclError(HCCL_E_PARA, f"config hcclBufferSize {size}: at least 1 (MB)")
    if det != HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET and det not in (0, 1, 2):
        raise HcclError(HCCL_E_PARA, f"config hcclDeterministic {det}: 0, 1 or 2")
    if timeout != HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET and timeout <= 0:
        raise HcclError(HCCL_E_PARA, f"config hcclExecTimeOut {timeout}: a number of seconds above 0")
    if c["hcclAlgo"]:
        select.parse_algo(c["hcclAlgo"])            # refused now, not once the peers are connected
    if c["hcclSymWinMaxMemSizePerRank"] < 1:
        raise HcclError(HCCL_E_PARA, "config hcclSymWinMaxMemSizePerRank: at least 1 (GB)")
    return Settings(None if size == HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET else size,
                    None if timeout == HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET else float(timeout),
                    c["hcclCommName"], 0 if det == HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET else det,
                    c["hcclAlgo"] or None, c["hcclSymWinMaxMemSizePerRank"] << 30)


def buffsize(hbm_bytes: int, configured_mb: int | None = None) -> int:
    """The HCCL buffer in bytes: the configuration's, HCCL_BUFFSIZE (MB), or the default
    capped for small boards."""
    if configured_mb is not None:
        return configured_mb << 20
    value = os.environ.get("HCCL_BUFFSIZE", "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise HcclError(HCCL_E_PARA, f"HCCL_BUFFSIZE={value!r} must be an integer >= 1 (MB)")
        return int(value) << 20
    return min(HCCL_COMM_DEFAULT_BUFFSIZE << 20, hbm_bytes // 8)


@dataclass(eq=False)
class Side:
    """A side stream of the rank and its local notifies: fork (main -> side), mid and join
    (side -> main; mid for a signal during a round, join at its end), resume (main -> side
    during a round: a notify of its own, as the side may not have taken the fork yet)."""
    stream: Stream
    fork: Signal
    mid: Signal
    join: Signal
    resume: Signal


@dataclass(eq=False)
class Comm:
    handle: int
    rank: int
    nranks: int
    device: int
    ctx: Context
    pid: int
    timeout_s: float                            # HCCL_EXEC_TIMEOUT: device-side waits
    slot_bytes: int
    scratch: Operand                            # the whole scratch buffer
    header: int                                 # bytes before the landing slots
    run_at: int                                 # offset of the run words
    own_notifies: list = field(default_factory=list)    # runtime Notify objects made here
    ready_in: dict[int, list] = field(default_factory=dict)    # peer -> our Notify per slot (it records)
    ack_out: dict[int, list] = field(default_factory=dict)     # peer -> our Notify per slot (it acks)
    staging: Allocation | None = None           # our pinned staging slots (peers without peer access)
    stage_at: dict[int, int] = field(default_factory=dict)     # peer -> offset of its staging slots
    # filled by connect
    devices: list[int] = field(default_factory=list)           # rank -> device
    pids: list[int] = field(default_factory=list)              # rank -> process
    levels: select.Levels | None = None
    choice: select.Choice | None = None
    channels: dict[int, Channel] = field(default_factory=dict)
    inboxes: dict[int, Inbox] = field(default_factory=dict)
    peer_headers: dict[int, tuple] = field(default_factory=dict)  # peer -> location of its scratch
    imports: list = field(default_factory=list)                 # ("mem", key) / ("notify", handle) / ("pinned", alloc)
    sides: list[Side] = field(default_factory=list)
    work_buffer: Operand | None = None          # hierarchical reduce-scatter's partial sums
    ops: int = 0                                # collectives issued (descriptor parity, check)
    p2p: dict[tuple[int, int], int] = field(default_factory=dict)   # (peer, direction) -> count
    queued: dict[int, tuple[Stream, int]] = field(default_factory=dict)   # caller's stream handle -> (it, the
                                                                          # seq of its latest operation's last task)
    last: Stream | None = None                  # the caller's stream of the latest collective (run_after)
    switches: dict[int, Signal] = field(default_factory=dict)  # caller's stream handle -> its "the one before is done"
    family: list = field(default_factory=list)  # the ranks of this communicator made in this process (itself too)
    name: str = ""                              # hcclCommName, or made from the rendezvous
    rid: str = ""                               # the rendezvous its ranks met in (sub-communicators derive theirs)
    parent: int = 0                             # the global communicator of a sub-communicator
    settings: Settings = field(default_factory=Settings)
    ranges: dict[int, int] = field(default_factory=dict)        # HcclCommSetMemoryRange: base -> size
    # whole collectives (mdev.runtime.collectives.whole): DIRECT (ranks of one process), STAGED
    # (of several), None (step by step only); each rank's places for the coll_run task
    whole: str | None = None
    places: bytes = b""                         # per rank, int64: device, error word, run words, IN, OUT, pid
    area: int = 0                               # bytes of the smallest IN (and OUT) area
    formulas: dict = field(default_factory=dict)   # (operation, algorithm, bytes) -> HCCL's time (ns)
    orders: dict = field(default_factory=dict)     # a whole reduction's chunks (packed), by operation
    active: dict[int, int] = field(default_factory=dict)        # HcclCommActivateCommMemory: address -> size
    destroyed: bool = False
    freed: bool = False

    # -- places in the scratch buffer
    def at(self, offset: int, nbytes: int) -> Operand:
        return self.scratch.slice(offset, nbytes)

    def nowhere(self) -> Operand:
        """Where an operation of no elements points (nothing is read or written)."""
        return self.at(DESC, 0)

    def loc(self, offset: int) -> tuple:
        """Device location of a scratch offset (for tasks)."""
        return self.at(offset, 8).location()

    def slot_offset(self, peer: int, k: int) -> int:
        index = peer if peer < self.rank else peer - 1
        return self.header + (index * SLOTS + k) * self.slot_bytes

    def guard(self, peer: int) -> tuple:
        """CommGuard of a wait for ``peer`` (mdev.board.tasks)."""
        pid = self.pids[peer] if self.pids[peer] != self.pid else 0
        return (pid, peer, self.peer_headers[peer], self.loc(ERR))

    def side(self, k: int) -> Side:
        """Side stream k, made on first use in the communicator's context."""
        while len(self.sides) <= k:
            st = streams.new_stream(self.ctx)
            self.sides.append(Side(st, *(self._own_signal() for _ in range(4))))
        return self.sides[k]

    @contextmanager
    def on_device(self):
        """This thread works in the communicator's context for a while (allocations)."""
        previous = rt.thread.context
        rt.thread.context = self.ctx
        try:
            yield
        finally:
            rt.thread.context = previous

    def work(self, nbytes: int) -> Operand:
        """Device memory for partial results (one landing slot's worth, made on first use and
        kept: queued operations may still use it)."""
        if self.work_buffer is None:
            ptr = memops.malloc(self.slot_bytes, C.ACL_MEM_MALLOC_HUGE_FIRST)
            self.work_buffer = rt.memory.operand(ptr, self.slot_bytes, write=True, what="HCCL work buffer")
        return self.work_buffer.slice(0, nbytes)

    def run_after(self, st: Stream | None) -> None:
        """A collective is issued on ``st`` (None: captured, no order with eager work): it runs
        after the one before, whatever stream that was issued on -- as HCCL's do, through the
        communicator's own streams -- by waiting for what that stream has queued so far."""
        last, self.last = self.last, st
        if st is None or last is None or last is st or last.destroyed:
            return
        switch = self.switches.get(st.handle)
        if switch is None:       # one notify per waiting stream: its waits are in the order of its records
            switch = self.switches[st.handle] = self._own_signal()
        switch.record(last)
        switch.wait(st, self.timeout_s)

    def _own_signal(self) -> Signal:
        """A local notify of the communicator's own, as its tasks name it."""
        return _signal(self._notify())

    def _notify(self):
        n = notify.new_notify(self.device)
        self.own_notifies.append(n)
        return n


def lookup(handle) -> Comm:
    if handle is None or handle == 0:
        raise HcclError(HCCL_E_PTR, "comm is NULL")
    comm = held.comms.get(handle) if isinstance(handle, int) and not isinstance(handle, bool) else None
    if comm is None or comm.destroyed:
        raise HcclError(HCCL_E_PARA, f"{handle!r} is not a live communicator (destroyed, or never made)")
    return comm


# ---------------------------------------------------------------------------- init
def prepare(rank: int, nranks: int, device: int, rid: str = "", config: Settings = Settings()) -> tuple[Comm, dict]:
    """This rank's own resources on board device ``device`` (a board index: ranks of other
    cluster nodes name theirs in the cards), for rendezvous ``rid``; returns the
    communicator and its "join" card."""
    topo = rt.attach().topology
    slot_bytes = _slot_bytes(buffsize(topo.device(device).hbm_bytes, config.buffer_mb), nranks)
    run_at = run_offset(nranks)
    header = address.align_up(run_at + RUN_BYTES, PAGE)
    nbytes = header + SLOTS * max(nranks - 1, 0) * slot_bytes
    previous = rt.thread.context
    devices.set_device(rt.local_device(device))   # the communicator holds the device until destroyed
    ctx = rt.default_contexts[device]
    try:
        ptr = memops.malloc(nbytes, C.ACL_MEM_MALLOC_HUGE_FIRST)
    except AclError:
        devices.reset_device(rt.local_device(device))
        raise
    finally:
        if previous is not None and not previous.destroyed:
            rt.thread.context = previous
    scratch = rt.memory.operand(ptr, nbytes, write=True, what="HCCL buffer")
    timeout = config.timeout_s if config.timeout_s is not None else env_seconds("HCCL_EXEC_TIMEOUT",
                                                                                 HCCL_EXEC_TIMEOUT_DEFAULT)
    comm = Comm(rt.new_handle(COMM_HANDLES), rank, nranks, device, ctx, os.getpid(), timeout, slot_bytes, scratch,
                header, run_at, name=config.name or f"hccl_comm_{rid[:16]}", rid=rid, settings=config)
    for peer in range(nranks):
        if peer != rank:
            comm.ready_in[peer] = [comm._notify() for _ in range(SLOTS)]
            comm.ack_out[peer] = [comm._notify() for _ in range(SLOTS)]
    card = {"rank": rank, "nranks": nranks, "pid": comm.pid, "device": device, "scratch": ptr,
            "slot_bytes": slot_bytes, "header": header}
    return comm, card


def run_offset(nranks: int) -> int:
    """Where the run words lie in a scratch buffer of a communicator of ``nranks``."""
    return address.align_up(P2P_DESC + 32 * nranks, 64)


def _slot_bytes(total: int, nranks: int) -> int:
    if nranks < 2:
        return MIN_SLOT
    return max(MIN_SLOT, (total // (SLOTS * (nranks - 1))) // PAGE * PAGE)


def share(comm: Comm, joined: list[dict]) -> dict:
    """The "keys" card: staging slots for the peers that cannot reach this device, and IPC
    keys of this rank's scratch and notifies for the peers in other processes."""
    topo = rt.attach().topology
    _check_joined(comm, joined)
    comm.devices = [c["device"] for c in joined]
    comm.pids = [c["pid"] for c in joined]
    kinds = {q: pair(topo, comm.devices[q], comm.device) for q in range(comm.nranks) if q != comm.rank}
    blind = [q for q, kind in kinds.items() if kind == STAGED]        # they cannot reach us
    if blind:
        comm.staging = rt.memory.new_pinned(SLOTS * len(blind) * comm.slot_bytes)
        comm.stage_at = {q: i * SLOTS * comm.slot_bytes for i, q in enumerate(blind)}
    _grant_peers(comm, blind)
    card: dict = {"rank": comm.rank, "stage": comm.staging.segment.name if comm.staging else None,
                  "stage_size": comm.staging.size if comm.staging else 0, "stage_at": comm.stage_at,
                  "scratch_key": None, "notifies": {}, "slots": {}}
    near = [q for q, kind in kinds.items() if kind != FABRIC and comm.pids[q] != comm.pid]
    if near:               # peers of this node in other processes: IPC, for their pids only
        page = comm.scratch.allocation.page              # IPC shares whole pages
        key = ipc.ipc_mem_get_export_key(comm.scratch.ptr, address.align_up(comm.scratch.nbytes, page), ipc.KEY_LEN, 0)
        ipc.ipc_mem_set_import_pid(key, sorted({comm.pids[q] for q in near}))
        card["scratch_key"] = key
        for q in near:
            keys = []
            for n in comm.ready_in[q] + comm.ack_out[q]:
                keys.append(ipc.notify_get_export_key(n.handle, ipc.KEY_LEN, 0))
                ipc.notify_set_import_pid(n.handle, [comm.pids[q]])
            card["notifies"][str(q)] = keys
    for q, kind in kinds.items():
        if kind == FABRIC:     # another node: registered by slot, as RDMA memory is
            card["slots"][str(q)] = [(n.device, n.slot, n.uid) for n in comm.ready_in[q] + comm.ack_out[q]]
    return card


def _grant_peers(comm: Comm, blind: list[int]) -> None:
    """Peers in other processes write, read and check this rank's scratch, from their devices,
    and the blind ones copy into its staging slots: devices let a process touch only its
    own memory and what it was granted (mdev.board.device), so grant it them -- before the
    keys card that tells them where it is goes out."""
    others = sorted({pid for q, pid in enumerate(comm.pids) if q != comm.rank and pid != comm.pid})
    if others:
        rt.link(comm.device).request("grant", comm.scratch.ptr - address.device_base(comm.device),
                                     comm.scratch.nbytes, others)
    for q in blind:
        if comm.pids[q] != comm.pid:
            rt.link(comm.devices[q]).request("admit_segment", comm.staging.segment.name, [comm.pids[q]])


def _check_joined(comm: Comm, joined: list[dict]) -> None:
    for c in joined:
        if c["nranks"] != comm.nranks:
            raise HcclError(HCCL_E_PARA, f"rank {c['rank']} made its communicator for {c['nranks']} ranks, "
                            f"rank {comm.rank} for {comm.nranks}")
    seen: dict[int, int] = {}
    for c in joined:
        if c["device"] in seen:
            raise HcclError(HCCL_E_PARA, f"ranks {seen[c['device']]} and {c['rank']} are both on device {c['device']}")
        seen[c["device"]] = c["rank"]


def connect(comm: Comm, joined: list[dict], keyed: list[dict], local: dict[int, Comm]) -> None:
    """Channels and inboxes towards every peer, from their cards (``local``: the peers made in
    this process, whose objects are used as they are)."""
    topo = rt.attach().topology
    comm.levels = select.levels(topo, comm.devices)
    comm.choice = select.parse_algo(comm.settings.algo or os.environ.get("HCCL_ALGO"))
    me = comm.rank
    for q in range(comm.nranks):
        if q == me:
            continue
        j, k = joined[q], keyed[q]
        comm.peer_headers[q] = ("d", j["device"], j["scratch"] - address.device_base(j["device"]))
        kind = pair(topo, comm.device, j["device"])
        if kind == DIRECT:
            rt.peer_access.add((comm.device, j["device"]))
        peer = local.get(q)
        if peer is not None:                                  # same process: its objects
            ready = [_signal(n) for n in peer.ready_in[me]]
            acks = [_signal(n) for n in peer.ack_out[me]]
            scratch_ptr = peer.scratch.ptr
        elif kind == FABRIC:                                  # another node: by slot
            signals = [Signal(*n) for n in k["slots"][str(me)]]
            ready, acks = signals[:SLOTS], signals[SLOTS:]
            scratch_ptr = j["scratch"]
        else:
            handles = [ipc.notify_import_by_key(key, C.ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT) for key in k["notifies"][str(me)]]
            comm.imports += [("notify", h) for h in handles]
            ready = [_signal(notify.get(h)) for h in handles[:SLOTS]]
            acks = [_signal(notify.get(h)) for h in handles[SLOTS:]]
            scratch_ptr = j["scratch"]
            if kind == DIRECT and not any(what == "mem" and key == k["scratch_key"] for what, key in comm.imports):
                _import_scratch(k["scratch_key"])
                comm.imports.append(("mem", k["scratch_key"]))
        # our sending end: its landing slots for us (or its staging slots), its ready notifies
        slot_off = j["header"] + ((me if me < q else me - 1) * SLOTS) * comm.slot_bytes
        if kind == DIRECT:
            out = [rt.memory.operand(scratch_ptr + slot_off + i * comm.slot_bytes, comm.slot_bytes, write=True,
                                     what="peer HCCL buffer") for i in range(SLOTS)]
        elif kind == FABRIC:
            base = scratch_ptr - address.device_base(j["device"]) + slot_off
            out = [("d", j["device"], base + i * comm.slot_bytes) for i in range(SLOTS)]
        else:
            stage = _stage_of(comm, k, peer, me)
            out = [stage.slice(i * comm.slot_bytes, comm.slot_bytes) for i in range(SLOTS)]
        comm.channels[q] = Channel(q, out, ready, [_signal(n) for n in comm.ack_out[q]], comm.guard(q),
                                   comm.timeout_s, kind)
        # our receiving end
        mine = [comm.at(comm.slot_offset(q, i), comm.slot_bytes) for i in range(SLOTS)]
        staging = None
        if pair(topo, j["device"], comm.device) == STAGED:
            staging = [rt.memory.operand(comm.staging.ptr + comm.stage_at[q] + i * comm.slot_bytes, comm.slot_bytes,
                                         write=True, what="HCCL staging") for i in range(SLOTS)]
        comm.inboxes[q] = Inbox(q, mine, [_signal(n) for n in comm.ready_in[q]], acks, comm.guard(q),
                                comm.timeout_s, staging)
    comm.family = [local[q] for q in sorted(local)] if local else [comm]
    _whole(comm, joined, topo)


def _whole(comm: Comm, joined: list[dict], topo) -> None:
    """Whether the communicator runs collectives whole (every pair of ranks with peer access),
    and where each rank's run words and areas lie."""
    if any(pair(topo, a["device"], b["device"]) != DIRECT for a in joined for b in joined if a is not b):
        return
    comm.whole = DIRECT if all(pid == comm.pid for pid in comm.pids) else STAGED
    places, areas = [], []
    for q, j in enumerate(joined):
        base = j["scratch"] - address.device_base(j["device"])
        area = SLOTS * max(comm.nranks - 1, 0) * j["slot_bytes"] // 2 // 64 * 64
        places.append((j["device"], base + ERR, base + comm.run_at, base + j["header"], base + j["header"] + area,
                       0 if comm.pids[q] == comm.pid else comm.pids[q]))
        areas.append(area)
    comm.places, comm.area = np.array(places, np.int64).tobytes(), min(areas)


# a peer's scratch imported by this process: several ranks of it (threads) that reach one
# peer of another process share its one import (a process maps memory once)
_scratch_lock = threading.Lock()
_scratch_users: dict[str, int] = {}


def _import_scratch(key: str) -> None:
    with _scratch_lock:
        if not _scratch_users.get(key):
            ipc.ipc_mem_import_by_key(key, C.ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS)
        _scratch_users[key] = _scratch_users.get(key, 0) + 1


def _close_scratch(key: str) -> None:
    with _scratch_lock:
        _scratch_users[key] -= 1
        if _scratch_users[key]:
            return
        del _scratch_users[key]
        ipc.ipc_mem_close(key)


def _stage_of(comm: Comm, keyed: dict, peer: Comm | None, me: int) -> Operand:
    """The peer's pinned staging slots for us, mapped into this process if it is another."""
    if peer is not None:
        base = peer.staging.ptr + peer.stage_at[me]
    else:
        alloc = rt.memory.map_pinned(keyed["stage"], keyed["stage_size"])
        comm.imports.append(("pinned", alloc))
        base = alloc.ptr + int(keyed["stage_at"][str(me)])
    return rt.memory.operand(base, SLOTS * comm.slot_bytes, write=True, what="peer HCCL staging")


def _signal(n) -> Signal:
    return Signal(n.device, n.slot, n.uid)


def register(comm: Comm) -> int:
    with rt.lock:
        held.comms[comm.handle] = comm
    return comm.handle


# ---------------------------------------------------------------------------- destroy
def destroy(comm: Comm) -> None:
    """End the communicator's queued work, tell the peers, free what it made.

    Work still queued fails (as HcclCommDestroy ends the operator being executed) rather
    than being waited for: a peer that never takes part would hold the destroy for
    HCCL_EXEC_TIMEOUT.  Its error word says so first (COMM_LEFT) -- its own tasks give up
    at once and announce nothing more, and the peers' waits for what it never recorded
    give up -- then the destroy waits until its streams got past the communicator's tasks,
    which no longer wait for anything, so nothing runs on the buffers freed next."""
    comm.destroyed = True
    with rt.lock:
        held.comms.pop(comm.handle, None)
    targets = [(s.stream, s.stream.seq) for s in comm.sides] + list(comm.queued.values())
    try:
        word = rt.memory.view(comm.at(ERR, 16)).view(np.int64)
        if not word[0]:
            word[1], word[0] = comm.rank, COMM_LEFT
        streams.wait_targets(targets, consume=False)
    except AclError:
        pass                                   # failures are the operations' to report
    for side in comm.sides:
        streams.release(side.stream, drain=False)
    # peers of this process write our buffer and record our notifies with no import that
    # would keep them alive: they go with the last of the family, never under a peer in use.
    # Ranks destroyed by their own threads at once may each see the family all destroyed:
    # each comm is claimed under the lock, so it is freed once
    with _freeing:
        last = all(c.destroyed for c in comm.family)
        claimed = [c for c in comm.family or [comm] if last and not c.freed]
        for c in claimed:
            c.freed = True
    for c in claimed:
        _free(c)


_freeing = threading.Lock()


def _free(comm: Comm) -> None:
    for kind, what in comm.imports:
        try:
            if kind == "mem":
                _close_scratch(what)
            elif kind == "notify":
                notify.destroy_notify(what)
            else:
                rt.memory.unmap_pinned(what)
        except AclError:
            pass
    for n in comm.own_notifies:
        try:
            notify.destroy_notify(n.handle)
        except AclError:
            pass
    try:
        memops.free(comm.scratch.ptr)
        if comm.work_buffer is not None:
            memops.free(comm.work_buffer.ptr)
        if comm.staging is not None:
            memops.free_host(comm.staging.ptr)
        devices.reset_device(rt.local_device(comm.device))
    except AclError:
        pass                                   # the device is gone, and its memory with it
