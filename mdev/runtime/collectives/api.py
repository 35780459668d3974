"""HCCL's functions: arguments checked here, then a Plan of tasks on the caller's stream.

    mdev.hccl (or a C adapter) --boundary (HcclResult codes)--> these @api functions
        --> comm (init / destroy), select.layout (algorithm), algorithms.* (the tasks)

Each operation validates its arguments (counts, data type, reduce op, ranks, that the
buffers are device memory of the communicator's device and large enough, that the stream
belongs to that device), then queues its whole schedule and returns: as in HCCL, an
operation is asynchronous on its stream.  Inside group_start / group_end, send and recv
calls are gathered and issued at group_end as one batch_send_recv per communicator and
stream (their transfers run at once); other operations run when called (they are
asynchronous already); making a communicator inside a group is refused (HCCL_E_NOT_SUPPORT:
mdev cannot defer it, and one thread making the ranks of several devices would wait for
itself).

Communicators take an HcclCommConfig (a dict, mdev.hccl_types.comm_config; comm.settings);
sub-communicators of a set of ranks meet in a rendezvous derived from their parent's
(create_sub_comm_config).  The V variants exchange blocks pairwise: all_gather_v and
all_to_all_vc as all_to_all does, reduce_scatter_v as the mesh reduce-scatter does.
Memory ranges, activated memory and symmetric windows are checked and kept: mdev's
operations read and write any device memory of the rank's device, so they need no more.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from contextlib import contextmanager

import numpy as np

from mdev.hccl_types import (DATA_TYPE_NAMES, DATA_TYPE_NUMPY, DATA_TYPE_SIZE, HCCL_COMM_CONFIG_RETRY,
                             HCCL_CONNECT_TIMEOUT_DEFAULT, HCCL_DETERMINISTIC, HCCL_E_NOT_SUPPORT, HCCL_E_PARA,
                             HCCL_E_PTR, HCCL_RECV, HCCL_SEND, REDUCE_OP_NAMES, HcclError)
from mdev.runtime.boundary import api
from mdev.runtime.collectives import algorithms as A
from mdev.runtime import trace
from mdev.runtime.collectives import comm as comms
from mdev.runtime.collectives import whole
from mdev.runtime.collectives.plan import Plan
from mdev.runtime.collectives.rendezvous import FileRendezvous, LocalRendezvous, parse_root_info, root_info
from mdev.runtime.collectives.select import HIERARCHICAL, RING, Layout, layout
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.core import Stream
from mdev.taskspec import COMM_LEFT
from mdev.runtime.memtable import DEVICE, Operand
from mdev.runtime.validate import read_regular
from mdev.runtime.memory import vmm

MAX_RANK_TABLE_BYTES = 16 << 20    # HCCL's rank table JSON: a line or two per device
_forming: dict[str, dict[int, comms.Comm]] = {}      # rendezvous id -> ranks of this process being made
_forming_lock = threading.Lock()
_seen: dict[str, int] = {}                            # rendezvous id -> its ranks here that saw the others
_process = {"deterministic": 0}                       # HcclSetConfig's settings
SYM_WINDOWS = 0xC5_0000_0000
_windows: dict[int, tuple[int, int, int]] = {}        # window / registration handle -> (comm, address, size)


class _Group(threading.local):
    def __init__(self) -> None:
        self.depth = 0
        self.items: list = []                     # (comm, stream, item) of deferred send / recv


_group = _Group()


# ---------------------------------------------------------------------------- argument checks
def _count(value, what: str = "count") -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise HcclError(HCCL_E_PARA, f"{what} must be an integer, got {value!r}")
    if not 0 <= int(value) < 1 << 63:
        raise HcclError(HCCL_E_PARA, f"{what} {value} is out of range")
    return int(value)


def _ints(values, what: str) -> list[int]:
    """The items of a list argument, each an integer in range."""
    if not isinstance(values, (list, tuple, np.ndarray)):
        raise HcclError(HCCL_E_PARA, f"{what} must be a list of integers, got {type(values).__name__}")
    return [_count(v, what) for v in values]


def _dtype(value) -> tuple[int, int]:
    """(HcclDataType, its size) of a type the reduce tasks can add."""
    value = _count(value, "dataType")
    if value not in DATA_TYPE_NAMES:
        raise HcclError(HCCL_E_PARA, f"dataType {value} is not an HcclDataType")
    if DATA_TYPE_NUMPY[value] is None:
        raise HcclError(HCCL_E_NOT_SUPPORT, f"{DATA_TYPE_NAMES[value]} is not supported by mdev's collectives")
    return value, DATA_TYPE_SIZE[value]


def _op(value) -> int:
    value = _count(value, "op")
    if value not in REDUCE_OP_NAMES:
        raise HcclError(HCCL_E_PARA, f"op {value} is not an HcclReduceOp (SUM 0, PROD 1, MAX 2, MIN 3)")
    return value


def _rank(comm: comms.Comm, value, what: str, peer: bool = False) -> int:
    value = _count(value, what)
    if value >= comm.nranks:
        raise HcclError(HCCL_E_PARA, f"{what} {value} is not a rank of a communicator of {comm.nranks}")
    if peer and value == comm.rank:
        raise HcclError(HCCL_E_PARA, f"{what} {value} is this rank itself")
    return value


def _stream(comm: comms.Comm, handle):
    stream = rt.stream(handle, comm.ctx)
    if stream.device != comm.device:
        raise HcclError(HCCL_E_PARA, f"stream {handle!r} belongs to device {rt.local_device(stream.device)}; the "
                        f"communicator's rank {comm.rank} is on device {rt.local_device(comm.device)}")
    return stream


def _buffer(comm: comms.Comm, ptr, nbytes: int, write: bool, what: str) -> Operand | None:
    if not ptr:
        if nbytes:
            raise HcclError(HCCL_E_PTR, f"{what} is NULL")
        return None
    operand = rt.memory.operand(ptr, nbytes, write=write, what=what)
    if any(p.kind != DEVICE or p.device != comm.device for p in operand.parts()):
        raise HcclError(HCCL_E_PARA, f"{what} must be device memory of device {rt.local_device(comm.device)} "
                        f"(rank {comm.rank}'s)")
    return operand


# ---------------------------------------------------------------------------- communicators
def _timeout() -> float:
    return comms.env_seconds("HCCL_CONNECT_TIMEOUT", HCCL_CONNECT_TIMEOUT_DEFAULT)


@api(1, failed=None)
def comm_init_all(ndev, devices) -> list[int]:
    """A communicator per device, every rank in this process (one thread per rank drives them)."""
    ndev = _count(ndev, "ndev")
    if ndev < 1:
        raise HcclError(HCCL_E_PARA, "ndev must be at least 1")
    devices = _ints(devices, "devices")
    if len(devices) != ndev:
        raise HcclError(HCCL_E_PARA, f"devices lists {len(devices)} ids, ndev is {ndev}")
    if len(set(devices)) != ndev:
        raise HcclError(HCCL_E_PARA, f"devices {devices} repeats a device")
    devices = [rt.check_device(d) for d in devices]          # board indices from here on
    _not_in_group("HcclCommInitAll")
    rv = LocalRendezvous(ndev)
    rid = os.urandom(16).hex()                               # what sub-communicators derive theirs from
    made: list[comms.Comm] = []
    try:
        for rank, dev in enumerate(devices):
            comm, card = comms.prepare(rank, ndev, dev, rid)
            made.append(comm)
            rv.publish("join", rank, card)
        joined = rv.gather("join")
        for comm in made:
            rv.publish("keys", comm.rank, comms.share(comm, joined))
        keyed = rv.gather("keys")
        local = dict(enumerate(made))
        for comm in made:
            comms.connect(comm, joined, keyed, local)
    except BaseException:
        for comm in made:
            comms.destroy(comm)
        raise
    return [comms.register(comm) for comm in made]


@api(1, failed=None)
def get_root_info() -> bytes:
    """The HcclRootInfo blob (HCCL_ROOT_INFO_BYTES bytes) every rank passes to comm_init_root_info."""
    return root_info(rt.attach().paths.name)


@api(1)
def comm_init_root_info(nranks, root_info_blob, rank) -> int:
    """This thread's rank (its current device) of a communicator of ``nranks`` ranks."""
    return _init_root_info(nranks, root_info_blob, rank, None)


