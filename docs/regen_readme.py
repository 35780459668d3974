"""Rewrite README.md's generated blocks from what the programs print, or check them.

    python docs/regen_readme.py            rewrite every block between its markers
    python docs/regen_readme.py --check    exit 1, showing the difference, if a block drifted

A block sits between ``<!-- generated: NAME -->`` and ``<!-- end generated: NAME -->`` (inline
in a sentence or around lines); each NAME below says which program makes its text.  Some
figures differ from run to run (wall times, and modelled times that include a measured
host-to-host copy): the check compares them as placeholders, and the rest exactly but for
the width of a table's columns.
tests/test_readme_figures.py runs the check.
"""

from __future__ import annotations

import ast
import difflib
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

WHATIF = ["examples/topology_whatif_trace.py", "--topology", "hccs8", "--topology", "islands8", "--hbm", "256MiB"]
NUMBER = r"\d+(?:\.\d+)?"
# whatif rows whose figures are times of this run
VOLATILE_ROWS = re.compile(rf"^(\s*(?:wall makespan|modelled makespan)\s.*)$", re.M)
VOLATILE_SHARE = re.compile(rf"{NUMBER}%\)")


def whatif_block() -> str:
    """`mdev whatif` of the trace example on two topologies: its table, as a shell session."""
    proc = subprocess.run([sys.executable, "-m", "mdev", "whatif", *WHATIF], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"mdev whatif failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    table = proc.stdout[proc.stdout.index("\n\n") + 2:].rstrip("\n").splitlines()      # after the runs' own lines
    lines = ["$ mdev whatif " + " ".join(WHATIF), "...", *table]
    return "\n\n" + "\n".join("    " + line.rstrip() for line in lines) + "\n\n"


def sanitized_examples_block() -> str:
    """How many examples tests/test_examples.py runs under the sanitizer, clean and not."""
    tree = ast.parse((ROOT / "tests" / "test_examples.py").read_text())
    found = {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body
             if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
             and node.targets[0].id in ("SANITIZED_CLEAN", "SANITIZED_FINDINGS")}
    clean, findings = len(found["SANITIZED_CLEAN"]), len(found["SANITIZED_FINDINGS"])
    return (f"{clean + findings} examples run under `MDEV_SANITIZE=all` in the tests, {clean} of them\n"
            f"clean and {findings} whose deliberate bug must be named")


def aclnn_ops_block() -> str:
    """The operator library's ops (mdev.operators): a table of their signatures and dtypes."""
    from mdev import operators as O
    from mdev.constants import ACL_BOOL
    classes = {O.ALL: "all", O.NUMERIC: "numeric", O.FLOATING: "floating", O.INTEGRAL: "integral"}

    def dtypes(op) -> str:
        named = classes.get(op.dtypes) or classes.get(op.dtypes - {ACL_BOOL})
        return named + (" + bool" if ACL_BOOL in op.dtypes - O.NUMERIC and named != "all" else "") if named \
            else ", ".join(sorted(O.TORCH_DTYPES[d] for d in op.dtypes))
    rows = [f"| `aclnn{op.name}` | {op.signature} | {dtypes(op)} |" for op in O.OPERATORS.values()]
    return (f"\n\n{len(rows)} operators. dtypes: floating = fp32, fp16, bf16, fp64; numeric = floating + int8, int16,"
            f" int32, int64, uint8; integral = the integer types; all = numeric + bool (of the first input tensor;"
            f" the others as torch promotes them).\n\n"
            "| operator | parameters of GetWorkspaceSize (before workspaceSize, executor) | dtypes |\n|---|---|---|\n"
            + "\n".join(rows) + "\n\n")


def ascendc_api_block() -> str:
    """The Ascend C kernel API subset: a table of the ``//@api name | meaning`` lines of mdev's
    kernel header (mdev/capi/include/ascendc/kernel_operator.h)."""
    header = ROOT / "mdev" / "capi" / "include" / "ascendc" / "kernel_operator.h"
    rows = ["| name | semantics on mdev |", "|---|---|"]
    for line in header.read_text(encoding="utf-8").splitlines():
        if line.startswith("//@api "):
            name, _, meaning = line[len("//@api "):].partition(" | ")
            rows.append(f"| `{name.strip()}` | {meaning.strip()} |")
    return "\n\n" + "\n".join(rows) + "\n\n"


BLOCKS = {"whatif": whatif_block, "sanitized-examples": sanitized_examples_block, "aclnn-ops": aclnn_ops_block,
          "ascendc-api": ascendc_api_block}


def pattern(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- generated: {re.escape(name)} -->)(.*?)(<!-- end generated: {re.escape(name)} -->)",
                      re.S)


def regenerate(text: str) -> str:
    for name, make in BLOCKS.items():
        found = pattern(name).search(text)
        if found is None:
            raise SystemExit(f"README.md has no block {name!r} (<!-- generated: {name} --> ... "
                             f"<!-- end generated: {name} -->)")
        text = text[:found.start(2)] + make() + text[found.end(2):]
    return text


def comparable(text: str) -> str:
    """The text with this run's times made placeholders, and a table's column widths (they
    follow the widest cell, a time maybe) ignored."""
    # a time with its unit: a makespan may cross from ms to us between runs
    text = VOLATILE_ROWS.sub(lambda m: re.sub(rf"{NUMBER} ?(?:ns|us|ms|s)\b", "#", m.group(1)), text)
    return re.sub(r" {2,}", "  ", VOLATILE_SHARE.sub("#%)", text))


def main(argv: list[str]) -> int:
    old = README.read_text(encoding="utf-8")
    new = regenerate(old)
    if "--check" in argv:
        if comparable(new) == comparable(old):
            return 0
        diff = difflib.unified_diff(old.splitlines(), new.splitlines(), "README.md", "regenerated", lineterm="", n=1)
        print("README.md's generated blocks drifted from what the programs print "
              "(python docs/regen_readme.py rewrites them):\n" + "\n".join(diff))
        return 1
    README.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
