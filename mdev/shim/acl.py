"""``import acl`` under ``mdev run``: the pyACL module is mdev's pyACL-compatible API.

``acl`` becomes the very object :mod:`mdev.acl` (and ``acl.rt`` is ``mdev.acl.rt``, ...), so
``import acl``, ``import acl.rt`` and ``from acl import rt`` all work as with pyACL.
"""

import sys

import mdev.acl as _acl

for _name in ("rt", "mdl", "util", "media", "op", "blas", "prof", "himpi", "fv"):
    sys.modules["acl." + _name] = getattr(_acl, _name)
sys.modules[__name__] = _acl
