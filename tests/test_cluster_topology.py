"""Topology files that describe clusters: the [cluster] table, node numbering, routes
between nodes, the new link types, the cluster presets, and `mdev topo` on nodes."""
from __future__ import annotations

import argparse
import tomllib

import pytest

from mdev import topology
from mdev.cli import topo as topo_cli
from mdev.topology import TopologyError
from test_topology import SMALL, error_for
from mdev.topology.render import render_matrix, render_nodes, render_path, render_summary

# Three servers of two HCCS-joined devices each (test_topology's SMALL board); every
# device has a RoCE port on one leaf switch.
TRIO = SMALL.replace('name = "small"', 'name = "trio"') + """
[cluster]
nodes = 3
[[cluster.switches]]
name = "leaf"
kind = "roce_switch"
[[cluster.links]]
a = [0, 1]
b = "leaf"
type = "roce"
bandwidth_gbps = 25
latency_us = 2
"""


def trio_dict() -> dict:
    return tomllib.loads(TRIO)


@pytest.fixture(scope="module")
def trio() -> topology.Topology:
    return topology.loads(TRIO, "trio.toml")


@pytest.fixture(scope="module")
def cm384() -> topology.Topology:
    return topology.resolve("cloudmatrix384")


# ---------------------------------------------------------------------------- numbering

def test_nodes_number_their_devices_contiguously(trio):
    assert trio.device_count == 6 and trio.node_count == 3
    assert [list(trio.node(k).devices) for k in range(3)] == [[0, 1], [2, 3], [4, 5]]
    assert trio.node(2).name == "node2" and trio.node(2).global_device(1) == 5
    assert trio.global_device(1, 0) == 2 and trio.local_device(5) == (2, 1)
    assert [trio.node_of(d) for d in range(6)] == [0, 0, 1, 1, 2, 2]
    with pytest.raises(IndexError):
        trio.global_device(1, 2)
    with pytest.raises(IndexError):
        trio.node(3)
    with pytest.raises(IndexError):
        trio.node_of(6)


def test_a_one_server_board_is_one_node():
    hccs8 = topology.resolve("hccs8")
    assert hccs8.node_count == 1 and hccs8.node(0).devices == range(8)
    assert hccs8.local_device(7) == (0, 7)


def test_servers_are_copied_with_their_parts_and_links(trio):
    assert {"n0.numa0", "n2.rc0", "leaf"} <= set(trio.nodes)
    assert "numa0" not in trio.nodes
    ids = {link.id for link in trio.links}
    assert {"npu2-npu3", "npu4-n2.rc0", "n1.rc0-n1.numa0", "npu5-leaf"} <= ids
    assert len(trio.links) == 3 * 4 + 6
    assert trio.device(4).numa_node == 0 and trio.host_path(4).nodes == ("npu4", "n2.rc0", "n2.numa0")


def test_routes_cross_nodes_but_peer_access_does_not(trio):
    inside, across = trio.path(2, 3), trio.path(1, 4)
    assert inside.label == "HCCS" and inside.p2p and trio.can_access_peer(2, 3)
    assert across.label == "ROCE" and across.nodes == ("npu1", "leaf", "npu4")
    assert not across.p2p and not trio.can_access_peer(1, 4)
    assert across.bottleneck_gbps == 25 and across.latency_us == 4
    assert across.channels() == [("npu1-leaf", True), ("npu4-leaf", False)]
    assert trio.topo_class(1, 4) == 0                 # no ACL class: no API call can ask
    assert trio.matrix(2) == [["X", "HCCS"], ["HCCS", "X"]]


def test_cluster_round_trips_in_its_compact_form(trio):
    d = trio.to_dict()
    assert d["cluster"]["nodes"] == 3 and d["devices"]["count"] == 2   # one server, not 6 devices
    again = topology.from_dict(d)
    assert again == trio and again.to_dict() == d
    d["cluster"]["nodes"] = 5                                          # the caller's copy only
    assert trio.node_count == 3 and topology.from_dict(d).device_count == 10


