"""Kernels: Python functions that device processes run over device memory.

    from mdev.kernel import kernel, float32, ptr

    @kernel
    def axpy(ctx, x: ptr, y: ptr, out: ptr, alpha: float32, n: ptr): ...

See :mod:`mdev.kernel.api` (defining and launching), :mod:`mdev.kernel.params` (argument
types for packed launches) and, for what a block sees while it runs on a device,
:class:`mdev.board.block.BlockContext`.  This package stands on the ground floor: device
processes unpickle kernels made of these types without loading the host runtime.
"""

from mdev.kernel.api import Kernel, kernel
from mdev.kernel.params import (bool_, float16, float32, float64, int8, int16, int32, int64, ptr,
                                uint8, uint16, uint32, uint64)

__all__ = ["Kernel", "kernel", "ptr", "bool_", "float16", "float32", "float64",
           "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
