"""A device's memory: its HBM, who may touch which bytes of it, and the other segments its
tasks reach (host processes' pinned buffers, peer devices' HBM and control pages).

    requests: malloc / free / ipc_attach / ipc_detach / grant / admit_segment / forget_*
        |
        v
    allocator (mdev.memory.allocator) --> HBM pages backed (malloc) or dropped (last free)
        |
        +--> control page (shm): page owners and grants rows, which peers read to check
             a copy into this HBM without asking

    a task's operand ("d", device, offset) / ("p", segment, offset)
        --locate / view--> checked mapping: this HBM, a peer's HBM, a pinned segment (TaskFault
                           if it is not memory the task's process may touch)
    a running task or kernel launch --pin--> its blocks are not handed out again until unpin

A process may touch its own allocations, ranges granted to it (IPC imports sealed by the
supervisor, buffers their owner shared with it), its own pinned buffers and those shared
with it (``admit_segment``).  Peer devices' HBM and control pages are mapped for P2P work
and re-mapped when a peer is restarted (see ``peer_control``); a peer operand found valid is
trusted again until that peer takes memory from a process (its H_REVOKED count changes).

The device (mdev.board.device) makes one, with its lock, its control page and its book of
clients; the device's server (mdev.board.serving) answers the ``rpc_*`` requests here by
their names like the device's own; the task modules reach it as ``device.memory``.  It
knows none of them.
"""

from __future__ import annotations

import heapq
import os
import threading
from typing import TYPE_CHECKING

import numpy as np

from mdev import protocol
from mdev import errors as E
from mdev.errors import AclError
from mdev import status as S
from mdev.naming import BoardPaths, tag_of
from mdev.board.tasktable import TaskFault, dma_fault
from mdev.board.windows import WindowPool
from mdev.memory import address
from mdev.memory.allocator import Allocator, OutOfMemory
from mdev.memory.segment import Segment

if TYPE_CHECKING:
    from mdev.board.stream import DeviceStream

CHECKED = 4096        # peer operands whose checks are remembered (forgotten all at once beyond)