@api(1)
def comm_init_root_info_config(nranks, root_info_blob, rank, config) -> int:
    """comm_init_root_info with an HcclCommConfig (a dict of its fields, None for none)."""
    return _init_root_info(nranks, root_info_blob, rank, config)


def _init_root_info(nranks, root_info_blob, rank, config) -> int:
    nranks, rank = _count(nranks, "nRanks"), _count(rank, "rank")
    settings = comms.settings(config)
    _not_in_group("HcclCommInitRootInfo")
    if nranks < 1 or rank >= nranks:
        raise HcclError(HCCL_E_PARA, f"rank {rank} is not a rank of a communicator of {nranks}")
    devices = rt.attach().topology.device_count
    if nranks > devices:
        raise HcclError(HCCL_E_PARA, f"nRanks {nranks}: a rank is a device, and the board has {devices}")
    board = rt.attach().paths.name
    return _join(parse_root_info(root_info_blob, board), nranks, rank, rt.current_context().device, settings)


@api(1)
def comm_init_cluster_info(cluster_info, rank) -> int:
    """This thread's rank of the communicator a rank table file (HCCL's JSON) describes."""
    return _init_cluster_info(cluster_info, rank, None)


@api(1)
def comm_init_cluster_info_config(cluster_info, rank, config) -> int:
    """comm_init_cluster_info with an HcclCommConfig (a dict of its fields)."""
    return _init_cluster_info(cluster_info, rank, config)


def _init_cluster_info(cluster_info, rank, config) -> int:
    rank = _count(rank, "rank")
    settings = comms.settings(config)
    _not_in_group("HcclCommInitClusterInfo")
    devices, rid = _rank_table(cluster_info)
    if rank >= len(devices):
        raise HcclError(HCCL_E_PARA, f"rank {rank} is not in {cluster_info} ({len(devices)} ranks)")
    current = rt.current_context().device
    if rt.check_device(devices[rank]) != current:
        raise HcclError(HCCL_E_PARA, f"{cluster_info} puts rank {rank} on device {devices[rank]}; this thread's "
                        f"device is {rt.local_device(current)} (set_device it first)")
    return _join(rid, len(devices), rank, current, settings)


