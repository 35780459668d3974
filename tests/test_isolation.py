"""Isolation between host processes of one user on one board.

The exporter (this test process) holds device memory and a pinned buffer, and exports the
memory with a pid list the attacker is not on.  The attacker (a second real process,
tests/peer.py) goes below the API: it submits raw copy, memset and kernel tasks naming the
exporter's addresses on its own streams (on the exporter's device and on a peer device),
asks the device to free the exporter's allocation, claims the exporter's client id in a
hello of its own, and asks to attach the export without the supervisor's grant.  Every
attempt is refused with the documented code -- 107000 (ACL_ERROR_RT_PARAM_INVALID) at the
next synchronisation for tasks, at once for requests, a kernel's access fault (507035) for
a kernel -- and the exporter's bytes are unchanged and still allocated.  Once the exporter
puts the attacker's pid on the list, the same process imports the memory through the API
and reads it, from both devices.
"""

from __future__ import annotations

import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from helpers import from_device, to_device
from mdev import protocol
from mdev.board import launcher
from mdev.naming import BoardPaths
from mdev.memory import address
from mdev.runtime.core import RUNTIME as rt
from peer import Peer

E_PARAM = 107000            # ACL_ERROR_RT_PARAM_INVALID
E_VECTOR = 507035           # ACL_ERROR_RT_VECTOR_CORE_EXCEPTION: a kernel's bad access
PEER_FLAG = 0x1             # ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS
N = 64 * 1024

ATTACKER = r'''
import socket
from mdev import protocol
from mdev.board import launcher
from mdev.kernel import kernel
from mdev.runtime.core import RUNTIME as rt

@kernel
def steal(ctx, src, dst, n):
    ctx.gm(dst, np.uint8, n)[:] = ctx.gm(src, np.uint8, n)

def raw(device, stream, op, *args):
    """Submit a task as the runtime would, with locations of our own choosing."""
    ok(acl.rt.set_device(device), "set_device")
    s = rt.stream(stream)
    rt.link(device).submit(s, op, *args)
    return acl.rt.synchronize_stream(stream)

def forged_free(device, client, pid, ptr):
    """Claim another process's client id in a hello of our own, then free its memory."""
    board = rt.attach()
    try:
        channel = protocol.connect(board.paths.device_socket(device), board.authkey,
                                   ("hello", client, pid, "rpc", "attacker"))
        channel.send(("r", 1, "free", (ptr,)))
        return channel.recv(timeout=10)[2]
    except (protocol.ChannelClosed, OSError):
        return "closed"

def own(device):
    ok(acl.rt.set_device(device), "set_device")
    stream, ret = acl.rt.create_stream()
    ok(ret, "create_stream")
    buf, ret = acl.rt.malloc(N, 0)
    ok(ret, "malloc")
    ok(acl.rt.memset(buf, N, 0, N), "memset")
    return stream, buf

def loc(ptr):
    from mdev.memory import address
    dev, off = address.split(ptr)
    return ("d", dev, off)

def try_request(device, op, *args):
    """A raw request to a device: its code (0 for success)."""
    from mdev.errors import AclError
    try:
        rt.link(device).request(op, *args)
        return 0
    except AclError as exc:
        return exc.code
'''


