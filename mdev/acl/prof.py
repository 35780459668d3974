"""``acl.prof``: pyACL's profiling module, over mdev's timeline trace (mdev.runtime.profiling).

    ret = acl.prof.init(path)                              the folder the data goes to
    config = acl.prof.create_config(device_ids, aicore_metrics, aicore_events, data_types)
    ret = acl.prof.start(config) ... ret = acl.prof.stop(config)   writes path/mdev_trace_<pid>.json
    ret = acl.prof.destroy_config(config); ret = acl.prof.finalize()

``create_config`` returns the configuration alone, 0 when it fails (pyACL's shape).  The
subscription, step and stamp functions resolve to stubs that return
``ACL_ERROR_API_NOT_SUPPORT`` (200001; see mdev.acl.unsupported).
"""

from __future__ import annotations

from mdev.acl import unsupported as _unsupported
from mdev.runtime import boundary as _boundary
from mdev.runtime import registry as _registry

globals().update(_registry.bound("acl.prof"))
_boundary.publish(globals())
_create_config = create_config  # noqa: F821  (bound from the registry above)


def create_config(device_id_list, aicore_metrics, aicore_events, data_type_config) -> int:
    """The configuration's handle, or 0 when it fails (acl.get_recent_err_msg() says why)."""
    config, _ = _create_config(device_id_list, aicore_metrics, aicore_events, data_type_config)
    return config


create_config.__wrapped__ = _create_config.__wrapped__


def __getattr__(name: str):
    """pyACL names mdev does not emulate resolve to stubs; anything else is an AttributeError."""
    return _unsupported.resolve("prof", name)
