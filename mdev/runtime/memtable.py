"""Device and host memory as seen from a host process.

Every pointer a user passes is classified by value (see ``mdev.memory.address``):

    device pointer  -> (device, offset) in that device's HBM segment, bounds-checked
                       against this process's allocation table
    pinned host     -> a shared segment this process created with malloc_host; device
                       processes map the same segment, so async copies are real DMA
    pageable host   -> any other mapped address of the program (numpy arrays, bytes);
                       only the host side can touch it, so copies with it run here, through
                       mdev.memory.program (the kernel checks each page as it copies)

Synchronous copies and memsets run in this process on mapped views (they wait for no
stream, as documented); asynchronous ones become stream tasks on the device, except when
pageable memory is involved: then the stream is drained first and the copy runs here.
"""

from __future__ import annotations

import bisect
import ctypes
import os
import threading
from dataclasses import dataclass

import numpy as np

from mdev import errors as E
from mdev import procfs
from mdev.errors import AclError
from mdev.runtime import hooks
from mdev.memory import address
from mdev.naming import create_fresh
from mdev.memory.program import program
from mdev.memory.segment import Segment

DEVICE, PINNED, PAGEABLE = "device", "pinned", "pageable"


PIN_HEADROOM = 1 << 30     # RAM pinning leaves to the rest of the machine

_DEVICE_LOW = address.DEVICE_BASE                                        # every device's addresses
_DEVICE_HIGH = address.DEVICE_BASE + address.MAX_DEVICES * address.DEVICE_SPAN


@dataclass(eq=False)
class Allocation:
    ptr: int
    size: int
    kind: str                 # DEVICE or PINNED
    device: int = -1
    page: int = 4096          # address.NORMAL_PAGE, spelt out: importing mdev.memory.address
                              # first runs mdev.acl, which imports this module mid-way
    reserved: int = 0
    policy: int = 0
    segment: Segment | None = None
    ipc_key: str | None = None        # set on memory this process imported over IPC
    fabric: bool = False              # imported through an A3 FABRIC handle: reached over the
                                      # supernode's fabric from any device, no peer access needed
    exports: list | None = None       # IPC keys this process exported from it (closed on free)
    registered: bool = False          # host memory of the program's, registered (aclrtHostRegister)
    managed: bool = False             # managed memory (aclrtMemAllocManaged): pinned, freed by aclrtFree
    # starts of aclrtHostRegisterV2 registrations inside this aclrtMallocHost memory: they end
    # with it (made on the first one)
    registered_within: set[int] | None = None
    dvpp: bool = False                # from acldvppMalloc
    held_by: str | None = None        # the runtime object that owns it (not the user's to free)
    module: int = 33                  # the software module it is for (ACL_RT_MEM_ATTR_MODULE_ID; 33: APP)

    @property
    def end(self) -> int:
        return self.ptr + self.size


@dataclass
class Operand:
    """A validated memory range: where it is, and how to reach it.

    A VMM range that crosses mappings has ``pieces``: one single-piece operand per mapping
    it touches, in address order (copies and memsets run piece by piece)."""
    kind: str
    ptr: int
    nbytes: int
    allocation: Allocation | None = None
    pieces: list | None = None

    @property
    def device(self) -> int:
        return self.allocation.device if self.kind == DEVICE else -1

    @property
    def is_host(self) -> bool:
        return self.kind != DEVICE

    def parts(self) -> list["Operand"]:
        return self.pieces or [self]

    def slice(self, offset: int, nbytes: int) -> "Operand":
        """The operand of bytes [offset, offset+nbytes) of this one."""
        if not self.pieces:
            return Operand(self.kind, self.ptr + offset, nbytes, self.allocation)
        out, pos = [], 0
        for p in self.pieces:
            lo, hi = max(offset, pos), min(offset + nbytes, pos + p.nbytes)
            if lo < hi:
                out.append(Operand(p.kind, p.ptr + lo - pos, hi - lo, p.allocation))
            pos += p.nbytes
        if len(out) == 1:
            return out[0]
        return Operand(self.kind, self.ptr + offset, nbytes, out[0].allocation, out)

    def _single(self) -> None:
        if self.pieces:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID,
                           f"[{self.ptr:#x}, +{self.nbytes}) spans {len(self.pieces)} VMM mappings; this "
                           "operation needs memory of one mapping")

    def location(self) -> tuple:
        """How a device process names this range (pageable memory has no such name)."""
        a = self.allocation
        if self.kind == DEVICE and self.pieces is None:     # address.device_base inlined: every task asks
            return ("d", a.device, self.ptr - _DEVICE_LOW - a.device * address.DEVICE_SPAN)
        self._single()              # device memory of several VMM mappings has no one name
        return ("p", a.segment.name, self.ptr - a.ptr)


