"""Application logs (aclAppLog / ACL_APP_LOG, pyACL's ``acl.app_log``), kept where the real
runtime keeps them.

    app_log(level, message) --level >= ASCEND_GLOBAL_LOG_LEVEL?--> plog file of this process
                                                                   (or stdout, see below)

The CANN log library writes a process's host logs to
``$ASCEND_PROCESS_LOG_PATH/debug/plog/plog-<pid>_<start time>.log`` (default
``~/ascend/log``), one line per record, and only records at or above the global level
(``ASCEND_GLOBAL_LOG_LEVEL``: 0 debug, 1 info, 2 warning, 3 error -- the default -- 4
none); ``ASCEND_SLOG_PRINT_TO_STDOUT=1`` prints them to stdout instead.  mdev does the same.
"""

from __future__ import annotations

import datetime
import os
import sys
import threading
import time
from pathlib import Path

from mdev import constants as C

LEVEL_NAMES = {C.ACL_DEBUG: "DEBUG", C.ACL_INFO: "INFO", C.ACL_WARNING: "WARNING", C.ACL_ERROR: "ERROR"}
DEFAULT_LEVEL = C.ACL_ERROR
_STARTED = time.strftime("%Y%m%d%H%M%S") + f"{int(time.time() * 1000) % 1000:03d}"
_lock = threading.Lock()


def log_dir() -> Path:
    """Where this process's plog files go."""
    root = os.environ.get("ASCEND_PROCESS_LOG_PATH") or os.path.join(os.path.expanduser("~"), "ascend", "log")
    return Path(root) / "debug" / "plog"


def log_file() -> Path:
    return log_dir() / f"plog-{os.getpid()}_{_STARTED}.log"


def _threshold() -> int:
    try:
        return int(os.environ.get("ASCEND_GLOBAL_LOG_LEVEL", DEFAULT_LEVEL))
    except ValueError:
        return DEFAULT_LEVEL


def record(level: int, message: str, func: str = "", file: str = "", line: int = 0) -> None:
    """One aclAppLog record; below the global level it is dropped, as the log library does.
    A log that cannot be written is lost, never an error of the caller."""
    if level not in LEVEL_NAMES or level < _threshold():
        return
    now = datetime.datetime.now()
    stamp = now.strftime("%Y-%m-%d-%H:%M:%S.") + f"{now.microsecond // 1000:03d}.{now.microsecond % 1000:03d}"
    process = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    text = (f"[{LEVEL_NAMES[level]}] APP({os.getpid()},{process}):{stamp} [{os.path.basename(file)}:{line}]"
            f"{threading.get_native_id()} {func}: {message}\n")
    if os.environ.get("ASCEND_SLOG_PRINT_TO_STDOUT") == "1":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    with _lock:
        try:
            log_dir().mkdir(parents=True, exist_ok=True)
            with open(log_file(), "a", encoding="utf-8") as f:
                f.write(text)
        except OSError:
            pass
