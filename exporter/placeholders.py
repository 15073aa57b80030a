"""The credentials the deployment examples ship as placeholders, refused when the sidecar starts.

`kubectl apply -k deploy/kubernetes` (or `deploy/kubernetes-tls`) as committed would otherwise
run sidecars whose events token and scrape password are printed in a public repository. The
sidecar refuses a token file holding `EVENTS_TOKEN` (exporter/config.py) and a basic-auth user
whose hash verifies `SCRAPE_PASSWORD`: one bcrypt check per hash, at load or in the background
(exporter/web/hashes.py), and `SCRAPE_PASSWORD` itself at login (exporter/web/basic_auth.py).
tests/deploy holds the example files to these values.
"""

from __future__ import annotations

from typing import Final

# deploy/kubernetes/secret-events-token.yaml, stringData.token
EVENTS_TOKEN: Final = "REPLACE-ME-with-a-random-token-of-at-least-32-characters"  # noqa: S105 (refused, not used)
# deploy/kubernetes-tls/secret-scrape-credentials.yaml, stringData.password (web-config.yml holds
# its bcrypt hash)
SCRAPE_PASSWORD: Final = "CHANGE-ME-scrape-password"  # noqa: S105 (refused, not used)
