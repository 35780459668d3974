"""What each device task (op) is, in one place, for every side that handles one.

A task travels as ``(op name, args)``, a tuple of builtins (the wire names no class); its
``OpSpec`` here says what that tuple means, so no consumer indexes it by a literal:

    OpSpec(name, args, engine, time, operands, ri, text, flag)
      args      the argument names, in order
      engine    the device engine it holds while it runs: DMA, AIV, or None (sync and
                control tasks; a kernel takes its own kernel's engine)
      time      its modelled-time kind (mdev.timemodel): TRANSFER, FILL, KERNEL, MEASURED,
                WAIT, INSTANT
      operands  the memory it touches, each with its role (READ / WRITE / UPDATE / HELD)
                and its extent computed from the arguments
      ri        (aclmdlRITaskType, name) of a model's task dump (aclmdlRIDebugPrint)
      text      the detail a dump shows, a format string over the argument names
      flag      its word is a synchronisation flag, not data (value writes and waits)
      reported  it touches memory its arguments point into, and reports what as it runs
                (a kernel: mdev.board.sanitize), so its writes go anywhere for a trace

    device  tasktable.op -------------> engine, locations it pins (mdev.board)
    trace   Recorder -----------------> bytes moved, route (source -> destination), writes
    time    timemodel.duration_ns ----> time kind
    sanitizer -----------------------> accesses (operands and roles)
    model dump (runtime.models) ------> ri, text

Operand kinds: ``Span`` (a location and a byte count), ``Pitched`` (rows of a 2-D copy),
``Tensor`` (a location with shape, strides in elements and an aclDataType), ``Tensors``
(an operator task's tensors, each as a Tensor carries them), ``Paras`` (parameters given by value or by address).  A
location is ``("d", device, offset)`` or ``("p", segment, offset)``.  A family of ops shares
one spec's fields under per-op names (``_family``).  ``SPECS`` holds every op a device
runs; tests/test_taskspec.py checks that every registered op has one and every consumer
covers it.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass, field
from typing import Callable

from mdev import constants as C
from mdev import dtypes
from mdev.hccl_types import DATA_TYPE_NAMES, REDUCE_OP_NAMES

READ, WRITE, UPDATE, HELD = "read", "write", "read-write", "held"     # HELD: must exist, bytes untouched
DMA, AIV = "dma", "aiv"
TRANSFER, FILL, KERNEL, MEASURED, WAIT, INSTANT = "transfer", "fill", "kernel", "measured", "wait", "instant"
PRESCRIBED = "prescribed"     # as long as its ``model_ns`` argument says (a whole collective)
MOVES = (TRANSFER, FILL)      # time kinds of bytes moving over a path


def where(location: tuple) -> str:
    kind, key, _ = location
    return f"device {key}" if kind == "d" else "pinned host"


@dataclass(frozen=True)
class Span:
    """``extent(args)`` bytes from the location argument ``at``; ``fill``: the argument whose
    low byte is written to every byte (a memset), ``word``: the argument written as the
    64-bit word (a value write)."""
    at: int
    role: str
    extent: Callable[[tuple], int]
    fill: int | None = None
    word: int | None = None
    direct = True          # the argument is a location (the device pins it while the task runs)

    def pieces(self, args: tuple) -> tuple:
        return ((args[self.at], self.extent(args)),)

    def moved(self, args: tuple) -> int:
        return self.extent(args)


@dataclass(frozen=True)
class Pitched:
    """``height`` rows of ``width`` bytes, ``pitch`` bytes apart, from the location ``at``
    (argument indices); its extent is the rows' bounding range (the gaps count as touched)."""
    at: int
    role: str
    pitch: int
    width: int
    height: int
    fill = word = None
    direct = True

    def pieces(self, args: tuple) -> tuple:
        return ((args[self.at], args[self.pitch] * (args[self.height] - 1) + args[self.width]),)

    def moved(self, args: tuple) -> int:
        return args[self.width] * args[self.height]


@dataclass(frozen=True)
class Tensor:
    """A tensor at the location ``at``: ``shape`` and ``strides`` (in elements, >= 0) and
    ``dtype`` (an aclDataType) are argument indices; its extent is the bounding range of
    its elements."""
    at: int
    role: str
    shape: int
    strides: int
    dtype: int
    fill = word = None
    direct = True

    def pieces(self, args: tuple) -> tuple:
        return ((args[self.at], tensor_extent(args[self.shape], args[self.strides], args[self.dtype])),)

    def moved(self, args: tuple) -> int:
        return math.prod(args[self.shape]) * dtypes.itemsize(args[self.dtype])


