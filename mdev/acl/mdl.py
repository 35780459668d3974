"""``acl.mdl``: models.

pyACL's ``acl.mdl`` is the offline-model API (``load_from_file``, ``execute``, datasets,
AIPP, dump); mdev does not emulate offline models, so those names return
``ACL_ERROR_API_NOT_SUPPORT`` (200001) in pyACL's return shape (see ``pyacl_names``).
The model-run-instance and stream-capture functions of the C API (``aclmdlRI*``) will live
here as ``acl.mdl.ri_*`` (issue 7); defining a function in this module is all it takes to
replace its stub.
"""

from __future__ import annotations


def __getattr__(name: str):
    """pyACL names mdev does not emulate resolve to stubs; anything else is an AttributeError."""
    from mdev.acl.pyacl_names import resolve
    return resolve("mdl", name)
