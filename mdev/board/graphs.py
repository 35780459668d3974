"""Stored graphs inside a device process, and the task that replays one.

    store_graph (request)   lanes: [(stream id, head, [(op, args), ...]), ...], defaults:
                            [(location, value)] written at each replay's start -> graph id
    run_graph   (task)      replay: lane 0 on the executing stream's worker, every other head
                            lane on a thread of its own; the task completes when all lanes have
    update_graph (task)     a task group's replacement tasks (ordered on the updating stream)
    drop_graph  (request)   ri_destroy

Inner tasks are ordinary ops (copy, memset, kernel, value_write, event record/wait, ...) run
with ``device.run_task`` -- they take the engines they need, exactly as on a stream.  Between
lanes, ``graph_record`` / ``graph_wait`` markers (local to one replay) order them as the
captured events did, so a forked lane really runs beside the origin until it joins back.
``graph_label`` marks a place, ``graph_switch`` reads a uint32 index from device memory and
continues at the place of the label it picks (on its own lane, or that lane's stream takes
over from the label while the switching one stops).  ``graph_stream_switch`` compares two
integers in device memory and, when the condition holds, starts another lane and stops its own.
``graph_cond`` reads a uint64 condition and runs child graphs inline on its lane: IF child 0
when it is not 0 (else child 1, if any), WHILE child 0 as long as it is not 0, SWITCH child
[value] (none past the last).
The first failing inner task stops the replay and fails ``run_graph`` with its code.
"""

from __future__ import annotations

import itertools
import operator
import threading
from typing import TYPE_CHECKING

from mdev import errors as E
from mdev import protocol
from mdev.board.tasks import feature_state
from mdev.board.tasktable import TaskFault, op, request

if TYPE_CHECKING:
    from mdev.board.device import Device
    from mdev.board.stream import DeviceStream

import numpy as np

RECORD, WAIT, ACTIVATE = protocol.GRAPH_RECORD, protocol.GRAPH_WAIT, protocol.GRAPH_ACTIVATE
LABEL, SWITCH = protocol.GRAPH_LABEL, protocol.GRAPH_SWITCH
STREAM_SWITCH, COND = protocol.GRAPH_STREAM_SWITCH, protocol.GRAPH_COND
COND_IF, COND_WHILE, COND_SWITCH = 0, 1, 2        # aclmdlRICondTaskType
# aclrtCondition (ACL_RT_EQUAL .. ACL_RT_LESS_OR_EQUAL) -> the comparison of left with right
_CONDITIONS = (operator.eq, operator.ne, operator.gt, operator.ge, operator.lt, operator.le)
_COMPARED = {4: np.int32, 8: np.int64}      # ACL_RT_SWITCH_INT32 / INT64, by their size
_gids = itertools.count(1)


class Graph:
    def __init__(self, client: int, lanes: list, defaults: list = ()) -> None:
        self.client = client
        self.defaults = [(where, int(value)) for where, value in defaults]
        self.stream_ids = [sid for sid, _, _ in lanes]
        self.heads = [i for i, (_, head, _) in enumerate(lanes) if head]
        self.lanes = [list(tasks) for _, _, tasks in lanes]
        # label -> (lane, index of its marker)
        self.labels = {args[0]: (lane, k) for lane, tasks in enumerate(self.lanes)
                       for k, (name, args) in enumerate(tasks) if name == LABEL}


def _graphs(device: "Device") -> dict:
    return feature_state(device, "graphs")


@request
def store_graph(device: "Device", conn, lanes: list, defaults: list = ()) -> int:
    graphs = _graphs(device)
    with device.lock:
        for gid in [g for g, graph in graphs.items() if graph.client not in device.clients]:
            del graphs[gid]          # graphs of processes that detached
        gid = next(_gids)
        graphs[gid] = Graph(conn.client, lanes, defaults)
    return gid


@request
def drop_graph(device: "Device", conn, gid: int) -> None:
    graphs = _graphs(device)
    with device.lock:
        graph = graphs.get(gid)
        if graph is not None and graph.client == conn.client:
            del graphs[gid]


@request
def graph_kernel_names(device: "Device", conn, fids: list) -> dict:
    return {fid: device.kernels[fid].name for fid in fids if fid in device.kernels}


class LaneStream:
    """What an inner task sees as its stream: the executing stream (identity, priority,
    owner) -- interrupted also when the replay has already failed."""

    def __init__(self, outer, run: "Run") -> None:
        self._outer = outer
        self._run = run

    def __getattr__(self, name: str):
        return getattr(self._outer, name)

    @property
    def interrupted(self) -> bool:
        return self._outer.interrupted or self._run.fault is not None


