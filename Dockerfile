# syntax=docker/dockerfile:1
# helios-exporter: the sidecar (`serve`, the default command) and the simulated engine
# (`simulate`) in one image.
#
#   docker build -t helios-exporter:0.2.0 .
#   docker run --rm -p 19400:19400 -e HELIOS_EXPORTER_ENGINE_URL=http://engine:8000 helios-exporter:0.2.0
#
# Configuration is the HELIOS_EXPORTER_* environment (README.md, "Configuration") or flags after
# the image name (`... helios-exporter:0.2.0 serve --engine-url ...`). docs/deploy.md explains the
# choices below; tests/deploy/test_image.py runs hadolint on this file and repeats the build and
# install steps without Docker (wheel from the same files, fresh virtualenv, console script).

ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

# ---- stage 1: build the project wheel and the wheels of its dependencies ----------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Only what the wheel is made of (.dockerignore keeps the context to these files as well).
COPY pyproject.toml README.md ./
COPY exporter/ exporter/
COPY simulator/ simulator/
# /wheels ends up holding helios_exporter-*.whl and every runtime dependency as a wheel, so the
# runtime stage installs offline from exactly what was resolved here.
RUN pip wheel --wheel-dir /wheels .

# ---- stage 2: the runtime: a virtualenv without pip, a fixed non-root user --------------------
FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="helios-exporter" \
      org.opencontainers.image.description="Prometheus exporter sidecar for Helios inference engines" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/helios-exporter/bin:$PATH \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# uid/gid 10001: fixed so that Kubernetes `runAsNonRoot` can verify it and `fsGroup` / volume
# ownership can name it; above the range distributions hand out to system and login users.
# The state directory exists in the image owned by that user, so a fresh Docker named volume
# mounted on it inherits the ownership.
RUN groupadd --system --gid 10001 helios \
    && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home \
       --shell /usr/sbin/nologin helios \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/helios-exporter
# `pip --python` installs into a virtualenv created without pip: nothing in /opt/helios-exporter
# but the exporter and its dependencies. --no-index: only the wheels built in stage 1.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m venv --without-pip /opt/helios-exporter \
    && pip --python /opt/helios-exporter/bin/python install --no-index --find-links=/wheels \
       /wheels/helios_exporter-*.whl \
    && helios-exporter --help > /dev/null

USER 10001:10001
WORKDIR /var/lib/helios-exporter
# The durable restore-window state (--state-dir, default /var/lib/helios-exporter): it must
# outlive the container, so mount a volume here (Compose: a named volume; Kubernetes: a PVC).
VOLUME ["/var/lib/helios-exporter"]
EXPOSE 19400
# The venv's python, no curl/wget needed: GET /healthz on 127.0.0.1, over TLS when
# HELIOS_EXPORTER_WEB_CONFIG_FILE turns it on (exporter/healthcheck.py). Follows
# HELIOS_EXPORTER_LISTEN's port; a port or web configuration given as a flag instead is not seen
# here (override the health check then).
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
    CMD ["/opt/helios-exporter/bin/python", "-m", "exporter.healthcheck"]
ENTRYPOINT ["helios-exporter"]
CMD ["serve"]
