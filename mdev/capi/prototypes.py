"""The declared C functions as typed prototypes: what the generator and the adapter agree on.

    functions.tsv (name, return type, parameters)  +  typedefs of the headers
        --> CFunction(name, ret: CType, params: [Param])
              generator: how each argument crosses into Python (a format letter)
              adapter:   what each Python value means (int, address, string, bytes, output)

Every parameter crosses the C/Python boundary as one of five *passings*, chosen by its type:

    "i"  signed integer or enum           -> int
    "u"  unsigned integer                 -> int
    "f"  float / double                   -> float
    "p"  any pointer, handle or callback  -> int (the address; 0 for NULL)
    "s"  const char* (an input string)    -> bytes, or None for NULL
    "b"  structure passed by value        -> bytes (its memory, sizeof bytes)

so the generated C stays free of the meaning of each argument; the adapter gives it.  The
one thing the prototype decides for both sides is which parameters are *outputs*
(:attr:`Param.is_output`): the adapter returns their values, the C entry point stores them.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from mdev.capi import functions_tsv, include_dir

# fixed-width and plain C scalars: name -> (passing, bytes)
_SCALARS = {
    "int8_t": ("i", 1), "int16_t": ("i", 2), "int32_t": ("i", 4), "int64_t": ("i", 8), "int": ("i", 4),
    "uint8_t": ("u", 1), "uint16_t": ("u", 2), "uint32_t": ("u", 4), "uint64_t": ("u", 8),
    "size_t": ("u", 8), "unsigned int": ("u", 4), "bool": ("u", 1), "char": ("i", 1),
    "float": ("f", 4), "double": ("f", 8),
}
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


@dataclass(frozen=True)
class Typedef:
    kind: str            # "scalar", "enum", "pointer" (handles), "function" (callbacks), "struct", "opaque"
    passing: str = "p"
    size: int = 8


@dataclass(frozen=True)
class CType:
    spelling: str        # as declared, e.g. "const aclrtIpcEventHandle*"
    base: str            # the type name without qualifiers and stars
    stars: int
    const_pointee: bool  # "const T*" (an input), not "T* const"
    typedef: Typedef | None

    @property
    def passing(self) -> str:
        if self.stars:
            # "const char* const" is a buffer with a size, not a string
            text = self.base == "char" and self.const_pointee and self.stars == 1 and not self.spelling.endswith("const")
            return "s" if text else "p"
        if self.typedef is not None:
            return "b" if self.typedef.kind == "struct" else self.typedef.passing
        return _SCALARS[self.base][0] if self.base in _SCALARS else "p"

    @property
    def is_void(self) -> bool:
        return self.base == "void" and not self.stars

    def pointee(self) -> "CType":
        """The type this pointer points to (``int32_t*`` -> ``int32_t``)."""
        return CType(self.base + "*" * (self.stars - 1), self.base, self.stars - 1, False, self.typedef)

    @property
    def scalar(self) -> tuple[str, int] | None:
        """(passing, bytes) of a value of this type when it is a number or a pointer."""
        if self.stars:
            return ("p", 8)
        if self.base in _SCALARS:
            return _SCALARS[self.base]
        if self.typedef is not None and self.typedef.kind in ("scalar", "enum", "pointer", "function"):
            return (self.typedef.passing, self.typedef.size)
        return None


@dataclass(frozen=True)
class Param:
    name: str
    type: CType
    output: bool | None = None      # set where the type alone does not tell (aclOpExecutor** executor)

    @property
    def is_output(self) -> bool:
        """A non-const pointer to one number or handle (``aclrtStream*``, ``size_t*``,
        ``int32_t* const``) or a ``void**``: where the function stores a value it returns."""
        if self.output is not None:
            return self.output
        t = self.type
        if t.const_pointee or not t.stars:
            return False
        if t.stars == 2 and t.base == "void":
            return True
        return t.stars == 1 and t.base not in ("void", "char") and t.pointee().scalar is not None


@dataclass(frozen=True)
class CFunction:
    name: str
    ret: CType
    params: tuple[Param, ...]
    variadic: bool
    header: str

    @property
    def outputs(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.is_output)

    @property
    def declaration(self) -> str:
        params = [f"{p.type.spelling} {p.name}" for p in self.params] + (["..."] if self.variadic else [])
        return f"{self.ret.spelling} {self.name}({', '.join(params) or 'void'})"


def _typedefs_of(source: str) -> dict[str, Typedef]:
    found: dict[str, Typedef] = {}
    source = _COMMENT.sub(" ", source)
    for match in re.finditer(r"\btypedef\s+(enum|struct|union)\b\s*\w*\s*\{", source):
        depth, i = 1, match.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(source[i], 0)
            i += 1
        name = re.match(r"\s*(\w+)\s*;", source[i:])
        if name:
            kind = "enum" if match.group(1) == "enum" else "struct"
            found[name.group(1)] = Typedef(kind, "i", 4) if kind == "enum" else Typedef(kind, "b", 0)
    for ret, name in re.findall(r"\btypedef\s+([\w\s\*]+?)\s*\(\s*\*\s*(\w+)\s*\)\s*\(", source):
        found[name] = Typedef("function")
    for target, name in re.findall(r"\btypedef\s+([\w ]+?\s*\**)\s*(\w+)\s*;", source):
        target = " ".join(target.split())
        if target.endswith("*"):
            found[name] = Typedef("pointer")
        elif target.startswith(("struct ", "union ")):
            found.setdefault(name, Typedef("opaque"))
        elif target in _SCALARS:
            found[name] = Typedef("scalar", *_SCALARS[target])
    return found


@functools.cache
def typedefs(root: Path | None = None) -> dict[str, Typedef]:
    """Every typedef name of the headers and what kind of type it is."""
    found: dict[str, Typedef] = {}
    for header in sorted((root or include_dir()).rglob("*.h")):
        found.update(_typedefs_of(header.read_text()))
    return found


def parse_type(spelling: str) -> CType:
    spelling = " ".join(spelling.replace("*", " * ").split()).replace(" *", "*")
    words = spelling.replace("*", " * ").split()
    stars = words.count("*")
    first_star = words.index("*") if stars else len(words)
    const_pointee = "const" in words[:first_star]
    base = " ".join(w for w in words if w not in ("const", "*"))
    known = typedefs()
    if base not in known and base not in _SCALARS and base != "void":
        raise ValueError(f"unknown C type {base!r} (in {spelling!r})")
    return CType(spelling, base, stars, const_pointee and stars > 0, known.get(base))


def _param(text: str) -> Param:
    text = " ".join(text.split())
    match = re.fullmatch(r"(.*?[\s\*])(\w+)", text)
    if match is None:
        raise ValueError(f"cannot read parameter {text!r}")
    return Param(match.group(2), parse_type(match.group(1).strip()))


@functools.cache
def functions(tsv: Path | None = None) -> tuple[CFunction, ...]:
    """Every function of functions.tsv, in its order."""
    result = []
    for line in (tsv or functions_tsv()).read_text().splitlines():
        name, ret, params, header = line.split("\t")
        parts = [] if params.strip() in ("", "void") else [p.strip() for p in params.split(",")]
        variadic = bool(parts) and parts[-1] == "..."
        result.append(CFunction(name, parse_type(ret), tuple(_param(p) for p in parts if p != "..."),
                                variadic, header))
    return tuple(result)


def declared_in(directory: str) -> tuple[CFunction, ...]:
    """The functions of one library's headers: those of ``directory`` ("acl", "hccl")."""
    return tuple(f for f in functions() if f.header.split("/")[0] == directory)


def by_name() -> dict[str, CFunction]:
    return {f.name: f for f in functions()}