def _rank_table(path) -> tuple[list[int], str]:
    """Device of each rank, and a rendezvous id every process reading the same file agrees on."""
    if not isinstance(path, str) or not path:
        raise HcclError(HCCL_E_PARA, "clusterInfo must be the path of a rank table file")
    try:
        raw = read_regular(path, MAX_RANK_TABLE_BYTES)
        table = json.loads(raw)
        entries = [(int(d["rank_id"]), int(d["device_id"])) for s in table["server_list"] for d in s["device"]]
    except OSError as exc:
        raise HcclError(HCCL_E_PARA, f"cannot read rank table {path}: {exc.strerror}") from None
    except (ValueError, KeyError, TypeError, OverflowError, RecursionError) as exc:    # the file's content
        raise HcclError(HCCL_E_PARA, f"{path} is not a rank table (server_list / device / rank_id / device_id): "
                        f"{exc!r}") from None
    ranks = sorted(entries)
    if [r for r, _ in ranks] != list(range(len(ranks))):
        raise HcclError(HCCL_E_PARA, f"{path}: rank_id values must be 0..{len(ranks) - 1}, each once")
    rid = hashlib.sha256(os.path.realpath(path).encode() + raw).hexdigest()[:32]
    return [d for _, d in ranks], rid


def _join(rid: str, nranks: int, rank: int, device: int, settings: comms.Settings = comms.Settings()) -> int:
    rv = FileRendezvous(rt.attach().paths.name, rid, nranks, _timeout())
    comm, card = comms.prepare(rank, nranks, device, rid, settings)
    try:
        rv.open()
        with _forming_lock:
            local = _forming.setdefault(rid, {})
            if rank in local:
                raise HcclError(HCCL_E_PARA, f"rank {rank} of this rendezvous is already being made in this process")
            local[rank] = comm
        rv.publish("join", rank, card)
        joined = rv.gather("join")
        rv.publish("keys", rank, comms.share(comm, joined))
        keyed = rv.gather("keys", joined)
        with _forming_lock:
            here = {q: c for q, c in _forming.get(rid, {}).items() if joined[q]["pid"] == os.getpid()}
            # every rank of this process has joined (their keys are out): once each has seen the
            # others, the rendezvous is forgotten -- a rank that finished and destroyed its
            # communicator meanwhile must still be seen by the slower ones
            _seen[rid] = _seen.get(rid, 0) + 1
            if _seen[rid] == len(here):
                del _forming[rid], _seen[rid]
        comms.connect(comm, joined, keyed, here)
        rv.done(rank)
    except BaseException:
        rv.abandon(rank)
        _forget(comm)
        comms.destroy(comm)
        raise
    return comms.register(comm)


def _forget(comm: comms.Comm) -> None:
    """A rank that failed to join leaves its rendezvous's ranks of this process."""
    with _forming_lock:
        for rid, ranks in list(_forming.items()):
            if ranks.get(comm.rank) is comm:
                del ranks[comm.rank]
                if not ranks:
                    del _forming[rid]
                    _seen.pop(rid, None)


@api()
def comm_destroy(comm) -> None:
    c = comms.lookup(comm)
    with _forming_lock:
        for handle in [h for h, (owner, _, _) in _windows.items() if owner == c.handle]:
            del _windows[handle]
    comms.destroy(c)


@api(1, failed=None)
def create_sub_comm_config(comm, rank_ids, sub_comm_id, sub_comm_rank_id, config) -> int | None:
    """This rank's communicator of the ranks ``rank_ids`` (ascending ranks of the global
    communicator ``comm``; this rank is ``rank_ids[sub_comm_rank_id]``), numbered
    ``sub_comm_id`` among its sub-communicators.  A rank outside it passes ``rank_ids`` None
    and gets None.  Its ranks meet in a rendezvous named from the parent's (no root info)."""
    parent = comms.lookup(comm)
    if rank_ids is None:
        return None
    if parent.parent:
        raise HcclError(HCCL_E_NOT_SUPPORT, "a sub-communicator cannot be split again (only the global one)")
    ranks = _ints(rank_ids, "rankIds")
    sub_id, me = _count(sub_comm_id, "subCommId"), _count(sub_comm_rank_id, "subCommRankId")
    if not ranks or ranks != sorted(set(ranks)) or ranks[-1] >= parent.nranks:
        raise HcclError(HCCL_E_PARA, f"rankIds {ranks[:16]} must be ascending ranks of the communicator "
                        f"(0..{parent.nranks - 1}), each once")
    if me >= len(ranks) or ranks[me] != parent.rank:
        raise HcclError(HCCL_E_PARA, f"subCommRankId {me} must be this rank's index in rankIds (rank {parent.rank})")
    settings = comms.settings(config)
    _not_in_group("HcclCreateSubCommConfig")
    key = f"{parent.rid}/{settings.name or sub_id}/{','.join(map(str, ranks))}"
    rid = hashlib.sha256(key.encode()).hexdigest()[:32]
    if not settings.name:
        settings = dataclasses.replace(settings, name=f"{parent.name}_sub_{sub_id}")
    handle = _join(rid, len(ranks), me, parent.device, settings)
    comms.held.comms[handle].parent = parent.handle
    return handle