class DeviceMemory:
    def __init__(self, index: int, paths: BoardPaths, hbm: Segment, control: S.ControlPage,
                 lock: threading.RLock, clients: dict, seal_key: bytes) -> None:
        self.index = index
        self.paths = paths
        self.hbm = hbm
        # small writes into it go through this: a slice assignment costs half a numpy view's fill
        self.hbm_bytes = memoryview(hbm.array)
        self.hbm_windows = WindowPool(hbm.name)      # kernel launches write through these
        self.control = control
        self.lock = lock                 # the device's: a client's release frees under it
        self.clients = clients           # the device's book: client -> {"pid": ...}
        self.seal_key = seal_key
        self.allocator = Allocator(hbm.size)
        self._free_grants = list(range(S.GRANTS))     # a heap: the lowest row first, so that
                                                      # peers scan only the rows below H_GRANTS
        self._admitted: dict[str, tuple[int, set]] = {}    # pinned buffer -> (its owner's client,
                                                           # pids it shared it with)
        self._segments: dict[str, Segment] = {}
        self._peer_controls: dict[int, S.ControlPage] = {}
        self._peer_hbm: dict[int, tuple[int, Segment]] = {}     # device -> (its boot ns, HBM)
        # (device, offset, bytes, client, pid) -> (the peer's boot time, its H_REVOKED) of a
        # peer operand found valid: a collective names the same buffers at every operation
        self._checked: dict[tuple, tuple[int, int]] = {}

    # ------------------------------------------------------------------ allocations
    def rpc_malloc(self, conn, req, size: int, reserved: int, page: int, policy: int) -> int:
        with self.lock:
            try:
                block = self._allocate_backed(size, reserved, page, conn.client, policy)
            except OutOfMemory as exc:
                raise AclError(E.ACL_ERROR_RT_MEMORY_ALLOCATION, f"device {self.index}: {exc}")
            self._mark_pages(block.offset, block.reserved, conn.client)
            self._note_used()
        return address.device_base(self.index) + block.offset

    def _allocate_backed(self, size: int, reserved: int, page: int, owner: int, policy: int):
        """A block of the allocator with its pages backed (call with the lock held);
        OutOfMemory, or AclError from back() with the block given back."""
        block = self.allocator.allocate(size, reserved, page, owner, policy)
        try:
            self.back(block.offset, block.reserved)
        except AclError:
            self.allocator.release(block.offset)
            raise
        return block

    def _note_used(self) -> None:
        self.control.header[S.H_HBM_USED] = self.allocator.used

    def back(self, offset: int, length: int) -> None:
        """Give [offset, offset+length) of the HBM its pages now, or refuse with
        ACL_ERROR_RT_MEMORY_ALLOCATION: the HBM segment is sparse (a 32 GiB device costs
        what is allocated), so memory /dev/shm could not hold would otherwise be handed out
        and kill this process with SIGBUS at its first touch.  Free space is checked first:
        filling RAM up to the limit only to fail is not done."""
        st = os.statvfs("/dev/shm")
        free = st.f_bavail * st.f_frsize
        if length > free:
            raise AclError(E.ACL_ERROR_RT_MEMORY_ALLOCATION,
                           f"device {self.index}: cannot back {length} bytes of HBM: /dev/shm has {free} bytes free")
        try:
            self.hbm.reserve(offset, length)
        except OSError as exc:
            raise AclError(E.ACL_ERROR_RT_MEMORY_ALLOCATION,
                           f"device {self.index}: cannot back {length} bytes of HBM in /dev/shm: {exc.strerror}")

    def hold(self, data: bytes) -> int:
        """The offset of ``data`` put in memory of no process (a kernel launch's placeholder
        argument) until ``drop``; TaskFault if /dev/shm cannot back it."""
        reserved = address.align_up(max(len(data), 1), address.NORMAL_PAGE)
        with self.lock:
            try:
                piece = self._allocate_backed(len(data) or 1, reserved, address.NORMAL_PAGE, -1, 0)
            except AclError as exc:
                raise TaskFault(exc.code, exc.message) from None
        self.hbm.array[piece.offset:piece.offset + len(data)] = memoryview(data)
        return piece.offset

    def drop(self, offsets: list) -> None:
        """Memory that ``hold`` gave is not needed any more."""
        with self.lock:
            for offset in offsets:
                self.allocator.release(offset)

    def rpc_free(self, conn, req, ptr: int) -> None:
        with self.lock:
            dev_off = address.split(ptr)
            block = self.allocator.blocks.get(dev_off[1]) if dev_off else None
            if block is None or dev_off[0] != self.index:
                raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{ptr:#x} is not an allocation of device {self.index}")
            if block.owner != conn.client:
                raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{ptr:#x} belongs to another process")
            self._release_owned(block)

    def release_client(self, client: int) -> None:
        """A host process detached or died (call with the lock held): it no longer imports
        anything, what it owned goes (or waits for its last importer), what it shared is
        no longer shared."""
        for block in list(self.allocator.blocks.values()):
            if client in block.importers:
                self._detach(client, block.offset)
        for block in self.allocator.owned_by(client):
            self._release_owned(block)
        for name in [n for n, (owner, _) in self._admitted.items() if owner == client]:
            del self._admitted[name]

    def _release_owned(self, block) -> None:
        """The owner lets go; memory still imported by other processes lives until they close."""
        if block.importers:
            block.owner = -1
            self._mark_pages(block.offset, block.reserved, -1)
        else:
            self._free_block(block.offset)

    def _mark_pages(self, offset: int, length: int, owner: int) -> None:
        self.control.page_owner[offset // S.PAGE:-(-(offset + length) // S.PAGE)] = owner
        if owner <= 0:
            self._revoked()

    def _revoked(self) -> None:
        """Memory was taken from a process: the peers' checks of operands here are void."""
        self.control.header[S.H_REVOKED] += 1

    def _free_block(self, offset: int) -> None:
        block = self.allocator.blocks[offset]
        if block.users:          # a running task uses it: the range waits for the task to end
            block.freed = True
            return
        self._revoke(block, lambda g: True)
        block = self.allocator.release(offset)
        self._mark_pages(block.offset, block.reserved, 0)
        # drop the pages: RAM goes back to the OS and the range reads as zero when reused
        self.hbm.release(block.offset, block.reserved)
        self._note_used()

    def pin(self, offsets) -> list:
        """Blocks of this HBM holding ``offsets`` that a task is about to use: none of them is
        handed out again before ``unpin`` (a free meanwhile only marks it)."""
        if not offsets:
            return []
        with self.lock:
            found = (self.allocator.find(o) for o in offsets)
            blocks = list({b.offset: b for b in found if b is not None}.values())
            for block in blocks:
                block.users += 1
        return blocks

    def unpin(self, blocks: list) -> None:
        if not blocks:
            return
        with self.lock:
            for block in blocks:
                block.users -= 1
                if not block.users and block.freed:
                    self._free_block(block.offset)

    # ------------------------------------------------------------------ sharing
    def rpc_ipc_attach(self, conn, req, offset: int, nbytes: int, seal: str) -> None:
        """An importer the supervisor granted [offset, offset+nbytes) (its seal says so) may
        touch that range from now on, from any device, until it detaches."""
        if not protocol.sealed(self.seal_key, seal, "import", conn.client, self.index, offset, nbytes):
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"device {self.index}: no IPC import of {nbytes} bytes at "
                           f"offset {offset!r} was granted to this process")
        with self.lock:
            block = self._block_of(offset, nbytes)
            if block is None or block.owner == -1:
                raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "the exported memory was freed")
            self._grant(block, conn.pid, offset, nbytes, conn.client)
            block.importers.add(conn.client)

    def rpc_ipc_detach(self, conn, req, offset: int) -> None:
        with self.lock:
            self._detach(conn.client, offset)

    def _detach(self, client: int, offset: int) -> None:
        block = self.allocator.find(offset)
        if block is not None and client in block.importers:
            block.importers.discard(client)
            self._revoke(block, lambda g: g[4] == client)
            if block.owner == -1 and not block.importers:
                self._free_block(block.offset)

    def rpc_grant(self, conn, req, offset: int, nbytes: int, pids: list) -> None:
        """The owner of an allocation lets processes ``pids`` touch [offset, offset+nbytes) of
        it, from any device, until it is freed (a collective's buffer, which its peers in
        other processes write, read and check)."""
        with self.lock:
            block = self._block_of(offset, nbytes)
            if block is None or block.owner != conn.client:
                raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"device {self.index}: {nbytes!r} bytes at offset "
                               f"{offset!r} are not an allocation of this process")
            for pid in pids:
                self._grant(block, int(pid), offset, nbytes, None)

    def rpc_admit_segment(self, conn, req, name: str, pids: list) -> None:
        """The owner of pinned buffer ``name`` lets processes ``pids`` have this device copy to
        and from it (a collective's staging slots), until the buffer is freed."""
        if self.paths.pinned_owner(name) != conn.pid:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{name!r:.80} is not a pinned buffer of this process")
        with self.lock:
            self._admitted.setdefault(name, (conn.client, set()))[1].update(int(p) for p in pids)

    def _block_of(self, offset, nbytes):
        """The live block holding all of [offset, offset+nbytes), or None."""
        if not (type(offset) is int and type(nbytes) is int and nbytes > 0):
            return None
        block = self.allocator.find(offset)
        if block is None or offset + nbytes > block.offset + block.reserved:
            return None
        return block

    def _grant(self, block, pid: int, offset: int, nbytes: int, importer: int | None) -> None:
        """A grants row (mdev.status) for peers to read, and the block's own record."""
        if not self._free_grants:
            raise AclError(E.ACL_ERROR_RT_MEMORY_ALLOCATION, f"device {self.index}: all {S.GRANTS} grants of "
                           "its memory to other processes are in use")
        row = heapq.heappop(self._free_grants)
        cells = self.control.grants[row]
        cells[S.G_START], cells[S.G_END] = offset, offset + nbytes
        cells[S.G_PID] = pid                 # last: it makes the row valid
        header = self.control.header
        header[S.H_GRANTS] = max(int(header[S.H_GRANTS]), row + 1)
        block.grants.append((pid, offset, offset + nbytes, row, importer))

    def _revoke(self, block, match) -> None:
        keep = []
        for grant in block.grants:
            if match(grant):
                self.control.grants[grant[3], S.G_PID] = 0
                heapq.heappush(self._free_grants, grant[3])
            else:
                keep.append(grant)
        block.grants = keep
        self._revoked()
        header = self.control.header
        used = int(header[S.H_GRANTS])
        while used and not self.control.grants[used - 1, S.G_PID]:
            used -= 1
        header[S.H_GRANTS] = used

    def rpc_forget_segment(self, conn, req, name: str) -> None:
        with self.lock:
            self._admitted.pop(name, None)
            seg = self._segments.pop(name, None)
        if seg is not None:
            seg.close()

    def rpc_forget_peer(self, conn, req, device: int) -> None:
        """The supervisor found ``device`` dead: unmap its segments now, not at next use."""
        with self.lock:
            self._peer_controls.pop(device, None)
            self._peer_hbm.pop(device, None)

    # ------------------------------------------------------------------ a task's operands
    def pid_of(self, client: int) -> int:
        """The pid of a client attached here (0 once it is gone)."""
        info = self.clients.get(client)
        return info["pid"] if info else 0

    def view(self, loc: tuple, nbytes: int, stream: "DeviceStream", write: bool = False):
        """uint8 numpy view of ``nbytes`` at a location for a task of ``stream``; TaskFault if
        it is not valid memory, or not memory the stream's process may touch."""
        return self.locate(loc, nbytes, stream.client).array[loc[2]:loc[2] + nbytes]

    def locate(self, loc: tuple, nbytes: int, client: int) -> Segment:
        """The mapping holding ``nbytes`` at a location, checked to be valid memory that
        ``client`` may touch: one interval lookup (this HBM's allocations), a look at the
        page owners (a peer's HBM), or the owner in a pinned buffer's name."""
        kind, key, offset = loc
        if kind == "d" and key == self.index:
            self.check_own(offset, nbytes, client)
            return self.hbm
        if kind == "d":   # a peer's HBM: its live pages and their owners are on its control page
            page, seg = self.peer_hbm(key)
            pid = self.pid_of(client)
            checked = (key, offset, nbytes, client, pid)
            seen = (int(page.header[S.H_BOOT_NS]), int(page.header[S.H_REVOKED]))
            if self._checked.get(checked) == seen:
                return seg
            if offset + nbytes > seg.size:
                raise dma_fault(f"{nbytes} bytes at {offset:#x} overrun {seg.name}")
            lo, hi = offset // S.PAGE, -(-(offset + nbytes) // S.PAGE)
            owners = page.page_owner[lo:hi]
            if hi - lo == 1:                   # (most operands: numpy's reductions cost more than a look)
                owner = int(owners[0])
                live, mine = owner != 0, owner == client
            else:
                live = np.count_nonzero(owners) == hi - lo
                mine = np.count_nonzero(owners == client) == hi - lo
            if not live:
                raise dma_fault(f"device {key}: {nbytes} bytes at offset {offset:#x} are not inside a live "
                                f"allocation (freed while queued?)")
            if not mine and not page.granted(pid, offset, offset + nbytes):
                raise self._denied(client, loc, nbytes)
            if len(self._checked) >= CHECKED:
                self._checked.clear()
            self._checked[checked] = seen
            return seg
        owner = self.paths.pinned_owner(key)
        if kind != "p" or owner is None:
            raise dma_fault(f"{loc!r:.100} is not device memory or a pinned buffer of this board")
        pid = self.pid_of(client)
        if owner != pid and pid not in self._admitted.get(key, (0, ()))[1]:
            raise self._denied(client, loc, nbytes)
        seg = self.segment(key)
        if offset + nbytes > seg.size:
            raise dma_fault(f"{nbytes} bytes at {offset:#x} overrun {seg.name}")
        return seg

    def check_own(self, offset: int, nbytes: int, client: int) -> None:
        """TaskFault unless [offset, offset+nbytes) of this HBM is inside a live allocation
        that ``client`` may touch (locate's case of this device's own memory)."""
        block = self.allocator.find(offset)
        if block is None or offset + nbytes > block.offset + block.reserved:
            raise dma_fault(f"device {self.index}: {nbytes} bytes at offset {offset:#x} "
                            f"are not inside a live allocation (freed while queued?)")
        if block.owner != client and not self.may_use(client, block, offset, nbytes):
            raise self._denied(client, ("d", self.index, offset), nbytes)

    def may_use(self, client: int, block, offset: int, nbytes: int) -> bool:
        """``client`` may touch [offset, offset+nbytes) of ``block`` of this HBM."""
        return block.owner == client or _granted(block.grants, self.pid_of(client), offset, offset + nbytes)

    def _denied(self, client: int, loc: tuple, nbytes: int) -> TaskFault:
        return TaskFault(E.ACL_ERROR_RT_PARAM_INVALID,
                         f"device {self.index}: {nbytes} bytes at {loc!r:.100} are not memory of process "
                         f"{self.pid_of(client)} (its own allocations, and the imports it was granted)")

    def segment(self, name: str) -> Segment:
        """A host process's pinned segment, mapped on first use (until forget_segment)."""
        with self.lock:
            seg = self._segments.get(name)
            if seg is None:
                try:
                    seg = self._segments[name] = Segment(name)
                except Exception as exc:
                    raise dma_fault(f"cannot map {name}: {exc}") from exc
        return seg

    # ------------------------------------------------------------------ peers
    # A peer's segments are mapped once and kept.  A peer that died and was restarted has
    # fresh segments under new names (its record, BoardPaths.device_tag, names them); the
    # supervisor marks the dead one's control page FAULTED before unlinking it, so a cached
    # page reading FAULTED (or STOPPED) is re-opened, and a cached HBM mapping whose boot
    # time differs from the page's is replaced by the HBM named like the page: copies
    # reach the new HBM.  A replaced mapping is dropped, not closed: a task of another worker
    # may still hold it, and the dead segment's memory is freed with its last reference.
    def peer_control(self, device: int) -> S.ControlPage:
        if device == self.index:
            return self.control
        page = self._peer_controls.get(device)
        if page is None or page.state in (S.STATE_FAULTED, S.STATE_STOPPED):
            page = self._reopen_peer_control(device)
        return page

    def _reopen_peer_control(self, device: int) -> S.ControlPage:
        """The peer's current control page; the stale one while no newer one exists."""
        with self.lock:
            stale = self._peer_controls.get(device)
            try:
                page = S.ControlPage(Segment(self.paths.control(device)))
            except Exception as exc:
                if stale is None:
                    raise dma_fault(f"cannot map the control page of device {device}: {exc}") from exc
                return stale     # being restarted: callers read the dead page's state
            if stale is not None and int(stale.header[S.H_BOOT_NS]) == int(page.header[S.H_BOOT_NS]):
                return stale     # the same dead page: not restarted yet
            self._peer_controls[device] = page
        return page

    def peer_hbm(self, device: int) -> tuple[S.ControlPage, Segment]:
        """A peer's control page and its HBM mapping, both of the peer's current process."""
        page = self.peer_control(device)
        if page.state not in (S.STATE_STARTING, S.STATE_ALIVE):
            raise dma_fault(f"device {device} is {S.STATE_NAMES.get(page.state, 'gone')}: its HBM is lost")
        boot = int(page.header[S.H_BOOT_NS])
        cached = self._peer_hbm.get(device)
        if cached is not None and cached[0] == boot:
            return page, cached[1]
        with self.lock:
            cached = self._peer_hbm.get(device)
            if cached is not None and cached[0] == boot:
                return page, cached[1]
            try:
                seg = Segment(self.paths.hbm(device, tag_of(page.segment.name)))    # the page's process's
            except Exception as exc:
                raise dma_fault(f"cannot map the HBM of device {device}: {exc}") from exc
            if page.state == S.STATE_FAULTED:
                # died while we mapped: its memory is lost
                seg.close()
                raise dma_fault(f"device {device} is faulted: its HBM is lost")
            self._peer_hbm[device] = (boot, seg)
        return page, seg


def _granted(grants: list, pid: int, start: int, end: int) -> bool:
    """One of a block's grants lets ``pid`` touch [start, end)."""
    return any(g[0] == pid and g[1] <= start and end <= g[2] for g in grants)
