"""`helios-exporter probe`: the cache-order probe (command.py: the command; passes.py: the passes
and the arms' repetitions; corpus.py: the bodies it sends; send.py: sending them; record.py:
probe.json, kept on disk while it runs)."""
