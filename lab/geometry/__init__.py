"""`helios-exporter geometry`: the offload records and slabs a model layout implies (command.py:
the command; partitions.py: the partitions it derives them from)."""
