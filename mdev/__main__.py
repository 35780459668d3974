"""``python -m mdev``: the same as the ``mdev`` command."""

import sys

from mdev.cli.main import main

sys.exit(main())
