"""Executors libmdev_client.so made itself: the agent's side (adopting them, granting their runs).

    C thread: aclnnXGetWorkspaceSize, a signature the agent said passed (mdev.capi.signatures;
        the slot's S_SIGNED after a call the agent answered)
      --> a record in the area (mdev.capi.channel: the call's words and descriptors' copy),
          its handle (LOCAL_TAG | count | record) answered at once, workspace size 0
    any call naming that handle (aclnnX, aclDestroyAclOpExecutor, aclSetAclOpExecutorRepeatable)
      --> :func:`executor`: the agent makes the call the record holds (the signature's way:
          no check) and renames the executor it made to the handle, then frees the record;
          from then on the handle is an executor like any other (used up by its run, ...)
    a run queued by the C side (mdev.capi.asynchronous) takes the record first: its tensors
    must lie in device allocations granted area-wide (:func:`grant_allocations`, from the
    executors the agent made and granted, and from a record adopted by a synchronous call:
    after the epoch moved on, the next run re-grants), for the stream's device, in this epoch.

A handle whose record is gone (adopted and used up, destroyed) is no live executor: the
runtime answers it as it answers any stale handle.
"""

from __future__ import annotations

import functools
import struct
import threading
from collections.abc import Callable

from mdev.capi import asynchronous
from mdev.capi import channel as ch
from mdev.errors import AclError
from mdev.runtime.execution import operators

_HEAD = struct.Struct("<QIIQII")       # handle, state, index, face, words, packed bytes
_ALLOC = struct.Struct("<QQII")        # start, end, device + 1, epoch
_U32 = struct.Struct("<I")
_SCALARS = {"i": "q", "u": "Q", "p": "Q", "f": "d"}

_lock = threading.Lock()
_mm = None
_function: Callable | None = None       # (face, index) -> the agent's Function of the call, or None
_next_alloc = 0


def serve(mm, function: Callable) -> None:
    """Adopt executors from the area ``mm`` (the agent's), their calls found by ``function``."""
    global _mm, _function
    _mm, _function = mm, function


def executor(handle) -> int:
    """``handle`` as the runtime knows it: a record's executor adopted first (the conversion of
    every executor parameter under the agent)."""
    handle = int(handle)
    if _mm is not None and handle >> 56 == ch.LOCAL_TAG >> 56 and operators.executor_values(handle) is None:
        _adopt(handle)
    return handle


def _adopt(handle: int) -> None:
    if handle & 0xFFFF >= ch.LOCAL_RECORDS:
        return
    base = ch.LOCAL_AT + (handle & 0xFFFF) * ch.LOCAL_BYTES
    with _lock:
        held, state, index, face, words, size = _HEAD.unpack_from(_mm, base)
        if held != handle or state not in (ch.LOCAL_READY, ch.LOCAL_TAKEN):
            return           # gone: the runtime refuses the handle
        fn = _function(face, index)     # the program's words: a record it scribbled on names nothing
        layout = _words(fn.fmt) if fn is not None and fn.makes_executor and fn.fmt.endswith("b") else None
        if layout is None or layout.size != 8 * words or size > ch.LOCAL_BYTES - ch.L_PACKED:
            return
        args = layout.unpack_from(_mm, base + ch.L_ARGS)
        packed = bytes(_mm[base + ch.L_PACKED:base + ch.L_PACKED + size])
        _HEAD.pack_into(_mm, base, 0, ch.LOCAL_FREE, 0, 0, 0, 0)
    epoch = _U32.unpack_from(_mm, ch.H_EPOCH)[0]       # before its tensors are located
    made = fn.call(*args, packed)
    if made[-1] != 0:
        return
    operators.rename_executor(made[1], handle)
    if state == ch.LOCAL_READY:
        # not queued by the C side: its grants were void (the epoch moved on, say): grant its
        # allocations again, or every later record's run would be synchronous
        try:
            found = asynchronous.executor_device(handle)
        except AclError:
            return
        if found is not None:
            grant_allocations(found[1], found[0], epoch)


@functools.cache
def _words(fmt: str) -> struct.Struct | None:
    """How a record holds the words of a call with argument letters ``fmt`` (its last, the
    descriptors' copy, apart); None when one is not a number."""
    if not all(letter in _SCALARS for letter in fmt[:-1]):
        return None
    return struct.Struct("<" + "".join(_SCALARS[letter] for letter in fmt[:-1]))


def grant_allocations(allocations, device: int, epoch: int) -> None:
    """Runs of executors the C side made may use [start, end) of these device allocations of
    ``device`` until the area's epoch moves on from ``epoch``."""
    global _next_alloc
    with _lock:
        entries = [_ALLOC.unpack_from(_mm, ch.H_ALLOCS + ch.ALLOC_BYTES * i) for i in range(ch.ALLOC_GRANTS)]
        for start, end in allocations:
            if (start, end, device + 1, epoch) in entries:
                continue
            stale = [i for i, entry in enumerate(entries) if entry[3] != epoch]
            i = stale[0] if stale else _next_alloc % ch.ALLOC_GRANTS      # full: one makes room
            _next_alloc += 1
            at = ch.H_ALLOCS + ch.ALLOC_BYTES * i
            seq = _U32.unpack_from(_mm, at + 24)[0]
            _U32.pack_into(_mm, at + 24, (seq + 1) & 0xFFFFFFFF)         # odd: being written
            _ALLOC.pack_into(_mm, at, start, end, device + 1, epoch)
            _U32.pack_into(_mm, at + 24, (seq + 2) & 0xFFFFFFFF)
            entries[i] = (start, end, device + 1, epoch)