def pairs(dst: Operand, src: Operand):
    """(dst part, src part) of equal length covering two equally long operands, so that a
    copy between multi-piece operands is a series of single-piece copies."""
    dp, sp = dst.parts(), src.parts()
    if len(dp) == 1 and len(sp) == 1:
        yield dst, src
        return
    i = j = doff = soff = 0
    while i < len(dp) and j < len(sp):
        n = min(dp[i].nbytes - doff, sp[j].nbytes - soff)
        yield dp[i].slice(doff, n), sp[j].slice(soff, n)
        doff, soff = doff + n, soff + n
        if doff == dp[i].nbytes:
            i, doff = i + 1, 0
        if soff == sp[j].nbytes:
            j, soff = j + 1, 0


def _commit(seg: Segment, size: int) -> None:
    """Take the pages of a pinned segment now, as page-locked memory is resident: running
    out is then the allocation error here, never a SIGBUS at the first touch (in this
    process, or in a device process copying to or from the buffer)."""
    st = os.statvfs("/dev/shm")
    if size > st.f_bavail * st.f_frsize:      # fail before filling RAM up to the limit
        raise AclError(E.ACL_ERROR_RT_MEMORY_ALLOCATION, f"cannot pin {size} bytes of host memory: "
                       f"/dev/shm has {st.f_bavail * st.f_frsize} bytes free")
    # page-locked memory is RAM: pinning what the machine has not got would push everything
    # else out (no swap: the machine stalls), where the real runtime answers the allocation error
    available = procfs.memory_available()
    if available is not None and size > available - PIN_HEADROOM:
        raise AclError(E.ACL_ERROR_RT_MEMORY_ALLOCATION, f"cannot pin {size} bytes of host memory: "
                       f"{available} bytes of RAM are available, {PIN_HEADROOM} of them kept for the rest")
    fd = seg.reopen(os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        raise AclError(E.ACL_ERROR_RT_MEMORY_ALLOCATION,
                       f"cannot pin {size} bytes of host memory: {exc.strerror}") from exc
    finally:
        os.close(fd)


class MemoryTable:
    """This process's allocations, sorted by address, plus views onto any memory."""

    def __init__(self, runtime) -> None:
        self.runtime = runtime
        self.lock = threading.Lock()
        self._starts: list[int] = []
        self._by_start: dict[int, Allocation] = {}
        # (ranges, their starts) of /proc/self/maps, replaced whole: threads read it at once
        self._maps: tuple[list[tuple[int, int, str]], list[int]] = ([], [])
        self._pinned_map: tuple | None = ()
        self.usage: dict[tuple[int, int], list[int]] = {}    # (device, module) -> [bytes now, peak]
        self.vmm = None        # this process's VMM state (mdev.runtime.memory.vmm), made on first use

    def add(self, alloc: Allocation) -> None:
        with self.lock:
            bisect.insort(self._starts, alloc.ptr)
            self._by_start[alloc.ptr] = alloc
            if alloc.kind == PINNED:
                self._pinned_map = None
            elif alloc.ipc_key is None:
                use = self.usage.setdefault((alloc.device, alloc.module), [0, 0])
                use[0] += alloc.reserved
                use[1] = max(use[1], use[0])
        if hooks.checker is not None:
            hooks.checker.allocated(alloc)

    def remove(self, ptr: int) -> Allocation | None:
        with self.lock:
            alloc = self._by_start.pop(ptr, None)
            if alloc is not None:
                del self._starts[bisect.bisect_left(self._starts, ptr)]
                if alloc.kind == PINNED:
                    self._pinned_map = None
                elif alloc.ipc_key is None:
                    self.usage[(alloc.device, alloc.module)][0] -= alloc.reserved
        if alloc is not None and hooks.checker is not None:
            hooks.checker.freed(alloc)
        return alloc

    def pinned_map(self) -> tuple:
        """(host address, size, segment) of every pinned buffer: kernels reach them by address."""
        table = self._pinned_map
        if table is None:
            with self.lock:
                table = self._pinned_map = tuple((a.ptr, a.size, a.segment.name)
                                                 for a in self._by_start.values() if a.kind == PINNED)
        return table

    def containing(self, ptr: int) -> Allocation | None:
        # first without the lock, which threads submitting to different devices would all
        # take: allocations never overlap, so one found holding ``ptr`` is the answer (as
        # live as under the lock); a miss may be a concurrent malloc or free's doing
        alloc = self._holding(ptr)
        if alloc is None:
            with self.lock:
                alloc = self._holding(ptr)
        return alloc

    def _holding(self, ptr: int) -> Allocation | None:
        starts = self._starts
        i = bisect.bisect_right(starts, ptr) - 1
        if i < 0:
            return None
        try:
            alloc = self._by_start[starts[i]]
        except (KeyError, IndexError):      # changed under a look without the lock
            return None
        return alloc if alloc.ptr <= ptr < alloc.end else None

    def overlapping(self, ptr: int, nbytes: int) -> Allocation | None:
        """The lowest allocation sharing a byte with [ptr, ptr+nbytes): two lookups in the sorted
        starts (allocations never overlap), whatever the range's size."""
        with self.lock:
            starts = self._starts
            i = bisect.bisect_right(starts, ptr) - 1
            if i >= 0 and self._by_start[starts[i]].end > ptr:
                return self._by_start[starts[i]]
            j = bisect.bisect_left(starts, ptr)
            return self._by_start[starts[j]] if j < len(starts) and starts[j] < ptr + nbytes else None

    def get(self, ptr: int) -> Allocation | None:
        return self._by_start.get(ptr)

    def allocations(self) -> list[Allocation]:
        """Every live allocation of this process (a list of its own: callers free as they go)."""
        return list(self._by_start.values())

    def of_device(self, device: int) -> list[Allocation]:
        return [a for a in self._by_start.values() if a.kind == DEVICE and a.device == device]

    # -- classification
    def operand(self, ptr, nbytes: int, *, write: bool, what: str = "pointer") -> Operand:
        """Classify and bounds-check [ptr, ptr+nbytes); AclError if it is not usable memory."""
        if type(ptr) is int and _DEVICE_LOW <= ptr < _DEVICE_HIGH and hooks.checker is None:
            alloc = self.containing(ptr)      # the common case first: inside a device allocation
            if alloc is not None and ptr + nbytes <= alloc.end:
                return Operand(DEVICE, ptr, nbytes, alloc)
        if not isinstance(ptr, int) or isinstance(ptr, bool):
            raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{what} must be an int address, got {type(ptr).__name__}")
        if ptr == 0:
            raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{what} is NULL")
        if ptr < 0:
            raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{what} {ptr} is negative")
        if address.VMM_BASE <= ptr < address.VMM_END:
            if self.vmm is None:
                raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{what} {ptr:#x} is a VMM address outside every "
                               f"reservation of this process (reserve_mem_address, or released)")
            return self.vmm.operand(ptr, nbytes, what)
        alloc = self.containing(ptr)
        if hooks.checker is not None and (alloc is None and address.split(ptr) is not None or
                                             alloc is not None and ptr + nbytes > alloc.end):
            hooks.checker.bad_pointer(ptr, nbytes, what)
        if address.split(ptr) is not None:
            if alloc is None:
                raise AclError(E.ACL_ERROR_RT_PARAM_INVALID,
                               f"{what} {ptr:#x} is not inside a live device allocation of this process "
                               f"(never allocated, or freed)")
            if ptr + nbytes > alloc.end:
                raise AclError(E.ACL_ERROR_RT_PARAM_INVALID,
                               f"{what} {ptr:#x} + {nbytes} bytes overruns its allocation "
                               f"[{alloc.ptr:#x}, +{alloc.size}) by {ptr + nbytes - alloc.end} bytes")
            return Operand(DEVICE, ptr, nbytes, alloc)
        if alloc is not None:
            if ptr + nbytes > alloc.end:
                raise AclError(E.ACL_ERROR_RT_PARAM_INVALID,
                               f"{what} {ptr:#x} + {nbytes} bytes overruns its pinned buffer of {alloc.size} bytes")
            return Operand(PINNED, ptr, nbytes, alloc)
        self._check_mapped(ptr, nbytes, write, what)
        return Operand(PAGEABLE, ptr, nbytes)

    def _check_mapped(self, ptr: int, nbytes: int, write: bool, what: str) -> None:
        """Pageable memory must be mapped here: a bad address is an error, not a segfault."""
        for attempt in range(2):
            if attempt or not self._maps[0]:
                self._read_maps()
            maps, starts = self._maps
            i = bisect.bisect_right(starts, ptr) - 1
            end, pos = ptr + max(nbytes, 1), ptr
            while 0 <= i < len(maps):
                start, stop, perms = maps[i]
                if not (start <= pos < stop) or "r" not in perms or (write and "w" not in perms):
                    break
                pos = stop
                if pos >= end:
                    return
                i += 1
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID,
                       f"{what} {ptr:#x} (+{nbytes} bytes) is neither device memory nor "
                       f"{'writable' if write else 'readable'} host memory of this process")

    def _read_maps(self) -> None:
        maps = []
        with open(program().maps) as f:
            for line in f:
                rng, perms = line.split(None, 2)[:2]
                lo, hi = rng.split("-")
                maps.append((int(lo, 16), int(hi, 16), perms))
        self._maps = (maps, [m[0] for m in maps])

    def view(self, operand: Operand) -> np.ndarray:
        """A uint8 view of the operand's bytes in this process (pageable memory: only when
        the program is this process; copies and fills use :meth:`copy` and :meth:`fill`)."""
        operand._single()
        if operand.kind == DEVICE:
            a = operand.allocation
            link = self.runtime.link(a.device)
            link.check_alive(exact=True)
            off = operand.ptr - address.device_base(a.device)
            return link.hbm().array[off:off + operand.nbytes]
        if operand.kind == PINNED:
            a = operand.allocation
            off = operand.ptr - a.ptr
            return a.segment.array[off:off + operand.nbytes]
        if operand.nbytes == 0:
            return np.empty(0, np.uint8)
        buf = (ctypes.c_ubyte * operand.nbytes).from_address(operand.ptr)
        return np.frombuffer(buf, dtype=np.uint8)

    def copy(self, dst: Operand, src: Operand) -> None:
        """Copy one single-piece operand's bytes to another's (pageable ones by the kernel)."""
        if dst.kind == PAGEABLE:
            program().write(dst.ptr, self.view(src) if src.kind != PAGEABLE else self.read(src), "dst")
        elif src.kind == PAGEABLE:
            program().read_into(src.ptr, self.view(dst), "src")
        else:
            np.copyto(self.view(dst), self.view(src))

    def read(self, operand: Operand) -> bytes:
        if operand.kind == PAGEABLE:
            return program().read(operand.ptr, operand.nbytes)
        return self.view(operand).tobytes()

    def fill(self, operand: Operand, value: int) -> None:
        if operand.kind == PAGEABLE:
            program().fill(operand.ptr, operand.nbytes, value)
        else:
            self.view(operand).fill(value & 0xFF)

    # -- pinned host memory
    def new_pinned(self, size: int, at: int | None = None) -> Allocation:
        """Page-locked host memory: a shared segment the devices map too.  With ``at`` (host
        memory registration) the segment takes the place of this process's pages at that
        address, with their contents: the memory stays where the program has it.  Its name
        has a random part of its own: nobody can take the next name first, and no name
        comes back (a device still mapping an old segment by that name, after finalize +
        init or a recycled pid, would copy to and from dead memory)."""
        board = self.runtime.attach()
        pid = os.getpid()
        registered = at is not None
        try:
            seg = create_fresh(lambda tag: Segment(board.paths.pinned(pid, tag), size, create=True),
                               "pinned segment")
        except Exception as exc:
            raise AclError(E.ACL_ERROR_RT_MEMORY_ALLOCATION, f"cannot create pinned segment: {exc}") from exc
        try:
            _commit(seg, size)
            if at is not None:
                program().read_into(at, seg.array)
                program().map_over(seg, at)
            else:
                at = program().share(seg)
            board.request("register_segment", seg.name)
        except Exception:
            if at is not None and not registered:
                program().unshare(at, size)
            seg.close()
            seg.unlink()
            raise
        alloc = Allocation(at, size, PINNED, segment=seg, reserved=size, registered=registered)
        self.add(alloc)
        return alloc

    def release_pinned(self, alloc: Allocation) -> None:
        """Free pinned memory (or end a registration: the pages become private ones again,
        with the segment's contents); the devices let go of the segment."""
        self.remove(alloc.ptr)
        seg = alloc.segment
        try:
            if alloc.registered:
                program().unmap_over(seg, alloc.ptr, alloc.size)
            else:
                program().unshare(alloc.ptr, alloc.size)
        finally:
            # the host's memory goes whatever the board says: a dead device or supervisor
            # has nothing left to let go of
            seg.close()
            seg.unlink()
        board = self.runtime.board
        if board is None:
            return
        for link in list(board.links.values()):
            try:
                link.request("forget_segment", seg.name)
            except AclError:
                pass
        try:
            board.request("unregister_segment", seg.name)
        except AclError:
            pass        # the supervisor is gone (507901): this process's side is freed all the same

    def map_pinned(self, name: str, size: int) -> Allocation:
        """Another process's pinned buffer on this board (a collective's staging slots), mapped
        here so that this process's tasks can copy to and from it.  It stays that process's:
        ``unmap_pinned`` lets go of it, free_host refuses it."""
        board = self.runtime.attach()
        if not name.startswith("/" + board.paths.shm_prefix + "pin.") or "/" in name[1:]:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{name!r} is not a pinned buffer of board {board.paths.name}")
        try:
            seg = Segment(name)
        except Exception as exc:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"cannot map pinned buffer {name}: {exc}") from exc
        if seg.size < size:
            seg.close()
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"pinned buffer {name} holds {seg.size} bytes, not {size}")
        alloc = Allocation(seg.address, size, PINNED, segment=seg, reserved=size, ipc_key=f"pinned:{name}")
        self.add(alloc)
        return alloc

    def unmap_pinned(self, alloc: Allocation) -> None:
        if self.remove(alloc.ptr) is not None:
            alloc.segment.close()
