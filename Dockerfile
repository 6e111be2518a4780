# One image for every kopf-dra component: `kopf-dra run <component>` (the Deployments' args).
# For a registry and a Docker daemon:
#
#   docker build -t kopf-dra:0.1.0 .                         # the tag is the package version
#   kind load docker-image kopf-dra:0.1.0 --name kopf-dra      # `make e2e-kind` does both
#
# Without them, `make image` (hack/image/build.sh) builds the same image as an OCI archive for
# `ctr -n k8s.io images import`: Debian's packages at the versions of hack/image/debian.lock,
# the same venv made by the same script (hack/image/venv.sh) from the same locked wheels.
# tests/integration/test_image.py checks this file against that archive (base, packages, user,
# environment, entrypoint) and runs every component from the archive.

FROM debian:bookworm-slim AS build
# `docker build --build-arg SOURCE_DATE_EPOCH=...`: the wheel's timestamps (setuptools).
ARG SOURCE_DATE_EPOCH
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pip \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# The wheels of hack/image/requirements.lock and build-requirements.lock, by sha256.
COPY hack/image/requirements.lock hack/image/build-requirements.lock hack/image/
RUN python3 -m pip download --no-cache-dir --no-deps --require-hashes --only-binary=:all: \
    --dest /wheels -r hack/image/build-requirements.lock -r hack/image/requirements.lock
# The wheel's sources (.dockerignore: the package, its metadata, what setup.py carries as
# operators/_share, and hack/image).
COPY . .
RUN hack/image/venv.sh /wheels /src /opt/kopf-dra

FROM debian:bookworm-slim
LABEL org.opencontainers.image.title="kopf-dra" \
      org.opencontainers.image.description="Kubernetes DRA control plane on kopf" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="0.1.0"
ENV PATH=/opt/kopf-dra/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# hack/image/packages: python3 (the venv's interpreter), openssl (the self-signed certificate
# of --metrics-secure), ca-certificates, libstdc++6 (google-re2).
RUN apt-get update && apt-get install -y --no-install-recommends \
    python3 openssl ca-certificates libstdc++6 \
    && rm -rf /var/lib/apt/lists/*
# uid 65532 with a name: what asks the passwd database (getpass, `id`) finds it.
RUN echo 'nonroot:x:65532:65532:nonroot:/nonexistent:/usr/sbin/nologin' >> /etc/passwd \
    && echo 'nonroot:x:65532:' >> /etc/group
COPY --from=build /opt/kopf-dra /opt/kopf-dra
# Non-root by default (the controllers need no privileges); the driver DaemonSet overrides the
# user to write the kubelet's host directories. Root filesystems may be read-only: nothing is
# written outside mounted volumes, the byte code is compiled in the image.
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["kopf-dra"]
CMD ["version"]
