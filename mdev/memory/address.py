"""The emulated device address space and allocation geometry.

Device pointers are plain integers that can never be real host addresses: device ``d``
owns ``[DEVICE_BASE + d * DEVICE_SPAN, +DEVICE_SPAN)``, above 2**48, where x86-64 and
arm64 user space never map anything.  So any pointer can be classified by value alone.
``d`` is the board-global device index (a cluster's node k, local device i: see
mdev.topology.model), so pointers of every node's devices are distinct and a device process
can name any device's memory.

    [2**48, 2**49)            1024 devices x 256 GiB
    [2**49, 2**49 + 2**47)    each host process's VMM virtual addresses
    [2**49 + 2**47, ...)      kernel entry addresses (aclrtGetFunctionAddr): names of code,
                              not memory -- no copy or kernel can reach them
"""

from __future__ import annotations

import ctypes

from mdev import constants as C

DEVICE_BASE = 1 << 48
DEVICE_SPAN = 1 << 38          # 256 GiB of address space per device: the most HBM a device may have
MAX_DEVICES = 1024             # devices of a board, every node's
# above the device ranges: each host process's VMM virtual addresses (reserve_mem_address)
VMM_BASE = DEVICE_BASE + MAX_DEVICES * DEVICE_SPAN
VMM_END = VMM_BASE + (1 << 47)
CODE_BASE = VMM_END

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
NORMAL_PAGE, HUGE_PAGE, GIANT_PAGE = 4 * KiB, 2 * MiB, 1 * GiB

_BASE_POLICY_MASK = 0xFF


def device_base(device: int) -> int:
    return DEVICE_BASE + device * DEVICE_SPAN


def function_address(device: int, function: int) -> int:
    """The entry address of function ``function`` loaded on ``device``."""
    return CODE_BASE + (device << 32) + function * 0x100


def split(ptr: int) -> tuple[int, int] | None:
    """(device, offset) of a device pointer, or None for anything else."""
    if DEVICE_BASE <= ptr < DEVICE_BASE + MAX_DEVICES * DEVICE_SPAN:
        rel = ptr - DEVICE_BASE
        return rel // DEVICE_SPAN, rel % DEVICE_SPAN
    return None


def page_size(size: int, policy: int) -> int:
    """Page size an allocation of ``size`` bytes gets under ``policy`` (aclrtMemMallocPolicy)."""
    base = policy & _BASE_POLICY_MASK
    if base in (C.ACL_MEM_MALLOC_HUGE1G_ONLY, C.ACL_MEM_MALLOC_HUGE1G_ONLY_P2P):
        return GIANT_PAGE
    if base in (C.ACL_MEM_MALLOC_HUGE_ONLY, C.ACL_MEM_MALLOC_HUGE_ONLY_P2P):
        return HUGE_PAGE
    if base in (C.ACL_MEM_MALLOC_NORMAL_ONLY, C.ACL_MEM_MALLOC_NORMAL_ONLY_P2P):
        return NORMAL_PAGE
    # HUGE_FIRST and values outside the enum: huge pages above 1 MiB (documented rule)
    return HUGE_PAGE if size > 1 * MiB else NORMAL_PAGE


def padded_size(size: int, policy: int, align32_only: bool = False) -> int:
    """Bytes aclrtMalloc really reserves: ALIGN_UP(size, 32) + 32, except 1 GiB pages."""
    aligned = -(-size // 32) * 32
    if align32_only or page_size(size, policy) == GIANT_PAGE:
        return aligned
    return aligned + 32


def align_up(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


def buffer_address(data: bytes | bytearray) -> int:
    """Address of the internal buffer of a bytes or bytearray object (0 when empty)."""
    if isinstance(data, bytes):
        return ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0
    if isinstance(data, bytearray):
        return ctypes.addressof((ctypes.c_char * len(data)).from_buffer(data)) if data else 0
    raise TypeError(f"expected bytes or bytearray, got {type(data).__name__}")