def _not_in_group(what: str) -> None:
    if _group.depth:
        raise HcclError(HCCL_E_NOT_SUPPORT, f"{what} inside HcclGroupStart / HcclGroupEnd: mdev makes a "
                        "communicator when called (one thread per rank), not at HcclGroupEnd")


@api(1)
def get_comm_name(comm) -> str:
    """The communicator's name (hcclCommName, or one mdev made; every rank has the same)."""
    return comms.lookup(comm).name


@api(1, failed=0)
def get_comm_config_capability() -> int:
    """HcclCommConfigCapability values below the answer are configurable: buffer size,
    deterministic, name, exec timeout and algorithm are honoured; expansion mode, world rank,
    job id and graph zero copy are accepted (mdev runs every operation one way)."""
    return HCCL_COMM_CONFIG_RETRY


@api()
def set_config(config, value) -> None:
    """HcclSetConfig: HCCL_DETERMINISTIC 0, 1 or 2 (mdev reduces in a fixed order always,
    so every setting gives the same, reproducible results)."""
    if _count(config, "config") != HCCL_DETERMINISTIC:
        raise HcclError(HCCL_E_PARA, f"config {config}: only HCCL_DETERMINISTIC (0) can be set")
    if isinstance(value, bool) or not isinstance(value, int) or value not in (0, 1, 2):
        raise HcclError(HCCL_E_PARA, f"HCCL_DETERMINISTIC must be 0, 1 or 2, got {value!r}")
    _process["deterministic"] = value


@api(1)
def get_config(config) -> int:
    if _count(config, "config") != HCCL_DETERMINISTIC:
        raise HcclError(HCCL_E_PARA, f"config {config}: only HCCL_DETERMINISTIC (0) can be read")
    return _process["deterministic"]


@api()
def comm_set_memory_range(comm, base_vir_ptr, size, alignment, flags) -> None:
    """A reserved address range (aclrtReserveMemAddress, whole) the communicator may see mapped."""
    c = comms.lookup(comm)
    base, size = _count(base_vir_ptr, "baseVirPtr"), _count(size, "size")
    if _count(alignment, "alignment") or _count(flags, "flags"):
        raise HcclError(HCCL_E_PARA, "alignment and flags must be 0")
    res = vmm.space().reservations.get(base)
    if res is None or size == 0 or size > res.size:
        raise HcclError(HCCL_E_PARA, f"{base:#x} (+{size} bytes) is not a range this process reserved "
                        "(aclrtReserveMemAddress)")
    if base in c.ranges:
        raise HcclError(HCCL_E_PARA, f"the range at {base:#x} is set already")
    c.ranges[base] = size


@api()
def comm_unset_memory_range(comm, base_vir_ptr) -> None:
    c = comms.lookup(comm)
    base = _count(base_vir_ptr, "baseVirPtr")
    if base not in c.ranges:
        raise HcclError(HCCL_E_PARA, f"{base:#x} is not a range set by HcclCommSetMemoryRange")
    if any(base <= a < base + c.ranges[base] for a in c.active):
        raise HcclError(HCCL_E_PARA, f"the range at {base:#x} still has activated memory")
    del c.ranges[base]


@api()
def comm_activate_comm_memory(comm, vir_ptr, size, offset, handle, flags) -> None:
    """Memory mapped (aclrtMapMem of ``handle``) inside a range set before, for the
    communicator's operations."""
    c = comms.lookup(comm)
    ptr, size = _count(vir_ptr, "virPtr"), _count(size, "size")
    if _count(offset, "offset") or _count(flags, "flags"):
        raise HcclError(HCCL_E_PARA, "offset and flags must be 0")
    if not handle:
        raise HcclError(HCCL_E_PTR, "handle is NULL")
    if not any(b <= ptr and ptr + size <= b + n for b, n in c.ranges.items()):
        raise HcclError(HCCL_E_PARA, f"{ptr:#x} (+{size} bytes) is not inside a range of HcclCommSetMemoryRange")
    if ptr in c.active:
        raise HcclError(HCCL_E_PARA, f"{ptr:#x} is activated already")
    _buffer(c, ptr, size, True, "virPtr")              # mapped, and of the rank's device
    c.active[ptr] = size


@api()
def comm_deactivate_comm_memory(comm, vir_ptr) -> None:
    c = comms.lookup(comm)
    if c.active.pop(_count(vir_ptr, "virPtr"), None) is None:
        raise HcclError(HCCL_E_PARA, f"{vir_ptr:#x} is not memory activated by HcclCommActivateCommMemory")


