"""pyACL drop-in: unmodified `import acl` programs run through `mdev run`.

The programs in examples/pyacl/ are written as the public pyACL samples are; each runs with
`python -m mdev run --board <this module's board> --topology laptop2 ...` and its output is
checked.  Also here: what `import acl` is inside and outside `mdev run`, the opt-in shim,
unsupported pyACL functions (200001 + message), typos (AttributeError), and the
compatibility table being in step with the code.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from conftest import PREFIX
from mdev.acl import pyacl_names, unsupported
from mdev.board import launcher
from mdev.shim import PTH_NAME, SHIM_DIR

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "pyacl"
BOARD = PREFIX + "pyacl"
BOARD_ARGS = ["--board", BOARD, "--topology", "laptop2", "--hbm", "256MiB"]

# example -> lines its output must contain
EXPECTED = {
    "memory_round_trip": ["[INFO] soc name: Ascend910B1",
                          "[INFO] round trip of 1048576 bytes verified",
                          "[INFO] memory round trip OK"],
    "multi_stream_events": ["[INFO] round 0: stream_compute saw the data of stream_copy",
                            "[INFO] round 2: stream_compute saw the data of stream_copy",
                            "[INFO] multi stream events OK"],
    "callback_thread": ["[INFO] launch_callback before subscribe_report: ret=107015",
                        "[INFO] callback batch 0 saw value 1 on the report thread: True",
                        "[INFO] callback batch 3 saw value 4 on the report thread: True",
                        "[INFO] blocking callback held the stream",
                        "[INFO] callback thread OK"],
    "multi_device_p2p": ["[INFO] 2 devices",
                         "[INFO] device 1 holds device 0's data after memcpy (2097152 bytes)",
                         "[INFO] device 1 holds device 0's data after memcpy_async (2097152 bytes)",
                         "[INFO] multi device p2p OK"],
    "dvpp_buffers": ["[INFO] 3 DVPP buffers take 12582912 bytes of HBM",     # 2 huge pages each
                     "[INFO] frame 2 came back intact: True",
                     "[INFO] HBM free again after dvpp_free: True",
                     "[INFO] dvpp buffers OK"],
    "ipc_two_processes": ["[importer] device 1 imported the exporter's memory",
                          "[importer] read the exporter's data",
                          "[exporter] sees the importer's writes",
                          "[INFO] ipc two processes OK"],
}


@pytest.fixture(scope="module")
def pyacl_board():
    yield BOARD
    launcher.stop(BOARD)


def mdev_run(*args: str, cwd=None, env: dict | None = None, timeout: float = 120):
    full_env = dict(os.environ, **(env or {}))
    full_env.pop("MDEV_BOARD", None)
    return subprocess.run([sys.executable, "-m", "mdev", "run", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def test_every_pyacl_example_is_tested():
    assert sorted(p.stem for p in EXAMPLES.glob("*.py")) == sorted(EXPECTED)
    for path in EXAMPLES.glob("*.py"):
        source = path.read_text()
        assert "\nimport acl\n" in source and "mdev" not in source.split('"""', 2)[2], path


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_pyacl_example(name, pyacl_board):
    proc = mdev_run(*BOARD_ARGS, str(EXAMPLES / f"{name}.py"))
    assert proc.returncode == 0, f"{name} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    for line in EXPECTED[name]:
        assert line in proc.stdout, f"{line!r} missing from\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr


def test_import_acl_is_mdev_acl_and_exit_code_passes_through(tmp_path, pyacl_board):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent("""
        import sys
        import acl
        import acl.rt
        from acl import util
        import mdev.acl
        assert acl is mdev.acl and acl.rt is mdev.acl.rt and util is mdev.acl.util
        assert acl.mdl is mdev.acl.mdl and acl.media.__name__ == "mdev.acl.media"
        import acl.media
        count, ret = acl.rt.get_device_count()
        major, minor, patch, ret2 = acl.get_version()
        mode, ret3 = acl.rt.get_run_mode()
        print("argv", sys.argv[1:], "devices", count, ret, "version", (major, minor, patch), ret2,
              "mode", mode, ret3, "soc", acl.get_soc_name())
        sys.exit(int(sys.argv[1]))
    """))
    proc = mdev_run(*BOARD_ARGS, str(prog), "7", "--flag")
    assert proc.returncode == 7, proc.stdout + proc.stderr
    assert "argv ['7', '--flag'] devices 2 0 version (1, 17, 0) 0 mode 1 0 soc Ascend910B1" in proc.stdout, \
        proc.stdout + proc.stderr


