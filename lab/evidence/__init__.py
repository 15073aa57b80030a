"""`helios-exporter evidence`: the evidence of a sidecar's phases (command.py: the command and
what the sidecar commands share; doc.py: the document; arithmetic.py: verdicts, quantiles,
accounting and gaps over phases; report.py, plot.py, document.py: the files it writes;
schema.py: the parts of evidence.json and probe.json the commands read)."""
