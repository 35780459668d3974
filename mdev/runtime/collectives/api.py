"""HCCL's functions: arguments checked here, then a Plan of tasks on the caller's stream.

    mdev.hccl (or a C adapter) --boundary (HcclResult codes)--> these @api functions
        --> comm (init / destroy), select.layout (algorithm), algorithms.* (the tasks)

Each operation validates its arguments (counts, data type, reduce op, ranks, that the
buffers are device memory of the communicator's device and large enough, that the stream
belongs to that device), then queues its whole schedule and returns: as in HCCL, an
operation is asynchronous on its stream.  Inside group_start / group_end, send and recv
calls are gathered and issued at group_end as one batch_send_recv per communicator and
stream (their transfers run at once); other operations run when called.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from contextlib import contextmanager

import numpy as np

from mdev.hccl_types import (DATA_TYPE_NAMES, DATA_TYPE_NUMPY, DATA_TYPE_SIZE, HCCL_CONNECT_TIMEOUT_DEFAULT,
                             HCCL_E_NOT_SUPPORT, HCCL_E_PARA, HCCL_E_PTR, HCCL_RECV, HCCL_SEND, REDUCE_OP_NAMES,
                             HcclError)
from mdev.runtime.boundary import api
from mdev.runtime.collectives import algorithms as A
from mdev.runtime import trace
from mdev.runtime.collectives import comm as comms
from mdev.runtime.collectives.plan import Plan
from mdev.runtime.collectives.rendezvous import FileRendezvous, LocalRendezvous, parse_root_info, root_info
from mdev.runtime.collectives.select import HIERARCHICAL, layout
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.core import Stream
from mdev.taskspec import COMM_LEFT
from mdev.runtime.memtable import DEVICE, Operand
from mdev.runtime.validate import read_regular

MAX_RANK_TABLE_BYTES = 16 << 20    # HCCL's rank table JSON: a line or two per device
_forming: dict[str, dict[int, comms.Comm]] = {}      # rendezvous id -> ranks of this process being made
_forming_lock = threading.Lock()


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
    rv = LocalRendezvous(ndev)
    made: list[comms.Comm] = []
    try:
        for rank, dev in enumerate(devices):
            comm, card = comms.prepare(rank, ndev, dev)
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
    nranks, rank = _count(nranks, "nRanks"), _count(rank, "rank")
    if nranks < 1 or rank >= nranks:
        raise HcclError(HCCL_E_PARA, f"rank {rank} is not a rank of a communicator of {nranks}")
    devices = rt.attach().topology.device_count
    if nranks > devices:
        raise HcclError(HCCL_E_PARA, f"nRanks {nranks}: a rank is a device, and the board has {devices}")
    board = rt.attach().paths.name
    return _join(parse_root_info(root_info_blob, board), nranks, rank, rt.current_context().device)


@api(1)
def comm_init_cluster_info(cluster_info, rank) -> int:
    """This thread's rank of the communicator a rank table file (HCCL's JSON) describes."""
    rank = _count(rank, "rank")
    devices, rid = _rank_table(cluster_info)
    if rank >= len(devices):
        raise HcclError(HCCL_E_PARA, f"rank {rank} is not in {cluster_info} ({len(devices)} ranks)")
    current = rt.current_context().device
    if rt.check_device(devices[rank]) != current:
        raise HcclError(HCCL_E_PARA, f"{cluster_info} puts rank {rank} on device {devices[rank]}; this thread's "
                        f"device is {rt.local_device(current)} (set_device it first)")
    return _join(rid, len(devices), rank, current)


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


def _join(rid: str, nranks: int, rank: int, device: int) -> int:
    rv = FileRendezvous(rt.attach().paths.name, rid, nranks, _timeout())
    comm, card = comms.prepare(rank, nranks, device)
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
        comms.connect(comm, joined, keyed, here)
        rv.done(rank)
    except BaseException:
        rv.abandon(rank)
        _forget(comm)
        comms.destroy(comm)
        raise
    return comms.register(comm)


def _forget(comm: comms.Comm) -> None:
    with _forming_lock:
        for rid, ranks in list(_forming.items()):
            if ranks.get(comm.rank) is comm:
                del ranks[comm.rank]
                if not ranks:
                    del _forming[rid]


@api()
def comm_destroy(comm) -> None:
    c = comms.lookup(comm)
    _forget(c)
    comms.destroy(c)


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
        plan.collective(kind, count, algorithm=lay.algorithm)
        for o, n in A.pieces(count, len(lay.group), item, c.slot_bytes):
            A.all_reduce(plan, plan.main, lay, send.slice(o * item, n * item) if send else _none(c),
                         recv.slice(o * item, n * item) if recv else _none(c), n, item)


def _none(c: comms.Comm) -> Operand:
    """Where an operation of no elements points (nothing is read or written)."""
    return c.at(comms.DESC, 0)


@api()
def barrier(comm, stream) -> None:
    c = comms.lookup(comm)
    _all_reduce(c, stream, None, None, 0, 2, 4, 0, "barrier")


@api()
def broadcast(buf, count, data_type, root, comm, stream) -> None:
    c = comms.lookup(comm)
    count, (dtype, item), root = _count(count), _dtype(data_type), _rank(c, root, "root")
    data = _buffer(c, buf, count * item, True, "buf") or _none(c)
    lay = layout(c.levels, c.choice, "broadcast", c.rank, c.nranks)
    with _operation(c, stream, dtype) as plan:
        plan.collective("broadcast", count, root, lay.algorithm)
        for o, n in A.pieces(count, c.nranks if lay.algorithm == "mesh" else 1, item, c.slot_bytes):
            A.broadcast(plan, plan.main, lay, data.slice(o * item, n * item), n, item, root)


@api()
def all_gather(send_buf, recv_buf, send_count, data_type, comm, stream) -> None:
    c = comms.lookup(comm)
    sc, (dtype, item) = _count(send_count, "sendCount"), _dtype(data_type)
    send = _buffer(c, send_buf, sc * item, False, "sendBuf") or _none(c)
    recv = _buffer(c, recv_buf, c.nranks * sc * item, True, "recvBuf") or _none(c)
    lay = layout(c.levels, c.choice, "allgather", c.rank, c.nranks)
    with _operation(c, stream, dtype) as plan:
        plan.collective("all_gather", sc, algorithm=lay.algorithm)
        for at in _parts(c, lay, sc, item):
            A.all_gather(plan, plan.main, lay, send, recv, sc, item, at)


@api()
def reduce_scatter(send_buf, recv_buf, recv_count, data_type, op, comm, stream) -> None:
    c = comms.lookup(comm)
    rc, (dtype, item), op = _count(recv_count, "recvCount"), _dtype(data_type), _op(op)
    send = _buffer(c, send_buf, c.nranks * rc * item, False, "sendBuf") or _none(c)
    recv = _buffer(c, recv_buf, rc * item, True, "recvBuf") or _none(c)
    lay = layout(c.levels, c.choice, "reducescatter", c.rank, c.nranks)
    if lay.algorithm == HIERARCHICAL:
        with c.on_device():
            c.work(0)                               # made here, on this thread, before any task uses it
    with _operation(c, stream, dtype, op) as plan:
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
    send = _buffer(c, send_buf, count * item, False, "sendBuf") or _none(c)
    recv = (_buffer(c, recv_buf, count * item, True, "recvBuf") or _none(c)) if c.rank == root else None
    with _operation(c, stream, dtype, op) as plan:
        plan.collective("reduce", count, root, "chain")
        A.reduce(plan, plan.main, send, recv, count, item, root)


@api()
def scatter(send_buf, recv_buf, recv_count, data_type, root, comm, stream) -> None:
    c = comms.lookup(comm)
    rc, (dtype, item) = _count(recv_count, "recvCount"), _dtype(data_type)
    root = _rank(c, root, "root")
    send = (_buffer(c, send_buf, c.nranks * rc * item, False, "sendBuf") or _none(c)) if c.rank == root else None
    recv = _buffer(c, recv_buf, rc * item, True, "recvBuf") or _none(c)
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
                check_count: int) -> None:
    (_, item), (_, ritem) = _dtype(stype), _dtype(rtype)
    sbytes = max((d + n for d, n in zip(sdispls, scounts)), default=0) * item
    rbytes = max((d + n for d, n in zip(rdispls, rcounts)), default=0) * ritem
    send = _buffer(c, send_buf, sbytes, False, "sendBuf") or _none(c)
    recv = _buffer(c, recv_buf, rbytes, True, "recvBuf") or _none(c)
    outs = [send.slice(d * item, n * item) for d, n in zip(sdispls, scounts)]
    ins = [recv.slice(d * ritem, n * ritem) for d, n in zip(rdispls, rcounts)]
    with _operation(c, stream, _dtype(stype)[0]) as plan:
        plan.collective("all_to_all", check_count, algorithm="pairwise",
                        nbytes=sum(o.nbytes for o in outs))
        A.all_to_all(plan, plan.main, outs, ins)


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
        data = _buffer(c, buf, count * item, kind == HCCL_RECV, "buf") or _none(c)
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

