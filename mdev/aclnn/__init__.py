"""The operator library (aclnn) for Python programs: ``import mdev.aclnn as aclnn``.

    aclnn.create_tensor(view_dims, data_type, strides, offset, format, storage_dims, ptr)
    aclnn.create_scalar(value, data_type), create_int_array([..]), create_tensor_list([..]), ...
    ws, executor, ret = aclnn.add_get_workspace_size(self, other, alpha, out)   # aclnnAddGetWorkspaceSize
    ret = aclnn.add(workspace, ws, executor, stream)                            # aclnnAdd: one task
    aclnn.destroy_tensor(t), ...; aclnn.OPERATORS: the ops there are (mdev.operators)

Each op X of the library is here twice, snake_cased: ``x_get_workspace_size(*params)`` and
``x(workspace, workspace_size, executor, stream)``; as in pyACL, outputs come first and the
status (an aclnnStatus, or an aclError of the runtime) last.  The functions are the runtime's
(mdev.runtime.execution.operators), bound like every face's.
"""

from __future__ import annotations

import functools

from mdev.operators import OPERATORS
from mdev.runtime import boundary, names, registry

globals().update(registry.bound("aclnn"))
boundary.publish(globals())

OP_NAMES = {names.snake(name): name for name in OPERATORS}


def __getattr__(attr: str):
    """``x_get_workspace_size`` and ``x`` of each op (made on first use)."""
    if attr.endswith("_get_workspace_size") and attr[:-len("_get_workspace_size")] in OP_NAMES:
        fn = functools.partial(globals()["operator_get_workspace_size"], OP_NAMES[attr[:-len("_get_workspace_size")]])
    elif attr in OP_NAMES:
        fn = globals()["operator_run"]
    else:
        raise AttributeError(f"module 'mdev.aclnn' has no attribute {attr!r}")
    globals()[attr] = fn
    return fn