def tensor_extent(shape, strides, data_type: int) -> int:
    """Bytes from a tensor's first element to the end of its last (0 if it has none)."""
    if 0 in shape:
        return 0
    return dtypes.itemsize(data_type) * (1 + sum((n - 1) * s for n, s in zip(shape, strides)))


@dataclass(frozen=True)
class Tensors:
    """The argument ``at`` holds tensors, each ``(location, shape, strides, aclDataType)``,
    alone or in a tuple of them (a tensor list), or None (an optional one left out): an
    operator task's inputs (READ) or outputs (WRITE).  The device pins and checks each as it
    runs, so they are no location arguments of their own."""
    at: int
    role: str
    fill = word = None
    direct = False

    def pieces(self, args: tuple) -> tuple:
        """(location, bytes) of each tensor that has elements (an empty one touches nothing)."""
        return tuple((t[0], n) for t in each_tensor(args[self.at]) if (n := tensor_extent(t[1], t[2], t[3])))

    def moved(self, args: tuple) -> int:
        return sum(math.prod(t[1]) * dtypes.itemsize(t[3]) for t in each_tensor(args[self.at]))


def is_tensor(entry) -> bool:
    """``entry`` has a tensor's form: (location, shape, strides, aclDataType), the location
    a ("d" or "p", device, offset) triple (a tensor list is a tuple of them)."""
    return type(entry) is tuple and len(entry) == 4 and type(entry[0]) is tuple and len(entry[0]) == 3 \
        and entry[0][0] in ("d", "p") and type(entry[1]) is tuple and type(entry[2]) is tuple


def each_tensor(entries: tuple):
    """The tensors of an operator task's inputs or outputs, lists flattened, absent ones left out."""
    for entry in entries:
        if entry is None:
            continue
        if is_tensor(entry):
            yield entry
        else:
            yield from (t for t in entry if t is not None)


@dataclass(frozen=True)
class Paras:
    """Parameters each given as ``("v", value)`` or ``("a", location, size)`` (read from
    device memory when the task runs): the argument ``at`` is one, or a dict of them."""
    at: int
    role: str = READ
    fill = word = None
    direct = False

    def pieces(self, args: tuple) -> tuple:
        given = args[self.at]
        paras = given.values() if isinstance(given, dict) else (given,)
        return tuple((p[1], p[2]) for p in paras if p[0] == "a")

    def moved(self, args: tuple) -> int:
        return sum(n for _, n in self.pieces(args))