@api(1, failed=0)
def comm_sym_win_register(comm, addr, size, flag) -> int:
    """A symmetric window over device memory of the rank's device (at most the configuration's
    hcclSymWinMaxMemSizePerRank); ``flag`` must be 1."""
    c = comms.lookup(comm)
    if _count(flag, "flag") != 1:
        raise HcclError(HCCL_E_PARA, f"flag {flag}: only 1 is supported")
    return _window(c, addr, size, c.settings.window_bytes, "hcclSymWinMaxMemSizePerRank")


@api()
def comm_sym_win_deregister(win_handle) -> None:
    _unwindow(None, win_handle, "a registered symmetric window")


@api(1, failed=0)
def comm_register(comm, addr, size, flag) -> int:
    """Device memory of the rank's device registered with the communicator; ``flag`` is
    reserved (0)."""
    c = comms.lookup(comm)
    if _count(flag, "flag"):
        raise HcclError(HCCL_E_PARA, f"flag {flag}: reserved, must be 0")
    return _window(c, addr, size, 1 << 63, "")


@api()
def comm_deregister(comm, handle) -> None:
    _unwindow(comms.lookup(comm), handle, "memory this communicator registered")


def _window(c: comms.Comm, addr, size, limit: int, what: str) -> int:
    """A handle for ``size`` bytes of the rank's device memory at ``addr`` (at most ``limit``)."""
    addr, size = _count(addr, "addr"), _count(size, "size")
    if not size or size > limit:
        raise HcclError(HCCL_E_PARA, f"size {size}: 1 byte to {what} ({limit >> 30} GB)")
    _buffer(c, addr, size, True, "addr")
    with _forming_lock:
        handle = rt.new_handle(SYM_WINDOWS)
        _windows[handle] = (c.handle, addr, size)
    return handle


def _unwindow(c: comms.Comm | None, handle, what: str) -> None:
    with _forming_lock:
        window = _windows.get(handle) if isinstance(handle, int) else None
        if window is None or (c is not None and window[0] != c.handle):
            raise HcclError(HCCL_E_PARA, f"{handle!r} is not {what}")
        del _windows[handle]


@api(1)
def get_rank_size(comm) -> int:
    return comms.lookup(comm).nranks


@api(1)
def get_rank_id(comm) -> int:
    return comms.lookup(comm).rank


@api(1)
def get_comm_async_error(comm) -> int:
    """The HcclResult that broke the communicator (on any rank: failures spread along the
    operation's transfers), or HCCL_SUCCESS."""
    c = comms.lookup(comm)
    word = rt.memory.view(c.at(comms.ERR, 16)).view(np.int64)
    return 0 if word[0] in (0, COMM_LEFT) else int(word[0])


# ---------------------------------------------------------------------------- operations
@contextmanager
def _operation(comm: comms.Comm, stream, dtype: int = 0, op: int = 0):
    """A Plan on the caller's stream (a handle, or a Stream already checked); its channels
    are drained once the schedule is queued."""
    plan = Plan(comm, stream if isinstance(stream, Stream) else _stream(comm, stream), dtype, op)
    first = plan.main.seq + 1
    yield plan
    plan.finish()
    if plan.kind is not None:
        trace.collective(plan.main, first, plan.main.seq, *plan.kind)


@api()
def all_reduce(send_buf, recv_buf, count, data_type, op, comm, stream) -> None:
    c = comms.lookup(comm)
    count, (dtype, item), op = _count(count), _dtype(data_type), _op(op)
    send = _buffer(c, send_buf, count * item, False, "sendBuf")
    recv = _buffer(c, recv_buf, count * item, True, "recvBuf")
    _all_reduce(c, stream, send, recv, count, dtype, item, op, "all_reduce")


def _all_reduce(c: comms.Comm, stream, send, recv, count: int, dtype: int, item: int, op: int, kind: str) -> None:
    lay = layout(c.levels, c.choice, "allreduce", c.rank, c.nranks)
    with _operation(c, stream, dtype, op) as plan:
        if whole.run(plan, kind, lay, count, item, send, recv):
            return
        plan.collective(kind, count, algorithm=lay.algorithm)
        for o, n in A.pieces(count, len(lay.group), item, c.slot_bytes):
            A.all_reduce(plan, plan.main, lay, send.slice(o * item, n * item) if send else c.nowhere(),
                         recv.slice(o * item, n * item) if recv else c.nowhere(), n, item)


@api()
def barrier(comm, stream) -> None:
    c = comms.lookup(comm)
    _all_reduce(c, stream, None, None, 0, 2, 4, 0, "barrier")


@api()
def broadcast(buf, count, data_type, root, comm, stream) -> None:
    c = comms.lookup(comm)
    count, (dtype, item), root = _count(count), _dtype(data_type), _rank(c, root, "root")
    data = _buffer(c, buf, count * item, True, "buf") or c.nowhere()
    lay = layout(c.levels, c.choice, "broadcast", c.rank, c.nranks)
    with _operation(c, stream, dtype) as plan:
        if whole.run(plan, "broadcast", lay, count, item, data if count else None, data if count else None, root):
            return
        plan.collective("broadcast", count, root, lay.algorithm)
        for o, n in A.pieces(count, c.nranks if lay.algorithm == "mesh" else 1, item, c.slot_bytes):
            A.broadcast(plan, plan.main, lay, data.slice(o * item, n * item), n, item, root)


