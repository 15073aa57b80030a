"""Grafana dashboards as code (grafana-foundation-sdk); `scripts/generate dashboards` writes them."""