class Run:
    """One replay of a graph."""

    POLL_S = 0.05

    def __init__(self, device: "Device", graph: Graph, outer) -> None:
        self.device = device
        self.graph = graph
        self.outer = outer
        self.cond = threading.Condition()
        self.marks: set = set()
        self.fault: tuple[int, str] | None = None
        self.active = 0

    def fail(self, code: int, message: str) -> None:
        with self.cond:
            if self.fault is None:
                self.fault = (code, message)
            self.cond.notify_all()

    def start(self, lane: int, at: int = 0) -> None:
        with self.cond:
            self.active += 1
        threading.Thread(target=self.lane, args=(lane, at), daemon=True,
                         name=f"graph-s{self.graph.stream_ids[lane]}").start()

    def _branch(self, index: int, k: int, args: tuple) -> int | None:
        """A label switch at task ``k`` of lane ``index``: where this lane goes on (None: the
        picked label is on another lane, which now runs from there)."""
        where, count, labels = args
        picked = int(self.device.memory.view(where, 4, self.outer).view(np.uint32)[0])
        label = labels[min(picked, count - 1)]
        target = self.graph.labels.get(label)
        if target is None:
            raise TaskFault(E.ACL_ERROR_RT_MODEL_EXECUTE, f"stream {self.graph.stream_ids[index]} task {k}: "
                            f"label {picked} of the switch is not set in this model")
        if target[0] == index:
            return target[1]
        self.start(*target)
        return None

    def _holds(self, args: tuple) -> bool:
        """A stream switch's condition, on the values in device memory now."""
        _, left, right, cond, nbytes = args
        a, b = (int(self.device.memory.view(where, nbytes, self.outer).view(_COMPARED[nbytes])[0])
                for where in (left, right))
        return _CONDITIONS[cond](a, b)

    def _conditional(self, args: tuple) -> None:
        """A conditional task: its child graph(s), run here, each to its end."""
        where, kind, gids = args
        if kind not in (COND_IF, COND_WHILE, COND_SWITCH) or not gids:
            raise TaskFault(E.ACL_ERROR_RT_MODEL_EXECUTE, f"conditional task of type {kind!r} with {len(gids)} models")

        def value() -> int:
            return int(self.device.memory.view(where, 8, self.outer).view(np.uint64)[0])
        if kind == COND_WHILE:
            while self.fault is None and value():
                if self.outer.interrupted:
                    raise TaskFault(E.ACL_ERROR_RT_STREAM_ABORT, "the stream was aborted during a model execution")
                self._child(gids[0])
            return
        picked = value()
        if kind == COND_IF:
            picked = 0 if picked else 1
        if picked < len(gids):
            self._child(gids[picked])

    def _child(self, gid: int) -> None:
        run = Run(self.device, _own_graph(self.device, self.outer, gid), self.outer)
        run.run()
        if run.fault is not None:
            raise TaskFault(*run.fault)

    def lane(self, index: int, at: int = 0) -> None:
        tasks = self.graph.lanes[index]
        stream = LaneStream(self.outer, self)
        try:
            k = at
            while k < len(tasks):
                if self.fault is not None:
                    return
                name, args = tasks[k]          # read at run time: an update may have replaced it
                if name == RECORD:
                    with self.cond:
                        self.marks.add(args[0])
                        self.cond.notify_all()
                elif name == WAIT:
                    self._wait(args[0])
                elif name == ACTIVATE:
                    self.start(args[0])
                elif name == COND:
                    self._conditional(args)
                elif name == STREAM_SWITCH:
                    if self._holds(args):
                        self.start(args[0])
                        return
                elif name == SWITCH:
                    k = self._branch(index, k, args)
                    if k is None:
                        return
                    continue
                elif name == LABEL:
                    pass
                else:
                    stream.position = (index, k)       # which task of the graph (sanitizer reports)
                    code, message = self.device.run_task(stream, name, args)
                    if code:
                        self.fail(code, f"stream {self.graph.stream_ids[index]} task {k} ({name}): {message}")
                k += 1
        except TaskFault as fault:
            self.fail(fault.code, fault.message)
        except Exception as exc:        # a bug here must fail the replay, not hang it
            self.fail(*self.device.internal_error(f"graph lane {index}", exc))
        finally:
            with self.cond:
                self.active -= 1
                self.cond.notify_all()

    def _wait(self, marker: int) -> None:
        with self.cond:
            while marker not in self.marks and self.fault is None:
                if self.outer.interrupted:
                    self.fault = (E.ACL_ERROR_RT_STREAM_ABORT, "the stream was aborted during a model execution")
                    self.cond.notify_all()
                    return
                self.cond.wait(self.POLL_S)

    def run(self) -> None:
        for where, value in self.graph.defaults:      # the conditions' launch values
            self.device.memory.view(where, 8, self.outer, write=True).view(np.uint64)[0] = value
        heads = self.graph.heads
        if not heads:
            return
        with self.cond:
            self.active += 1                   # the first head lane, run on this thread
        for lane in heads[1:]:
            self.start(lane)
        self.lane(heads[0])
        with self.cond:
            while self.active:
                self.cond.wait(self.POLL_S)


def _own_graph(device: "Device", stream: "DeviceStream", gid: int) -> Graph:
    """A stored graph of the stream's own process (another's is not there for it)."""
    graph = _graphs(device).get(gid)
    if graph is None or graph.client != stream.client:
        raise TaskFault(E.ACL_ERROR_RT_MODEL_EXECUTE, f"model graph {gid} does not exist (destroyed?)")
    return graph


@op()
def run_graph(device: "Device", stream: "DeviceStream", gid: int) -> None:
    graph = _own_graph(device, stream, gid)
    run = Run(device, graph, stream)
    run.run()
    if run.fault is not None:
        raise TaskFault(*run.fault)


@op(quick=lambda args: True)
def update_graph(device: "Device", stream: "DeviceStream", gid: int, lane: int, indices: list,
                 tasks: list) -> None:
    graph = _own_graph(device, stream, gid)
    target = graph.lanes[lane]
    for i, task in zip(indices, tasks):
        target[i] = tuple(task)
