"""``acl.util.start_thread`` / ``stop_thread``: threads a program starts through the runtime
(pyACL programs use them to run ``process_report`` loops); the runtime keeps them by id.
"""

from __future__ import annotations

import threading

from typing import Any, Callable

from mdev import errors as E
from mdev.errors import AclError
from mdev.runtime.boundary import api
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.validate import as_int


# this module's part of the runtime's state, made afresh with it (finalize, fork)
held = rt.family(user_threads=dict)


@api(1)
def start_thread(fn: Callable, args_list: Any) -> int:
    if not callable(fn):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "thr_func must be callable")
    thread = threading.Thread(target=fn, args=(args_list,), daemon=True, name="acl.util thread")
    thread.start()
    with rt.lock:
        held.user_threads[thread.ident] = thread
    return thread.ident


@api()
def stop_thread(thread_id: int) -> None:
    thread = held.user_threads.pop(as_int(thread_id, "thr_id"), None)
    if thread is None:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{thread_id} is not a thread from start_thread")
    if thread is not threading.current_thread():
        thread.join()
