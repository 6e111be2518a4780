#!/usr/bin/env python3
"""Packs files into a one-layer OCI image archive that `ctr images import` loads.

There is no registry on the test machines, so the real-node e2e brings its two images (pause,
busybox) this way. Standard library only: it runs before the project's venv matters.

usage: oci-image.py OUT.tar NAME:TAG ENTRYPOINT SRC:DEST [SRC:DEST ...] [--busybox-applets]
                    [--user UID:GID]
(--user: the image's user, as a Dockerfile's USER; Kueue's image runs as 65532:65532, which its
chart's runAsNonRoot needs.)
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile

APPLETS = ("sh", "cat", "echo", "env", "ls", "sleep", "test", "grep", "true", "wc", "head")


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def _layer(files: list[tuple[str, str]], applets: bool) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = sorted(
            {d for _, dest in files for d in _parents(dest)} | {"tmp", "dev", "proc", "sys", "etc"}
        )
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
        for src, dest in files:
            with open(src, "rb") as f:
                _add_bytes(tar, dest, f.read(), 0o755)
        if applets:
            for name in APPLETS:
                info = tarfile.TarInfo(f"bin/{name}")
                info.type = tarfile.SYMTYPE
                info.linkname = "busybox"
                tar.addfile(info)
    return buf.getvalue()


def _parents(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _blob(tar: tarfile.TarFile, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    _add_bytes(tar, f"blobs/sha256/{digest}", data)
    return f"sha256:{digest}"


def main(argv: list[str]) -> int:
    applets = "--busybox-applets" in argv
    args = [a for a in argv if a != "--busybox-applets"]
    user = ""
    if "--user" in args:
        at = args.index("--user")
        user = args[at + 1]
        del args[at : at + 2]
    out, name, entrypoint, *specs = args
    files = [(s.split(":", 1)[0], s.split(":", 1)[1]) for s in specs]
    layer = _layer(files, applets)
    config = {
        "architecture": subprocess.run(
            ["go", "env", "GOARCH"], capture_output=True, text=True, check=True
        ).stdout.strip(),
        "os": "linux",
        "config": {
            "Entrypoint": [entrypoint],
            "Env": ["PATH=/bin"],
            "WorkingDir": "/",
            **({"User": user} if user else {}),
        },
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(layer).hexdigest()}"]},
    }
    with tarfile.open(out, "w") as tar:
        layer_digest = _blob(tar, layer)
        config_bytes = json.dumps(config, sort_keys=True).encode()
        config_digest = _blob(tar, config_bytes)
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": config_digest,
                "size": len(config_bytes),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": layer_digest,
                    "size": len(layer),
                }
            ],
        }
        manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
        manifest_digest = _blob(tar, manifest_bytes)
        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": manifest_digest,
                    "size": len(manifest_bytes),
                    "platform": {"architecture": config["architecture"], "os": "linux"},
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1],
                    },
                }
            ],
        }
        _add_bytes(tar, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        _add_bytes(tar, "index.json", json.dumps(index, sort_keys=True).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
