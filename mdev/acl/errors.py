"""``acl.errors``: the aclError codes, where pyACL programs find them.

The codes live on the ground floor (:mod:`mdev.errors`), shared by every face.
"""

from mdev.errors import *  # noqa: F401,F403
from mdev.errors import __all__  # noqa: F401
