"""`helios-exporter observer-cost`: an observer's cost, measured (command.py: the command; plan,
run, witness, checks, stats: the measurement; doc, report, plot: the document it writes)."""
