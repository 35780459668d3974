"""Cluster nodes as the runtime sees them: which node this process runs on, and the
mapping between a node's device ids and the board's device indices.

    host process on node k --(user's device id i, 0..n-1)--> runtime --(board index)-->
        links, pointers (mdev.memory.address), control pages, tasks, topology routes

    board index of (node k, device i)  =  topology.node(k).first + i   (= k * n + i: nodes
                                                                        are copies of one server)

A process runs on one node (``MDEV_NODE``, ``mdev run --node``; default 0) and the API
only ever takes and returns that node's device ids; this module is the seam for faces
that must reason about other nodes too (HCCL: a rank is a (node, device) pair, ranks on
different nodes talk over the inter-node links with staged transports, and modelled time
needs the route between any two board devices)::

    from mdev.runtime.devices import nodes
    me = nodes.board_index(nodes.this_node().index, local_id)   # == nodes.to_board(local_id)
    peer = nodes.board_index(peer_node, peer_local)             # from the peer's rank info
    path = nodes.route(me, peer)          # topology.Path: links, bottleneck_gbps, latency_us,
                                          # channels(); path.p2p is False across nodes
    nodes.same_node(me, peer)             # peer access (and IPC) only within a node

Devices of a node nobody attached to yet are not running (mdev.board.fleet): by the time
ranks talk, every rank's process has attached, so its node runs.
"""

from __future__ import annotations

from mdev.topology import ClusterNode, Path, Topology

from mdev.runtime.core import RUNTIME as rt


def board_topology() -> Topology:
    """The whole board (every node), device indices board-global."""
    return rt.attach().topology


def this_node() -> ClusterNode:
    """The cluster node this process runs on (``devices``: its board indices)."""
    return rt.attach().node


def to_board(device_id: int) -> int:
    """Board index of this process's device ``device_id`` (AclError 107001 if it has none)."""
    return rt.check_device(device_id)


def to_local(board_index: int) -> int:
    """This process's device id of board device ``board_index`` (which must be on its node)."""
    if board_index not in this_node().devices:
        raise ValueError(f"board device {board_index} is not on node {this_node().index}")
    return rt.local_device(board_index)


def board_index(node: int, device_id: int) -> int:
    """Board index of node ``node``'s device ``device_id`` (IndexError if there is none)."""
    return board_topology().global_device(node, device_id)


def node_of(board_index: int) -> int:
    return board_topology().node_of(board_index)


def same_node(a: int, b: int) -> bool:
    return node_of(a) == node_of(b)


def route(a: int, b: int) -> Path:
    """The route between board devices ``a`` and ``b``, across nodes too."""
    return board_topology().path(a, b)
