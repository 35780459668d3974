"""Topology: presets, file validation, routing, peer access, rendering and `mdev topo`."""
from __future__ import annotations

import argparse
import copy
import pathlib
import pickle
import re
import tomllib

import pytest

from mdev import topology
from mdev.cli import topo as topo_cli
from mdev.topology import TopologyError
from mdev.topology.model import TOPO_CLASS
from mdev.topology.render import render_matrix, render_p2p, render_path, render_summary

PRESETS = ["a2-4x8", "cloudmatrix384", "hccs16", "hccs8", "islands8", "laptop2", "pcie4"]

# A minimal valid board: two devices joined by HCCS, both on one root complex.
SMALL = """
name = "small"
[devices]
count = 2
soc_name = "Ascend910B1"
hbm = "4GiB"
hbm_gbps = 1600
aicore = 24
[[nodes]]
name = "numa0"
kind = "numa"
numa = 0
[[nodes]]
name = "rc0"
kind = "root_complex"
[[links]]
a = 0
b = 1
type = "hccs"
bandwidth_gbps = 56
latency_us = 1
[[links]]
a = [0, 1]
b = "rc0"
type = "pcie"
bandwidth_gbps = 31.5
latency_us = 0.5
[[links]]
a = "rc0"
b = "numa0"
type = "host"
bandwidth_gbps = 100
latency_us = 0.2
"""


@pytest.fixture(scope="module")
def presets() -> dict[str, topology.Topology]:
    return {name: topology.resolve(name) for name in PRESETS}


def small_dict() -> dict:
    return tomllib.loads(SMALL)  # entries as written: links[1] is the PCIe star


def error_for(d: dict) -> TopologyError:
    with pytest.raises(TopologyError) as info:
        topology.from_dict(d, "config/bad.toml")
    return info.value


# ---------------------------------------------------------------------------- presets

def test_preset_catalogue():
    assert topology.list_presets() == PRESETS
    assert topology.default_preset() == "hccs8"
    assert topology.preset_path("pcie4").name == "pcie4.toml"
    with pytest.raises(ValueError, match="unknown preset"):
        topology.preset_path("nope")


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_loads_round_trips_and_states_its_source(name, presets):
    topo = presets[name]
    assert topo.name == name and topo.description
    assert "unverified" in topo.source.lower()
    again = topology.from_dict(topo.to_dict(), "<dict>")
    assert again == topo
    assert again.to_dict() == topo.to_dict()
    for d in topo.devices:
        host = topo.host_path(d.id)
        assert host.links and topo.nodes[host.dst].kind == "numa"
        assert d.numa_node == topo.nodes[host.dst].numa
        assert d.host_gbps == host.bottleneck_gbps


def test_preset_device_profiles(presets):
    d = presets["hccs8"].device(7)
    assert (d.soc_name, d.hbm_bytes, d.aicore, d.cube, d.vector, d.aicpu, d.l2_bytes, d.npu_arch) == (
        "Ascend910B1", 64 << 30, 24, 24, 48, 6, 192 << 20, 2201)
    assert [presets[n].device_count for n in PRESETS] == [32, 768, 16, 8, 8, 2, 4]
    assert presets["laptop2"].device(1).hbm_bytes == 4 << 30


def test_to_dict_keeps_per_device_overrides():
    d = small_dict()
    d["devices"]["override"] = [{"id": 1, "hbm": "2GiB", "aicore": 20}]
    topo = topology.from_dict(d)
    assert topo.device(0).hbm_bytes == 4 << 30 and topo.device(1).hbm_bytes == 2 << 30
    assert topo.device(1).cube == 20  # cube defaults to aicore, per device
    assert topology.from_dict(topo.to_dict()) == topo


def test_format_md_example_is_valid():
    text = (pathlib.Path(topology.__file__).parent / "FORMAT.md").read_text()
    example = re.search(r"```toml\n(.*?)```", text, re.S).group(1)
    topo = topology.loads(example, "FORMAT.md")
    assert topo.matrix()[0] == ["X", "HCCS", "PIX", "PIX"]
    assert topo.device(3).hbm_bytes == 32 << 30


