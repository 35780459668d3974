"""``acl.mdl``: models.

pyACL's ``acl.mdl`` is the offline-model API (``load_from_file``, ``execute``, datasets,
AIPP, dump); mdev does not emulate offline models, so those names return
``ACL_ERROR_API_NOT_SUPPORT`` (200001) in pyACL's return shape (see ``mdev.acl.unsupported``).

The model-run-instance and stream-capture functions of the C API (``aclmdlRI*``, not in
pyACL's own method table) are here, named by pyACL's rule with "RI" as one word:
``aclmdlRIBuildBegin`` -> ``acl.mdl.ri_build_begin``.  Each is also available under its
full snake_case name (``acl.mdl.mdl_ri_build_begin``).  Shapes follow pyACL: outputs
first, ``ret`` last::

    model, ret = acl.mdl.ri_build_begin(0)
    ret = acl.mdl.ri_capture_begin(stream, acl.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL)
    model, ret = acl.mdl.ri_capture_end(stream)
    status, model, ret = acl.mdl.ri_capture_get_info(stream)
    previous_mode, ret = acl.mdl.ri_capture_thread_exchange_mode(mode)
    handle, ret = acl.mdl.ri_capture_task_grp_end(stream)
    ret = acl.mdl.ri_execute_async(model, stream)
"""

from __future__ import annotations

from mdev.acl import unsupported as _unsupported
from mdev.runtime import boundary as _boundary
from mdev.runtime import registry as _registry

# build, bind, execute, destroy, capture, task groups and update, debug dumps
globals().update(_registry.bound("acl.mdl"))

# the same functions under their full snake_case names (aclmdlRIBuildBegin -> mdl_ri_build_begin)
for _name in [n for n in list(globals()) if n.startswith("ri_")]:
    globals()["mdl_" + _name] = globals()[_name]
del _name
_boundary.publish(globals())


def __getattr__(name: str):
    """pyACL names mdev does not emulate resolve to stubs; anything else is an AttributeError."""
    return _unsupported.resolve("mdl", name)
