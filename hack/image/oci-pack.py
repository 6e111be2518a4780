#!/usr/bin/env python3
"""Packs one gzipped root filesystem layer into an OCI image archive for `ctr images import`.

hack/image/build.sh makes the layer (GNU tar, gzip -n); this adds the image config, manifest
and index, named so that containerd tags the image NAME (``io.containerd.image.name``). Every
byte follows from the arguments: blobs in a fixed order, fixed owners and times, JSON with
sorted keys. Standard library only. Prints the manifest's digest.

usage: oci-pack.py --layer L.tar.gz --diff-id sha256:HEX --name REPO:TAG --created EPOCH
                   --arch ARCH --entrypoint JSON --cmd JSON --user U --workdir DIR
                   [--env K=V ...] [--label K=V ...] --out OUT.tar
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import io
import json
import os
import re
import sys
import tarfile
from pathlib import Path
from typing import Any

# The digest of a blob is of its bytes: keys sorted and no spaces, so equal configs hash equal.
JSON_SEPARATORS = (",", ":")
CHUNK = 1 << 20


def _json(value: dict[str, Any]) -> bytes:
    return json.dumps(value, sort_keys=True, separators=JSON_SEPARATORS).encode()


def _info(name: str, size: int, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o644
    info.mtime = mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _pairs(values: list[str], flag: str) -> list[tuple[str, str]]:
    pairs = []
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise SystemExit(f"oci-pack.py: {flag} {value!r}: expected KEY=VALUE")
        pairs.append((key, rest))
    return pairs


def _string_list(value: str, flag: str) -> list[str]:
    parsed = json.loads(value)
    if not isinstance(parsed, list) or not all(isinstance(v, str) for v in parsed):
        raise SystemExit(f"oci-pack.py: {flag} {value!r}: expected a JSON list of strings")
    return parsed


def image_config(args: argparse.Namespace, diff_id: str) -> dict[str, Any]:
    created = datetime.datetime.fromtimestamp(args.created, datetime.UTC)
    return {
        "architecture": args.arch,
        "os": "linux",
        "created": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "config": {
            "Entrypoint": _string_list(args.entrypoint, "--entrypoint"),
            "Cmd": _string_list(args.cmd, "--cmd"),
            "Env": [f"{k}={v}" for k, v in _pairs(args.env, "--env")],
            "User": args.user,
            "WorkingDir": args.workdir,
            "Labels": dict(sorted(_pairs(args.label, "--label"))),
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [
            {"created": created.strftime("%Y-%m-%dT%H:%M:%SZ"), "created_by": "hack/image"}
        ],
    }


def pack(args: argparse.Namespace) -> str:
    layer = Path(args.layer)
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", args.diff_id):
        raise SystemExit(f"oci-pack.py: --diff-id {args.diff_id!r}: expected sha256:<64 hex>")
    if ":" not in args.name.rsplit("/", 1)[-1]:
        raise SystemExit(f"oci-pack.py: --name {args.name!r}: expected REPOSITORY:TAG")
    layer_digest = _sha256_file(layer)
    config = _json(image_config(args, args.diff_id))
    manifest = _json(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": f"sha256:{hashlib.sha256(config).hexdigest()}",
                "size": len(config),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": f"sha256:{layer_digest}",
                    "size": layer.stat().st_size,
                }
            ],
        }
    )
    manifest_digest = f"sha256:{hashlib.sha256(manifest).hexdigest()}"
    index = _json(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": manifest_digest,
                    "size": len(manifest),
                    "platform": {"architecture": args.arch, "os": "linux"},
                    "annotations": {
                        "io.containerd.image.name": args.name,
                        "org.opencontainers.image.ref.name": args.name.rsplit(":", 1)[1],
                    },
                }
            ],
        }
    )
    out = Path(args.out)
    partial = out.with_name(out.name + ".partial")
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
        blobs = {hashlib.sha256(b).hexdigest(): b for b in (config, manifest)}
        entries: list[tuple[str, bytes | Path]] = [
            ("oci-layout", _json({"imageLayoutVersion": "1.0.0"})),
            ("index.json", index),
            *((f"blobs/sha256/{d}", b) for d, b in blobs.items()),
            (f"blobs/sha256/{layer_digest}", layer),
        ]
        for name, content in sorted(entries, key=lambda e: e[0]):
            if isinstance(content, Path):
                with content.open("rb") as f:
                    tar.addfile(_info(name, content.stat().st_size, args.created), f)
            else:
                tar.addfile(_info(name, len(content), args.created), io.BytesIO(content))
    os.replace(partial, out)
    return manifest_digest


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="oci-pack.py", description="Packs a root filesystem layer into an OCI image archive."
    )
    parser.add_argument("--layer", required=True, help="the gzipped layer tar")
    parser.add_argument("--diff-id", required=True, help="sha256:<hex> of the uncompressed layer")
    parser.add_argument("--name", required=True, help="REPOSITORY:TAG containerd names it")
    parser.add_argument("--created", required=True, type=int, help="seconds since the epoch")
    parser.add_argument("--arch", required=True, help="GOARCH-style: amd64, arm64")
    parser.add_argument("--entrypoint", required=True, help="JSON list")
    parser.add_argument("--cmd", default="[]", help="JSON list")
    parser.add_argument("--user", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE, in order")
    parser.add_argument("--label", action="append", default=[], help="KEY=VALUE")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if not Path(args.layer).is_file():
        parser.error(f"--layer {args.layer}: no such file")
    print(pack(args))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
