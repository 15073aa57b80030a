"""Grafana dashboards as code (grafana-foundation-sdk); `python dashboards/generate.py` writes them."""
