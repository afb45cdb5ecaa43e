"""``python -m rlx`` runs the ``rlx`` command."""

import sys

from rlx.cli import main

sys.exit(main())
