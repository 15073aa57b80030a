# syntax=docker/dockerfile:1
# helios-exporter: the sidecar (`serve`, the default command), the simulated engine (`simulate`)
# and the lab's client commands in one image. Build it with podman or buildah (Docker works the
# same):
#
#   scripts/image                      # prints the image's name last
#   podman run --rm -p 19400:19400 -e HELIOS_EXPORTER_ENGINE_URL=http://engine:8000 \
#       localhost/helios-exporter:<version>
#
# Configuration is the HELIOS_EXPORTER_* environment (README.md, "Configuration") or flags after
# the image name (`... helios-exporter:<version> serve --engine-url ...`). docs/deploy.md explains
# the choices below. tests/deploy/test_dockerfile.py runs hadolint on this file and
# tests/deploy/test_image.py repeats the build and install steps without an engine;
# tests/deploy/test_image_build.py builds it with podman and
# runs it: non-root, read-only root, no capabilities, the health check, /metrics against the
# simulator in a second container.
#
# PYTHON_IMAGE: any Debian-based image with python3 (3.11+), its pip and venv, and useradd:
# Docker Hub's python:3.11-slim-bookworm, or the one scripts/image builds from Debian packages
# where Docker Hub cannot be reached. Pure Python: the same file builds amd64 and arm64.

ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

# ---- stage 1: the wheels of the project and its dependencies, and the virtualenv ------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Only what the wheel is made of (.dockerignore keeps the context to these files as well). The
# dependencies first, from pyproject.toml alone: a layer that a change of the code reuses.
COPY pyproject.toml ./
RUN python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
        > requirements.txt \
    && python3 -m pip wheel --wheel-dir /wheels -r requirements.txt
COPY README.md ./
COPY commands/ commands/
COPY exporter/ exporter/
COPY lab/ lab/
COPY simulator/ simulator/
# /wheels ends up holding helios_exporter-*.whl and every runtime dependency as a wheel.
RUN python3 -m pip wheel --no-deps --wheel-dir /wheels .
# The virtualenv the runtime stage copies: created without pip, so nothing in /opt/helios-exporter
# but the exporter and its dependencies, installed by the base's pip run by the venv's python
# (`pip --python` does it on Docker Hub's image, not with Debian's pip); --no-index: only the
# wheels above. Both stages start from the same base, so the venv's python links stay valid.
RUN pip_home="$(python3 -c 'import os, pip; print(os.path.dirname(os.path.dirname(pip.__file__)))')" \
    && python3 -m venv --without-pip /opt/helios-exporter \
    && PYTHONPATH="$pip_home" /opt/helios-exporter/bin/python -m pip install --no-index \
       --find-links=/wheels /wheels/helios_exporter-*.whl

# ---- stage 2: the runtime: the virtualenv of stage 1, a fixed non-root user ---------------------
FROM ${PYTHON_IMAGE} AS runtime
# pyproject.toml's version, passed by scripts/image (the number lives there only).
ARG VERSION=""
LABEL org.opencontainers.image.title="helios-exporter" \
      org.opencontainers.image.description="Prometheus exporter sidecar for Helios inference engines" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
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
COPY --from=build /opt/helios-exporter /opt/helios-exporter
RUN helios-exporter --help > /dev/null

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