# ---------------------------------------------------------------------------- validation

def test_error_names_file_field_and_problem():
    d = small_dict()
    d["links"][1]["bandwidth_gbps"] = -5
    e = error_for(d)
    assert str(e) == "config/bad.toml: links[1].bandwidth_gbps: must be a positive number, got -5"
    assert isinstance(e, ValueError) and (e.filename, e.field) == ("config/bad.toml", "links[1].bandwidth_gbps")
    assert str(pickle.loads(pickle.dumps(e))) == str(e)


@pytest.mark.parametrize("mutate, field, problem", [
    (lambda d: d["links"][0].update(bandwith_gbps=5), "links[0].bandwith_gbps", "did you mean 'bandwidth_gbps'"),
    (lambda d: d.update(colour="red"), "colour", "unknown key"),
    (lambda d: d["links"][2].update(b="numa9"), "links[2].b", "unknown node 'numa9'"),
    (lambda d: d["links"][0].update(a=7), "links[0].a", "unknown node 7"),
    (lambda d: d["devices"].update(override=[{"id": 1, "aicore": 2}, {"id": 1, "aicore": 3}]),
     "devices.override[1].id", "duplicate device id 1"),
    (lambda d: d["devices"].update(override=[{"id": 5}]), "devices.override[0].id", "does not exist"),
    (lambda d: d["devices"].update(hbm="64GB"), "devices.hbm", "ambiguous"),
    (lambda d: d["devices"].update(hbm="lots"), "devices.hbm", "size like"),
    (lambda d: d["devices"].update(aicore=0), "devices.aicore", "an integer >= 1, got 0"),
    (lambda d: d["devices"].update(count=True), "devices.count", "got true"),
    (lambda d: d["devices"].pop("soc_name"), "devices.soc_name", "missing"),
    (lambda d: d.pop("name"), "name", "missing"),
    (lambda d: d["links"][1].update(efficiency=1.5), "links[1].efficiency", "<= 1"),
    (lambda d: d["links"][0].update(type="nvlink"), "links[0].type", "must be one of"),
    (lambda d: d["links"][0].update(b="rc0"), "links[0].type", "cannot end at 'rc0'"),
    (lambda d: d["links"][0].update(type="pcie"), "links[0].type", "directly"),
    (lambda d: d["nodes"].append({"name": "rc0", "kind": "pcie_switch"}), "nodes[2].name", "duplicate node name"),
    (lambda d: d["nodes"].append({"name": "npu5", "kind": "pcie_switch"}), "nodes[2].name", "reserved"),
    (lambda d: d["nodes"].append({"name": "sw", "kind": "pcie_switch"}), "nodes[2]", "has no links"),
    (lambda d: d["nodes"].append({"name": "n1", "kind": "numa", "numa": 0}), "nodes[2].numa", "duplicate NUMA id"),
    (lambda d: d["nodes"][1].update(numa=1), "nodes[1].numa", "only numa nodes"),
    (lambda d: d["links"].append(dict(d["links"][0])), "links[3]", "duplicate link id 'npu0-npu1'"),
    (lambda d: d["links"].pop(1), "links", "npu0 has no path to the host"),
])
def test_validation_errors(mutate, field, problem):
    d = copy.deepcopy(small_dict())
    mutate(d)
    e = error_for(d)
    assert e.filename == "config/bad.toml"
    assert e.field == field, str(e)
    assert problem in e.problem, str(e)


def test_unreachable_peer_and_directed_links():
    d = small_dict()
    d["links"][0].update(bidirectional=False)  # npu0 -> npu1 only; npu1 -> npu0 goes via rc0
    topo = topology.from_dict(d)
    assert topo.path(0, 1).label == "HCCS" and topo.path(1, 0).label == "PHB"
    assert topo.path(0, 1).channels() == [("npu0-npu1", True)]
    assert topo.path(1, 0).channels() == [("npu1-rc0", True), ("npu0-rc0", False)]


def test_file_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \n")
    with pytest.raises(TopologyError, match=r"bad\.toml: invalid TOML"):
        topology.load(bad)
    with pytest.raises(TopologyError, match="cannot read"):
        topology.load(tmp_path / "missing.toml")
    with pytest.raises(TopologyError, match="no such file or preset"):
        topology.resolve("missing-preset")


