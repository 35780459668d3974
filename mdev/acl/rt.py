"""``acl.rt``: the runtime functions, named and shaped as pyACL names and shapes them.

Each name binds the ``@api`` implementation of the same name in ``mdev.runtime`` that
mdev.runtime.registry places here; the
binding gives the pyACL return shape (outputs first, ``ret`` last).  Handles and pointers
are ints and 0 (or None) is the default stream.
"""

from __future__ import annotations

from mdev.acl import unsupported as _unsupported
from mdev.runtime import boundary, registry, stream_config
from mdev.runtime.devices import groups
from mdev.runtime.execution import exceptions, kernels
from mdev.runtime.execution import models as _graph_model
from mdev.runtime.memory import allocators

_bound = registry.bound("acl.rt")
globals().update(_bound)

# aliases: C names and pyACL spellings of the same functions
set_current_context = _bound["set_context"]        # C name aclrtSetCurrentContext
get_current_context = _bound["get_context"]        # C name aclrtGetCurrentContext
get_stream_id = _bound["stream_get_id"]
malloc_cached = _bound["malloc"]

# exception info fields: plain values, as pyACL returns them
get_device_id_from_exception_info = exceptions.get_device_id_from_exception_info
get_stream_id_from_exception_info = exceptions.get_stream_id_from_exception_info
get_task_id_from_exception_info = exceptions.get_task_id_from_exception_info
get_thread_id_from_exception_info = exceptions.get_thread_id_from_exception_info
get_error_code_from_exception_info = exceptions.get_error_code_from_exception_info

# values, no ret (as in pyACL / the C API)
allocator_create_desc = allocators.allocator_create_desc
create_stream_config_handle = stream_config.create_stream_config_handle
create_binary = kernels.create_binary
create_group_info = groups.create_group_info

# errors
get_last_error = boundary.get_last_error
peek_at_last_error = boundary.peek_at_last_error

# model streams: aclrtActiveStream starts a non-head stream of a model being built
active_stream = boundary.bind(_graph_model.active_stream)
switch_stream = boundary.bind(_graph_model.switch_stream)

boundary.publish(globals())


# pyACL functions mdev does not emulate (yet): stubs returning ACL_ERROR_API_NOT_SUPPORT
def __getattr__(name: str):
    return _unsupported.resolve("rt", name)
