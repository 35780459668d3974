"""``acl.constants``: the runtime's flags and enum values, where pyACL programs find them.

The constants live on the ground floor (:mod:`mdev.constants`), shared by every face.
"""

from mdev.constants import *  # noqa: F401,F403
from mdev.constants import ACL_DTYPE_TO_NUMPY, NPY_TYPE_TO_NUMPY, __all__  # noqa: F401