def test_parse_size():
    assert topology.parse_size("64GiB") == 64 << 30
    assert topology.parse_size("32 GiB") == 32 << 30
    assert topology.parse_size("512MiB") == 512 << 20
    assert topology.parse_size("1.5GiB") == 3 << 29
    assert topology.parse_size(4096) == 4096
    for bad in ("64GB", "-1", "1.5B", True, "GiB"):
        with pytest.raises(ValueError):
            topology.parse_size(bad)


# ---------------------------------------------------------------------------- routing

def test_hccs_mesh_is_one_hop_everywhere(presets):
    topo = presets["hccs8"]
    for a in range(8):
        for b in range(8):
            if a != b:
                p = topo.path(a, b)
                assert (p.hops, p.label, p.topo_class, p.p2p) == (1, "HCCS", 0x01, True)
                assert p.links[0].type == "hccs" and topo.can_access_peer(a, b)


def test_islands_peer_access_only_within_an_island(presets):
    topo = presets["islands8"]
    inside = topo.path(1, 3)
    assert (inside.label, inside.hops, inside.p2p) == ("HCCS", 1, True)
    across = topo.path(0, 5)
    assert across.label in ("PHB", "SYS") and not across.p2p
    assert topo.topo_class(0, 5) in (0x08, 0x10)
    assert {l.type for l in across.links} <= {"pcie", "host", "smp"} and "pcie" in {l.type for l in across.links}
    assert across.bottleneck_gbps == min(l.effective_gbps for l in across.links)
    assert across.latency_us == pytest.approx(sum(l.latency_us for l in across.links))
    assert not topo.can_access_peer(0, 5) and topo.can_access_peer(4, 7)


def test_p2p_across_host_flag_opens_host_bridge_paths(presets):
    d = presets["islands8"].to_dict()
    d["p2p_across_host"] = True
    assert topology.from_dict(d).can_access_peer(0, 5)


def test_pcie_switch_box(presets):
    topo = presets["pcie4"]
    p = topo.path(0, 3)
    assert (p.label, p.topo_class, p.p2p, p.hops) == ("PIX", 0x02, True, 2)
    assert p.nodes == ("npu0", "sw0", "npu3")


def test_hccs16_sio_pairs_and_switch(presets):
    topo = presets["hccs16"]
    assert topo.path(4, 5).label == "SIO" and topo.topo_class(4, 5) == 0x20
    far = topo.path(0, 15)
    assert (far.label, far.topo_class, far.p2p) == ("HCCS_SW", 0x40, True)
    assert far.nodes == ("npu0", "hccs_l1", "npu15")  # widest of the 2-hop routes, not PCIe


def test_bottleneck_is_narrowest_link():
    d = small_dict()
    d["links"][0]["bandwidth_gbps"] = 1  # make the PCIe route wider than HCCS: hops still win
    d["links"][1].update(count=2, efficiency=0.5)
    topo = topology.from_dict(d)
    assert topo.path(0, 1).bottleneck_gbps == 1
    host = topo.host_path(0)
    assert host.bottleneck_gbps == 31.5 * 2 * 0.5 and host.bottleneck.id == "npu0-rc0"


def test_pxb_class():
    d = small_dict()
    d["nodes"] += [{"name": "sw0", "kind": "pcie_switch"}, {"name": "sw1", "kind": "pcie_switch"},
                   {"name": "top", "kind": "pcie_switch"}]
    pcie = d["links"][1]
    d["links"] = [d["links"][2], dict(pcie, a=[0, 1], b=["sw0", "sw1"]),
                  dict(pcie, a=["sw0", "sw1"], b="top"), dict(pcie, a="top", b="rc0")]
    topo = topology.from_dict(d)
    assert topo.path(0, 1).label == "PXB" and topo.topo_class(0, 1) == TOPO_CLASS["PIX"]
    assert topo.can_access_peer(0, 1)


