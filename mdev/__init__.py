"""mdev: an emulator of Huawei Ascend NPU boards behind the CANN Runtime API.

Each emulated device is an OS process holding its HBM in POSIX shared memory; a named
board (supervisor + device processes) is shared by every host process that attaches to
it.  The pyACL-shaped API lives in :mod:`mdev.acl`; see README.md for a tour.
"""

__version__ = "0.2.0"   # the one place the version is written (pyproject reads it)
