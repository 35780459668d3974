"""The house's floors: imports run one way, every module imports on its own, and a device
process loads nothing of the host side.

    ground (errors, constants, protocol, procfs, memory, timemodel, topology, kernel definitions,
            ops, hccl_types, taskspec, dtypes, status, operators, naming, residence)
      ^ board (device side)  ^ runtime (host side)  ^ sanitizer (tool)  ^ faces  ^ cli

The import graph is read from the source with ``ast``: imports inside functions count,
``if TYPE_CHECKING:`` blocks do not (they never run) -- but for a reader of the code they
are arrows too, and they make no circle either.  Inside the board, the device knows its
ops and requests only through mdev.board.tasktable: the modules that define them stand
above it, and the device process's entry point imports them all.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("mdev",)

GROUND = ("mdev.errors", "mdev.constants", "mdev.protocol", "mdev.frameshape", "mdev.procfs", "mdev.memory", "mdev.timemodel", "mdev.kernel",
          "mdev.ops", "mdev.hccl_types", "mdev.taskspec", "mdev.dtypes", "mdev.status", "mdev.operators", "mdev.topology",
          "mdev.naming", "mdev.residence")
# what a host process loads of the board: the launcher that starts one (everything else it
# shares with the devices, the names of the board's files and its lock among them, stands on
# the ground floor)
BOARD_DOORWAY = ("mdev.board", "mdev.board.launcher")
FACES = ("mdev.acl", "mdev.aclnn", "mdev.capi", "mdev.hccl")
# (modules, what they must never import)
FLOORS = [
    (GROUND, ("mdev.board", "mdev.runtime", "mdev.sanitizer", "mdev.cli", "mdev.shim", *FACES)),
    (("mdev.board",), ("mdev.runtime", "mdev.sanitizer", "mdev.cli", "mdev.shim", *FACES)),
    (("mdev.runtime",), ("mdev.sanitizer", "mdev.cli", "mdev.shim", *FACES)),
    (("mdev.sanitizer",), ("mdev.cli", "mdev.shim", *FACES)),
] + [((face,), ("mdev.cli", "mdev.shim", *(f for f in FACES if f != face))) for face in FACES]


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _within(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _known(name: str) -> str | None:
    """The module of ours that ``name`` (a module or a name inside one) belongs to."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, hints: bool = False) -> None:
        self.module = module
        self.hints = hints           # read the TYPE_CHECKING blocks too
        self.package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
        self.found: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        if "TYPE_CHECKING" in ast.unparse(node.test) and not self.hints:
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found.update(filter(None, (_known(alias.name) for alias in node.names)))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")[:len(self.package.split(".")) - node.level + 1]
            origin = ".".join(base + ([node.module] if node.module else []))
        else:
            origin = node.module or ""
        for alias in node.names:
            target = _known(f"{origin}.{alias.name}") or _known(origin)
            if target:
                self.found.add(target)


def _graph(hints: bool = False) -> dict[str, set[str]]:
    graph = {}
    for module, path in MODULES.items():
        visitor = _Imports(module, hints)
        visitor.visit(ast.parse(path.read_text(), str(path)))
        deps = {d for d in visitor.found if d != module}
        # importing a.b.c runs the packages a and a.b too
        deps |= {".".join(d.split(".")[:i]) for d in deps for i in range(1, d.count(".") + 1)}
        graph[module] = {d for d in deps if d in MODULES and d != module and not module.startswith(d + ".")}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_no_import_circle() -> None:
    assert _circles(_graph()) == []


def test_type_hints_make_no_circle_either() -> None:
    """A module that needs another's class only for its hints imports it under TYPE_CHECKING;
    such an arrow points down too (a Protocol of the lower module names what it calls)."""
    assert _circles(_graph(hints=True)) == []


def _registering() -> set[str]:
    """The board's modules that define device ops (``@op(...)``) or requests (``@request``)."""
    found = set()
    for module, path in MODULES.items():
        if _within(module, ("mdev.board",)):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.FunctionDef) and any(
                        isinstance(d, ast.Name) and d.id == "request"
                        or isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id == "op"
                        for d in node.decorator_list):
                    found.add(module)
    return found


def test_the_device_process_loads_every_op_and_the_device_none() -> None:
    """An op registers when its module is imported: the device process's entry point imports
    each such module (a device would answer "unknown task" for a missed one), while the
    Device, below them all, imports none."""
    graph, registering = _graph(), _registering()
    assert {"mdev.board.tasks", "mdev.board.kernels", "mdev.board.sanitize"} <= registering
    assert sorted(registering - graph["mdev.board.device_process"]) == []
    assert sorted(registering & graph["mdev.board.device"]) == []


def test_imports_never_point_up() -> None:
    graph = _graph()
    upward = sorted(f"{module} -> {dep}" for floor, forbidden in FLOORS for module, deps in graph.items()
                    if _within(module, floor) for dep in deps if _within(dep, forbidden))
    assert upward == []


def test_the_graph_reader_sees_what_runs() -> None:
    """The checks above would pass vacuously if the reader missed imports: it sees one made
    inside a function (the board launcher's loading of topologies) and skips a
    TYPE_CHECKING one (board.block's Device annotation) unless asked to, and the circle finder
    finds a circle."""
    graph = _graph()
    assert "mdev.topology" in graph["mdev.board.launcher"]
    assert "mdev.board.device" not in graph["mdev.board.block"]
    assert "mdev.board.device" in _graph(hints=True)["mdev.board.block"]
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _import_alone(module: str) -> tuple[str, str]:
    proc = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "MDEV_AUTOSTART": "0"}, timeout=120)
    return module, proc.stderr.strip().splitlines()[-1] if proc.returncode else ""


