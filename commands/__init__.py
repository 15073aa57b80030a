"""The console script `helios-exporter`: every command in one table (cli.py), above the sidecar
(exporter/), the lab (lab/) and the simulated engine (simulator/)."""