def _random_result(args: tuple) -> int:
    """random_num's result bytes: as the host sized them, or from an immediate count."""
    data_type, func_type, result_bytes, num = args[0], args[1], args[4], args[7]
    if result_bytes is not None:
        return result_bytes
    if func_type == C.ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK:
        return -(-num[1] // 8)
    return num[1] * dtypes.itemsize(data_type)


@dataclass(frozen=True)
class OpSpec:
    name: str
    args: tuple[str, ...]
    engine: str | None = None
    time: str = INSTANT
    operands: tuple = ()
    ri: tuple[int, str] | None = None
    text: str = ""
    flag: bool = False
    reported: bool = False     # touches memory through its arguments, and reports what as it runs
    locations: tuple[int, ...] = field(init=False)      # arguments that are locations

    def __post_init__(self) -> None:
        object.__setattr__(self, "locations", tuple(sorted(o.at for o in self.operands if o.direct)))
        if self.ri is None:
            object.__setattr__(self, "ri", (C.ACL_MODEL_RI_TASK_DEFAULT, self.name.upper()))

    @property
    def moves(self) -> bool:
        """Its time is that of bytes moving from ``source`` (if any) into ``target``."""
        return self.time in MOVES

    def source(self) -> object | None:
        """The operand bytes move from (a transfer), or None."""
        return next((o for o in self.operands if o.role == READ), None)

    def target(self) -> object | None:
        """The operand the task writes first, or None."""
        return next((o for o in self.operands if o.role in (WRITE, UPDATE)), None)

    def accesses(self, args: tuple) -> list[tuple]:
        """(location, bytes, is write, memset fill) of what it touches, in order; a
        read-write operand is read, then written."""
        out = []
        for operand in self.operands:
            if operand.role == HELD:
                continue
            fill = args[operand.fill] & 0xFF if operand.fill is not None else None
            for location, nbytes in operand.pieces(args):
                if operand.role in (READ, UPDATE):
                    out.append((location, nbytes, False, None))
                if operand.role in (WRITE, UPDATE):
                    out.append((location, nbytes, True, fill))
        return out

    def describe(self, args: tuple, kernels: dict | None = None) -> str:
        """The dump's detail of a task; ``kernels``: names of function ids."""
        if not self.text:
            return ""
        return _Text(kernels or {}).vformat(self.text, (), dict(zip(self.args, args)))


class _Text(string.Formatter):
    """Format specs of a dump's text: ``where`` (a location), ``kernel`` (a function id)."""

    def __init__(self, kernels: dict) -> None:
        self.kernels = kernels

    def format_field(self, value, spec: str) -> str:
        if spec == "where":
            return where(value)
        if spec == "kernel":
            return self.kernels.get(value, f"function {value}")
        return super().format_field(value, spec)


def _family(names: dict[str, tuple[str, ...]], **shared) -> list[OpSpec]:
    """Ops that share every field but their name and arguments."""
    return [OpSpec(name, args, **shared) for name, args in names.items()]


_EVENT_WAIT = (C.ACL_MODEL_RI_TASK_EVENT_WAIT, "EVENT_WAIT")
_DEFAULT = C.ACL_MODEL_RI_TASK_DEFAULT
_nbytes = lambda a: a[2]        # noqa: E731  (copy, memset, fill32, reduce: the byte count is args[2])

SPECS: dict[str, OpSpec] = {spec.name: spec for spec in [
    # ---------------------------------------------------------------- memory (mdev.board.tasks)
    OpSpec("copy", ("dst", "src", "nbytes"), DMA, TRANSFER,
           (Span(1, READ, _nbytes), Span(0, WRITE, _nbytes)),
           (_DEFAULT, "MEMCPY_ASYNC"), "{nbytes} B, {src:where} -> {dst:where}"),
    OpSpec("copy2d", ("dst", "dpitch", "src", "spitch", "width", "height"), DMA, TRANSFER,
           (Pitched(2, READ, 3, 4, 5), Pitched(0, WRITE, 1, 4, 5)),
           (_DEFAULT, "MEMCPY2D_ASYNC"), "{width} x {height} B, {src:where} -> {dst:where}"),
    OpSpec("copy_strided", ("dst", "dst_strides", "src", "src_strides", "shape", "data_type"), DMA, TRANSFER,
           (Tensor(2, READ, 4, 3, 5), Tensor(0, WRITE, 4, 1, 5)),
           (_DEFAULT, "MEMCPY_STRIDED"), "{shape} of type {data_type}, {src:where} -> {dst:where}"),
    OpSpec("memset", ("dst", "value", "nbytes"), DMA, FILL, (Span(0, WRITE, _nbytes, fill=1),),
           (_DEFAULT, "MEMSET_ASYNC"), "{nbytes} B of {value:#04x}, {dst:where}"),
    OpSpec("fill32", ("dst", "value", "nbytes"), DMA, FILL, (Span(0, WRITE, _nbytes),),
           text="{nbytes} B of 32-bit {value:#x}, {dst:where}"),
    OpSpec("copy_desc", ("desc", "base"), DMA, INSTANT, (Span(0, READ, lambda a: 32),)),
    OpSpec("cmo", ("where", "nbytes", "kind"), None, INSTANT, (Span(0, HELD, lambda a: a[1]),)),
    # ---------------------------------------------------------------- events and notifies
    OpSpec("record_event", ("slot", "uid"), ri=(C.ACL_MODEL_RI_TASK_EVENT_RECORD, "EVENT_RECORD"),
           text="event {slot} (external)"),
    OpSpec("reset_event", ("slot", "uid"), ri=(C.ACL_MODEL_RI_TASK_EVENT_RESET, "EVENT_RESET"),
           text="event {slot} (external)"),
    OpSpec("record_remote_event", ("owner", "slot")),
    OpSpec("wait_event", ("slot", "uid", "target", "timeout_s"), time=WAIT, ri=_EVENT_WAIT,
           text="event {slot} (record {target}, made outside the model)"),
    OpSpec("wait_event_latest", ("slot", "uid", "timeout_s"), time=WAIT, ri=_EVENT_WAIT),
    OpSpec("wait_event_flag", ("slot", "uid", "timeout_s"), time=WAIT, ri=_EVENT_WAIT,
           text="event {slot} (external: a record after the last reset)"),
    OpSpec("wait_remote_event", ("owner", "slot", "target", "timeout_s"), time=WAIT),
    OpSpec("record_notify", ("owner", "slot", "guard"), ri=(_DEFAULT, "NOTIFY_RECORD")),
    OpSpec("wait_notify", ("slot", "uid", "timeout_s", "guard", "follow"), time=WAIT, ri=(_DEFAULT, "NOTIFY_WAIT")),
    *_family({"cnt_notify_record": ("slot", "uid", "mode", "value"), "cnt_notify_reset": ("slot", "uid")}),
    OpSpec("cnt_notify_wait", ("slot", "uid", "mode", "value", "timeout_s", "clear"), time=WAIT),
    # ---------------------------------------------------------------- values (flags)
    OpSpec("value_write", ("dst", "value"), None, FILL, (Span(0, WRITE, lambda a: 8, word=1),),
           (C.ACL_MODEL_RI_TASK_VALUE_WRITE, "VALUE_WRITE"), "value {value:#x}, {dst:where}", flag=True),
    OpSpec("value_wait", ("src", "value", "flag", "timeout_s"), None, WAIT, (Span(0, READ, lambda a: 8),),
           (C.ACL_MODEL_RI_TASK_VALUE_WAIT, "VALUE_WAIT"), "value {value:#x}, {src:where}", flag=True),
    # ---------------------------------------------------------------- host, kernels, graphs
    OpSpec("host_callback", ("callback", "block"), time=MEASURED),
    # a kernel's memory is what it touches as it runs: it reports that itself (mdev.board.sanitize);
    # "kernel" runs a Python kernel in the device process, "native_kernel" an Ascend C kernel of
    # a device image in the device's kernel runner (mdev.board.native)
    *_family({op: ("fid", "num_blocks", "args_kind", "args", "placeholders", "limit", "pinned", "timeout_s")
              for op in ("kernel", "native_kernel")},
             time=KERNEL, ri=(C.ACL_MODEL_RI_TASK_KERNEL, "KERNEL"), text="{fid:kernel} <<<{num_blocks}>>>",
             reported=True),
    OpSpec("run_graph", ("gid",), time=MEASURED, ri=(_DEFAULT, "MODEL_EXECUTE")),
    OpSpec("update_graph", ("gid", "lane", "indices", "tasks")),
    # an operator of the operator library (aclnn: mdev.operators), on tensors of this device
    OpSpec("operator", ("name", "inputs", "outputs", "attrs"), AIV, KERNEL,
           (Tensors(1, READ), Tensors(2, WRITE)), (C.ACL_MODEL_RI_TASK_KERNEL, "OPERATOR"), "aclnn{name}"),
    # ---------------------------------------------------------------- system tasks (mdev.board.systasks)
    OpSpec("reduce", ("dst", "src", "nbytes", "kind", "data_type"), DMA, TRANSFER,
           (Span(1, READ, _nbytes), Span(0, UPDATE, _nbytes)), (_DEFAULT, "REDUCE_ASYNC")),
    OpSpec("random_num", ("data_type", "func_type", "params", "result", "result_bytes", "counter", "seed", "num"),
           AIV, INSTANT, (Paras(6), Paras(7), Paras(2), Span(3, WRITE, _random_result), Span(5, UPDATE, lambda a: 16)),
           (_DEFAULT, "RANDOM_NUM")),
    OpSpec("overflow_status", ("dst",), operands=(Span(0, WRITE, lambda a: 64),)),
    OpSpec("overflow_reset", ()),
    # a collective's descriptor words (operation, count), written as the rank enters it, and
    # its agreement check against a peer's (mdev.board.collectives)
    OpSpec("coll_enter", ("dst", "word", "count", "comm"), operands=(Span(0, WRITE, lambda a: 16),),
           text="operation word {word:#x}, count {count}, {dst:where}"),
    OpSpec("coll_check", ("mine", "peer", "fields", "guard"),
           operands=(Span(0, READ, lambda a: 8 + 8 * max(f[1] for f in a[2])),
                     Span(1, READ, lambda a: 8 + 8 * max(f[1] for f in a[2])))),
    # a whole collective of one rank (mdev.board.collective_run): its input read, its output
    # written, in modelled time from the last rank's entry for as long as HCCL's formula says
    OpSpec("coll_run", ("rank", "peers", "root", "word", "count", "send", "recv", "in_bytes", "out_bytes",
                        "order", "mode", "data", "timeout_s", "model_ns"), None, PRESCRIBED,
           (Span(5, READ, lambda a: a[7]), Span(6, WRITE, lambda a: a[8])), (_DEFAULT, "HCCL"),
           "rank {rank} (root {root}), operation word {word:#x}, count {count}, {in_bytes} B in, "
           "{out_bytes} B out"),
]}


# ---------------------------------------------------------------------------- argument values
# the values tasks carry in their arguments and words, known to the host that sends them
# and the device that runs them
KERNEL_OPS = ("kernel", "native_kernel")      # the ops of a kernel launch
REDUCE_PROD = 0x100     # reduce kind: the product (no SDMA kind of aclrtReduceAsync; collectives use it)

# a rank's communicator error word (two int64 in its own HBM): the HcclResult that broke the
# communicator and the rank it names (mdev.board.tasks.CommGuard)
COMM_TIMEOUT, COMM_PARA, COMM_REMOTE = 9, 1, 21          # HcclResult values (mdev.hccl_types)
COMM_LEFT = 1 << 16          # the rank destroyed its communicator: what it recorded before stands
# operations as the descriptor numbers them
KINDS = ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "reduce", "scatter", "all_to_all",
         "barrier", "send/recv", "all_gather_v", "reduce_scatter_v", "all_to_all_vc")
