"""``python3 -S -m worker.runner``: run one attempt of one job; see :mod:`worker.runner`."""

import sys

from worker.runner.main import main

if __name__ == "__main__":
    sys.exit(main())
