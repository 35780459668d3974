"""AI Core groups (aclrtSetGroup .. aclrtGetGroupInfoDetail).

Groups split a device's AI Cores by driver configuration (dcmi_create_capability_group) and
exist only on Atlas inference parts in the control-CPU form.  Every part an mdev board
emulates is an A2/A3-class part in host (EP) form, where the runtime answers these calls
ACL_ERROR_RT_FEATURE_NOT_SUPPORT and aclrtCreateGroupInfo returns NULL -- as here.
"""

from __future__ import annotations

from mdev import errors as E
from mdev.errors import AclError
from mdev.runtime.boundary import api
from mdev.runtime.core import RUNTIME as rt


def _no_groups(what: str) -> AclError:
    ctx = rt.current_context()
    soc = rt.attach().topology.device(ctx.device).soc_name
    return AclError(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, f"{what}: {soc} in host (EP) form has no AI Core groups")


def create_group_info() -> int:
    """NULL (0): no groups on this part (a value, no ret)."""
    return 0


@api()
def set_group(group_id: int) -> None:
    raise _no_groups("set_group")


@api(1)
def get_group_count() -> int:
    raise _no_groups("get_group_count")


@api()
def destroy_group_info(group_info) -> None:
    if not group_info:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "groupInfo is NULL")
    raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{group_info!r} is not a group info of create_group_info")


@api()
def get_all_group_info(group_info) -> None:
    raise _no_groups("get_all_group_info")


@api(1)
def get_group_info_detail(group_info, group_index: int, attr: int) -> int:
    raise _no_groups("get_group_info_detail")