def test_a_process_off_the_pid_list_reaches_nothing_of_the_exporter(acl, board):
    assert acl.rt.set_device(0) == 0
    victim, ret = acl.rt.malloc(N, 0)
    assert ret == 0
    secret = np.random.default_rng(4).integers(1, 256, N, dtype=np.uint8)
    to_device(acl, victim, secret)
    key, ret = acl.rt.ipc_mem_get_export_key(victim, N, 65, 0)     # pid validation on, no pids yet
    assert ret == 0
    pinned, ret = acl.rt.malloc_host(N)
    assert ret == 0
    segment = rt.memory.get(pinned).segment
    host = segment.array[:N]
    host[:] = secret[::-1]
    me = next(c for c in launcher.status(board)["clients"] if c["pid"] == os.getpid())
    used = launcher.status(board)["devices"][0]["hbm_used"]

    with Peer(board) as b:
        b.do(ATTACKER, N=N)
        b.do("stream0, buf0 = own(0); stream1, buf1 = own(1)")
        # the API refuses the key: not on the pid list
        assert b.ev("acl.rt.ipc_mem_import_by_key(key, 1)[1]", key=key) == 207006
        # raw copies out of (and into) the exporter's HBM, from its device and from a peer
        for device, stream, buf in ((0, "stream0", "buf0"), (1, "stream1", "buf1")):
            assert b.ev(f"raw({device}, {stream}, 'copy', loc({buf}), loc(victim), N)", victim=victim) == E_PARAM
            assert b.ev(f"raw({device}, {stream}, 'memset', loc(victim), 0xEE, N)", victim=victim) == E_PARAM
            assert b.ev(f"raw({device}, {stream}, 'copy', loc(victim), loc({buf}), N)", victim=victim) == E_PARAM
            for n in (1, 16):   # small ones, which the device writes through another path
                assert b.ev(f"raw({device}, {stream}, 'copy', loc({buf}), loc(victim), n)", victim=victim, n=n) == E_PARAM
                assert b.ev(f"raw({device}, {stream}, 'memset', loc(victim), 0xEE, n)", victim=victim, n=n) == E_PARAM
                assert b.ev(f"raw({device}, {stream}, 'copy', loc(victim + 8), loc({buf}), n)", victim=victim, n=n) == E_PARAM
            # the exporter's pinned buffer, named by its segment
            assert b.ev(f"raw({device}, {stream}, 'copy', loc({buf}), ('p', seg, 0), N)", seg=segment.name) == E_PARAM
            assert b.ev(f"raw({device}, {stream}, 'memset', ('p', seg, 0), 0xEE, N)", seg=segment.name) == E_PARAM
            assert b.ev(f"bytes(get({buf}, N)) == bytes(N)")       # nothing reached the attacker
        # segments of the board that are not pinned buffers are not memory at all
        hbm = BoardPaths(board).hbm(0)
        assert b.ev("raw(0, stream0, 'copy', loc(buf0), ('p', seg, 0), N)", seg=hbm) != 0
        # a kernel handed the exporter's pointer
        b.do("ok(acl.rt.set_device(0)); ret = steal[1, stream0](victim, buf0, N)", victim=victim)
        assert b.ev("(ret, acl.rt.synchronize_stream(stream0))") == (0, E_VECTOR)
        assert b.ev("bytes(get(buf0, N)) == bytes(N)")
        # frees: with its own identity, and claiming the exporter's client id
        assert b.ev("acl.rt.free(victim)", victim=victim) == E_PARAM      # not in its table
        assert b.ev("forged_free(0, client, pid, victim)", client=me["id"], pid=me["pid"], victim=victim) == "closed"
        assert b.ev("forged_free(0, client, '0' * 64, victim)", client=me["id"], victim=victim) == "closed"
        assert b.ev("try_request(0, 'free', victim)", victim=victim) == E_PARAM
        # attaching the export without the supervisor's grant
        offset = victim - address.device_base(0)
        assert b.ev("try_request(0, 'ipc_attach', off, N, '0' * 64)", off=offset) == E_PARAM
        assert b.ev("raw(0, stream0, 'copy', loc(buf0), loc(victim), N)", victim=victim) == E_PARAM

        # the exporter's bytes are unchanged and still its allocation
        assert from_device(acl, victim, N).tobytes() == secret.tobytes()
        assert bytes(host) == secret[::-1].tobytes()
        assert launcher.status(board)["devices"][0]["state"] == "ok"

        # granted: the same process imports through the API and reads, from both devices
        assert acl.rt.ipc_mem_set_import_pid(key, [b.pid]) == 0
        b.do("imp = acl.rt.ipc_mem_import_by_key(key, 1); ok(imp[1], 'import'); imp = imp[0]", key=key)
        assert b.ev("bytes(get(imp, N))") == secret.tobytes()
        for device, stream, buf in ((0, "stream0", "buf0"), (1, "stream1", "buf1")):
            b.do(f"ok(acl.rt.set_device({device})); ok(acl.rt.memset({buf}, N, 0, N))")
            assert b.ev(f"raw({device}, {stream}, 'copy', loc({buf}), loc(imp), N)") == 0
            assert b.ev(f"bytes(get({buf}, N))") == secret.tobytes()
        b.do("ok(acl.rt.ipc_mem_close(key), 'close')", key=key)
        # closed: the grant went with it
        assert b.ev("raw(1, stream1, 'copy', loc(buf1), loc(imp), N)") == E_PARAM

    assert from_device(acl, victim, N).tobytes() == secret.tobytes()
    assert launcher.status(board)["devices"][0]["hbm_used"] == used
    assert acl.rt.free(victim) == 0                  # still allocated: this free is the first
    assert acl.rt.free_host(pinned) == 0



