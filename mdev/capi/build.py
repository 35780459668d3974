"""Compiling mdev's C libraries with the system compiler (called by ``mdev cann-home``).

    mdev/capi/csrc/mdev_embed.{c,h} ----------------------------> lib64/libmdev_embed.so
        + mdev_config.h (this interpreter, this checkout,           (links libpython3.x.so)
                         the agent channel's layout)
    mdev/capi/csrc/mdev_client.c -------------------------------> lib64/libmdev_client.so
                                                                    (the host agent; libmdev_embed.so
                                                                    in a Python program running mdev)
    functions.tsv --generate--> src/acl_entries.c --------------> lib64/libascendcl.so
                                                                    libacl_rt.so, libacl_rt_impl.so
                  (acl/acl_op_compiler.h) ----------------------> lib64/libacl_op_compiler.so
                  (acl/acl_prof.h) src/prof_entries.c ----------> lib64/libmsprofiler.so (aclprof*)
                  (hccl/ functions) src/hccl_entries.c ---------> lib64/libhccl.so
    csrc/mdev_empty.c, needing libhccl.so ----------------------> lib64/libhcomm.so
    csrc/mdev_nnopbase.c (descriptors) + (aclnn/ executor functions) --> lib64/libnnopbase.so
    mdev/operators.py --opapi--> src/opapi_entries.c -----------> lib64/libopapi.so (the operators)
    csrc/mdev_profapi.c, mdev_rts.c ----------------------------> lib64/libprofapi.so, libruntime.so
    csrc/mdev_atb.c (ATB's C++ names, no kernels) ---------------> lib64/libatb.so
    csrc/mdev_empty.c ------------------------------------------> lib64/libge_runner.so, libgraph.so,
                                                                    libacl_tdt_channel.so

Each library depends (NEEDED) on the libraries that hold what programs look up through its
handle, as CANN's do: torch_npu dlsyms aclrtGetSysParamOpt through libacl_op_compiler.so's
handle, HcclGroupStart / HcclGroupEnd through libhcomm.so's and aclprof* through
libascendcl.so's (which needs libmsprofiler.so), and links Msprof* and rt* symbols that
CANN's libascendcl.so reaches through libprofapi.so and libruntime.so.  One library answers
to the three names CANN programs link libascendcl.so by (its SONAME is libascendcl.so, so a
program linking any of them loads it once).  Everything is compiled with ``-Wall -Wextra -Werror``; the generated C is written
next to the libraries (``src/``), never into the source tree.  A build whose inputs
(sources, interpreter, flags) have not changed is skipped, so refreshing a tree is quick.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import mdev
from mdev.capi import generate, include_dir, opapi, prototypes

CSRC = Path(__file__).resolve().parent / "csrc"
FLAGS = ["-std=c11", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror"]
# the client uses Linux calls (memfd, futex, pidfd) beyond C11's library
CLIENT_FLAGS = ["-std=gnu11", *FLAGS[1:]]
EMBED = "libmdev_embed.so"
CLIENT = "libmdev_client.so"


@dataclass(frozen=True)
class Library:
    """A shared library: entry points over a face, C of its own (csrc/``source``), or both; its
    name, the names it also answers to, and the libraries it depends on."""
    name: str
    face: generate.Face | None = None
    source: str | None = None
    aliases: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()


def _declared(*headers: str) -> tuple[prototypes.CFunction, ...]:
    return tuple(f for f in prototypes.functions() if f.header in headers)


_OP_COMPILER = "acl/acl_op_compiler.h"
PROFILER = "acl/acl_prof.h"          # libmsprofiler.so's, not libascendcl.so's
_ACL = tuple(f for f in prototypes.declared_in("acl") if f.header not in (_OP_COMPILER, PROFILER))
_EMPTY = "mdev_empty.c"
# HCCL's companions: the profiling API hccl_test links (-lmsprofiler), and the library torch_npu
# looks HcclGroupStart / HcclGroupEnd up in
_PROFILER = Library("libmsprofiler.so", generate.Face("prof", "mdev.capi.adapter", (PROFILER,), _declared(PROFILER)))
_HCOMM = Library("libhcomm.so", source=_EMPTY, needs=("libhccl.so",))

# every face goes through the one libmdev_client.so of the process (one host agent, or one
# embedded interpreter), so HCCL's and the operators' calls see the devices, memory and
# streams the program made through libascendcl.so; in dependency order
LIBRARIES = (
    Library("libprofapi.so", source="mdev_profapi.c"),
    Library("libruntime.so", source="mdev_rts.c"),
    _PROFILER,
    Library("libascendcl.so", generate.Face("acl", "mdev.capi.adapter", ("acl/acl.h", "acl/acl_rt_allocator.h"), _ACL),
            aliases=("libacl_rt.so", "libacl_rt_impl.so"),
            needs=("libprofapi.so", "libruntime.so", "libmsprofiler.so")),
    Library("libacl_op_compiler.so", generate.Face("op_compiler", "mdev.capi.adapter", (_OP_COMPILER,),
                                                   _declared(_OP_COMPILER)), needs=("libascendcl.so",)),
    Library("libhccl.so", generate.Face("hccl", "mdev.capi.adapter", ("hccl/hccl.h",), prototypes.declared_in("hccl"))),
    _HCOMM,
    Library("libnnopbase.so", generate.Face("nnopbase", "mdev.capi.adapter", ("aclnn/acl_meta.h",),
                                            tuple(f for f in prototypes.declared_in("aclnn") if "Executor" in f.name)),
            source="mdev_nnopbase.c"),
    Library("libopapi.so", generate.Face("opapi", "mdev.capi.adapter", (opapi.HEADER, opapi.MISSING_HEADER),
                                         opapi.functions(), opapi.packing), needs=("libnnopbase.so", "libascendcl.so")),
    # loaded by name (NEEDED by torch_npu's libraries): CANN's graph engine, data channel and
    # transformer-kernel libraries, whose functions mdev does not have
    *(Library(name, source=_EMPTY, needs=("libascendcl.so",))
      for name in ("libge_runner.so", "libgraph.so", "libacl_tdt_channel.so")),
    Library("libatb.so", source="mdev_atb.c", needs=("libascendcl.so",)),
)


class BuildError(Exception):
    pass


def compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise BuildError("no C compiler found (install gcc, or set CC)")
    return cc


def python_link() -> tuple[list[str], list[str]]:
    """(compile flags, link flags) to embed this interpreter, as ``python3-config --embed`` says."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        raise BuildError(f"{sys.executable} has no shared libpython (it was built without --enable-shared): "
                         "mdev's C libraries embed Python and need libpython3.x.so")
    libdir = sysconfig.get_config_var("LIBDIR")
    version = sysconfig.get_config_var("LDVERSION") or sysconfig.get_config_var("VERSION")
    return ([f"-I{sysconfig.get_paths()['include']}"],
            [f"-L{libdir}", f"-lpython{version}", f"-Wl,-rpath,{libdir}", "-lpthread"])


