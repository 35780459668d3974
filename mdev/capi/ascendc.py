"""The Ascend C toolchain stand-in of ``mdev cann-home``: kernel sources become native images.

    kernel .cpp --rewrite()--> .cpp   `K<<<blockDim, l2ctrl, stream>>>(args)` -> mdev_ascendc::launcher
                                      `asm("trap")` -> __mdev_trap(); each __global__ kernel listed
                                      (MDEV_ASCENDC_KERNEL), its aclrtlaunch_K.h written
        --g++ (ascendc.cmake)--> device image: a shared object (mdev_ascendc_abi.h) that the
                                 device's kernel runner loads
    ascendc_library(T STATIC srcs)    the image embedded in static library T with the host code
                                      of the sources (their wrappers and <<<>>> launches)
    ascendc_fatbin_library(T srcs)    the image as T.o, installed to <prefix>/fatbin/T/T.o, for
                                      aclrtBinaryLoadFromFile / aclrtBinaryLoadFromData

The rewrite reads lines, not C++: anything it cannot rewrite (a ``<<<`` it cannot parse, a
template kernel, inline assembly other than the trap) stops the build with the file and line.
``python -m mdev.capi.ascendc rewrite SRC OUT INCLUDE_DIR`` is what the CMake module runs.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

# the device image ABI, shared with the kernel runner (mdev/board/csrc)
ABI_HEADER = Path(__file__).resolve().parent.parent / "board" / "csrc" / "mdev_ascendc_abi.h"
_LAUNCH = re.compile(r"\b([A-Za-z_]\w*)\s*<<<(.*?)>>>")
_TRAP = re.compile(r"\b(?:asm|__asm__|__asm)\s*(?:volatile\s*|__volatile__\s*)?\(\s*\"trap\"\s*\)")
_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\b")
_GLOBAL = re.compile(r"\b__global__\b")
_IDENT = re.compile(r"[A-Za-z_]\w*")


class RewriteError(Exception):
    """What the rewrite cannot handle, with the file and line (``path:line: message``)."""


@dataclass(frozen=True)
class KernelDecl:
    name: str
    params: list[str]        # each parameter as written


def _strip_comments(text: str) -> str:
    """The text with comments blanked (newlines kept, so lines still count)."""
    def blank(m: re.Match) -> str:
        s = m.group(0)
        return s if s.startswith(('"', "'")) else re.sub(r"[^\n]", " ", s)
    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', blank, text, flags=re.S)


def _split_params(text: str) -> list[str]:
    params, depth, cur = [], 0, ""
    for ch in text:
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        if ch == "," and depth == 0:
            params.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip() and cur.strip() != "void":
        params.append(cur.strip())
    return params


def kernels_of(code: str, path: str) -> list[KernelDecl]:
    """The ``__global__`` kernels defined in ``code`` (comments stripped)."""
    found = []
    for m in _GLOBAL.finditer(code):
        line = code.count("\n", 0, m.start()) + 1
        start = code.rfind(";", 0, m.start())
        start = max(start, code.rfind("}", 0, m.start()), code.rfind("#define", 0, m.start()))
        if "#define" in code[max(0, code.rfind("\n", 0, m.start())):m.start()]:
            continue            # a macro defining __global__ itself
        if re.search(r"\btemplate\b", code[start + 1:m.start()]):
            raise RewriteError(f"{path}:{line}: template kernels are not supported by mdev's Ascend C stand-in")
        open_paren = code.find("(", m.end())
        if open_paren < 0:
            raise RewriteError(f"{path}:{line}: cannot find the parameter list of this __global__ kernel")
        names = _IDENT.findall(code[m.end():open_paren])
        depth, close = 0, open_paren
        for close in range(open_paren, len(code)):
            depth += {"(": 1, ")": -1}.get(code[close], 0)
            if depth == 0:
                break
        after = code[close + 1:].lstrip()
        if not names or depth != 0:
            raise RewriteError(f"{path}:{line}: cannot parse this __global__ kernel's declaration")
        if after.startswith("{"):
            found.append(KernelDecl(names[-1], _split_params(code[open_paren + 1:close])))
    return found


def rewrite(text: str, path: str) -> tuple[str, list[KernelDecl]]:
    """The source as mdev compiles it (same line numbers, via #line) and its kernels."""
    code = _strip_comments(text)
    kernels = kernels_of(code, path)
    out = []
    for number, (line, scan) in enumerate(zip(text.split("\n"), code.split("\n")), 1):
        if "<<<" in scan:
            if scan.count("<<<") != len(_LAUNCH.findall(scan)):
                raise RewriteError(f"{path}:{number}: cannot parse this <<<>>> launch (mdev's rewrite wants "
                                   "`kernel<<<blockDim, l2ctrl, stream>>>(args)` on one line, kernel a plain name)")
            try:
                line = _LAUNCH.sub(_launcher, line)
            except RewriteError as exc:
                raise RewriteError(f"{path}:{number}: {exc}") from None
        if _ASM.search(scan):
            line, traps = _TRAP.subn("__mdev_trap()", line)
            if not traps or _ASM.search(_TRAP.sub("", scan)):
                raise RewriteError(f"{path}:{number}: inline assembly is not emulated (only asm(\"trap\") is)")
        out.append(line)
    name = path.replace("\\", "\\\\").replace('"', '\\"')
    tail = [f'#line {len(out) + 1} "{name}"'] + [f"MDEV_ASCENDC_KERNEL({k.name})" for k in kernels]
    tail += ["#ifndef MDEV_ASCENDC_DEVICE_IMAGE"] + [_aclrtlaunch(k, header=False) for k in kernels] + ["#endif"]
    return f'#line 1 "{name}"\n' + "\n".join(out) + "\n" + "\n".join(tail) + "\n", kernels


def _launcher(m: re.Match) -> str:
    config = _split_params(m.group(2))
    if len(config) != 3:
        raise RewriteError(f"<<<{m.group(2)}>>>: mdev wants <<<blockDim, l2ctrl, stream>>>")
    blocks, l2ctrl, stream = config
    return (f'::mdev_ascendc::launcher<decltype(&{m.group(1)})>(MDEV_ASCENDC_IMAGE_REF, "{m.group(1)}", '
            f"({blocks}), ({l2ctrl}), ({stream}))")


def _param_name(param: str) -> str:
    names = _IDENT.findall(param)
    return names[-1] if names else ""


def _c_param(param: str) -> str:
    """A kernel parameter as aclrtlaunch_K takes it: pointers (GM addresses) as void*."""
    plain = re.sub(r"\b__gm__\b", "", param).strip()
    if "*" in plain or re.search(r"\bGM_ADDR\b", plain):
        return f"void* {_param_name(plain)}"
    return plain


def _aclrtlaunch(k: KernelDecl, header: bool) -> str:
    params = ", ".join(["uint32_t blockDim", "aclrtStream stream", *(_c_param(p) for p in k.params)])
    head = f'extern "C" uint32_t aclrtlaunch_{k.name}({params})'
    if header:
        return head + ";"
    args = ", ".join(f"static_cast<decltype(::mdev_ascendc::param_of<{i}>(&{k.name}))>({_param_name(p)})"
                     for i, p in enumerate(k.params))
    return (head + f' {{ return ::mdev_ascendc::launcher<decltype(&{k.name})>(MDEV_ASCENDC_IMAGE_REF, "{k.name}", '
            f"blockDim, nullptr, stream)({args}); }}")


def launch_header(k: KernelDecl) -> str:
    guard = f"MDEV_ACLRTLAUNCH_{k.name.upper()}_H"
    return "\n".join([f"/* mdev: launch of Ascend C kernel {k.name} (generated by ascendc.cmake) */",
                      f"#ifndef {guard}", f"#define {guard}", "#include <cstdint>", '#include "acl/acl.h"',
                      _aclrtlaunch(k, header=True),
                      "#ifndef ACLRT_LAUNCH_KERNEL", "#define ACLRT_LAUNCH_KERNEL(kernel_func) aclrtlaunch_##kernel_func",
                      "#endif", "#endif", ""])


def cmake_module(home: Path, include: Path) -> str:
    """ascendc.cmake: ascendc_library and ascendc_fatbin_library over this interpreter's mdev."""
    root = Path(__file__).resolve().parent.parent.parent
    text = _CMAKE.replace("@PYTHON@", sys.executable).replace("@ROOT@", str(root)) \
        .replace("@HOME@", str(home)).replace("@INCLUDE@", str(include))
    for what in ("include_directories", "compile_definitions", "compile_options"):
        # on a target and on its device image alike
        text += (f"\nfunction(ascendc_{what} target)\n    target_{what}(${{target}} ${{ARGN}})\n"
                 f"    if(TARGET ${{target}}_mdev_image)\n        target_{what}(${{target}}_mdev_image ${{ARGN}})\n"
                 "    endif()\nendfunction()\n")
    return text


_CMAKE = r"""# mdev cann-home: the Ascend C toolchain's CMake module, for mdev's emulated devices.
# Kernel sources are rewritten (mdev.capi.ascendc) and compiled with the system C++ compiler
# against mdev's Ascend C headers into native device images, run by the device's kernel runner.
set(MDEV_ASCENDC_PYTHON "@PYTHON@")
set(MDEV_ASCENDC_ROOT "@ROOT@")
set(MDEV_ASCENDC_HOME "@HOME@")
set(MDEV_ASCENDC_INCLUDE "@INCLUDE@")
if(NOT CMAKE_CXX_COMPILER_LOADED)
    enable_language(CXX)
endif()

# images run on this machine's devices: where its CPU converts fp16 itself (F16C), half
# arithmetic uses it (the same IEEE rounding as the library's conversion, ~50x faster)
set(MDEV_ASCENDC_CPU_OPTIONS "")
file(STRINGS "/proc/cpuinfo" _mdev_f16c REGEX "^flags.*[ \t]f16c([ \t]|$)" LIMIT_COUNT 1)
if(_mdev_f16c)
    include(CheckCXXCompilerFlag)
    check_cxx_compiler_flag(-mf16c MDEV_ASCENDC_COMPILER_F16C)
    if(MDEV_ASCENDC_COMPILER_F16C)
        set(MDEV_ASCENDC_CPU_OPTIONS -mf16c)
    endif()
endif()

# the sources of target ${target} rewritten once, into ${dir}/src, by custom target
# ${target}_mdev_sources (the device image and the host library both compile them); each
# keeps its position in the list in its name, so a/k.cpp and b/k.cpp do not collide
function(_mdev_ascendc_sources target dir out_var dirs_var)
    set(rewritten "")
    set(dirs "")
    set(index 0)
    foreach(src IN LISTS ARGN)
        get_filename_component(abs "${src}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
        get_filename_component(name "${abs}" NAME_WE)
        get_filename_component(srcdir "${abs}" DIRECTORY)
        set(out "${dir}/src/${index}_${name}.cpp")
        add_custom_command(OUTPUT "${out}"
            COMMAND ${CMAKE_COMMAND} -E env "PYTHONPATH=${MDEV_ASCENDC_ROOT}"
                    "${MDEV_ASCENDC_PYTHON}" -m mdev.capi.ascendc rewrite "${abs}" "${out}" "${dir}/include"
            DEPENDS "${abs}"
            COMMENT "mdev: rewriting Ascend C kernel source ${src}"
            VERBATIM)
        list(APPEND rewritten "${out}")
        list(APPEND dirs "${srcdir}")
        math(EXPR index "${index} + 1")
    endforeach()
    add_custom_target(${target}_mdev_sources DEPENDS ${rewritten})
    set(${out_var} "${rewritten}" PARENT_SCOPE)
    set(${dirs_var} "${dirs}" PARENT_SCOPE)
endfunction()

# device image ${image}: a shared object named ${file} in ${dir}, of sources rewritten by
# target ${sources_target}
function(_mdev_ascendc_image image dir file sources_target rewritten dirs)
    set(entry "${dir}/image_entry.cpp")
    file(WRITE "${entry}" "#include \"kernel_operator.h\"\nMDEV_ASCENDC_IMAGE_ENTRY\n")
    add_library(${image} SHARED ${rewritten} "${entry}")
    add_dependencies(${image} ${sources_target})
    target_include_directories(${image} PRIVATE "${MDEV_ASCENDC_INCLUDE}" ${dirs})
    target_compile_definitions(${image} PRIVATE MDEV_ASCENDC_DEVICE_IMAGE=1 ASCENDC_MDEV=1)
    target_compile_options(${image} PRIVATE -O2 -std=c++17 -fvisibility=hidden -fno-gnu-unique -w
                           ${MDEV_ASCENDC_CPU_OPTIONS})
    set_target_properties(${image} PROPERTIES PREFIX "" OUTPUT_NAME "${file}" SUFFIX ""
                          LIBRARY_OUTPUT_DIRECTORY "${dir}" CXX_STANDARD 17)
endfunction()

function(ascendc_library target)
    set(type STATIC)
    set(sources ${ARGN})
    list(GET sources 0 first)
    if(first STREQUAL "STATIC" OR first STREQUAL "SHARED")
        set(type ${first})
        list(REMOVE_AT sources 0)
    endif()
    set(dir "${CMAKE_CURRENT_BINARY_DIR}/mdev_ascendc/${target}")
    string(MAKE_C_IDENTIFIER "mdev_image_${target}" symbol)
    _mdev_ascendc_sources(${target} "${dir}" rewritten dirs ${sources})
    _mdev_ascendc_image(${target}_mdev_image "${dir}" "${target}_image.so" ${target}_mdev_sources "${rewritten}" "${dirs}")
    set(embed "${dir}/image_embed.cpp")
    file(WRITE "${embed}" "// mdev: the device image of ${target}, linked into the program
#include \"kernel_operator.h\"
__asm__(\".pushsection .rodata.${symbol},\\\"a\\\",@progbits\\n.balign 64\\n.globl ${symbol}_start\\n.hidden ${symbol}_start\\n${symbol}_start:\\n.incbin \\\"${dir}/${target}_image.so\\\"\\n.globl ${symbol}_end\\n.hidden ${symbol}_end\\n${symbol}_end:\\n.popsection\\n\");
extern \"C\" const unsigned char ${symbol}_start[];
extern \"C\" const unsigned char ${symbol}_end[];
::mdev_ascendc::Image ${symbol}(${symbol}_start, ${symbol}_end);
")
    set_source_files_properties("${embed}" PROPERTIES OBJECT_DEPENDS "${dir}/${target}_image.so")
    add_library(${target} ${type} ${rewritten} "${embed}")
    add_dependencies(${target} ${target}_mdev_image ${target}_mdev_sources)
    target_include_directories(${target} PRIVATE "${MDEV_ASCENDC_INCLUDE}" ${dirs}
                               PUBLIC "${dir}/include" "${MDEV_ASCENDC_HOME}/include")
    target_compile_definitions(${target} PRIVATE MDEV_ASCENDC_IMAGE_NAME=${symbol})
    target_compile_options(${target} PRIVATE -std=c++17 -fPIC -w)
    set_target_properties(${target} PROPERTIES CXX_STANDARD 17)
    target_link_libraries(${target} PUBLIC "${MDEV_ASCENDC_HOME}/lib64/libascendcl.so")
endfunction()

function(ascendc_fatbin_library target)
    set(dir "${CMAKE_CURRENT_BINARY_DIR}/mdev_ascendc/${target}")
    _mdev_ascendc_sources(${target} "${dir}" rewritten dirs ${ARGN})
    _mdev_ascendc_image(${target} "${dir}" "${target}.o" ${target}_mdev_sources "${rewritten}" "${dirs}")
    install(FILES "${dir}/${target}.o" DESTINATION fatbin/${target})
endfunction()

"""


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[0] != "rewrite":
        print("usage: python -m mdev.capi.ascendc rewrite SOURCE OUTPUT INCLUDE_DIR", file=sys.stderr)
        return 2
    source, output, include = Path(argv[1]), Path(argv[2]), Path(argv[3])
    try:
        text, kernels = rewrite(source.read_text(encoding="utf-8", errors="surrogateescape"), str(source))
    except RewriteError as exc:
        print(f"{exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"mdev ascendc: {exc}", file=sys.stderr)
        return 1
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8", errors="surrogateescape")
    include.mkdir(parents=True, exist_ok=True)
    for k in kernels:
        (include / f"aclrtlaunch_{k.name}.h").write_text(launch_header(k))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