_DTYPE_LABELS = tuple(DATA_TYPE_NAMES.get(i, str(i)) for i in range(max(DATA_TYPE_NAMES) + 1))
_REDOP_LABELS = tuple(REDUCE_OP_NAMES[i] for i in range(len(REDUCE_OP_NAMES)))
# (name, word, shift, bits, labels) of the descriptor fields (mdev.board.collectives.coll_check,
# mdev.board.collective_run)
FIELDS = (("operation", 0, 0, 8, KINDS), ("data type", 0, 8, 8, _DTYPE_LABELS),
          ("reduce op", 0, 16, 8, _REDOP_LABELS), ("root", 0, 24, 24, ()),
          ("operation number", 0, 48, 16, ()), ("count", 1, 0, 64, ()))

# a rank's run words (RUN_BYTES of its scratch buffer, uint64) for whole collectives
# (mdev.board.collective_run): its own -- operations entered, the descriptor words, where its
# buffers lie, its modelled entry (float64) -- and, of the hub's (rank 0), the meeting's:
# operations done, ranks entered and ranks that reduced their share so far (counted under a
# lock), a shared reduction's go, the latest entry (float64), a failed rank (+1); and its own
# mode (the last rank checks that every rank runs the operation the same way)
RUN_ARRIVED, RUN_DONE, RUN_TALLY, RUN_WORD, RUN_COUNT, RUN_SEND, RUN_RECV, RUN_ENTER, RUN_MET, RUN_GO, \
    RUN_REDUCED, RUN_FAILED, RUN_MODE = range(13)
