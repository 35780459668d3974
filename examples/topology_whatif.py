"""Topology what-if: the same peer-access probe on two boards, the HCCS mesh and two islands.

The probe is one ordinary pyACL program: for every ordered pair (a, b) it asks
device_can_access_peer, get_devices_topo, and tries device_enable_peer_access(b) with a
current, then copies 1 MiB a -> b where that worked.  This script runs the probe twice, in
two processes, on two boards started on demand with

    MDEV_TOPOLOGY=hccs8     8 x Ascend910B1, every pair linked by HCCS
    MDEV_TOPOLOGY=islands8  8 x Ascend910A, two HCCS quads joined only through the host

and prints the P2P matrix of each: the program is unchanged, only the board differs.

    python examples/topology_whatif.py             (the what-if boards are stopped at the end)
    python examples/topology_whatif.py --probe     (the probe alone, on the current board)
"""

import json
import os
import subprocess
import sys

import numpy as np

import mdev.acl as acl

TOPO_NAMES = {getattr(acl, f"ACL_RT_DEVS_TOPOLOGY_{name}"): name         # link classes of get_devices_topo
              for name in ("HCCS", "PIX", "PIB", "PHB", "SYS", "SIO", "HCCS_SW")}
PRESETS = ("hccs8", "islands8")
SIZE = 1 << 20


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


# ---------------------------------------------------------------------------- the probe
def probe():
    """Run on whatever board MDEV_BOARD / MDEV_TOPOLOGY give; print one JSON line."""
    def fill(device):                    # device's buffer holds its own pattern, device + 1
        pattern = np.full(SIZE, device + 1, np.uint8)
        check(acl.rt.memcpy(bufs[device], SIZE, acl.util.numpy_to_ptr(pattern), SIZE, acl.ACL_MEMCPY_HOST_TO_DEVICE),
              "memcpy H2D")

    check(acl.init(), "init")
    n, ret = acl.rt.get_device_count()
    check(ret, "get_device_count")
    bufs = {}
    for d in range(n):
        check(acl.rt.set_device(d), "set_device")
        bufs[d], ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        fill(d)
    pairs = {}
    for a in range(n):
        for b in range(n):
            if a == b:
                continue
            can, ret = acl.rt.device_can_access_peer(a, b)
            check(ret, "device_can_access_peer")
            topo, ret = acl.rt.get_devices_topo(a, b)
            check(ret, "get_devices_topo")
            check(acl.rt.set_device(a), "set_device")
            enable_ret = acl.rt.device_enable_peer_access(b, 0)      # 0, or 207000 where not allowed
            copied = False
            if enable_ret == acl.ACL_SUCCESS:
                # device a pushes its 1 MiB into device b's buffer, which is then checked
                check(acl.rt.memcpy(bufs[b], SIZE, bufs[a], SIZE, acl.ACL_MEMCPY_DEVICE_TO_DEVICE), "memcpy D2D")
                back = np.zeros(SIZE, np.uint8)
                check(acl.rt.memcpy(acl.util.numpy_to_ptr(back), SIZE, bufs[b], SIZE, acl.ACL_MEMCPY_DEVICE_TO_HOST),
                      "memcpy D2H")
                copied = bool((back == a + 1).all())
                fill(b)                          # restore device b's own pattern
                check(acl.rt.device_disable_peer_access(b), "device_disable_peer_access")
            else:
                acl.get_recent_err_msg()
            pairs[f"{a},{b}"] = {"can": can, "topo": topo, "enable": enable_ret, "copied": copied}
    for d in range(n):
        check(acl.rt.set_device(d), "set_device")
        check(acl.rt.free(bufs[d]), "free")
        check(acl.rt.reset_device_force(d), "reset_device_force")
    check(acl.finalize(), "finalize")
    print(json.dumps({"devices": n, "soc": acl.get_soc_name(), "pairs": pairs}))
    return 0


# ---------------------------------------------------------------------------- the what-if
def run_on(preset, board):
    env = dict(os.environ, MDEV_TOPOLOGY=preset, MDEV_BOARD=board, MDEV_AUTOSTART="1")
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--probe"], env=env,
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"probe on {preset} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def show(preset, result):
    n = result["devices"]
    pairs = result["pairs"]
    print(f"\n{preset}: {n} x {result['soc']}   cell = link class / peer access "
          f"(P2P: enabled and 1 MiB copy verified, - : enable refused with its ret)")
    print("      " + "".join(f"{b:>13}" for b in range(n)))
    for a in range(n):
        cells = []
        for b in range(n):
            if a == b:
                cells.append(f"{'X':>13}")
                continue
            p = pairs[f"{a},{b}"]
            mark = "P2P" if p["copied"] else f"-{p['enable']}"
            cells.append(f"{TOPO_NAMES.get(p['topo'], hex(p['topo'])) + '/' + mark:>13}")
        print(f"{a:>5} " + "".join(cells))
    usable = sum(p["copied"] for p in pairs.values())
    print(f"{preset}: {usable} of {len(pairs)} ordered pairs can use peer access")
    return usable


def consistent(result):
    """can_access_peer, enable and the copy agree for every pair."""
    return all((p["can"] == 1) == (p["enable"] == 0) == p["copied"] for p in result["pairs"].values())


def main():
    base = os.environ.get("MDEV_BOARD", "default")
    boards = {preset: f"{base}-whatif-{preset}" for preset in PRESETS}
    try:
        results = {preset: run_on(preset, board) for preset, board in boards.items()}
    finally:
        from mdev.board import launcher        # the what-if boards are this script's own
        for board in boards.values():
            launcher.stop(board)
    usable = {preset: show(preset, result) for preset, result in results.items()}
    ok = all(consistent(r) for r in results.values())
    n = results["hccs8"]["devices"]
    ok &= usable["hccs8"] == n * (n - 1)
    ok &= 0 < usable["islands8"] < usable["hccs8"]
    cross = results["islands8"]["pairs"]["0,4"]
    print(f"\nislands8 across the islands (0 -> 4): {TOPO_NAMES.get(cross['topo'])}, "
          f"device_enable_peer_access ret = {cross['enable']}")
    print(f"topology_whatif: same probe, hccs8 {usable['hccs8']} P2P pairs, islands8 {usable['islands8']} "
          f"(cross-island pairs refused with 207000): {'OK' if ok else 'INCONSISTENT'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(probe() if "--probe" in sys.argv[1:] else main())
