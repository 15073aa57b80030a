"""`python -m commands NAME ...` is `helios-exporter NAME ...`."""

from commands.cli import main

main()