RUN_BYTES = 128
# a whole collective's mode: inputs through the IN areas, results through the hub's OUT
# area; from SHARERS_SHIFT, how many of the last ranks to enter share the reduction's chunks
STAGE_IN, VIA_OUT = 1, 2
SHARERS_SHIFT = 8


def same_or_apart(send, recv, nbytes: int) -> bool:
    """Whether a rank's output (location ``recv``) is its input (``send``) or lies apart from
    it, ``nbytes`` each: its peers may then write the parts of its output whose input they
    read no more (a shared all-reduce straight into the outputs); False for malformed ones."""
    try:
        (_, s_dev, s_at), (_, r_dev, r_at) = send, recv
        return s_dev != r_dev or s_at == r_at or s_at + nbytes <= r_at or r_at + nbytes <= s_at
    except (TypeError, ValueError):
        return False

# counting notifies (aclrtCntNotify*): a uint32 counter, its record modes and wait tests
CNT_MASK = 0xFFFFFFFF
CNT_RECORD = {
    C.ACL_RT_CNT_NOTIFY_RECORD_SET_VALUE_MODE: lambda cur, v: v,
    C.ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE: lambda cur, v: (cur + v) & CNT_MASK,
    C.ACL_RT_CNT_NOTIFY_RECORD_BIT_OR_MODE: lambda cur, v: cur | v,
    C.ACL_RT_CNT_NOTIFY_RECORD_BIT_AND_MODE: lambda cur, v: cur & v,
}
CNT_RELEASED = {
    C.ACL_RT_CNT_NOTIFY_WAIT_LESS_MODE: lambda cur, v: cur < v,
    C.ACL_RT_CNT_NOTIFY_WAIT_EQUAL_MODE: lambda cur, v: cur == v,
    C.ACL_RT_CNT_NOTIFY_WAIT_BIGGER_MODE: lambda cur, v: cur > v,
    C.ACL_RT_CNT_NOTIFY_WAIT_BIGGER_OR_EQUAL_MODE: lambda cur, v: cur >= v,
    C.ACL_RT_CNT_NOTIFY_WAIT_EQUAL_WITH_BITMASK_MODE: lambda cur, v: cur & v == v,
}
