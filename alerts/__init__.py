"""The Helios alerting and recording rules as code; `scripts/generate alerts` writes them.

Laid out like kubernetes-mixin: `config` reads alerts/config.yaml, `promql` and `templates` hold
the expression and annotation building blocks, `groups/` has one module per rule group, `runbooks`
adds every runbook link in one place and `render` writes the YAML and the docs tables.
"""
