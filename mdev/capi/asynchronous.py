"""Asynchronous C calls under the host agent: which ones may return before the agent runs
them, and the grants that make it exact.

    C thread --aclrtMemsetAsync(dev, max, v, n, stream)--> libmdev_client.so
        the function has a SPEC, and its arguments pass every check the spec names against
        the grants the agent gave this thread --> a ring entry, ACL_SUCCESS at once
        otherwise --> a synchronous call: the runtime validates and submits, the answer is
        the runtime's code; when it succeeds, :func:`grants` says what the call showed valid
        (its stream, the device allocations it touched, its event), and the agent writes
        that into the thread's slot for the next calls' checks (mdev.capi.agent)

A spec has two characters per parameter, a role and an argument index ('.' none):

    s.  a stream handle this thread may submit to (0: its context's default stream)
    e.  an event handle it may record on that stream;  w.  one that stream may wait on
    dN  a device pointer: [p, p + argument N) inside one device allocation of this process,
        on the stream's device, NULL refused
    mN  a bound: argument N <= this one
    k.  a copy kind the runtime takes without looking further (host/device in any
        direction, or DEFAULT: memory of the stream's own device makes it device to device)
    x.  an operator's executor granted for the stream's device (any thread's grant: torch_npu
        makes it on one thread, runs it on another); queueing the run takes the grant, which
        the run uses up (mdev.runtime.execution.operators.run_device says what it holds)
    ..  anything

The checks are exactly the runtime's for such arguments (mdev.runtime.memory.memops.memset_async,
memcpy_async, sync.events.record_event, stream_wait_event): a call passing them would succeed
synchronously, so the caller loses nothing by not waiting.  Grants are void once anything
could have made them false: the agent advances the area's epoch around every call not in
HARMLESS (mdev.capi.channel; a THREAD_LOCAL call voids only its thread's grants), and
grants nothing while a capture or a checking tool could refuse a task; a stream of a
stop-on-failure context is granted with the address of its failure word in the device's
control page (mapped into the program), which the C side reads before queueing as the
runtime reads it before submitting (a stopped context refuses with its failure code); and the C side calls synchronously once the stream's device process is gone (its
pidfd, polled with the agent's: 507901 at once).  What can still fail after the C side
returned is a race the program made itself (another thread freeing the memory meanwhile,
a device dying meanwhile): that failure is the thread's last error and the answer of its
next synchronisation (``aclrtSynchronize*``), as a task failure is.  Order: a call other
than an UNORDERED one first waits until every thread's queued calls have run.

An aclnnX(workspace, workspaceSize, executor, stream) of mdev's operator library is
asynchronous too (OPERATOR_RUN): when aclnnXGetWorkspaceSize succeeds the agent grants its
executor (area-wide, stamped with the epoch) if every tensor lies where operator_run would
take it; the C side takes that grant when it queues the run, so a second run of the same
executor, a repeatable one (aclSetAclOpExecutorRepeatable advances the epoch) or a destroyed
one is called synchronously and gets the runtime's code.

A new asynchronous function needs only its SPEC here (and a call
that frees or destroys nothing belongs in HARMLESS, or it voids every grant); the C entry
points carry the specs (mdev.capi.generate).
"""

from __future__ import annotations

from mdev import constants as C
from mdev.capi import channel
from mdev.capi.channel import G_WAIT
from mdev.operators import OPERATORS
from mdev.runtime import capture, hooks
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.execution import operators
from mdev.runtime.memtable import DEVICE
from mdev.runtime.streams import NON_EXECUTING
from mdev.runtime.sync import events

SPECS = {
    "aclrtMemsetAsync": "d3m3....s.",
    "aclrtMemcpyAsync": "d3m3d3..k.s.",
    "aclrtRecordEvent": "e.s.",
    "aclrtStreamWaitEvent": "s.w.",
}
# aclnnX(workspace, workspaceSize, executor, stream): operator_run looks at neither workspace argument
OPERATOR_RUN = "....x.s."
# aclnnXGetWorkspaceSize: the C side answers a signature the agent said passed (mdev.capi.local)
MADE_HERE = "G"
_WORKSPACE = "GetWorkspaceSize"

# the copy kinds memcpy_async takes at once between memory of the stream's own device
PLAIN_KINDS = (C.ACL_MEMCPY_HOST_TO_HOST, C.ACL_MEMCPY_HOST_TO_DEVICE, C.ACL_MEMCPY_DEVICE_TO_HOST,
               C.ACL_MEMCPY_DEVICE_TO_DEVICE, C.ACL_MEMCPY_DEFAULT)
assert PLAIN_KINDS == tuple(range(channel.PLAIN_KINDS))      # the C side's check is kind < PLAIN_KINDS

# calls that cannot make a grant false (no free, destroy, context switch, capture, mode
# change, reset): every other call (but THREAD_LOCAL's) advances the epoch before and
# after it runs
HARMLESS = frozenset(SPECS) | frozenset((
    "aclrtSynchronizeStream", "aclrtSynchronizeStreamWithTimeout", "aclrtSynchronizeDevice",
    "aclrtSynchronizeDeviceWithTimeout", "aclrtSynchronizeEvent", "aclrtSynchronizeEventWithTimeout",
    "aclrtStreamQuery", "aclrtQueryEvent", "aclrtQueryEventStatus", "aclrtQueryEventWaitStatus",
    "aclrtEventElapsedTime", "aclrtGetDevice", "aclrtGetCurrentContext", "aclrtGetDeviceCount",
    "aclrtGetLastError", "aclrtPeekAtLastError", "aclGetRecentErrMsg", "aclrtGetRunMode", "aclrtGetSocName",
    "aclrtMalloc", "aclrtMallocHost", "aclrtCreateStream", "aclrtCreateEvent", "aclrtCreateEventWithFlag",
    "aclrtCreateEventExWithFlag", "aclrtMemcpy", "aclrtMemset", "aclrtGetMemInfo",
    "aclrtLaunchKernel", "aclrtLaunchKernelV2", "aclrtLaunchKernelWithConfig", "aclrtLaunchKernelWithHostArgs",
    "aclrtLaunchKernelWithArgsArray",
))


