# One image for every kopf-dra component: `kopf-dra run <component>` (the Deployments' args).
#
#   docker build -t kopf-dra:0.1.0 .                         # `make image`: the package version
#   kind load docker-image kopf-dra:0.1.0 --name kopf-dra      # `make e2e-kind` does both
#
# The same install path (wheel built from the sources, installed into a clean environment,
# `kopf-dra version` and `kopf-dra run <component> --help`) is proven without Docker by
# tests/integration/test_packaging.py.
ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
WORKDIR /src
COPY pyproject.toml setup.py MANIFEST.in README.md LICENSE constraints.txt ./
COPY operators ./operators
# Carried in the wheel as operators/_share (kopf-dra demo and control-plane up need them).
COPY manifests ./manifests
COPY crds ./crds
COPY hack/controlplane ./hack/controlplane
COPY hack/node ./hack/node
# The wheel of kopf-dra and of every pinned dependency (constraints.txt), nothing else.
RUN pip wheel --no-cache-dir --constraint constraints.txt --wheel-dir /wheels .

FROM python:${PYTHON_VERSION}-slim
LABEL org.opencontainers.image.title="kopf-dra" \
      org.opencontainers.image.description="Kubernetes DRA control plane on kopf" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="0.1.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# openssl: the self-signed certificate of --metrics-secure (and of the webhook, for local runs).
RUN apt-get update && apt-get install -y --no-install-recommends openssl \
    && rm -rf /var/lib/apt/lists/*
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels kopf-dra
# Non-root by default (the controllers need no privileges); the driver DaemonSet overrides the
# user to write the kubelet's host directories. Root filesystems may be read-only: nothing is
# written outside mounted volumes.
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["kopf-dra"]
CMD ["version"]
