"""The supervisor's book of things shared between host processes of a board.

    exporter --export(kind, device, detail, validate)--> key (unguessable)
    exporter --set_pids(key, pids)-->                    whitelist
    importer --import(key)--> detail   (refused: unknown or closed key, pid not listed,
                                        importing one's own export where that is not allowed,
                                        a device of another cluster node)
    importer/exporter --close(key)-->  an importer detaches; the exporter closes the key

Kinds: "mem" (IPC memory: device, offset, size), "event" (device, slot, uid), "notify"
(device, slot, uid), "vmm" (physical allocation: device, offset, size), "fabric" (the same,
exported as an A3 FABRIC handle: importable from other servers of the supernode).  The pid of a
request is the one the kernel reports for the client's socket, so it cannot be forged.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from mdev import errors as E
from mdev.errors import AclError


SHAREABLE = ("vmm", "fabric")      # physical allocations: a key is a uint64 shareable handle


@dataclass
class Export:
    key: str
    kind: str
    owner: int
    owner_pid: int
    device: int
    detail: tuple
    validate_pid: bool
    pids: set = field(default_factory=set)
    importers: set = field(default_factory=set)
    closed: bool = False


class IpcRegistry:
    def __init__(self) -> None:
        self.exports: dict[str, Export] = {}

    def export(self, client: int, pid: int, kind: str, device: int, detail: tuple, validate_pid: bool) -> str:
        key = ""
        while not key or key in self.exports:
            # a VMM shareable handle is a uint64: its key carries 64 bits (top bit set, never 0)
            token = f"{secrets.randbits(63) | 1 << 63:016x}" if kind in SHAREABLE else secrets.token_hex(20)
            key = f"mdev-{kind}-{token}"
        self.exports[key] = Export(key, kind, client, pid, device, tuple(detail), validate_pid)
        return key

    def _get(self, key: str, kind: str | None = None) -> Export:
        entry = self.exports.get(key) if isinstance(key, str) else None
        if entry is None or (kind is not None and entry.kind != kind):
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"unknown IPC key {str(key)[:70]!r}")
        return entry

    def set_pids(self, client: int, key: str, pids: list[int]) -> None:
        entry = self._get(key)
        if entry.owner != client:
            raise AclError(E.ACL_ERROR_RT_NO_PERMISSION, "only the exporting process may set the import pids")
        entry.pids.update(int(p) for p in pids)

    def import_(self, client: int, pid: int, key: str, kind: str, reachable=lambda device: True) -> dict:
        """``reachable(device)``: the importer's node holds the device (an IPC key from
        another server names nothing there, as on a real cluster)."""
        entry = self._get(key, kind)
        if not reachable(entry.device):
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"the IPC key {key[:70]!r} names a device of another node")
        if entry.closed:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "the IPC key was closed (or its exporter is gone)")
        if entry.owner == client and kind in SHAREABLE:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "a process cannot import its own shareable handle")
        if entry.validate_pid and entry.owner != client and pid not in entry.pids:
            raise AclError(E.ACL_ERROR_RT_NO_PERMISSION,
                           f"process {pid} is not on the import list of this key (set_import_pid)")
        entry.importers.add(client)
        return {"device": entry.device, "detail": entry.detail, "owner_pid": entry.owner_pid,
                "owner": entry.owner == client}

    def close(self, client: int, key: str) -> str:
        """An importer detaches (returns "importer"); the exporter closes the key ("exporter")."""
        entry = self._get(key)
        if client in entry.importers:
            entry.importers.discard(client)
            self._forget_if_done(entry)
            return "importer"
        if entry.owner == client:
            entry.closed = True
            self._forget_if_done(entry)
            return "exporter"
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "this process neither exported nor imported the key")

    def _forget_if_done(self, entry: Export) -> None:
        if entry.closed and not entry.importers:
            self.exports.pop(entry.key, None)

    def drop_client(self, client: int) -> None:
        """A host process left: its exports close, its imports go."""
        for entry in list(self.exports.values()):
            entry.importers.discard(client)
            if entry.owner == client:
                entry.closed = True
            self._forget_if_done(entry)

    def drop_device(self, device: int) -> None:
        """A device process died: keys of its memory, events and notifies name nothing now
        (and must never name what its successor allocates in the same place)."""
        for key in [k for k, e in self.exports.items() if e.device == device]:
            del self.exports[key]