def test_run_module_and_missing_program(tmp_path, pyacl_board):
    (tmp_path / "mymod.py").write_text("import acl\nprint('module sees', acl.__name__)\n")
    proc = mdev_run(*BOARD_ARGS, "-m", "mymod", cwd=tmp_path)
    assert proc.returncode == 0 and "module sees mdev.acl" in proc.stdout, proc.stdout + proc.stderr
    proc = mdev_run(*BOARD_ARGS, str(tmp_path / "nope.py"))
    assert proc.returncode == 2 and "no such file" in proc.stderr


def test_bad_topology_is_reported_without_traceback(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text("print('ran')\n")
    proc = mdev_run("--board", PREFIX + "pyacl-bad", "--topology", "no-such-preset", str(prog))
    assert proc.returncode == 2 and "ran" not in proc.stdout         # a bad argument
    assert proc.stderr.startswith("mdev run:") and "Traceback" not in proc.stderr


def test_no_acl_outside_mdev_run():
    spec = importlib.util.find_spec("acl")
    if spec is not None:   # a real pyACL may be installed: it must not be ours
        assert not str(spec.origin).startswith(str(ROOT)), spec.origin
        pytest.skip(f"a real pyACL is installed at {spec.origin}")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", "import acl"], env=env, capture_output=True, text=True)
    assert proc.returncode != 0 and "No module named 'acl'" in proc.stderr


def test_board_name_derived_from_topology():
    from mdev.cli.run import board_name_for
    assert board_name_for("laptop2", None, None) == "run-laptop2"
    assert board_name_for("/x/my board.toml", 4, 1 << 30) == "run-my_board-d4-h1024m"
    assert board_name_for(None, 2, None) == "run-default-d2"


def test_shim_path_and_install_shim(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mdev", "shim-path"], capture_output=True, text=True)
    assert proc.returncode == 0 and Path(proc.stdout.strip()) == SHIM_DIR
    assert (SHIM_DIR / "acl.py").is_file()

    site_dir = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mdev", "install-shim", "--site", str(site_dir)],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and (site_dir / PTH_NAME).is_file(), proc.stderr
    check = ("import site, sys; site.addsitedir(sys.argv[1]); import acl, mdev.acl; "
             "assert acl is mdev.acl; print('shim on')")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MDEV_PYACL_SHIM")}
    on = subprocess.run([sys.executable, "-c", check, str(site_dir)], env=env, capture_output=True, text=True)
    assert on.returncode == 0 and "shim on" in on.stdout, on.stderr
    off = subprocess.run([sys.executable, "-c", check, str(site_dir)], env=dict(env, MDEV_PYACL_SHIM="0"),
                         capture_output=True, text=True)
    assert off.returncode != 0 and "No module named 'acl'" in off.stderr

    proc = subprocess.run([sys.executable, "-m", "mdev", "install-shim", "--site", str(site_dir), "--remove"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and not (site_dir / PTH_NAME).exists()


def test_mdev_env_serves_a_program_of_another_environment(tmp_path):
    """`mdev env` gives a program that runs with another Python what `mdev run` would: `import
    acl` is mdev.acl, and a board it starts on demand runs with MDEV_PYTHON (mdev's
    interpreter), not with the program's Python, which may not have mdev."""
    proc = subprocess.run([sys.executable, "-m", "mdev", "env"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    exported = dict(line[len("export "):].split("=", 1) for line in proc.stdout.splitlines()
                    if line.startswith("export "))
    assert exported["MDEV_PYTHON"] == sys.executable
    path = exported["PYTHONPATH"].split(os.pathsep)
    assert path[0] == str(SHIM_DIR) and str(ROOT) in path

    used = tmp_path / "used"
    mdev_python = tmp_path / "mdev-python"           # stands for mdev's interpreter: says it ran
    mdev_python.write_text(f'#!/bin/sh\necho "$@" >> {used}\nexec {sys.executable} "$@"\n')
    mdev_python.chmod(0o755)
    name = PREFIX + "envpy"
    env = dict(os.environ, **dict(exported, MDEV_PYTHON=str(mdev_python)), MDEV_BOARD=name,
               MDEV_AUTOSTART="1", MDEV_TOPOLOGY="laptop2", MDEV_IDLE_TIMEOUT="0.5")
    code = "import acl; assert acl.__name__ == 'mdev.acl'; print(acl.rt.set_device(0), acl.get_recent_err_msg())"
    try:
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and proc.stdout.startswith("0 "), proc.stdout + proc.stderr
        assert "-m mdev.board.supervisor --name " + name in used.read_text()
        proc = subprocess.run([sys.executable, "-c", code], env=dict(env, MDEV_PYTHON=str(tmp_path / "none"),
                                                                     MDEV_BOARD=name + "x"),
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and proc.stdout.startswith("507899 "), proc.stdout + proc.stderr
        assert "cannot run (No such file or directory); check MDEV_PYTHON" in proc.stdout
    finally:
        launcher.stop(name)


def test_run_help_says_which_python_runs_the_program():
    proc = subprocess.run([sys.executable, "-m", "mdev", "run", "--help"], capture_output=True, text=True, timeout=60)
    text = " ".join(proc.stdout.split())
    assert f"runs with mdev's interpreter ({sys.executable})" in text and "mdev env" in text


# ----------------------------------------------------------------------------- unsupported names
def test_unsupported_function_returns_200001_with_message():
    import mdev.acl as acl
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", unsupported.MdevUnsupportedWarning)
        model_id, ret = acl.mdl.load_from_file("resnet50.om")
        assert (model_id, ret) == (None, acl.ACL_ERROR_API_NOT_SUPPORT) == (None, 200001)
        message = acl.get_recent_err_msg()
        assert "acl.mdl.load_from_file is not supported by mdev" in message
        assert acl.rt.get_last_error(0) == 200001
        assert acl.mdl.execute(1, 0, 0) == 200001            # ret-only shape
        assert acl.mdl.create_desc() == 0                     # value shape: a NULL handle
        assert acl.mdl.get_input_name_by_index(0, 0) is None  # string shape
        assert acl.create_data_buffer(0, 16) == 0             # top-level acl.*
        ptr, ret = acl.media.dvpp_jpeg_get_image_info(b"", 0)
        assert (ptr, ret) == (None, 200001)
        assert "acl.media.dvpp_jpeg_get_image_info is not supported by mdev (the media engines" \
            in acl.get_recent_err_msg()
        a, b, c, ret = acl.himpi.vpc_resize(1, 2, 3)          # shape taken from the caller
        assert (a, b, c, ret) == (None, None, None, 200001)
        assert acl.himpi.vpc_resize(1, 2, 3) == 200001
        assert acl.op.execute_v2(0) == 200001 and acl.blas.gemm_ex() == 200001
        assert acl.prof.model_subscribe(1, 0) == 200001 and acl.fv.search() == 200001
    stub = unsupported.make_stub("mdl", "unload", "r")
    with pytest.warns(unsupported.MdevUnsupportedWarning, match="acl.mdl.unload is not supported"):
        assert stub(1) == 200001


def test_typo_raises_attribute_error():
    import mdev.acl as acl
    with pytest.raises(AttributeError, match="did you mean 'malloc_host'"):
        acl.rt.malloc_hots
    with pytest.raises(AttributeError):
        acl.mdl.load_from_fiel
    with pytest.raises(AttributeError):
        acl.media.no_such_function
    with pytest.raises(AttributeError):
        acl.no_such_module
    assert not hasattr(acl.util, "bytes_to_pointer")


def test_dir_lists_what_works():
    import mdev.acl as acl
    assert "bytes_to_ptr" in dir(acl.util) and "malloc" in dir(acl.rt)
    assert "load_from_file" not in dir(acl.mdl)
    assert hasattr(acl.mdl, "load_from_file")               # but the name resolves


def test_float16_helpers_and_version_shape():
    import mdev.acl as acl
    assert acl.float16_to_float(0x3C00) == 1.0 and acl.float_to_float16(-2.0) == 0xC000
    assert acl.get_version() == (1, 17, 0, 0)


def test_name_table_matches_mdev():
    # every implemented name is a real function of the mdev module, and counts add up
    for module, table in unsupported.FUNCTIONS.items():
        for name in table:
            assert pyacl_names.status(module, name) in ("implemented", "unsupported")
    counts = pyacl_names.counts()
    assert counts["util"] == {"implemented": 7, "unsupported": 0}
    assert counts["rt"]["implemented"] >= 100
    assert pyacl_names.c_name("rt", "set_context") == "aclrtSetCurrentContext"
    assert pyacl_names.c_name("rt", "memcpy2d_async") == "aclrtMemcpy2dAsync"


def test_compat_doc_is_generated_from_the_table():
    doc = ROOT / "docs" / "pyacl_compat.md"
    assert doc.read_text() == pyacl_names.markdown(), \
        "docs/pyacl_compat.md is stale: python -m mdev.acl.pyacl_names --markdown > docs/pyacl_compat.md"
