"""``python -m simulator --listen 127.0.0.1:8000 --scenario steady`` serves the engine;
``python -m simulator corpus NAME`` writes a corpus (``simulator.corpora``) to stdout;
``python -m simulator semantic-check A.json B.json`` checks two arms' answers
(``simulator.semantic``)."""

from __future__ import annotations

import sys

from simulator import cli, corpora, semantic

if __name__ == "__main__":
    if sys.argv[1:2] == ["corpus"]:
        sys.exit(corpora.main(sys.argv[2:]))
    if sys.argv[1:2] == ["semantic-check"]:
        sys.exit(semantic.main(sys.argv[2:]))
    sys.exit(cli.main())