def test_explicit_fabric_ids_are_per_node():
    d = trio_dict()
    d["cluster"]["links"][0] = {"a": 0, "b": "leaf", "id": "port", "type": "roce",
                                "bandwidth_gbps": 25, "latency_us": 2}
    d["cluster"]["links"].append({"a": 1, "b": "leaf", "type": "roce", "bandwidth_gbps": 25, "latency_us": 2})
    ids = {link.id for link in topology.from_dict(d).links}
    assert {"n0.port", "n2.port", "npu5-leaf"} <= ids


def test_shared_switches_link_once():
    d = trio_dict()
    d["cluster"]["switches"].append({"name": "spine", "kind": "roce_switch"})
    d["cluster"]["links"].append({"a": "leaf", "b": "spine", "type": "roce", "bandwidth_gbps": 400,
                                  "latency_us": 1})
    topo = topology.from_dict(d)
    assert [link.id for link in topo.links].count("leaf-spine") == 1


def test_resized_cluster_keeps_whole_nodes_or_one_server(trio):
    assert topology.resized(trio, devices=4).node_count == 2
    one = topology.resized(trio, devices=1)
    assert one.node_count == 1 and one.device_count == 1 and "leaf" not in one.nodes
    assert topology.resized(trio, devices=2).device_count == 2
    assert topology.resized(trio, hbm_bytes=1 << 20).device(5).hbm_bytes == 1 << 20
    with pytest.raises(TopologyError, match="whole nodes"):
        topology.resized(trio, devices=3)


# ---------------------------------------------------------------------------- checks

@pytest.mark.parametrize("change, field, problem", [
    (lambda d: d["cluster"].update(nodes=0), "cluster.nodes", "integer >= 1"),
    (lambda d: d["cluster"].update(racks=2), "cluster.racks", "unknown key"),
    (lambda d: d["cluster"]["switches"][0].update(kind="numa"), "cluster.switches[0].kind", "host parts"),
    (lambda d: d["cluster"]["switches"][0].update(name="rc0"), "cluster.switches[0].name", "duplicate"),
    (lambda d: d["cluster"]["switches"].append({"name": "lonely", "kind": "ub_switch"}),
     "cluster.switches[1]", "no links"),
    (lambda d: d["cluster"]["links"][0].update(b="lef"), "cluster.links[0].b", "did you mean 'leaf'"),
    (lambda d: d["cluster"]["links"][0].update(type="ub"), "cluster.links[0].type", "ub link cannot end"),
    (lambda d: d["cluster"].update(links=[]), "cluster.switches[0]", "no links"),
])
def test_cluster_errors_name_the_field(change, field, problem):
    d = trio_dict()
    change(d)
    err = error_for(d)
    assert err.field == field and problem in err.problem, str(err)


def test_nodes_must_reach_each_other():
    d = trio_dict()
    d["cluster"]["links"][0]["a"] = 0    # only device 0 of each server has a port: devices do
    err = error_for(d)                   # not forward, so device 1 reaches no other node
    assert err.field == "cluster.links" and err.problem == "no route from npu0 to npu3"


def test_the_server_must_be_a_valid_board_by_itself():
    d = trio_dict()
    d["links"] = d["links"][1:]                 # the two devices of a server lose their HCCS link
    d["links"][0]["a"] = [0]                    # ... and device 1 its host link
    err = error_for(d)
    assert err.field == "links" and "npu1 has no path to the host" in err.problem


# ---------------------------------------------------------------------------- presets

def test_a2_4x8(tmp_path):
    a2 = topology.resolve("a2-4x8")
    assert (a2.device_count, a2.node_count, a2.node(3).devices) == (32, 4, range(24, 32))
    assert a2.matrix(3) == topology.resolve("hccs8").matrix()     # each node is hccs8
    p = a2.path(a2.global_device(0, 1), a2.global_device(3, 7))
    assert p.label == "ROCE" and p.hops == 2 and not p.p2p
    assert p.bottleneck_gbps == pytest.approx(25 * 0.9)
    assert "UNVERIFIED" in a2.source and "200GE" in a2.source


