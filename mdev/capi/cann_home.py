"""A CANN-package-shaped tree over mdev: what CANN programs' builds and scripts look for.

    <home>/include/acl/...                      mdev's own CANN headers (mdev/capi/include)
    <home>/include/hccl/...                     HCCL's (hccl.h, hccl_comm.h, hccl_types.h)
    <home>/include/aclnn/acl_meta.h             the operator library's descriptors
    <home>/include/aclnnop/aclnn_ops.h          its operators (generated from mdev/operators.py)
    <home>/lib64/libascendcl.so                 the C library (see build)
           libacl_rt.so, libacl_rt_impl.so      the same library under the other names
           libhccl.so                           HCCL's C library (the same loader and runtime)
           libhcomm.so                          needs libhccl.so (its handle finds HcclGroupStart / End)
           libmsprofiler.so                     aclprof* (acl/acl_prof.h): the timeline trace
           libopapi.so, libnnopbase.so          the operator library (aclnn): operators, descriptors
           libacl_op_compiler.so, libge_runner.so, libgraph.so, libacl_tdt_channel.so, libatb.so,
           libprofapi.so, libruntime.so         the other libraries frameworks (torch_npu) load
           libmdev_client.so                    where their calls go: the host agent, or...
           libmdev_embed.so                     ...Python embedded (a Python program running mdev)
    <home>/bin/setenv.bash, <home>/set_env.sh   ASCEND_HOME_PATH, ASCEND_INSTALL_PATH, ASCEND_OPP_PATH,
                                                LD_LIBRARY_PATH, SOC_VERSION, ASCENDC_CMAKE_DIR
    <home>/opp/, runtime/, compiler/            the package folders torch_npu's environment check
                                                wants (mdev's operators are libopapi.so's: opp/ is empty)
    <home>/include/ascendc/kernel_operator.h    mdev's Ascend C kernel API (and the image ABI)
    <home>/tikcpp/ascendc_kernel_cmake/ascendc.cmake
                                                the toolchain stand-in (mdev.capi.ascendc):
                                                kernels compile with g++ into native images
    <home>/src/                                 the generated C the libraries were built from

``make(home)`` creates or refreshes the tree (the libraries are rebuilt only when their
inputs changed).  The default home is ``<sys.prefix>/share/mdev/cann``, in the environment
mdev is installed in, or ``$XDG_DATA_HOME/mdev/cann`` when that is not writable.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

import mdev
from mdev.capi import ascendc, build, include_dir, opapi

# the CANN packages' folders torch_npu checks for once ASCEND_HOME_PATH is set
PACKAGE_FOLDERS = ("opp", "runtime", "compiler")


def default_home() -> Path:
    home = Path(sys.prefix) / "share" / "mdev" / "cann"
    try:
        home.mkdir(parents=True, exist_ok=True)
        if os.access(home, os.W_OK):
            return home
    except OSError:
        pass
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data / "mdev" / "cann"


def setenv_script(home: Path) -> str:
    q = shlex.quote
    root = str(Path(mdev.__file__).resolve().parent.parent)
    lib = f"{home}/lib64"
    return f"""\
# mdev cann-home: the environment of mdev's emulated CANN toolkit (source it from bash, zsh or sh).
# SOC_VERSION is the SoC of the board $MDEV_BOARD (default "default"), asked when sourced.
export ASCEND_HOME_PATH={q(str(home))}
export ASCEND_INSTALL_PATH={q(str(home))}
export ASCEND_TOOLKIT_HOME={q(str(home))}
export ASCEND_OPP_PATH={q(f"{home}/opp")}
export ASCENDC_CMAKE_DIR={q(f"{home}/tikcpp/ascendc_kernel_cmake")}
# a board started on demand runs with mdev's Python, whichever Python loaded the library
export MDEV_PYTHON={q(sys.executable)}
case ":${{LD_LIBRARY_PATH:-}}:" in
    *:{q(lib)}:*) ;;
    *) export LD_LIBRARY_PATH={q(lib)}"${{LD_LIBRARY_PATH:+:${{LD_LIBRARY_PATH}}}}" ;;
esac
SOC_VERSION="$(PYTHONPATH={q(root)}"${{PYTHONPATH:+:${{PYTHONPATH}}}}" {q(sys.executable)} -m mdev.capi.soc)" \\
    || echo "mdev: cannot tell the board's SoC (SOC_VERSION left empty)" >&2
export SOC_VERSION
"""


def make(home: Path | None = None, log=print) -> Path:
    """Create or refresh the tree at ``home`` (default: :func:`default_home`); its absolute path."""
    home = Path(home or default_home()).expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    shutil.copytree(include_dir(), home / "include", dirs_exist_ok=True)
    built = build.build(home / "lib64", home / "src")
    names = ", ".join(lib.name + (f" ({', '.join(lib.aliases)})" if lib.aliases else "") for lib in build.LIBRARIES)
    log(f"mdev cann-home: {'built' if built else 'up to date:'} {home / 'lib64'}: {names}; Python {sys.executable}")
    (home / "include" / opapi.HEADER).parent.mkdir(exist_ok=True)
    shutil.copy2(home / "src" / opapi.HEADER, home / "include" / opapi.HEADER)
    for package in PACKAGE_FOLDERS:
        (home / package).mkdir(exist_ok=True)
    (home / "bin").mkdir(exist_ok=True)
    (home / "bin" / "setenv.bash").write_text(setenv_script(home))
    (home / "set_env.sh").write_text(f". {shlex.quote(str(home / 'bin' / 'setenv.bash'))}\n")
    cmake_dir = home / "tikcpp" / "ascendc_kernel_cmake"
    cmake_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ascendc.ABI_HEADER, home / "include" / "ascendc" / ascendc.ABI_HEADER.name)
    (cmake_dir / "ascendc.cmake").write_text(ascendc.cmake_module(home, home / "include" / "ascendc"))
    return home