def test_every_module_imports_on_its_own() -> None:
    """Each module is the first thing a fresh interpreter imports (no circle hides behind
    an import order that happens to work)."""
    modules = sorted(m for m in MODULES if m != "mdev.__main__")      # __main__ runs the CLI
    with ThreadPoolExecutor(4) as pool:
        failures = [f"{m}: {err}" for m, err in pool.map(_import_alone, modules) if err]
    assert failures == []


def test_a_host_loads_of_the_board_only_its_launcher() -> None:
    """The facts both sides share stand on the ground floor: a host importing a face loads
    no device-side module (no device memory, no op table)."""
    code = "import sys, mdev.acl, mdev.hccl; print(' '.join(m for m in sys.modules if m.startswith('mdev.board')))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "MDEV_AUTOSTART": "0"}, timeout=120, check=True)
    assert sorted(set(proc.stdout.split()) - set(BOARD_DOORWAY)) == []


def test_a_device_process_loads_no_host_side_module(acl) -> None:
    """A kernel runs inside the device process: it reports which mdev modules are loaded there."""
    from mdev.kernel import kernel

    @kernel(vectorized=True)
    def loaded(ctx, out, n):
        import sys as _sys
        names = ",".join(sorted(m for m in _sys.modules if m.startswith("mdev"))).encode()
        view = ctx.gm(out, np.uint8, n)
        view[:len(names)] = np.frombuffer(names[:n], np.uint8)

    assert acl.rt.set_device(0) == 0
    n = 1 << 16
    out, ret = acl.rt.malloc(n, 0)
    assert ret == 0
    assert loaded[1](out, n) == 0
    assert acl.rt.synchronize_device() == 0
    host = np.zeros(n, np.uint8)
    assert acl.rt.memcpy(host.ctypes.data, n, out, n, acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    names = bytes(host).rstrip(b"\0").decode().split(",")
    assert "mdev.board.device" in names            # the report really came from a device
    host_side = [m for m in names if _within(m, ("mdev.runtime", "mdev.sanitizer", "mdev.cli", *FACES))]
    assert host_side == []


def _defining_api() -> set[str]:
    """The runtime's modules that make an API function (``@api(...)``, or ``api(...)(fn)``)."""
    found = set()
    for module, path in MODULES.items():
        if _within(module, ("mdev.runtime",)) and module != "mdev.runtime.boundary":
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "api":
                    found.add(module)
    return found


def test_every_api_function_is_in_the_registry_and_every_face_presents_it() -> None:
    """One registry (mdev.runtime.registry) holds what ``@api`` marks, sub-packages' too, and
    the pyACL and C faces both read it: none of them drops a function."""
    import importlib
    from mdev.capi import adapter, prototypes
    from mdev.runtime import boundary, names, registry
    entries = registry.entries()
    # in a fresh interpreter, the registry alone loads them all
    code = "from mdev.runtime import boundary, registry; registry.entries(); print(' '.join(boundary.REGISTRY))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "MDEV_AUTOSTART": "0"}, timeout=120, check=True)
    assert sorted(_defining_api() - set(proc.stdout.split())) == []
    assert "mdev.runtime.collectives.api" in _defining_api() and _defining_api() <= set(boundary.REGISTRY)
    missing = [f"{e.face}.{e.name}" for e in entries
               if getattr(getattr(importlib.import_module(f"mdev.{e.face}"), e.name, None), "__wrapped__", None)
               is not e.fn]
    assert missing == []
    table = registry.c_table()
    declared = {fn.name for fn in prototypes.functions()}
    assert all(adapter.implementation(names.c_name(e.group, e.name), table) is e.fn
               for e in entries if names.c_name(e.group, e.name) in declared)


# what the Runtime object itself holds: the board, init counts, contexts and streams, the
# lock, handles, the memory table, and the few values several families read
CORE_STATE = {"_handles", "board", "callbacks", "contexts", "default_contexts", "default_device", "device_refs",
              "families", "finalized", "init_count", "lock", "memory", "messages_per_process", "op_wait_timeout",
              "peer_access", "process_messages", "streams", "thread"}


def test_core_holds_no_familys_state() -> None:
    """A feature's state lives in its family (rt.family), so core needs to know no feature's
    fields: a new attribute on the Runtime object is a decision, not a habit."""
    from mdev.runtime.core import Runtime
    assert set(vars(Runtime())) == CORE_STATE


def test_a_familys_state_is_made_afresh_with_the_runtime() -> None:
    """As finalize (rt.__init__) and a forked child reset the runtime, they make every
    family's state afresh too, and the family keeps the same object."""
    code = """if True:
        import os
        import mdev.acl
        from mdev.runtime.core import RUNTIME as rt
        from mdev.runtime.sync import events
        from mdev.runtime.execution import kernels
        held = events.held
        held.events[1] = "an event"
        kernels.held.op_execute_timeout_us = 1
        pid = os.fork()
        if pid == 0:
            os._exit(0 if events.held.events == {} and kernels.held.op_execute_timeout_us > 1 else 1)
        assert os.waitpid(pid, 0)[1] == 0, "the forked child kept its parent's events"
        assert held.events == {1: "an event"}
        rt.__init__()
        assert events.held is held and held.events == {} and kernels.held.op_execute_timeout_us == kernels.OP_TIMEOUT_MAX_US
        print("ok")
    """
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "MDEV_AUTOSTART": "0"}, timeout=120)
    assert proc.stdout.strip() == "ok", proc.stderr
