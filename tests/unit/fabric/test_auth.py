"""Bearer tokens of the fabric manager: a directory of one file per cluster (a Secret's mount),
what it refuses to start with, rotation without a restart; the client's token file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from operators.fabric.auth import StaticTokens, TokenDirectory, TokenError, TokenFile

A = "a" * 32
B = "b" * 32


def secret_mount(directory: Path, tokens: dict[str, str], version: str = "v1") -> None:
    """What kubelet makes of a Secret: files in a timestamped directory, ``..data`` pointing at
    it, and one symlink per key through ``..data``."""
    data = directory / f"..{version}"
    data.mkdir(parents=True)
    for key, token in tokens.items():
        (data / key).write_text(token + "\n")
    link = directory / "..data_tmp"
    link.symlink_to(data.name)
    os.replace(link, directory / "..data")
    for key in tokens:
        if not (directory / key).is_symlink():
            (directory / key).symlink_to(f"..data/{key}")


def test_a_secret_mount_names_each_cluster_by_its_key(tmp_path: Path) -> None:
    secret_mount(tmp_path, {"default": A, "other-cluster": B})
    tokens = TokenDirectory(tmp_path)
    assert tokens.cluster_of(A) == "default"
    assert tokens.cluster_of(B) == "other-cluster"
    assert tokens.cluster_of("c" * 32) is None
    assert tokens.cluster_of("") is None


def test_a_rotated_secret_is_picked_up_without_a_restart(tmp_path: Path) -> None:
    secret_mount(tmp_path, {"default": A})
    tokens = TokenDirectory(tmp_path)
    secret_mount(tmp_path, {"default": B, "new": "n" * 40}, version="v2")
    assert tokens.cluster_of(B) == "default"
    assert tokens.cluster_of(A) is None
    assert tokens.cluster_of("n" * 40) == "new"


def test_a_bad_rotation_keeps_the_tokens_read_before_until_it_is_fixed(tmp_path: Path) -> None:
    (tmp_path / "default").write_text(A)
    tokens = TokenDirectory(tmp_path)
    (tmp_path / "short").write_text("tiny")
    assert tokens.cluster_of(A) == "default"
    assert tokens.cluster_of("tiny") is None
    (tmp_path / "short").write_text(B)
    assert tokens.cluster_of(B) == "short"


@pytest.mark.parametrize(
    ("files", "problem"),
    [
        ({"default": "tiny"}, "default: the token is shorter than 16"),
        ({"default": "two words here, long enough"}, "default: a token is one word"),
        ({"a": A, "b": A}, "clusters a and b share a token"),
        ({"bad@id": A}, "bad@id: a cluster id is"),
        ({}, "no token files"),
    ],
)
def test_a_directory_it_cannot_use_is_refused_naming_the_file(
    tmp_path: Path, files: dict[str, str], problem: str
) -> None:
    for name, token in files.items():
        (tmp_path / name).write_text(token)
    with pytest.raises(TokenError, match=problem):
        TokenDirectory(tmp_path)


def test_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TokenError, match="missing"):
        TokenDirectory(tmp_path / "missing")


def test_static_tokens_check_the_same_rules() -> None:
    assert StaticTokens({"c1": A}).cluster_of(A) == "c1"
    with pytest.raises(TokenError, match="shorter"):
        StaticTokens({"c1": "tiny"})


def test_the_clients_token_file_is_re_read_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(A + "\n")
    token = TokenFile(path)
    assert token() == A
    path.write_text(B + "B\n")  # another size: a change even within the same mtime tick
    assert token() == B + "B"
    path.unlink()
    with pytest.raises(TokenError, match=str(path)):
        token()