@api()
def all_gather(send_buf, recv_buf, send_count, data_type, comm, stream) -> None:
    c = comms.lookup(comm)
    sc, (dtype, item) = _count(send_count, "sendCount"), _dtype(data_type)
    send = _buffer(c, send_buf, sc * item, False, "sendBuf") or c.nowhere()
    recv = _buffer(c, recv_buf, c.nranks * sc * item, True, "recvBuf") or c.nowhere()
    lay = layout(c.levels, c.choice, "allgather", c.rank, c.nranks)
    with _operation(c, stream, dtype) as plan:
        if whole.run(plan, "all_gather", lay, sc, item, send if sc else None, recv if sc else None):
            return
        plan.collective("all_gather", sc, algorithm=lay.algorithm)
        for at in _parts(c, lay, sc, item):
            A.all_gather(plan, plan.main, lay, send, recv, sc, item, at)


@api()
def reduce_scatter(send_buf, recv_buf, recv_count, data_type, op, comm, stream) -> None:
    c = comms.lookup(comm)
    rc, (dtype, item), op = _count(recv_count, "recvCount"), _dtype(data_type), _op(op)
    send = _buffer(c, send_buf, c.nranks * rc * item, False, "sendBuf") or c.nowhere()
    recv = _buffer(c, recv_buf, rc * item, True, "recvBuf") or c.nowhere()
    lay = layout(c.levels, c.choice, "reducescatter", c.rank, c.nranks)
    if lay.algorithm == HIERARCHICAL:
        with c.on_device():
            c.work(0)                               # made here, on this thread, before any task uses it
    with _operation(c, stream, dtype, op) as plan:
        if whole.run(plan, "reduce_scatter", lay, rc, item, send if rc else None, recv if rc else None):
            return
        plan.collective("reduce_scatter", rc, algorithm=lay.algorithm)
        for at in _parts(c, lay, rc, item):
            A.reduce_scatter(plan, plan.main, lay, send, recv, rc, item, at)


