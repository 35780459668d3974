"""Labels: branches inside a model run instance (aclrtCreateLabel .. aclrtSwitchLabelByIndex).

    build:   set_label(L, s)                      a label marker at this point of s's lane
             switch_label_by_index(p, n, LL, s)   a switch task on s's lane
    replay:  the switch reads the uint32 at device address p (clamped to n - 1), looks up
             label LL[i] and continues at its marker -- on the same lane, or, if the label
             is on another stream of the model, that stream runs from there and s stops

Labels are set and switched on streams bound to a model being built (aclmdlRIBindStream);
the device resolves the markers when the graph is stored (mdev.board.graphs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mdev import errors as E
from mdev.errors import AclError
from mdev.runtime import capture as R
from mdev.runtime.boundary import api
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.core import Context, lookup
from mdev.runtime.memtable import DEVICE
from mdev.runtime.validate import as_int, as_list, size


# this module's part of the runtime's state, made afresh with it (finalize, fork)
held = rt.family(labels=dict)

LABEL_HANDLES, LIST_HANDLES = 0x1A_0000_0000, 0x1B_0000_0000
MAX_LABELS = 65535          # per process


@dataclass(eq=False)
class Label:
    handle: int
    context: Context
    model: object = None         # the model it was set in (a label marks one place)
    destroyed: bool = False


@dataclass(eq=False)
class LabelList:
    handle: int
    labels: list = field(default_factory=list)
    destroyed: bool = False


def _label(handle) -> Label:
    label = lookup(held.labels, handle, "label")
    if not isinstance(label, Label):
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{handle!r} is a label list, not a label")
    return label


def _label_list(handle) -> LabelList:
    labels = lookup(held.labels, handle, "label list")
    if not isinstance(labels, LabelList):
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{handle!r} is a label, not a label list")
    return labels


def _model_stream(stream, what: str):
    """The stream must be bound to a model being built: labels live in model run instances."""
    st = rt.stream_in_context(stream)
    rec = st.recorder
    if not isinstance(rec, R.Build) or rec.model is None:
        raise AclError(E.ACL_ERROR_RT_STREAM_MODEL, f"{what} needs a stream bound to a model being built "
                       f"(aclmdlRIBindStream); stream {st.stream_id} is not")
    return st, rec


@api(1)
def create_label() -> int:
    ctx = rt.current_context()
    if sum(isinstance(v, Label) for v in held.labels.values()) >= MAX_LABELS:
        raise AclError(E.ACL_ERROR_RT_OVER_LIMIT, f"a process may create at most {MAX_LABELS} labels")
    return rt.keep(held.labels, Label(rt.new_handle(LABEL_HANDLES), ctx))


@api()
def destroy_label(label) -> None:
    rt.forget(held.labels, _label(label))


@api()
def set_label(label, stream) -> None:
    lab = _label(label)
    st, rec = _model_stream(stream, "set_label")
    if lab.context is not st.context:
        raise AclError(E.ACL_ERROR_RT_LABEL_CONTEXT, "the label was created in another context")
    if lab.model is not None:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "the label is already set (a label marks one place)")
    rec.record(st, R.LABEL, (lab.handle,))
    lab.model = rec.model


@api(1)
def create_label_list(labels, num: int) -> int:
    num = size(num, "num")
    if not 0 < num <= MAX_LABELS:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"num must be in (0, {MAX_LABELS}], got {num}")
    handles = as_list(labels, "labels")
    if len(handles) < num:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"labels holds {len(handles)} labels, num is {num}")
    return rt.keep(held.labels, LabelList(rt.new_handle(LIST_HANDLES), [_label(h) for h in handles[:num]]))


@api()
def destroy_label_list(label_list) -> None:
    rt.forget(held.labels, _label_list(label_list))


@api()
def switch_label_by_index(ptr, max_value: int, label_list, stream) -> None:
    """Asynchronous: when the task runs, branch to label ``list[min(*ptr, max_value - 1)]``
    (``ptr``: a uint32 in device memory of the stream's device)."""
    labels = _label_list(label_list)
    st, rec = _model_stream(stream, "switch_label_by_index")
    max_value = as_int(max_value, "maxValue")
    if not 0 < max_value <= len(labels.labels):
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"maxValue must be in [1, {len(labels.labels)}] (the labels "
                       f"of the list), got {max_value}")
    if any(label.destroyed or label.context is not st.context for label in labels.labels):
        raise AclError(E.ACL_ERROR_RT_LABEL_CONTEXT, "every label of the list must be live and of the stream's context")
    operand = rt.memory.operand(ptr, 4, write=False, what="ptr")
    if operand.kind != DEVICE or operand.device != st.device:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "ptr must be device memory of the stream's device")
    rec.record(st, R.SWITCH, (operand.location(), max_value, [label.handle for label in labels.labels]))
