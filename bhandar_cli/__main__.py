"""`python -m bhandar_cli` runs the same command line as `bhandar`."""

from bhandar_cli.cli import main

if __name__ == "__main__":
    main()
