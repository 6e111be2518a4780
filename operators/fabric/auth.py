"""Who is calling the fabric manager: one bearer token per cluster.

The manager reads its tokens from a directory, one file per cluster: the file's name is the
cluster id, its content the token (surrounding whitespace ignored). That is what a Secret looks
like when it is mounted (each key a file), so ``kubectl create secret generic ...
--from-literal=<cluster>=<token>`` is all it takes, and a key added to or rotated in the Secret
is picked up without a restart (kubelet swaps the files; the directory is re-read when any of
them changes). Hidden entries (the Secret mount's ``..data`` machinery) are skipped.

A client reads its own token from one file (``TokenFile``), re-read when it changes, so a
rotated Secret reaches it too.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final, Protocol

import structlog

log = structlog.get_logger(__name__)

#: Cluster ids: what a Secret's key may be, and short enough to log.
CLUSTER_ID: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
#: Shorter tokens are refused: a guessable token is no authentication.
MIN_TOKEN_LENGTH: Final = 16
MAX_TOKEN_LENGTH: Final = 4096


class TokenError(ValueError):
    """A token file or directory cannot be used (the message names the file)."""


class Authenticator(Protocol):
    def cluster_of(self, token: str) -> str | None:
        """The cluster a presented token belongs to, or None (unknown token)."""
        ...


def _digest(token: str) -> bytes:
    # Looked up by digest: a dict lookup then reveals nothing about the stored tokens.
    return hashlib.sha256(token.encode()).digest()


def _check_token(token: str, where: str) -> str:
    token = token.strip()
    if len(token) < MIN_TOKEN_LENGTH:
        raise TokenError(f"{where}: the token is shorter than {MIN_TOKEN_LENGTH} characters")
    if len(token) > MAX_TOKEN_LENGTH or any(c.isspace() for c in token):
        raise TokenError(f"{where}: a token is one word of at most {MAX_TOKEN_LENGTH} characters")
    return token


def _index(tokens: Mapping[str, str], where: str) -> dict[bytes, str]:
    """Token digest -> cluster; a token shared by two clusters would make the caller ambiguous."""
    index: dict[bytes, str] = {}
    for cluster, token in sorted(tokens.items()):
        if not CLUSTER_ID.match(cluster):
            raise TokenError(
                f"{where}/{cluster}: a cluster id is 1-63 letters, digits, '.', '_' or '-'"
            )
        digest = _digest(_check_token(token, f"{where}/{cluster}"))
        if digest in index:
            raise TokenError(f"{where}: clusters {index[digest]} and {cluster} share a token")
        index[digest] = cluster
    return index


class StaticTokens:
    """Tokens given in code (tests, benchmarks): cluster id -> token."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._index = _index(tokens, "tokens")

    def cluster_of(self, token: str) -> str | None:
        return self._index.get(_digest(token))


class TokenDirectory:
    """Tokens from a directory (a Secret's mount), re-read when its files change.

    A change that makes the directory unusable (a bad file) keeps the tokens read before, and
    says why in the log: a typo in a rotated Secret must not lock every cluster out.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._signature = self._stat()
        self._index = _index(self._read(), str(self.directory))
        if not self._index:
            raise TokenError(f"{self.directory}: no token files (one per cluster id)")

    def _entries(self) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(self.directory) as entries:
                return sorted(
                    (e for e in entries if not e.name.startswith(".") and e.is_file()),
                    key=lambda e: e.name,
                )
        except OSError as e:
            raise TokenError(f"{self.directory}: {e.strerror or e}") from None

    def _stat(self) -> tuple[tuple[str, int, int], ...]:
        try:  # kubelet swaps a Secret's files under us: one may vanish between list and stat
            stats = [(e.name, e.stat()) for e in self._entries()]
        except OSError as e:
            raise TokenError(f"{self.directory}: {e}") from None
        return tuple((name, st.st_mtime_ns, st.st_size) for name, st in stats)

    def _read(self) -> dict[str, str]:
        tokens: dict[str, str] = {}
        for entry in self._entries():
            try:
                tokens[entry.name] = Path(entry.path).read_text()
            except (OSError, UnicodeDecodeError) as e:
                raise TokenError(f"{entry.path}: {e}") from None
        return tokens

    def refresh(self) -> None:
        """Re-read the tokens if a file changed; each change is tried (and logged) once."""
        try:
            signature = self._stat()
            if signature == self._signature:
                return
            self._signature = signature
            index = _index(self._read(), str(self.directory))
        except TokenError as e:
            log.error("token directory not re-read; the previous tokens stay", error=str(e))
            return
        self._index = index
        log.info("token directory re-read", clusters=sorted(index.values()))

    def cluster_of(self, token: str) -> str | None:
        self.refresh()
        return self._index.get(_digest(token))


class TokenFile:
    """A client's own token, from a file (a Secret's key), re-read when the file changes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._signature: tuple[int, int] | None = None
        self._token = ""

    def __call__(self) -> str:
        try:
            stat = self.path.stat()
            signature = (stat.st_mtime_ns, stat.st_size)
            if signature != self._signature:
                token = _check_token(self.path.read_text(), str(self.path))
                self._signature, self._token = signature, token
        except (OSError, UnicodeDecodeError) as e:
            raise TokenError(f"{self.path}: {e}") from None
        return self._token
