"""A /dev/shm too full for an allocation: the allocation is refused with
ACL_ERROR_RT_MEMORY_ALLOCATION (207001) and a message naming /dev/shm, and nothing dies.

A board's HBM segments are sparse (a 32 GiB device costs what is allocated), so an
allocation /dev/shm cannot hold used to be handed out and kill the device process with
SIGBUS at its first memset.  Two real set-ups:

    small tmpfs      a private mount namespace whose /dev/shm is a 64 MiB tmpfs, mostly
                     filled: a board of 1 GiB devices runs inside it (where the machine lets
                     the test make a mount namespace; it skips otherwise)
    big HBM          on the machine's own /dev/shm, an allocation larger than its free space
                     but smaller than its size, on a board whose HBM exceeds both
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from async_util import ok, out
from helpers import GiB, MiB, attached, extra_board, from_device, to_device
from mdev.board import launcher

NO_MEMORY = 207001        # ACL_ERROR_RT_MEMORY_ALLOCATION
CANNOT_MOUNT = 77

INSIDE = r'''
import os, subprocess, sys
import numpy as np
if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", "/dev/shm"]).returncode:
    sys.exit(CANNOT_MOUNT)
from mdev.board import launcher
import mdev.acl as acl
name = f"shmfull-{os.getpid()}"
launcher.start(name, launcher.resolve_topology("laptop2", hbm=1 << 30), owner_pid=os.getpid())
os.environ.update(MDEV_BOARD=name, MDEV_AUTOSTART="0")
try:
    with open("/dev/shm/filler", "wb") as f:           # leave about 20 MiB free
        os.posix_fallocate(f.fileno(), 0, 44 << 20)
    assert acl.rt.set_device(0) == 0
    ptr, ret = acl.rt.malloc(32 << 20, 0)              # under the 64 MiB the tmpfs has in all
    message = acl.get_recent_err_msg()
    if ret == 0:                                       # the old behaviour: SIGBUS on first touch
        ret = ("memset", acl.rt.memset(ptr, 32 << 20, 1, 32 << 20))
    print("MALLOC", repr((ret, message)))
    host, hret = acl.rt.malloc_host(32 << 20)
    print("MALLOC_HOST", repr((hret, acl.get_recent_err_msg())))
    # the device lives on: a smaller allocation works, memset and copy included
    small, ret = acl.rt.malloc(4 << 20, 0)
    assert ret == 0, acl.get_recent_err_msg()
    assert acl.rt.memset(small, 4 << 20, 0x5A, 4 << 20) == 0
    back = np.zeros(4 << 20, np.uint8)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(back), back.nbytes, small, back.nbytes, 2) == 0
    assert (back == 0x5A).all()
    assert acl.rt.free(small) == 0
    print("STATE", launcher.status(name)["devices"][0]["state"])
    acl.rt.reset_device(0)
    acl.finalize()
finally:
    launcher.stop(name)
print("LEFT", sorted(e for e in os.listdir("/dev/shm") if e != "filler"))
'''.replace("CANNOT_MOUNT", str(CANNOT_MOUNT))


def test_small_tmpfs_refuses_what_it_cannot_back_and_the_device_lives():
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) to make a mount namespace")
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable, "-c", INSIDE],
                          capture_output=True, text=True, timeout=180)
    if proc.returncode == CANNOT_MOUNT or "unshare failed" in proc.stderr:
        pytest.skip(f"cannot mount a private tmpfs here: {proc.stderr.strip()[-200:]}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    ret, message = eval(lines["MALLOC"])
    assert ret == NO_MEMORY and "/dev/shm" in message, (ret, message)
    ret, message = eval(lines["MALLOC_HOST"])
    assert ret == NO_MEMORY and "/dev/shm" in message, (ret, message)
    assert lines["STATE"] == "ok"
    assert lines["LEFT"] == "[]"


def test_allocation_beyond_free_space_of_dev_shm_is_refused(monkeypatch):
    st = os.statvfs("/dev/shm")
    size = st.f_blocks * st.f_frsize
    hbm = 1 << (size + 4 * GiB).bit_length()          # a device bigger than /dev/shm itself
    with extra_board("shm-big", "laptop2", hbm=hbm) as name, attached(monkeypatch, name) as acl:
        ok(acl, acl.rt.set_device(0))
        held = out(acl, acl.rt.malloc_host(16 * MiB))    # /dev/shm is at least this much short of its size
        ask = size - 8 * MiB
        assert ask > os.statvfs("/dev/shm").f_bavail * st.f_frsize
        ptr, ret = acl.rt.malloc(ask, acl.ACL_MEM_MALLOC_NORMAL_ONLY)
        assert (ptr, ret) == (0, NO_MEMORY)
        assert "/dev/shm" in acl.get_recent_err_msg()
        assert launcher.status(name)["devices"][0]["state"] == "ok"
        small = out(acl, acl.rt.malloc(1 * MiB, 0))
        data = os.urandom(1 * MiB)
        to_device(acl, small, np.frombuffer(data, np.uint8))
        assert from_device(acl, small, 1 * MiB).tobytes() == data
        ok(acl, acl.rt.free(small))
        ok(acl, acl.rt.free_host(held))