def _parts(c: comms.Comm, lay, count: int, item: int) -> list[tuple[int, int]]:
    """Parts of a per-rank block so that a transfer fits a slot (hierarchical: a group's blocks)."""
    return A.pieces(count, 1, item, c.slot_bytes // (len(lay.group) if lay.across else 1))


@api()
def reduce(send_buf, recv_buf, count, data_type, op, root, comm, stream) -> None:
    c = comms.lookup(comm)
    count, (dtype, item), op = _count(count), _dtype(data_type), _op(op)
    root = _rank(c, root, "root")
    send = _buffer(c, send_buf, count * item, False, "sendBuf") or c.nowhere()
    recv = (_buffer(c, recv_buf, count * item, True, "recvBuf") or c.nowhere()) if c.rank == root else None
    with _operation(c, stream, dtype, op) as plan:
        if whole.run(plan, "reduce", Layout(RING, RING, tuple(range(c.nranks))), count, item,
                     send if count else None, recv if count else None, root, "chain"):
            return
        plan.collective("reduce", count, root, "chain")
        A.reduce(plan, plan.main, send, recv, count, item, root)


@api()
def scatter(send_buf, recv_buf, recv_count, data_type, root, comm, stream) -> None:
    c = comms.lookup(comm)
    rc, (dtype, item) = _count(recv_count, "recvCount"), _dtype(data_type)
    root = _rank(c, root, "root")
    send = (_buffer(c, send_buf, c.nranks * rc * item, False, "sendBuf") or c.nowhere()) if c.rank == root else None
    recv = _buffer(c, recv_buf, rc * item, True, "recvBuf") or c.nowhere()
    lay = layout(c.levels, c.choice, "scatter", c.rank, c.nranks)
    with _operation(c, stream, dtype) as plan:
        plan.collective("scatter", rc, root, lay.algorithm)
        A.scatter(plan, plan.main, lay, send, recv, rc, item, root)


@api()
def all_to_all(send_buf, send_count, send_type, recv_buf, recv_count, recv_type, comm, stream) -> None:
    c = comms.lookup(comm)
    sc, rc = _count(send_count, "sendCount"), _count(recv_count, "recvCount")
    (stype, item), (rtype, ritem) = _dtype(send_type), _dtype(recv_type)
    if sc * item != rc * ritem:
        raise HcclError(HCCL_E_PARA, f"sendCount x its type size ({sc * item} bytes) differs from recvCount x its "
                        f"type size ({rc * ritem} bytes)")
    counts = [sc] * c.nranks
    _all_to_all(c, stream, send_buf, counts, [q * sc for q in range(c.nranks)], stype, recv_buf,
                [rc] * c.nranks, [q * rc for q in range(c.nranks)], rtype, sc)


@api()
def all_to_all_v(send_buf, send_counts, sdispls, send_type, recv_buf, recv_counts, rdispls, recv_type,
                 comm, stream) -> None:
    c = comms.lookup(comm)
    lists = [_counts(c, v, what) for v, what in ((send_counts, "sendCounts"), (sdispls, "sdispls"),
                                                 (recv_counts, "recvCounts"), (rdispls, "rdispls"))]
    _dtype(send_type), _dtype(recv_type)
    _all_to_all(c, stream, send_buf, lists[0], lists[1], send_type, recv_buf, lists[2], lists[3], recv_type, 0)


def _counts(c: comms.Comm, values, what: str) -> list[int]:
    out = _ints(values, what)
    if len(out) != c.nranks:
        raise HcclError(HCCL_E_PARA, f"{what} has {len(out)} entries; the communicator has {c.nranks} ranks")
    return out


def _all_to_all(c: comms.Comm, stream, send_buf, scounts, sdispls, stype, recv_buf, rcounts, rdispls, rtype,
                check_count: int, kind: str = "all_to_all") -> None:
    (_, item), (_, ritem) = _dtype(stype), _dtype(rtype)
    sbytes = max((d + n for d, n in zip(sdispls, scounts)), default=0) * item
    rbytes = max((d + n for d, n in zip(rdispls, rcounts)), default=0) * ritem
    send = _buffer(c, send_buf, sbytes, False, "sendBuf") or c.nowhere()
    recv = _buffer(c, recv_buf, rbytes, True, "recvBuf") or c.nowhere()
    outs = [send.slice(d * item, n * item) for d, n in zip(sdispls, scounts)]
    ins = [recv.slice(d * ritem, n * ritem) for d, n in zip(rdispls, rcounts)]
    with _operation(c, stream, _dtype(stype)[0]) as plan:
        plan.collective(kind, check_count, algorithm="pairwise", nbytes=sum(o.nbytes for o in outs))
        A.all_to_all(plan, plan.main, outs, ins)


@api()
def all_gather_v(send_buf, send_count, recv_buf, recv_counts, recv_displs, data_type, comm, stream) -> None:
    """Rank q's ``recv_counts[q]`` elements land at ``recv_displs[q]`` (elements) of every
    rank's recv_buf; this rank sends ``send_count`` (its own entry of recv_counts)."""
    c = comms.lookup(comm)
    sc, (dtype, _) = _count(send_count, "sendCount"), _dtype(data_type)
    counts, displs = _counts(c, recv_counts, "recvCounts"), _counts(c, recv_displs, "recvDispls")
    if counts[c.rank] != sc:
        raise HcclError(HCCL_E_PARA, f"sendCount {sc} differs from this rank's recvCounts entry {counts[c.rank]}")
    _all_to_all(c, stream, send_buf, counts[c.rank:c.rank + 1] * c.nranks, [0] * c.nranks, dtype, recv_buf, counts,
                displs, dtype, 0, "all_gather_v")


@api()
def reduce_scatter_v(send_buf, send_counts, send_displs, recv_buf, recv_count, data_type, op, comm, stream) -> None:
    """This rank's ``recv_buf`` = op over the ranks of their block ``send_displs[me]``
    (``send_counts[me]`` elements, the same on every rank) of send_buf; ``recv_count`` is
    ``send_counts[me]``.  Summed in the mesh reduce-scatter's order (algorithms' docstring)."""
    c = comms.lookup(comm)
    rc, (dtype, item), op = _count(recv_count, "recvCount"), _dtype(data_type), _op(op)
    counts, displs = _counts(c, send_counts, "sendCounts"), _counts(c, send_displs, "sendDispls")
    if counts[c.rank] != rc:
        raise HcclError(HCCL_E_PARA, f"recvCount {rc} differs from this rank's sendCounts entry {counts[c.rank]}")
    send = _buffer(c, send_buf, max((d + n for d, n in zip(displs, counts)), default=0) * item, False,
                   "sendBuf") or c.nowhere()
    recv = _buffer(c, recv_buf, rc * item, True, "recvBuf") or c.nowhere()
    parts = -(-max(counts) * item // c.slot_bytes) or 1       # every block in as many parts, each fitting a slot
    pieces = [A.split(n, parts) for n in counts]
    with _operation(c, stream, dtype, op) as plan:
        plan.collective("reduce_scatter_v", 0, algorithm="mesh", nbytes=sum(counts) * item)
        for k in range(parts):
            blocks = [send.slice((d + pieces[q][k][0]) * item, pieces[q][k][1] * item) for q, d in enumerate(displs)]
            o, n = pieces[c.rank][k]
            A.mesh_reduce_scatter(plan, plan.main, list(range(c.nranks)), c.rank, blocks,
                                  recv.slice(o * item, n * item))


@api()
def all_to_all_vc(send_buf, send_count_matrix, send_type, recv_buf, recv_type, comm, stream) -> None:
    """``send_count_matrix[i * n + j]``: the elements rank i sends rank j; blocks lie in rank
    order, packed, in both buffers."""
    c = comms.lookup(comm)
    n = c.nranks
    matrix = _ints(send_count_matrix, "sendCountMatrix")
    if len(matrix) != n * n:
        raise HcclError(HCCL_E_PARA, f"sendCountMatrix has {len(matrix)} entries; {n} ranks need {n * n}")
    _dtype(send_type), _dtype(recv_type)
    scounts = matrix[c.rank * n:(c.rank + 1) * n]
    rcounts = [matrix[q * n + c.rank] for q in range(n)]
    _all_to_all(c, stream, send_buf, scounts, _packed(scounts), send_type, recv_buf, rcounts, _packed(rcounts),
                recv_type, 0, "all_to_all_vc")


def _packed(counts: list[int]) -> list[int]:
    """Displacements of blocks of ``counts`` laid one after another."""
    return [sum(counts[:q]) for q in range(len(counts))]


@api()
def send(send_buf, count, data_type, dest_rank, comm, stream) -> None:
    _point_to_point(comm, stream, [(HCCL_SEND, send_buf, count, data_type, dest_rank)])


@api()
def recv(recv_buf, count, data_type, src_rank, comm, stream) -> None:
    _point_to_point(comm, stream, [(HCCL_RECV, recv_buf, count, data_type, src_rank)])


@api()
def batch_send_recv(send_recv_info, item_num, comm, stream) -> None:
    """``send_recv_info``: HcclSendRecvItem as dicts with the C field names (sendRecvType, buf,
    count, dataType, remoteRank) or as tuples in that order; ``item_num`` of them."""
    item_num = _count(item_num, "itemNum")
    if not isinstance(send_recv_info, (list, tuple)):
        raise HcclError(HCCL_E_PARA, "sendRecvInfo must be a list of HcclSendRecvItem")
    items = [_item(info, i) for i, info in enumerate(send_recv_info[:item_num])]
    if len(items) != item_num:
        raise HcclError(HCCL_E_PARA, f"sendRecvInfo holds {len(items)} items, itemNum is {item_num}")
    _point_to_point(comm, stream, items, batch=True)


_ITEM_FIELDS = ("sendRecvType", "buf", "count", "dataType", "remoteRank")


def _item(info, index: int) -> tuple:
    """The five fields of HcclSendRecvItem ``index``, from a dict or a tuple in C's order."""
    if isinstance(info, dict):
        missing = [k for k in _ITEM_FIELDS if k not in info]
        if missing:
            raise HcclError(HCCL_E_PARA, f"sendRecvInfo[{index}] lacks {', '.join(missing)}")
        return tuple(info[k] for k in _ITEM_FIELDS)
    if not isinstance(info, (list, tuple)) or len(info) != len(_ITEM_FIELDS):
        raise HcclError(HCCL_E_PARA, f"sendRecvInfo[{index}] must be an HcclSendRecvItem: a dict of "
                        f"{', '.join(_ITEM_FIELDS)} or a tuple of them in that order")
    return tuple(info)


def _point_to_point(comm, stream, items: list[tuple], batch: bool = False) -> None:
    c = comms.lookup(comm)
    checked = []
    for kind, buf, count, data_type, peer in items:
        kind = _count(kind, "sendRecvType")
        if kind not in (HCCL_SEND, HCCL_RECV):
            raise HcclError(HCCL_E_PARA, f"sendRecvType {kind} is neither HCCL_SEND (0) nor HCCL_RECV (1)")
        count, (dtype, item) = _count(count), _dtype(data_type)
        peer = _rank(c, peer, "destRank" if kind == HCCL_SEND else "srcRank", peer=True)
        data = _buffer(c, buf, count * item, kind == HCCL_RECV, "buf") or c.nowhere()
        checked.append((kind, data, count, dtype, peer))
    st = _stream(c, stream)
    if _group.depth:                            # group_start: issued together at group_end
        _group.items += [(c, st, i) for i in checked]
        return
    _issue(c, st, checked, batch)


def _issue(c: comms.Comm, st, items: list[tuple], batch: bool) -> None:
    with _operation(c, st) as plan:
        for kind, _, count, dtype, peer in items:
            plan.dtype = dtype
            plan.point_to_point(peer, kind == HCCL_SEND, count)
        if not batch and len(items) == 1:
            kind, data, _, _, peer = items[0]
            A.exchange(plan, plan.main, peer if kind == HCCL_SEND else None, data if kind == HCCL_SEND else None,
                       peer if kind == HCCL_RECV else None, data if kind == HCCL_RECV else None)
            return
        with plan.parallel(len(items)) as sides:   # every item at once, as HCCL's batch runs them
            for side, (kind, data, _, _, peer) in zip(sides, items):
                send_ = kind == HCCL_SEND
                A.exchange(plan, side.stream, peer if send_ else None, data if send_ else None,
                           None if send_ else peer, None if send_ else data)


@api()
def group_start() -> None:
    _group.depth += 1


@api(1)
def group_status_get() -> bool:
    """Whether this thread is between group_start and group_end."""
    return _group.depth > 0


@api()
def group_end() -> None:
    if not _group.depth:
        raise HcclError(HCCL_E_PARA, "group_end without group_start")
    _group.depth -= 1
    if _group.depth:
        return
    items, _group.items = _group.items, []
    batches: dict[tuple[int, int], tuple] = {}
    for c, st, item in items:
        batches.setdefault((c.handle, st.handle), (c, st, []))[2].append(item)
    for c, st, batch in batches.values():
        _issue(c, st, batch, batch=True)

