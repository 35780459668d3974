"""Hand-written adapters of the C functions the prototype alone cannot marshal."""
from __future__ import annotations
import os
ADAPTERS = {}
def string(value):
    return None if value is None else os.fsdecode(value)
