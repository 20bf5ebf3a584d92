"""`python -m capsule`: the same as the `capsule` command."""

from capsule.cli import main

if __name__ == "__main__":
    main()
