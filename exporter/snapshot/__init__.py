"""The engine's offload snapshot, from the body a source fetched to the typed `Snapshot` a poll
cycle reads. In the order a body goes through:

- limits.py: strict JSON within a depth limit (every JSON body from outside is read with it);
- parse.py: `parse_snapshot(body)`, the entry point: decodes, validates, builds;
- validate.py: each version's validator and the checks the schema cannot make;
- v3.py: schema 3's additions, each left out and named when it breaks its rules;
- model.py: what comes out, the immutable `Snapshot` and the `SnapshotError` that says why not;
- source.py and schemas.py: the schema of every version from one source (and its files,
  exporter/schema/, written by `scripts/generate snapshot-schema`).
"""
