"""`helios-exporter status`: the on-call status page of a running sidecar, in the terminal
(command.py), as text (text.py) from the model the sidecar's page shares (exporter/oncall/)."""