def _run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise BuildError(f"compiling failed: {' '.join(command)}\n{result.stdout}{result.stderr}")


def build(lib_dir: Path, src_dir: Path) -> bool:
    """Build the libraries into ``lib_dir`` (sources in ``src_dir``); False if up to date."""
    py_compile, py_link = python_link()
    root = str(Path(mdev.__file__).resolve().parent.parent)
    sources = {
        "mdev_config.h": generate.config_header(sys.executable, root),
        "mdev_embed.h": (CSRC / "mdev_embed.h").read_text(),
        "mdev_embed.c": (CSRC / "mdev_embed.c").read_text(),
        "mdev_client.c": (CSRC / "mdev_client.c").read_text(),
    }
    cc = compiler()
    commands = [([cc, *FLAGS, *py_compile, f"-I{src_dir}", str(src_dir / "mdev_embed.c"),
                  "-o", str(lib_dir / EMBED), f"-Wl,-soname,{EMBED}", *py_link], EMBED),
                ([cc, *CLIENT_FLAGS, f"-I{src_dir}", str(src_dir / "mdev_client.c"), "-o", str(lib_dir / CLIENT),
                  f"-Wl,-soname,{CLIENT}", "-ldl", "-lpthread"], CLIENT)]
    sources[opapi.HEADER] = opapi.header()
    sources[opapi.MISSING_HEADER] = opapi.missing_header()
    for library in LIBRARIES:
        files, link = [], []
        if library.face is not None:
            files.append(f"{library.face.name}_entries.c")
            sources[files[-1]] = generate.entry_points(library.face)
            link = ["-lmdev_client"]
        if library.source is not None:
            files.append(library.source)
            sources[files[-1]] = (CSRC / library.source).read_text()
        needs = ["-Wl,--no-as-needed", *(f"-l{n[3:-3]}" for n in library.needs), "-Wl,--as-needed"] \
            if library.needs else []
        commands.append(([cc, *CLIENT_FLAGS, f"-I{include_dir()}", f"-I{src_dir}", *(str(src_dir / f) for f in files),
                          "-o", str(lib_dir / library.name), f"-Wl,-soname,{library.name}", f"-L{lib_dir}",
                          *link, *needs, "-Wl,-rpath,$ORIGIN"], library.name))
    headers = sorted((p.name, p.read_text()) for p in include_dir().rglob("*.h"))
    stamp = hashlib.sha256(repr((sorted(sources.items()), commands, headers)).encode()).hexdigest()
    stamp_file = lib_dir / ".mdev-build"
    wanted = [lib_dir / name for name in (EMBED, CLIENT, *(n for lib in LIBRARIES for n in (lib.name, *lib.aliases)))]
    if stamp_file.exists() and stamp_file.read_text() == stamp and all(p.exists() for p in wanted):
        return False
    lib_dir.mkdir(parents=True, exist_ok=True)
    src_dir.mkdir(parents=True, exist_ok=True)
    for name, text in sources.items():
        (src_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (src_dir / name).write_text(text)
    # build under temporary names, then rename: a program running from the tree keeps its copy
    for command, name in commands:
        final = lib_dir / name
        tmp = lib_dir / f".{name}.{os.getpid()}"
        command = [str(tmp) if part == str(final) else part for part in command]
        try:
            _run(command)
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
    for library in LIBRARIES:
        for alias in library.aliases:
            link = lib_dir / alias
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(library.name)
    stamp_file.write_text(stamp)
    return True