def test_streams_and_events_are_made_and_destroyed_only_in_slots_of_the_own_lease(acl, board):
    """A process makes and destroys streams and events by messages naming slots of its own
    lease (no reply): the same messages naming another process's slots are dropped, and
    so are tasks for them; the other process's stream and event are untouched."""
    from mdev.runtime.sync import events
    assert acl.rt.set_device(0) == 0
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    event, ret = acl.rt.create_event()
    assert ret == 0
    buf, ret = acl.rt.malloc(N, 0)
    assert ret == 0
    slot, ev = rt.stream(stream).slot, events.get(event)
    control = rt.link(0).control
    gens = (int(control.stream_gen[slot]), int(control.event_gen[ev.slot]))
    with Peer(board) as b:
        b.do(ATTACKER, N=N)
        b.do("stream0, buf0 = own(0)")
        b.do("link = rt.link(0)\n"
             "for message in [('sd', slot), ('ed', eslot, uid), ('sc', slot, 0, 0, 0), ('ec', eslot),\n"
             "                ('t', slot, 1, 'memset', (loc(buf0), 0xEE, N))]:\n"
             "    link.post(message)", slot=slot, eslot=ev.slot, uid=ev.uid)
        # handled in order before its own next task, which runs: the connection stayed
        b.do("ok(acl.rt.memset_async(buf0, N, 1, N, stream0)); ok(acl.rt.synchronize_stream(stream0))")
        assert b.ev("bytes(get(buf0, N)) == bytes([1]) * N")
    assert (int(control.stream_gen[slot]), int(control.event_gen[ev.slot])) == gens
    assert acl.rt.memset_async(buf, N, 7, N, stream) == 0
    assert acl.rt.record_event(event, stream) == 0
    assert acl.rt.synchronize_event(event) == 0
    assert (from_device(acl, buf, N) == 7).all()
    assert acl.rt.destroy_event(event) == 0
    assert acl.rt.destroy_stream(stream) == 0
    assert acl.rt.free(buf) == 0


NOBODY = 65534
CONNECT = r'''
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.settimeout(10)
print("challenge" if s.recv(64) else "closed")
'''


@pytest.mark.skipif(os.getuid() != 0, reason="running a process as a second OS user needs root")
def test_a_connection_of_another_uid_is_closed_before_the_handshake():
    """The board's sockets are 0600 in a 0700 directory, so only root could reach one as
    another user; past the file modes, the listener itself refuses a peer whose uid (the
    kernel's SO_PEERCRED) is not its own -- here a socket anybody may connect to."""
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable     # one nobody may run
    shared = tempfile.mkdtemp(prefix="mdev-test-uid-", dir="/tmp")
    os.chmod(shared, 0o755)
    path = os.path.join(shared, "s.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o777)
    listener.listen(4)
    admission = protocol.Admission(listener, b"k" * 32)
    try:
        answers = []
        for user in (NOBODY, os.getuid()):
            try:
                child = subprocess.Popen([python, "-c", CONNECT, path], stdout=subprocess.PIPE, text=True,
                                         preexec_fn=(lambda u=user: (os.setgid(u), os.setuid(u))))
            except PermissionError:
                pytest.skip(f"uid {user} may not run {python}")
            assert select.select([listener], [], [], 10)[0]
            admission.admit()
            answers.append(child.communicate(timeout=20)[0].strip())
        assert answers == ["closed", "challenge"]       # the same user is challenged, nobody is not
    finally:
        admission.close()
        listener.close()
        shutil.rmtree(shared)
