"""HCCL's API in Python: ``import mdev.hccl as hccl``.

    hccl.<snake_case of HcclX>  --boundary (HcclResult codes)-->  mdev.runtime.collectives.api
    comms, ret = hccl.comm_init_all(ndev, devices)               one rank per device, this process
    root, ret = hccl.get_root_info()                             bytes, HCCL_ROOT_INFO_BYTES long
    comm, ret = hccl.comm_init_root_info(nranks, root, rank)     this thread's device is the rank's
    ret = hccl.all_reduce(send, recv, count, dtype, op, comm, stream)   asynchronous on the stream
    cfg = hccl.comm_config_init(); cfg["hcclBufferSize"] = 64           HcclCommConfig as a dict
    comm, ret = hccl.comm_init_root_info_config(nranks, root, rank, cfg)
    sub, ret = hccl.create_sub_comm_config(comm, [0, 2], 1, my_index, cfg)   None outside [0, 2]

Names are HCCL's in snake_case (HcclAllReduce -> all_reduce, HcclCommInitAll ->
comm_init_all, HcclGetRankSize -> get_rank_size), outputs first and the HcclResult ``ret``
last, as pyACL shapes the CANN runtime; pointers and streams are the ints mdev.acl hands
out.  ``HCCL_*`` constants carry HCCL's values.  Failures return their HcclResult and never
raise; the message is kept with the thread's error messages (``acl.get_recent_err_msg()``).
"""

from __future__ import annotations

from mdev import hccl_types as _types
from mdev import sanitizer as _sanitizer  # noqa: F401  (MDEV_SANITIZE turns it on at attach / init)
from mdev.hccl_types import *  # noqa: F401,F403  (HCCL_SUCCESS, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, ...)
from mdev.runtime import boundary as _boundary
from mdev.runtime import registry as _registry

globals().update(_registry.bound("hccl", codes=_boundary.HCCL))


def comm_config_init() -> dict:
    """HcclCommConfigInit: a configuration (a dict of HcclCommConfig's field names) with every
    field "not set"; change the fields wanted, pass it to comm_init_root_info_config,
    comm_init_cluster_info_config or create_sub_comm_config."""
    return _types.comm_config()


def get_error_string(code: int) -> str:
    """HcclGetErrorString: what an HcclResult means ("unknown error" for anything else, as
    HCCL's own says of a value it does not know)."""
    if isinstance(code, bool) or not isinstance(code, int):
        return _types.error_string(-1)
    return _types.error_string(code)


_boundary.publish(globals())