def test_self_and_bad_indices(presets):
    topo = presets["laptop2"]
    p = topo.path(1, 1)
    assert (p.label, p.hops, p.topo_class) == ("X", 0, 0)
    assert p.bottleneck_gbps == topo.device(1).d2d_gbps == 800
    assert not topo.can_access_peer(1, 1)
    with pytest.raises(IndexError):
        topo.path(0, 2)
    with pytest.raises(ValueError, match="no NUMA node 3"):
        topo.host_path(0, numa=3)


def test_host_path_to_remote_numa_crosses_smp(presets):
    topo = presets["hccs8"]
    near, far = topo.host_path(0), topo.host_path(0, numa=1)
    assert near.dst == "numa0" and near.label == "PHB"
    assert far.dst == "numa1" and far.label == "SYS" and far.hops == near.hops + 1


def test_matrix_labels(presets):
    m = presets["islands8"].matrix()
    assert [m[i][i] for i in range(8)] == ["X"] * 8
    assert m[0][1:4] == ["HCCS"] * 3 and set(m[0][4:]) == {"SYS"}
    assert presets["pcie4"].matrix()[2] == ["PIX", "PIX", "X", "PIX"]


# ---------------------------------------------------------------------------- rendering

def test_render_matrix_and_summary(presets):
    text = render_matrix(presets["hccs16"])
    assert text.splitlines()[0].split()[:2] == ["NPU0", "NPU1"]
    assert "CPU Affinity" in text and "Legend:" in text
    for label in ("X", "HCCS", "SIO", "HCCS_SW", "PIX", "PXB", "PHB", "SYS"):
        assert re.search(rf"^\s+{label}\s+=", text, re.M)
    assert re.search(r"^NPU8\s+HCCS_SW", text, re.M)
    summary = render_summary(presets["islands8"])
    assert "Ascend910A" in summary and "source:" in summary
    assert "NS" in render_p2p(presets["islands8"])


def test_render_path_lists_hops_and_bottleneck(presets):
    text = render_path(presets["islands8"].path(0, 5))
    assert text.splitlines()[0].startswith("npu0 -> npu5: SYS, 7 hops")
    assert "smp" in text and "bottleneck: npu0-sw0 (pcie, 31.5 GB/s)" in text
    assert "X (on-device copy)" in render_path(presets["hccs8"].path(2, 2))


# ---------------------------------------------------------------------------- CLI

def run(capsys, *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="mdev")
    topo_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    code = args.handler(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_list(capsys):
    code, out, _ = run(capsys, "topo", "list")
    assert code == 0 and len(out.splitlines()) == len(PRESETS)
    assert re.search(r"^hccs8 .*\(default\)$", out, re.M)


def test_cli_show(capsys):
    code, out, _ = run(capsys, "topo", "show")
    assert code == 0 and out.startswith("hccs8:") and "Legend:" in out
    code, out, _ = run(capsys, "topo", "show", str(topology.preset_path("islands8")), "--p2p")
    assert code == 0 and "NS" in out
    code, _, err = run(capsys, "topo", "show", "nope")
    assert code == 2 and "no such file or preset" in err         # a bad argument


def test_cli_check(capsys, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(SMALL.replace("bandwidth_gbps = 56", "bandwidth_gbps = -5"))
    code, out, _ = run(capsys, "topo", "check", "laptop2", str(topology.preset_path("hccs16")))
    assert code == 0
    assert out.splitlines() == ["ok: laptop2 (2 devices, 4 links)",
                                f"ok: {topology.preset_path('hccs16')} (16 devices, 43 links)"]
    code, out, err = run(capsys, "topo", "check", str(bad), "pcie4")
    assert code == 1 and "ok: pcie4" in out
    assert f"{bad}: links[0].bandwidth_gbps: must be a positive number, got -5" in err


def test_cli_path(capsys):
    code, out, _ = run(capsys, "topo", "path", "islands8", "0", "npu5")
    assert code == 0 and "SYS" in out and "bottleneck:" in out
    code, out, _ = run(capsys, "topo", "path", "pcie4", "2", "host")
    assert code == 0 and out.startswith("npu2 -> numa0: PHB")
    code, _, err = run(capsys, "topo", "path", "pcie4", "0", "9")
    assert code == 2 and "not a device" in err
