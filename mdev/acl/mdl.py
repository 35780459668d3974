"""``acl.mdl``: models.

pyACL's ``acl.mdl`` is the offline-model API (``load_from_file``, ``execute``, datasets,
AIPP, dump); mdev does not emulate offline models, so those names return
``ACL_ERROR_API_NOT_SUPPORT`` (200001) in pyACL's return shape (see ``pyacl_names``).

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

from mdev.runtime.boundary import bind, publish
from mdev.runtime import models as _model

# explicit build on persistent streams
ri_build_begin = bind(_model.build_begin, 1)
ri_bind_stream = bind(_model.bind_stream)
ri_end_task = bind(_model.end_task)
ri_build_end = bind(_model.build_end)
ri_unbind_stream = bind(_model.unbind_stream)

# execution and lifetime
ri_execute_async = bind(_model.execute_async)
ri_execute = bind(_model.execute)
ri_destroy = bind(_model.destroy)

# stream capture
ri_capture_begin = bind(_model.capture_begin)
ri_capture_end = bind(_model.capture_end, 1)
ri_capture_get_info = bind(_model.capture_get_info, 2)
ri_capture_thread_exchange_mode = bind(_model.capture_thread_exchange_mode, 1)

# task groups and update
ri_capture_task_grp_begin = bind(_model.task_grp_begin)
ri_capture_task_grp_end = bind(_model.task_grp_end, 1)
ri_capture_task_update_begin = bind(_model.task_update_begin)
ri_capture_task_update_end = bind(_model.task_update_end)

# debug dumps
ri_debug_print = bind(_model.debug_print)
ri_debug_json_print = bind(_model.debug_json_print)

# the same functions under their full snake_case names (aclmdlRIBuildBegin -> mdl_ri_build_begin)
for _name in [n for n in list(globals()) if n.startswith("ri_")]:
    globals()["mdl_" + _name] = globals()[_name]
del _name
publish(globals())


def __getattr__(name: str):
    """pyACL names mdev does not emulate resolve to stubs; anything else is an AttributeError."""
    from mdev.acl.pyacl_names import resolve
    return resolve("mdl", name)
