"""Compiling mdev's C libraries with the system compiler (called by ``mdev cann-home``).

    mdev/capi/csrc/mdev_embed.{c,h} ----------------------------> lib64/libmdev_embed.so
        + mdev_config.h (this interpreter, this checkout,           (links libpython3.x.so)
                         the agent channel's layout)
    mdev/capi/csrc/mdev_client.c -------------------------------> lib64/libmdev_client.so
                                                                    (the host agent; libmdev_embed.so
                                                                    in a Python program running mdev)
    functions.tsv --generate--> src/acl_entries.c --------------> lib64/libascendcl.so
                                                                    libacl_rt.so, libacl_rt_impl.so
                                                                    (links to libascendcl.so)
                  (hccl/ functions) src/hccl_entries.c -----------> lib64/libhccl.so
                  (acl/acl_prof.h) src/prof_entries.c ------------> lib64/libmsprofiler.so
                                                                    (all link libmdev_client.so)
    (no entry points of its own) -------------------------------> lib64/libhcomm.so (needs libhccl.so)

One library answers to the three names CANN programs link (its SONAME is libascendcl.so,
so a program linking any of them loads it once).  A library may need others (``needs``,
linked whether or not it calls them, so that ``dlsym`` through its handle finds their
functions, as through CANN's: libascendcl.so needs libmsprofiler.so for the ``aclprof*``
functions, libhcomm.so libhccl.so for ``HcclGroupStart`` / ``HcclGroupEnd``).  Everything is compiled with
``-Wall -Wextra -Werror``; the generated C is written next to the libraries (``src/``),
never into the source tree.  A build whose inputs (sources, interpreter, flags) have not
changed is skipped, so refreshing a tree is quick.
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
from mdev.capi import generate, include_dir, prototypes

CSRC = Path(__file__).resolve().parent / "csrc"
FLAGS = ["-std=c11", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror"]
# the client uses Linux calls (memfd, futex, pidfd) beyond C11's library
CLIENT_FLAGS = ["-std=gnu11", *FLAGS[1:]]
EMBED = "libmdev_embed.so"
CLIENT = "libmdev_client.so"


@dataclass(frozen=True)
class Library:
    """A shared library over one face (or none): its entry points, its name, the names it also
    answers to and the libraries of the tree it needs (built before it)."""
    face: generate.Face | None
    name: str
    aliases: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()


PROFILER_HEADER = "acl/acl_prof.h"
# HCCL's companions: the profiling API hccl_test links (-lmsprofiler), and the library
# torch_npu looks HcclGroupStart / HcclGroupEnd up in
HCCL_COMPANIONS = (
    Library(generate.Face("prof", "mdev.capi.adapter", (PROFILER_HEADER,), prototypes.declared_by(PROFILER_HEADER)),
            "libmsprofiler.so"),
)
HCCL_DEPENDENTS = (Library(None, "libhcomm.so", needs=("hccl",)),)

# every face goes through the one libmdev_client.so of the process (one host agent, or one
# embedded interpreter), so HCCL's calls see the devices, memory and streams the program made
# through libascendcl.so
LIBRARIES = HCCL_COMPANIONS + (
    Library(generate.Face("acl", "mdev.capi.adapter", ("acl/acl.h", "acl/acl_rt_allocator.h"),
                          prototypes.declared_in("acl", but=(PROFILER_HEADER,))),
            "libascendcl.so", ("libacl_rt.so", "libacl_rt_impl.so"), needs=("msprofiler",)),
    Library(generate.Face("hccl", "mdev.capi.adapter", ("hccl/hccl.h",), prototypes.declared_in("hccl")),
            "libhccl.so"),
) + HCCL_DEPENDENTS


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
    for library in LIBRARIES:
        source = f"{(library.face.name if library.face else library.name.split('.')[0])}_entries.c"
        sources[source] = generate.entry_points(library.face) if library.face else generate.no_entries(library.name)
        needed = ["-Wl,--no-as-needed", *(f"-l{n}" for n in library.needs), "-Wl,--as-needed"] if library.needs else []
        commands.append(([cc, *FLAGS, f"-I{include_dir()}", f"-I{src_dir}", str(src_dir / source),
                          "-o", str(lib_dir / library.name), f"-Wl,-soname,{library.name}", f"-L{lib_dir}",
                          *needed, "-lmdev_client", "-Wl,-rpath,$ORIGIN"], library.name))
    headers = sorted((p.name, p.read_text()) for p in include_dir().rglob("*.h"))
    stamp = hashlib.sha256(repr((sorted(sources.items()), commands, headers)).encode()).hexdigest()
    stamp_file = lib_dir / ".mdev-build"
    wanted = [lib_dir / name for name in (EMBED, CLIENT, *(n for lib in LIBRARIES for n in (lib.name, *lib.aliases)))]
    if stamp_file.exists() and stamp_file.read_text() == stamp and all(p.exists() for p in wanted):
        return False
    lib_dir.mkdir(parents=True, exist_ok=True)
    src_dir.mkdir(parents=True, exist_ok=True)
    for name, text in sources.items():
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