def test_cloudmatrix384_is_48_nodes_of_16_dies(cm384):
    assert (cm384.device_count, cm384.node_count, cm384.node(0).count) == (768, 48, 16)
    assert cm384.device(767).soc_name == "Ascend910_9391" and cm384.device(767).hbm_bytes == 64 << 30
    die, partner = cm384.global_device(47, 14), cm384.global_device(47, 15)
    assert cm384.path(die, partner).label == "SIO"                       # one 910C package
    inside = cm384.path(cm384.global_device(47, 0), die)
    assert inside.label == "HCCS_SW" and inside.p2p and inside.bottleneck_gbps == 196
    across = cm384.path(0, 767)
    assert across.nodes == ("npu0", "n0.ub_l1", "ub_l2", "n47.ub_l1", "npu767")
    assert across.bottleneck_gbps == 196 and not across.p2p and across.latency_us < 1.0
    assert "UNVERIFIED" in cm384.source and "two devices" in cm384.source


def test_cloudmatrix384_loads_fast_enough_for_every_host(cm384):
    import time
    t0 = time.perf_counter()
    topology.from_dict(cm384.to_dict())
    assert time.perf_counter() - t0 < 2.0       # generous: it takes ~0.1 s; a host loads it at attach


# ---------------------------------------------------------------------------- rendering and CLI

def test_matrix_of_one_node_uses_local_names(trio, cm384):
    text = render_matrix(trio, node=2)
    assert "NPU0  X     HCCS" in text and "NPU4" not in text and "ROCE" in text
    assert "(within a node)" in text
    assert render_matrix(cm384, node=47).count("\nNPU") == 16


def test_summary_nodes_table_and_path(trio):
    summary = render_summary(trio)
    assert "nodes: 3 x 2 devices" in summary and "n0.numa0" in summary and "n1.numa0" not in summary
    table = render_nodes(trio)
    assert "node2  2        npu4-5         ROCE" in table
    text = render_path(trio.path(1, 4), trio)
    assert "npu1 (node0 device 1) -> npu4 (node2 device 0): ROCE" in text
    assert "peer access: no (another node)" in text


def run(capsys, *argv) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    topo_cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(list(argv))
    code = args.handler(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_show_check_and_path_on_nodes(capsys):
    code, out, _ = run(capsys, "topo", "show", "a2-4x8", "--node", "3")
    assert code == 0 and "Node 3 (its host processes see devices 0..7)" in out and "node3  8" in out
    code, _, err = run(capsys, "topo", "show", "a2-4x8", "--node", "4")
    assert code == 2 and "nodes 0..3" in err         # a bad argument
    code, out, _ = run(capsys, "topo", "check", "cloudmatrix384", "a2-4x8")
    assert code == 0 and "ok: cloudmatrix384 (768 devices in 48 nodes of 16, 2448 links)" in out
    code, out, _ = run(capsys, "topo", "path", "a2-4x8", "0:1", "3:7")
    assert code == 0 and out.startswith("npu1 (node0 device 1) -> npu31 (node3 device 7): ROCE")
    code, _, err = run(capsys, "topo", "path", "a2-4x8", "4:0", "0")
    assert code == 2 and "nodes 0..3" in err


def test_format_md_cluster_example_is_valid():
    import pathlib
    import re
    text = (pathlib.Path(topology.__file__).parent / "FORMAT.md").read_text()
    example = re.search(r"```toml\n(\[cluster\].*?)```", text, re.S).group(1)
    server = topology.preset_path("hccs8").read_text()
    topo = topology.loads(server + example, "FORMAT.md")
    assert topo.node_count == 4 and topo.path(0, 31).label == "ROCE"


def test_whatif_counts_peer_pairs_of_the_node_it_runs_on(trio):
    from mdev.cli import whatif
    assert whatif.peer_pairs(trio, 2) == (1, 1, [(0, 1)])          # local ids of node 2
    assert whatif.run_node(trio, 2) == 2 and whatif.run_node(topology.resolve("hccs8"), 2) == 0
