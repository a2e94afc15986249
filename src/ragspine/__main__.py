"""`python -m ragspine` runs the command line."""

from ragspine.cli import main

main()
