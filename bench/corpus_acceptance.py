"""The share of real-world workflow files forge-ci accepts, and why it refuses the rest.

    python bench/corpus_acceptance.py [--top N] [--folder all|realworld|starter]

Issue #16's measure over ``shared/corpus`` (actionlint's 1,503 real-world files and GitHub's 175
starter workflows): of the files whose jobs are not all Windows/macOS, the share accepted (every
Linux job planned). Printed today, counting ``uses:`` steps as accepted (issue #15), and
projected with the rest of issue #16 (contexts, job token, dispatch inputs); then the remaining
refusal reasons with the number of files each affects, and the most common notices. Goal:
>= 85 %. Not a speed benchmark; ``bench/workflow_parse.py`` times the same files.
"""

from __future__ import annotations

import argparse
import sys

from forge_ci_testing.acceptance import FOLDERS, GOAL, Tally, measure
from forge_ci_testing.corpus import corpus_root


def _line(label: str, tally: Tally, accepted: int) -> str:
    share = tally.share(accepted)
    return (
        f"  {label:<28} {accepted:>5} / {tally.measured:<5} {share:6.1%}  "
        f"(goal {GOAL:.0%}: {share / GOAL:.2f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=25, help="reasons to list (default 25)")
    args = parser.parse_args()
    root = corpus_root()
    if root is None:
        sys.exit("shared/corpus not found (beside the checkout or under $FORGE_CI_SHARED_DIR)")
    tallies = measure(root)
    for name in (*FOLDERS, "all"):
        tally = tallies[name]
        print(
            f"{name}: {tally.files} files, {tally.foreign} with only Windows/macOS jobs "
            f"(left out), {tally.measured} measured"
        )
        print(_line("accepted today", tally, tally.accepted))
        print(_line("counting uses: (#15)", tally, tally.accepted_with_uses))
        print(_line("projected with all of #16", tally, tally.accepted_projected))
    total = tallies["all"]
    for title, counter in (
        ("refusal reasons today (files affected)", total.reasons),
        ("reasons left when uses: counts as accepted", total.reasons_after_uses),
        ("reasons left after all of #16 (projected)", total.reasons_projected),
        ("notices of the files (files)", total.notices),
    ):
        print(f"\n{title}:")
        for reason, count in counter.most_common(args.top):
            print(f"  {count:>5}  {reason[:150]}")


if __name__ == "__main__":
    main()
