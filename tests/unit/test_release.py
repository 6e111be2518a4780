"""What a release is made of: one version everywhere (package, image tag, chart), the license,
the package metadata, pinned dependencies that say how they are made, and CRDs that document
every field (``kubectl explain``)."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from operators import __version__
from operators.localcluster.manifests import render

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kopf-dra"


def _images(objects: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    for obj in objects:
        template = obj.get("spec", {}).get("template", {}).get("spec", {})
        for container in template.get("containers", []) + template.get("initContainers", []):
            yield obj["metadata"]["name"], container["image"]


def test_the_package_version_is_the_image_tag_and_the_charts_app_version() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "operators.__version__"
    }
    images = dict(_images(render(ROOT / "manifests")))
    assert images
    assert set(images.values()) == {f"kopf-dra:{__version__}"}, images
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == chart["version"] == __version__
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["image"] == {"repository": "kopf-dra", "tag": "", "pullPolicy": "IfNotPresent"}
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f'org.opencontainers.image.version="{__version__}"' in dockerfile
    assert "kopf-dra:latest" not in dockerfile + (ROOT / "Makefile").read_text()


def test_the_license_is_apache_2_as_the_metadata_says() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in text
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]


def test_the_package_metadata_is_complete() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["authors"]
    assert project["urls"]
    assert all(u.startswith("https://") for u in project["urls"].values())
    classifiers = project["classifiers"]
    assert "Typing :: Typed" in classifiers
    assert any(c.startswith("Development Status ::") for c in classifiers)
    assert f"Programming Language :: Python :: {project['requires-python'][2:]}" in classifiers


def test_constraints_say_how_they_are_regenerated() -> None:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    header = [line for line in lines if line.startswith("#")]
    assert any("pip freeze" in line for line in header)
    pins = [line for line in lines if line and not line.startswith("#")]
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+==\S+", pin) for pin in pins), pins
    assert not any(pin.lower().startswith("kopf-dra==") for pin in pins)


def _undocumented(schema: dict[str, Any], path: str) -> Iterator[str]:
    if "description" not in schema:
        yield path
    for name, prop in (schema.get("properties") or {}).items():
        if path.count(".") == 0 and name == "metadata":
            # The API server forbids anything but name and generateName rules here; kubectl
            # explain shows ObjectMeta's own descriptions.
            assert prop == {"type": "object"}
            continue
        yield from _undocumented(prop, f"{path}.{name}")
    if "items" in schema:
        yield from _undocumented(schema["items"], f"{path}[]")


def test_every_crd_field_has_a_description() -> None:
    crds = [o for o in render(ROOT / "crds") if o["kind"] == "CustomResourceDefinition"]
    assert crds
    for crd in crds:
        for version in crd["spec"]["versions"]:
            schema = version["schema"]["openAPIV3Schema"]
            missing = list(_undocumented(schema, crd["spec"]["names"]["kind"]))
            assert not missing, missing


def test_the_chart_ships_the_same_crds() -> None:
    ours = sorted(p.name for p in (ROOT / "crds").glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(p.name for p in (CHART / "crds").glob("*.yaml")) == ours
    for name in ours:
        assert (CHART / "crds" / name).read_text() == (ROOT / "crds" / name).read_text(), name