def spec(name: str) -> str | None:
    """The spec of C function ``name``, or None when it is always called synchronously."""
    if name in SPECS:
        return SPECS[name]
    return OPERATOR_RUN if name.startswith("aclnn") and name[len("aclnn"):] in OPERATORS else None


def table_spec(name: str, params: int, outputs: bool) -> str | None:
    """What the C entry point of ``name`` carries in its face's table: its checked spec, MADE_HERE
    for an aclnnXGetWorkspaceSize (mdev.capi.local), or None."""
    if outputs:
        op = name[len("aclnn"):-len(_WORKSPACE)] if name.startswith("aclnn") and name.endswith(_WORKSPACE) else None
        return MADE_HERE if op in OPERATORS else None
    found = spec(name)
    return checked(found, params) if found else None


def harmless(name: str) -> bool:
    """Whether a call cannot make a grant false: one of HARMLESS, or an operator library
    call (aclnnXGetWorkspaceSize makes an executor, aclnnX runs one: neither frees memory
    nor ends a stream, an event or a context -- a framework makes thousands a second, and
    each would otherwise void every thread's grants)."""
    return name in HARMLESS or name.startswith("aclnn")


# calls that change only what the calling thread's grants rest on (its current context):
# they void that thread's grants, not every thread's
THREAD_LOCAL = frozenset(("aclrtSetCurrentContext", "aclrtSetDevice", "aclrtCreateContext"))
SYNCHRONISATIONS = frozenset(name for name in HARMLESS if name.startswith("aclrtSynchronize"))
# calls that see nothing another thread's queued calls change (the caller's own state, the
# board's constants): they need not wait for those to run first
UNORDERED = frozenset(("aclrtGetDevice", "aclrtGetCurrentContext", "aclrtGetLastError", "aclrtPeekAtLastError",
                       "aclGetRecentErrMsg", "aclrtGetRunMode", "aclrtGetSocName", "aclrtGetDeviceCount"))


def checked(spec: str, params: int) -> str:
    """``spec`` after checking it names a role and an index for each of ``params`` parameters,
    one stream among them (the C side reads it without looking twice), at most one executor."""
    pairs = [spec[k:k + 2] for k in range(0, len(spec), 2)]
    if len(spec) != 2 * params or spec[::2].count("s") != 1 or spec[::2].count("x") > 1 or any(
            not (role in "sewkx." and index == "." or role in "dm" and index.isdigit() and int(index) < params)
            for role, index in pairs):
        raise ValueError(f"an asynchronous spec has a role and an index per parameter, one stream: {spec!r}")
    return spec


def grants(spec: str, args: list) -> tuple[list, list, list] | None:
    """After a call with ``spec`` and ``args`` succeeded on this (agent) thread: what it
    showed valid -- ([(stream handle, device, its process id)], [(start, end, device, 0)],
    [(event, device, flags)]) -- or None when its kind of call must keep being validated
    synchronously."""
    if capture.held.captures or hooks.checker is not None:
        return None
    roles = spec[::2]
    stream = rt.stream_in_context(args[roles.index("s")])
    if stream.recorder is not None or stream.flags & NON_EXECUTING:
        return None
    device = stream.device
    ranges, evs = [], []
    for k, role in enumerate(roles):
        if role == "d":
            alloc = rt.memory.containing(args[k])
            if alloc is None or alloc.kind != DEVICE or alloc.device != device or alloc.ipc_key is not None:
                return None
            ranges.append((alloc.ptr, alloc.end, device, 0))
        elif role in "ew":
            ev = events.get(args[k])
            if events.shared(ev) or ev.device != device:
                return None
            evs.append((args[k], device, G_WAIT if ev.can_wait else 0))
    return [(args[roles.index("s")], device, rt.link(device).pid)], ranges, evs


def stop_word(handle: int) -> tuple[object, int] | None:
    """Where granted stream ``handle``'s failure word lies when its context stops on failure
    -- (the device's control segment, the word's byte offset in it) -- else None.  The C side
    reads the word before queueing a call for the stream, as streams.submit reads it before
    submitting: once a failed task stopped the context, its calls go the synchronous way and
    get the runtime's refusal with the failure code."""
    stream = rt.stream_in_context(handle)
    if not stream.context.stop_on_failure:
        return None
    control = rt.link(stream.device).control
    word = control.stream_err[stream.slot:].__array_interface__["data"][0]
    return control.segment, word - control.segment.address


def executor_device(executor: int) -> tuple[int, set[tuple[int, int]]] | None:
    """After aclnnXGetWorkspaceSize made ``executor`` on this (agent) thread: the device a
    run of it may be queued for (its stream's grant says the rest) and the device allocations
    its tensors lie in, or None.  Not without a current context: no stream of it is granted,
    and locating the tensors would cost the call ~10 us for nothing."""
    if capture.held.captures or hooks.checker is not None or rt.thread.context is None:
        return None
    return operators.run_device(executor)

