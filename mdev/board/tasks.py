"""What a device does when a stream task reaches the head of its stream.

Each op is a function ``op(device, stream, *args)`` registered in ``OPS``; it raises
``TaskFault`` to fail the task (the failure surfaces at the next synchronisation).
Memory operands arrive as locations resolved by the host:

    ("d", device, offset)    HBM of a device (this one or a peer mapped for P2P)
    ("p", segment, offset)   a host process's pinned buffer (shared segment)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from mdev.acl import errors as E

if TYPE_CHECKING:
    from mdev.board.device import Device
    from mdev.board.stream import DeviceStream


class TaskFault(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


OPS: dict[str, Callable] = {}


def op(engine: str | None):
    """Register a task op; ``engine`` names the engine it occupies while running."""
    def register(fn: Callable) -> Callable:
        fn.engine = engine
        OPS[fn.__name__] = fn
        return fn
    return register


@op("dma")
def copy(device: "Device", stream: "DeviceStream", dst: tuple, src: tuple, nbytes: int) -> None:
    np.copyto(device.view(dst, nbytes, write=True), device.view(src, nbytes))
    device.on_memory_written(dst)


@op("dma")
def copy2d(device: "Device", stream: "DeviceStream", dst: tuple, dpitch: int, src: tuple,
           spitch: int, width: int, height: int) -> None:
    dst_rows = _rows(device.view(dst, dpitch * (height - 1) + width, write=True), dpitch, width, height)
    src_rows = _rows(device.view(src, spitch * (height - 1) + width), spitch, width, height)
    np.copyto(dst_rows, src_rows)
    device.on_memory_written(dst)


@op("dma")
def memset(device: "Device", stream: "DeviceStream", dst: tuple, value: int, nbytes: int) -> None:
    device.view(dst, nbytes, write=True).fill(value & 0xFF)
    device.on_memory_written(dst)


def _rows(flat: np.ndarray, pitch: int, width: int, height: int) -> np.ndarray:
    return np.lib.stride_tricks.as_strided(flat, shape=(height, width), strides=(pitch, 1))


def dma_fault(message: str) -> TaskFault:
    return TaskFault(E.ACL_ERROR_RT_SYS_DMA, message)
