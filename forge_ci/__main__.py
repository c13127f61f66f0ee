"""``python -m forge_ci`` is the ``forge-ci`` command."""

import sys

from forge_ci.cli import main

sys.exit(main())
