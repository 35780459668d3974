"""Bad input gets the documented code and one clear message (issue 28, section 4): never a
traceback, never the blame for an emulator bug, never a hang; the ``mdev`` command says what
is wrong with an argument in one line and exits 2; nothing of a board survives its stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

import mdev.hccl as hccl
from helpers import extra_board, wait_until
from mdev import errors as E
from mdev import hccl_types as H
from mdev.board import launcher
from mdev.board.device import Device
from mdev.naming import BoardPaths
from mdev.errors import AclError
from mdev.runtime import boundary
from mdev.runtime.collectives.rendezvous import MAGIC

MDEV = [sys.executable, "-m", "mdev.cli.main"]


# ---------------------------------------------------------------------------- the API boundary
def _raises_inside(value):
    """An emulator bug: a TypeError deep inside, no fault of the caller's."""
    return len(value) + None


def _validates(value):
    """Explicit validation whose message shows the value (as most of mdev's do)."""
    if not isinstance(value, int):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"value must be an int, got {value!r}")
    if not 0 <= value < 100:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"value {value} is out of range")
    return value


def test_an_internal_error_is_507000_with_its_traceback_in_the_log(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ASCEND_PROCESS_LOG_PATH", str(tmp_path))
    acl_face, hccl_face = boundary.bind(_raises_inside, 1), boundary.bind(_raises_inside, codes=boundary.HCCL)
    assert acl_face("abc") == (0, E.ACL_ERROR_RT_INTERNAL_ERROR)       # before: 100000, the caller blamed
    assert hccl_face("abc") == H.HCCL_E_INTERNAL
    assert "internal error TypeError" in boundary.recent_messages()
    log = "".join(p.read_text() for p in (tmp_path / "debug" / "plog").glob("plog-*.log"))
    assert "Traceback" in log and "return len(value) + None" in log
    assert "Traceback" not in capsys.readouterr().err                   # stderr only with MDEV_DEBUG=1
    monkeypatch.setattr(boundary, "_DEBUG", True)
    acl_face("abc")
    assert "return len(value) + None" in capsys.readouterr().err


def test_only_explicit_validation_and_pyacls_parser_blame_the_caller():
    validated = boundary.bind(_validates, 1)
    assert validated("x") == (0, E.ACL_ERROR_INVALID_PARAM)
    assert validated(1, 2) == (0, E.ACL_ERROR_INVALID_PARAM)           # the wrong number of arguments
    assert validated(10 ** 5000) == (0, E.ACL_ERROR_INVALID_PARAM)     # no C parameter holds it: the
    assert "fits no parameter" in boundary.recent_messages()            # message could not show it
    deep: list = []
    for _ in range(2000):
        deep = [deep]
    assert validated(deep) == (0, E.ACL_ERROR_INVALID_PARAM)           # its repr: a RecursionError
    assert "nested more than 32 deep" in boundary.recent_messages()
    cycle: list = []
    cycle.append(cycle)
    assert validated({"a": cycle}) == (0, E.ACL_ERROR_INVALID_PARAM)
    assert boundary.bind(_validates, 1, codes=boundary.HCCL)(deep) == (0, H.HCCL_E_PARA)


def test_hostile_arguments_of_the_runtime_get_parameter_errors(acl):
    deep: list = []
    for _ in range(2000):
        deep = [deep]
    assert acl.rt.set_device(10 ** 5000) == E.ACL_ERROR_INVALID_PARAM          # before: 507000 (ValueError)
    assert acl.rt.query_event(deep)[1] == E.ACL_ERROR_INVALID_PARAM            # before: 507000 (RecursionError)
    assert acl.rt.notify_batch_reset(7, 1) == E.ACL_ERROR_INVALID_PARAM       # before: 100000 by accident
    assert "notifies must be a list" in acl.get_recent_err_msg()
    assert acl.rt.create_label_list(12, 1)[1] == E.ACL_ERROR_INVALID_PARAM
    assert acl.rt.ipc_open_event_handle(10 ** 5000)[1] == E.ACL_ERROR_INVALID_PARAM     # before: the supervisor's 507000
    assert acl.rt.ipc_mem_close([[1]]) == E.ACL_ERROR_INVALID_PARAM          # a key is a str: never sent on
    assert acl.float_to_float16(10 ** 400) == 0x7C00                           # +inf, as C's conversion gives


def test_a_device_task_that_fails_inside_keeps_its_traceback(capsys):
    try:
        {}["missing"]
    except KeyError as exc:
        code, message = Device.internal_error(SimpleNamespace(index=3), "task memset", exc)
    assert code == E.ACL_ERROR_RT_INTERNAL_ERROR and message == "task memset failed: KeyError('missing')"
    err = capsys.readouterr().err          # a device's stderr is its board's log
    assert "device 3: task memset failed" in err and "Traceback" in err and '{}["missing"]' in err


def test_a_file_named_for_a_small_one_is_read_only_if_it_is_one(board, run_py, tmp_path):
    """/dev/zero, a FIFO or a directory named as a config, a kernel binary, a rank table or a
    model dump: an error code at once (before: a hang, /dev/zero filling memory -- hence a
    process of its own, with a time and a memory limit)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = run_py(f"""
        import resource, time
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
        import mdev.acl as acl, mdev.hccl as hccl
        t0 = time.monotonic()
        for path in ("/dev/zero", {str(fifo)!r}, {str(tmp_path)!r}):
            print(acl.init(path))                          # the config is read before anything else
        assert acl.init() == 0 and acl.rt.set_device(0) == 0
        for path in ("/dev/zero", {str(fifo)!r}, {str(tmp_path)!r}):
            print(acl.rt.binary_load_from_file(path, None)[1], hccl.comm_init_cluster_info(path, 0)[1])
            assert "not a regular file" in acl.get_recent_err_msg()
        stream, _ = acl.rt.create_stream()
        assert acl.mdl.ri_capture_begin(stream, 0) == 0
        assert acl.rt.memset_async(acl.rt.malloc(64, 0)[0], 64, 0, 64, stream) == 0
        model, ret = acl.mdl.ri_capture_end(stream)
        print(acl.mdl.ri_debug_json_print(model, {str(fifo)!r}, 0))    # a FIFO nobody reads
        print(time.monotonic() - t0 < 10)
    """, board, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["100003"] * 3 + ["107009", "1"] * 3 + ["107009", "True"]


# ---------------------------------------------------------------------------- mdev.hccl
def _blob(root: bytes, body: bytes) -> bytes:
    return (MAGIC + body).ljust(H.HCCL_ROOT_INFO_BYTES, b"\0")[:H.HCCL_ROOT_INFO_BYTES]


def test_damaged_root_infos_are_parameter_errors(acl, monkeypatch):
    monkeypatch.setenv("HCCL_CONNECT_TIMEOUT", "2")
    assert acl.rt.set_device(0) == 0
    root, ret = hccl.get_root_info()
    assert ret == 0
    board = json.loads(root[len(MAGIC):].rstrip(b"\0"))["board"]
    cases = {
        "a 4000-character id": _blob(root, json.dumps({"board": board, "id": "a" * 4000}).encode()),  # ENAMETOOLONG
        "nested 2000 deep": _blob(root, b"[" * 2000 + b"]" * 2000),                                  # RecursionError
        "an id that is a list": _blob(root, json.dumps({"board": board, "id": [[1]]}).encode()),
        "a path for an id": _blob(root, json.dumps({"board": board, "id": "../../x"}).encode()),
        "no dict": _blob(root, json.dumps([board]).encode()),
    }
    for what, blob in cases.items():
        assert hccl.comm_init_root_info(1, blob, 0) == (0, H.HCCL_E_PARA), what
        assert "rootInfo is damaged" in acl.get_recent_err_msg(), what
    assert hccl.comm_init_root_info(1 << 40, root, 0) == (0, H.HCCL_E_PARA)      # before: 2**40 notifies made
    assert "a rank is a device" in acl.get_recent_err_msg()
    assert not (BoardPaths(board).rendezvous).exists()


def test_damaged_rank_tables_are_parameter_errors(acl, tmp_path):
    assert acl.rt.set_device(0) == 0
    tables = {"deep": "[" * 2000 + "]" * 2000,                                  # RecursionError before
              "inf": json.dumps({"server_list": [{"device": [{"rank_id": 0, "device_id": 0}]}]})
              .replace('"rank_id": 0', '"rank_id": 1e400'),                      # int(inf): OverflowError
              "not a dict": "[1, 2]", "no devices": '{"server_list": [{}]}'}
    for what, text in tables.items():
        (tmp_path / f"{what}.json").write_text(text)
        assert hccl.comm_init_cluster_info(str(tmp_path / f"{what}.json"), 0) == (0, H.HCCL_E_PARA), what
        assert "is not a rank table" in acl.get_recent_err_msg(), what


def test_batch_send_recv_items_are_checked_field_by_field(acl):
    assert acl.rt.set_device(0) == 0
    comms, ret = hccl.comm_init_all(1, [0])
    assert ret == 0
    stream, _ = acl.rt.create_stream()
    good = {"sendRecvType": H.HCCL_SEND, "buf": 0, "count": 0, "dataType": H.HCCL_DATA_TYPE_FP32, "remoteRank": 0}
    try:
        for field in good:
            item = {k: v for k, v in good.items() if k != field}
            assert hccl.batch_send_recv([item], 1, comms[0], stream) == H.HCCL_E_PARA     # before: 4 (KeyError)
            assert f"lacks {field}" in acl.get_recent_err_msg()
        for item in [(0, 0, 0), 7, None, [good]]:
            assert hccl.batch_send_recv([item], 1, comms[0], stream) == H.HCCL_E_PARA, item
            assert "must be an HcclSendRecvItem" in acl.get_recent_err_msg()
        assert hccl.batch_send_recv(5, 1, comms[0], stream) == H.HCCL_E_PARA
        assert hccl.batch_send_recv([dict(good, sendRecvType=[1])], 1, comms[0], stream) == H.HCCL_E_PARA
    finally:
        assert hccl.comm_destroy(comms[0]) == 0
        assert acl.rt.destroy_stream(stream) == 0


def test_get_error_string_of_anything_else_is_unknown_error():
    assert hccl.get_error_string(H.HCCL_E_PARA) == "parameter error"
    for value in ([1], {}, None, "x", 1.5, 10 ** 50, True):         # [1]: a TypeError before
        assert hccl.get_error_string(value) == "unknown error"


def test_board_stop_removes_rendezvous_a_dead_rank_left():
    with extra_board("hcclstop", devices=2) as name:
        paths = BoardPaths(name)
        code = f"""
            import os, sys
            import mdev.acl as acl, mdev.hccl as hccl
            assert acl.init() == 0 and acl.rt.set_device(0) == 0
            root, _ = hccl.get_root_info()
            print("joining", flush=True)
            hccl.comm_init_root_info(2, root, 0)     # waits for rank 1, which never comes
        """
        env = dict(os.environ, MDEV_BOARD=name, MDEV_AUTOSTART="0", HCCL_CONNECT_TIMEOUT="60", HCCL_BUFFSIZE="4")
        rank = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, stdout=subprocess.PIPE,
                                text=True)
        try:
            assert wait_until(lambda: any(paths.rendezvous.glob("*/join-0.json")), timeout=30)
        finally:
            rank.send_signal(signal.SIGKILL)
            rank.wait(timeout=30)
        assert paths.rendezvous.exists()
        assert launcher.stop(name) == launcher.STOPPED
        assert not paths.rendezvous.exists()                     # before: <board>.hccl survived the stop


# ---------------------------------------------------------------------------- the mdev command
BAD_COMMANDS = {
    "board start, no such topology": (["board", "start", "--name", "bi-none", "--topology", "nonexistent"],
                                      "no such file or preset"),
    "board start, malformed TOML": (["board", "start", "--name", "bi-none", "--topology", "{toml}"], "invalid TOML"),
    "board start, 0 devices": (["board", "start", "--name", "bi-none", "--devices", "0"], "not 0"),
    "board start, bad HBM": (["board", "start", "--name", "bi-none", "--hbm", "12zz"], "invalid _size value"),
    "board start, bad name": (["board", "start", "--name", "../x"], "bad board name"),
    "board status, bad name": (["board", "status", "--name", "../x"], "bad board name"),
    "board stop, bad name": (["board", "stop", "--name", "../x"], "bad board name"),
    "smi, bad name": (["smi", "--name", "a/b"], "bad board name"),
    "cann-home, a directory it cannot make": (["cann-home", "/proc/mdev-nope"], "/proc/mdev-nope"),
    "topo list, an argument it does not take": (["topo", "list", "extra"], "unrecognized arguments"),
    "topo show, no such topology": (["topo", "show", "nonexistent"], "no such file or preset"),
    "topo path, no such device": (["topo", "path", "hccs8", "0", "99"], "not a device"),
    "run, no such program": (["run", "nonexistent.py"], "no such file"),
    "run, bad topology": (["run", "--topology", "{toml}", "{prog}"], "invalid TOML"),
    "run, bad board name": (["run", "--board", "../x", "{prog}"], "bad board name"),
    "trace summary, no trace": (["trace", "summary", "{toml}"], "Expecting value"),
    "trace plot, no such file": (["trace", "plot", "/nonexistent/trace.json"], "No such file"),
    "whatif, bad topology": (["whatif", "{prog}", "--topology", "nonexistent"], "no such file or preset"),
    "bench, no such group": (["bench", "nonexistentgroup"], "unknown group"),
    "no such subcommand": (["frobnicate"], "invalid choice"),
}


@pytest.mark.parametrize("case", sorted(BAD_COMMANDS))
def test_a_bad_argument_is_one_line_and_status_2(case, tmp_path):
    argv, says = BAD_COMMANDS[case]
    (tmp_path / "bad.toml").write_text("x = [\n")
    (tmp_path / "prog.py").write_text("print('ran')\n")
    argv = [a.format(toml=tmp_path / "bad.toml", prog=tmp_path / "prog.py") for a in argv]
    proc = subprocess.run(MDEV + argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "ran" not in proc.stdout, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(("mdev", "usage:", "python -m bench")) and says in last, proc.stderr
    assert not BoardPaths("bi-none").files()
