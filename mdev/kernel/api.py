"""Defining kernels: the ``@kernel`` decorator and the ``kernel[blocks, stream](...)`` launch.

    @kernel
    def add_custom(ctx, x, y, z, n): ...

    add_custom[8, stream](x, y, z, n)     # add_custom<<<8, nullptr, stream>>>(x, y, z, n)
    add_custom[8](x, y, z, n)             # on the default stream

Like ``<<<>>>``, a launch reports failure through the thread's last error (it also
returns the aclError code, for convenience).  The function itself runs in the device
process (shipped there by value with cloudpickle), once per block with a
:class:`~mdev.board.block.BlockContext`, or once for all blocks if ``vectorized``.

Launching is the host runtime's work: ``mdev.runtime.execution.kernels`` installs the launcher
(``set_launcher``) when it is imported, which every face does.  A launch before any face
is imported finds no runtime, hence no current context, and returns 107002 as the real
``<<<>>>`` does without one.
"""

from __future__ import annotations

import functools
from typing import Callable

from mdev import constants as C
from mdev import errors as E
from mdev.kernel import params

# core -> (the device engine it runs on, its aclrtDevResLimitType; AI CPU kernels have none)
ENGINES = {"vector": ("aiv", C.ACL_RT_DEV_RES_VECTOR_CORE), "cube": ("aic", C.ACL_RT_DEV_RES_CUBE_CORE),
           "aicpu": ("aicpu", None)}


class Kernel:
    def __init__(self, fn: Callable, core: str = "vector", vectorized: bool = False,
                 name: str | None = None) -> None:
        if core not in ENGINES:
            raise ValueError(f"core must be 'vector', 'cube' or 'aicpu', got {core!r}")
        self.fn = fn
        self.core = core
        self.vectorized = vectorized
        self.name = name or fn.__name__
        self.types = params.param_types(fn)
        self.registrations: dict = {}     # (board client, device) -> function id there
        functools.update_wrapper(self, fn)

    @property
    def engine(self) -> str:
        return ENGINES[self.core][0]

    @property
    def res_type(self) -> int:
        return ENGINES[self.core][1]

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["registrations"] = {}
        return state

    def __reduce_ex__(self, protocol):
        # kernels of mdev's own modules (mdev.ops) ship by reference: the device process
        # imports the same module; any other kernel (a user script's) ships by value
        module, qualname = getattr(self, "__module__", None), getattr(self, "__qualname__", "")
        if isinstance(module, str) and module.startswith("mdev.") and _lookup(module, qualname) is self:
            return _lookup, (module, qualname)
        return super().__reduce_ex__(protocol)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def release(self) -> None:
        """The device no longer has it (its binary was unloaded); a Python kernel holds nothing."""

    def __getitem__(self, config) -> Callable[..., int]:
        num_blocks, stream = config if isinstance(config, tuple) else (config, None)

        def launch(*args) -> int:
            if _launcher is None:
                return E.ACL_ERROR_RT_CONTEXT_NULL
            return _launcher(self, num_blocks, stream, args)
        return launch

    def __repr__(self) -> str:
        return f"<kernel {self.name} ({self.core}{', vectorized' if self.vectorized else ''})>"


_launcher: Callable[["Kernel", object, object, tuple], int] | None = None


def set_launcher(launcher: Callable[["Kernel", object, object, tuple], int]) -> None:
    """The host runtime's ``kernel[blocks, stream](*args)``: returns the aclError code."""
    global _launcher
    _launcher = launcher


def _lookup(module: str, qualname: str):
    """The object ``module.qualname`` (how by-reference kernels are unpickled)."""
    import importlib
    obj = importlib.import_module(module)
    try:
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        return None
    return obj


def kernel(fn: Callable | None = None, *, core: str = "vector", vectorized: bool = False,
           name: str | None = None):
    """Make a launchable kernel: ``@kernel`` or ``@kernel(core="cube", vectorized=True)``."""
    if fn is None:
        return lambda f: Kernel(f, core, vectorized, name)
    return Kernel(fn, core, vectorized, name)


def kernels_of(namespace: dict, module_name: str) -> list[Kernel]:
    """The kernels a binary (a Python source) defines, in definition order: its ``@kernel``
    objects, or else its public top-level functions."""
    found = [v for v in namespace.values() if isinstance(v, Kernel)]
    if found:
        return found
    return [Kernel(v) for k, v in namespace.items()
            if callable(v) and getattr(v, "__module__", None) == module_name and not k.startswith("_")
            and not isinstance(v, type)]
