"""Entry point of the in-container runner: ``python3 -S -m worker.runner``.

PLACEHOLDER until the runner is implemented: it reports a configuration error (exit status 2, as
the runner does for any unconfirmed result) so that nothing can mistake it for a working runner.
Standard library only.
"""

import json
import sys


def main() -> int:
    report = {"status": "configuration_error", "reason": "runner not implemented"}
    sys.stdout.write(json.dumps(report) + "\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
