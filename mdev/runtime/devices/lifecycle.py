"""aclInit / aclFinalize: the process's reference-counted initialisation and its config.

Finalize releases everything the process holds on the board (contexts, streams, memory)
by detaching from it; the device processes free what was left behind.
"""

from __future__ import annotations

import json
import re

from mdev import constants as C
from mdev import errors as E
from mdev.runtime.boundary import api
from mdev.runtime import hooks, trace
from mdev.runtime.devices import device_state
from mdev.errors import AclError
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.validate import file_path, read_regular


# this module's part of the runtime's state, made afresh with it (finalize, fork)
held = rt.family(config=dict, config_text=lambda: None)

MAX_JSON_DEPTH = 10
MAX_CONFIG_BYTES = 16 << 20        # an aclInit config is a few lines of JSON


def _depth(text: str) -> tuple[int, int]:
    """Deepest nesting of {} and of [] outside strings (aclInit allows 10 of each)."""
    depth = {"{": 0, "[": 0}
    deepest = {"{": 0, "[": 0}
    in_string = escaped = False
    for ch in text:
        if in_string:
            escaped = not escaped and ch == "\\"
            if ch == '"' and not escaped:
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            depth[ch] += 1
            deepest[ch] = max(deepest[ch], depth[ch])
        elif ch in "}]":
            depth["{" if ch == "}" else "["] -= 1
    return deepest["{"], deepest["["]


def _parse(config_path: str | None) -> tuple[dict, str | None]:
    if not config_path:
        return {}, None
    file_path(config_path, "config path")
    try:
        text = read_regular(config_path, MAX_CONFIG_BYTES).decode("utf-8")
    except OSError as exc:
        raise AclError(E.ACL_ERROR_INVALID_FILE, f"cannot read aclInit config {config_path}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise AclError(E.ACL_ERROR_PARSE_FILE, f"{config_path}: not UTF-8 text: {exc}") from None
    if not text.strip():
        return {}, text
    if max(_depth(text)) > MAX_JSON_DEPTH:
        raise AclError(E.ACL_ERROR_PARSE_FILE, f"{config_path}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AclError(E.ACL_ERROR_PARSE_FILE, f"{config_path}: malformed JSON: {exc}") from exc
    if not isinstance(config, dict):
        raise AclError(E.ACL_ERROR_PARSE_FILE, f"{config_path}: the top level must be a JSON object")
    return config, text


def _default_device(config: dict) -> int | None:
    section = config.get("defaultDevice")
    if not isinstance(section, dict) or "default_device" not in section:
        return None
    value = section["default_device"]
    if not isinstance(value, str) or not re.fullmatch(r"0|[1-9]\d*", value):
        raise AclError(E.ACL_ERROR_INVALID_PARAM,
                       f'defaultDevice.default_device must be a string of decimal digits, got {value!r}')
    return int(value)


KiB = 1 << 10
STACK_GRAIN, STACK_MAX = 16 * KiB, 192 * KiB


def configured_stack(config: dict) -> int | None:
    """``StackSize.aicore_stack_size`` in bytes, if the config sets it (the device limit
    ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE: rounded up to 16 KiB, at least 32 KiB, at most 192 KiB
    -- the A2/A3 maximum; every part mdev emulates takes the A2/A3 rules)."""
    section = config.get("StackSize")
    if section is None:
        return None
    if not isinstance(section, dict):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"StackSize must be a JSON object, got {section!r}")
    if "aicore_stack_size" not in section:
        return None
    value = section["aicore_stack_size"]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise AclError(E.ACL_ERROR_INVALID_PARAM,
                       f"StackSize.aicore_stack_size must be a non-negative integer of bytes, got {value!r}")
    if -(-value // STACK_GRAIN) * STACK_GRAIN > STACK_MAX:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"StackSize.aicore_stack_size {value} exceeds the "
                       f"{STACK_MAX // KiB} KiB maximum")
    return value


ERR_MSG_MODES = ("0", "1")


def _err_msg_mode(config: dict) -> str:
    """``err_msg_mode``: "0" (default) keeps error messages per thread, "1" per process."""
    value = config.get("err_msg_mode", "0")
    if value not in ERR_MSG_MODES:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f'err_msg_mode must be "0" or "1", got {value!r}')
    return value


@api()
def init(config_path: str | None = None) -> None:
    config, text = _parse(config_path)
    with rt.lock:
        if rt.init_count > 0:
            if (text or "") != (held.config_text or ""):
                raise AclError(E.ACL_ERROR_INVALID_PARAM, "acl.init called again with a different configuration")
            rt.init_count += 1
            raise AclError(E.ACL_ERROR_REPEAT_INITIALIZE, "acl.init was already called; only the first config counts")
        default_device = _default_device(config)
        stack = configured_stack(config)
        mode = _err_msg_mode(config)
        if default_device is not None:
            rt.check_device(default_device)
        held.config, held.config_text, rt.default_device = config, text, default_device
        rt.messages_per_process = mode == "1"
        if stack is not None:       # aclInit and aclrtDeviceSetLimit: the later one counts
            device_state.held.device_limit_values[C.ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE] = stack
        rt.init_count = 1
        rt.finalized = False
    hooks.started()


@api()
def finalize() -> None:
    with rt.lock:
        if rt.init_count == 0:
            if rt.finalized:
                raise AclError(E.ACL_ERROR_REPEAT_FINALIZE, "acl.finalize was already called")
            return
        _release_all()
        rt.finalized = True


@api(1)
def finalize_reference() -> int:
    with rt.lock:
        if rt.init_count < 1:
            raise AclError(E.ACL_ERROR_REPEAT_FINALIZE, "acl.finalize_reference without a matching init")
        rt.init_count -= 1
        if rt.init_count == 0:
            _release_all()
            rt.finalized = True
        return rt.init_count


def detach() -> None:
    """Release everything and detach from the board, whatever the init count (tests use it)."""
    with rt.lock:
        _release_all()


def _release_all() -> None:
    """Drop every resource of this process: detaching makes the devices free them."""
    for ctx in list(rt.contexts.values()):
        ctx.destroyed = True
    for stream in rt.streams.values():
        stream.destroyed = True
    links = list(rt.board.links.values()) if rt.board is not None else []
    if hooks.checker is not None:
        hooks.checker.teardown(rt.memory.allocations(), "finalize")
    for alloc in rt.memory.allocations():
        rt.memory.remove(alloc.ptr)
        if alloc.segment is not None:
            # devices keep pinned segments mapped until told: unmapping is what frees the RAM
            for link in links:
                try:
                    link.request("forget_segment", alloc.segment.name)
                except AclError:
                    pass
            alloc.segment.close()
            if alloc.ipc_key is None:        # not another process's buffer mapped here
                alloc.segment.unlink()
    if rt.callbacks is not None:
        rt.callbacks.close()
    board = rt.board
    if board is not None and getattr(board, "tracing", False):
        trace.on_detach(board)       # MDEV_TRACE: collect this process's task records
    for link in links:
        try:
            # the device lets go of this process now: its running work is stopped (kernels
            # cut off memory) before finalize returns, not whenever the sockets close
            link.request("release")
        except AclError:
            pass      # the device is gone, and this process's work with it
    rt.__init__()
    if board is not None:
        board.close()
