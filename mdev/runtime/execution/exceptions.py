"""Exception-info callbacks: what the host learns when a device task fails.

A failing task makes its device send ``("exc", info)`` to the submitting process before
the task counts as done; the device link's reader thread calls every registered callback
with an exception-info handle, valid only during the call, that the getters read.
"""

from __future__ import annotations

import itertools
import threading
import traceback

from typing import Callable

from mdev import errors as E
from mdev.errors import AclError
from mdev.runtime.boundary import api
from mdev.runtime.board_client import MESSAGE_HANDLERS
from mdev.runtime.core import RUNTIME as rt


# this module's part of the runtime's state, made afresh with it (finalize, fork)
held = rt.family(exception_callbacks=list, exception_legacy=lambda: None)

INVALID = 0xFFFFFFFF
_infos: dict[int, dict] = {}
_handles = itertools.count(0xF000_0001)
_lock = threading.Lock()


def _callbacks() -> list[Callable]:
    registered = held.exception_callbacks
    legacy = held.exception_legacy
    return registered + ([legacy] if legacy is not None else [])


def _on_exception(link, message: tuple) -> None:
    callbacks = _callbacks()
    if not callbacks:
        return
    info = dict(message[1], device=rt.local_device(message[1]["device"]))   # the user's device id
    handle = next(_handles)
    with _lock:
        _infos[handle] = info
    try:
        for callback in callbacks:
            try:
                callback(handle)
            except Exception:
                traceback.print_exc()   # one failing callback does not silence the others
    finally:
        with _lock:
            _infos.pop(handle, None)


MESSAGE_HANDLERS["exc"] = _on_exception


@api()
def set_exception_info_callback(callback) -> None:
    """The deprecated single callback slot (None clears it); coexists with registered ones."""
    if callback is not None and not callable(callback):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "callback must be callable or None")
    held.exception_legacy = callback


@api()
def exception_info_callback_register(callback) -> None:
    if not callable(callback):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "callback must be callable")
    if callback not in held.exception_callbacks:
        held.exception_callbacks.append(callback)


@api()
def exception_info_callback_unregister(callback) -> None:
    if not callable(callback):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "callback must be callable")
    if callback in held.exception_callbacks:
        held.exception_callbacks.remove(callback)


def _field(name: str) -> Callable[[int], int]:
    def getter(info: int) -> int:
        record = _infos.get(info) if type(info) is int else None   # anything else names no info
        return INVALID if record is None else int(record.get(name, INVALID))
    getter.__name__ = f"get_{name}_from_exception_info"
    return getter


get_device_id_from_exception_info = _field("device")
get_stream_id_from_exception_info = _field("stream")
get_task_id_from_exception_info = _field("task")
get_thread_id_from_exception_info = _field("thread")
get_error_code_from_exception_info = _field("code")
