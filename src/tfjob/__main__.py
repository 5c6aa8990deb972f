"""`python -m tfjob` runs the `tfjob` command."""

from tfjob.interfaces.cli import main

main()
