"""Floating-point overflow status inside a device process, per host process (A2/A3 parts
keep it per process).

    kernel of a stream with the overflow switch on --numpy FP error--> status[client] = 1
    "overflow_status" task --> 64 bytes at its destination: uint32 status, then zeros
    "overflow_reset" task  --> status[client] = 0

``watching`` wraps the blocks of a kernel: numpy calls back on overflow, invalid operation
and division by zero (its error state is per thread, so every block thread sets it).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import numpy as np

from mdev.board.tasks import feature_state
from mdev.board.tasktable import op, request

if TYPE_CHECKING:
    from mdev.board.device import Device
    from mdev.board.stream import DeviceStream


def _status(device: "Device") -> dict:
    return feature_state(device, "overflow_status")


def watching(device: "Device", stream: "DeviceStream"):
    """The context a kernel block runs in: overflow reporting if the stream asked for it."""
    if not stream.overflow_switch:
        return contextlib.nullcontext()
    status, client = _status(device), stream.client

    def overflowed(kind: str, flag: int) -> None:
        status[client] = 1

    return np.errstate(over="call", invalid="call", divide="call", call=overflowed)


@request
def set_overflow_switch(device: "Device", conn, slot: int, flag: int) -> None:
    device.own_stream(conn, slot).overflow_switch = flag


@op(quick=lambda args: True)
def overflow_status(device: "Device", stream: "DeviceStream", dst: tuple) -> None:
    record = device.memory.view(dst, 64, stream, write=True)
    record.fill(0)
    record[:4].view(np.uint32)[0] = _status(device).get(stream.client, 0)
    device.wake()


@op(quick=lambda args: True)
def overflow_reset(device: "Device", stream: "DeviceStream") -> None:
    _status(device).pop(stream.client, None)
