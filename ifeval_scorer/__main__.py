"""`python -m ifeval_scorer GENERATIONS.jsonl [options]`: the same as `capsule score`."""

from __future__ import annotations

import sys

from capsule.cli import cli


def main() -> None:
    """Run `capsule score` with this process's arguments (errors print as `Error: ...`)."""
    cli.main(args=["score", *sys.argv[1:]], prog_name="python -m ifeval_scorer")


if __name__ == "__main__":
    main()
