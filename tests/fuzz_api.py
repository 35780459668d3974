"""Random calls of every public function of ``acl`` and ``acl.rt`` with random arguments,
run as a script in a host process of its own (``python fuzz_api.py EXAMPLES``) so that the
process-wide settings the calls change (timeouts, limits, modes) touch no other test.

Each hypothesis example is a sequence of calls; every argument is drawn from hostile values
(wrong types, negative / huge ints, containers, objects) and live handles of this process
(a device allocation, a stream, an event).  Each call must return what the binding
documents: an aclError, or a tuple whose last item is one.  The functions that return a
value and no aclError (as in pyACL) may raise TypeError for an argument of the wrong type,
as pyACL's argument parser does; nothing else may escape, and no call may fail with an
internal error other than a stopped stream's.  The script prints the number of calls made.
"""

from __future__ import annotations

import inspect
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mdev.acl as acl

# Calls that would end the process's use of the board, or block without a time limit on
# work a random sequence can leave waiting for ever (a wait on an event never recorded).
EXCLUDED = {"finalize", "finalize_reference", "process_report", "synchronize_device", "synchronize_stream",
            "synchronize_event", "reset_device", "reset_device_force", "app_log"}
# Value-returning functions (no aclError in their result), whose wrong-type argument is a TypeError.
VALUE_FUNCTIONS = {"data_type_size", "float16_to_float", "float_to_float16", "get_soc_name", "get_recent_err_msg",
                   "get_version"}
INTERNAL = {500000, 507899}


def _functions() -> dict:
    found = {}
    for module in (acl, acl.rt):
        for name in dir(module):
            fn = getattr(module, name)
            if (name.startswith("_") or name in EXCLUDED or not callable(fn) or inspect.isclass(fn)
                    or inspect.ismodule(fn) or getattr(fn, "__module__", "").startswith("mdev.errors")):
                continue
            try:
                arity = len(inspect.signature(fn).parameters)
            except (TypeError, ValueError):
                arity = 3
            found[f"{module.__name__}.{name}"] = (fn, arity)
    return found


FUNCTIONS = _functions()
LIVE: dict = {}
CALLS = [0]

hostile = st.one_of(
    st.integers(-2**65, 2**65),
    st.sampled_from([-1, 0, 1, 2, 7, 4096, 1 << 40, 2**63, 2**64]),
    st.none(), st.booleans(), st.floats(allow_nan=True), st.text(max_size=4), st.binary(max_size=16),
    st.just([1]), st.just({}), st.just((1, 2)), st.just(object()),
    st.sampled_from(["ptr", "stream", "event"]).map(lambda k: LIVE[k]),
)
call = st.tuples(st.sampled_from(sorted(FUNCTIONS)), st.lists(hostile, min_size=0, max_size=6))


def _check(name: str, args: list) -> None:
    fn, arity = FUNCTIONS[name]
    args = (args + [0] * arity)[:arity]
    acl.get_recent_err_msg()
    CALLS[0] += 1
    try:
        result = fn(*args)
    except TypeError:
        if name.rsplit(".", 1)[1] in VALUE_FUNCTIONS:
            return
        raise
    code = result[-1] if isinstance(result, tuple) and result else result
    if name.rsplit(".", 1)[1] in VALUE_FUNCTIONS or code is None:
        return
    assert type(code) is int, f"{name}{tuple(args)!r} returned {result!r}"
    assert code not in INTERNAL and not (code == 507000 and "stopped" not in acl.get_recent_err_msg()), \
        f"{name}{tuple(args)!r}: internal error {code}: {acl.get_recent_err_msg()}"


def main(examples: int) -> None:
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    LIVE["ptr"], _ = acl.rt.malloc(4096, 0)
    LIVE["stream"], _ = acl.rt.create_stream()
    LIVE["event"], _ = acl.rt.create_event()

    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(call, min_size=1, max_size=40))
    def sequence(calls):
        for name, args in calls:
            _check(name, args)

    sequence()
    print(f"{CALLS[0]} calls of {len(FUNCTIONS)} functions")


if __name__ == "__main__":
    main(int(sys.argv[1]))
