"""The sidecar from the command line: its experiment API (sidecar.py), how a client reaches it
behind its web configuration (access.py), and `helios-exporter phase` (command.py)."""
