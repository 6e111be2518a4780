"""The fabric manager's state on disk: a snapshot file and an append-only journal beside it.

Every change appends one line to ``<state-file>.journal`` holding only what it changed, with the
revision it made, so a request costs what it changed, not the whole state. Once the journal has
grown as large as the snapshot (and at least ``min_compact_bytes``), the whole state goes into a
new snapshot (temp file + rename) and the journal is emptied: a compaction writes the state once
per as many bytes appended, so the bytes written stay proportional to the changes.

On start: the snapshot, then every journal line with a newer revision. A crash in the middle of
an append leaves a partial last line, which is dropped (its request was never answered); a crash
between a new snapshot and the emptying of the journal leaves lines the snapshot already holds,
which their revisions skip. Lines are flushed to the operating system before the request is
answered: a crashed process loses nothing; a crashed machine may lose the last lines.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import IO, Any

import structlog

log = structlog.get_logger(__name__)

REVISION = "revision"


class JournalError(ValueError):
    """The snapshot cannot be read (the message names the file)."""


def _encode(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


class Journal:
    """The snapshot at ``path`` and the journal at ``path.journal``."""

    def __init__(self, path: str | Path, *, min_compact_bytes: int = 1 << 20) -> None:
        self.path = Path(path)
        self.journal_path = self.path.with_name(self.path.name + ".journal")
        self.min_compact_bytes = min_compact_bytes
        self.snapshot_bytes = 0
        self.journal_bytes = 0
        self._file: IO[bytes] | None = None

    def load(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """The snapshot (None: there is none) and the journal's records newer than it."""
        snapshot: dict[str, Any] | None = None
        if self.path.exists():
            try:
                raw = self.path.read_bytes()
                loaded = json.loads(raw)
            except (OSError, ValueError) as e:
                raise JournalError(f"state file {self.path}: {e}") from None
            if not isinstance(loaded, dict):
                raise JournalError(f"state file {self.path}: not a JSON object")
            snapshot, self.snapshot_bytes = loaded, len(raw)
        after = int((snapshot or {}).get(REVISION, 0))
        return snapshot, [r for r in self._records() if int(r.get(REVISION, 0)) > after]

    def _records(self) -> list[dict[str, Any]]:
        try:
            data = self.journal_path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as e:
            raise JournalError(f"journal {self.journal_path}: {e}") from None
        records: list[dict[str, Any]] = []
        good = 0
        for line in data.splitlines(keepends=True):
            try:
                record = json.loads(line) if line.endswith(b"\n") else None
            except ValueError:
                record = None
            if not isinstance(record, dict):
                break
            records.append(record)
            good += len(line)
        if good < len(data):
            # Cut the unreadable rest, or the next append would be glued to it.
            log.warning(
                "journal: dropped an unfinished or unreadable tail",
                journal=str(self.journal_path),
                dropped_bytes=len(data) - good,
            )
            os.truncate(self.journal_path, good)
        self.journal_bytes = good
        return records

    def append(self, record: dict[str, Any]) -> None:
        """One change, on one line, flushed before the caller answers its request."""
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.journal_path.open("ab")
        line = _encode(record) + b"\n"
        self._file.write(line)
        self._file.flush()
        self.journal_bytes += len(line)

    @property
    def due(self) -> bool:
        """The journal has grown enough that writing the whole state once is worth it."""
        return self.journal_bytes >= max(self.min_compact_bytes, self.snapshot_bytes)

    def compact(self, state: dict[str, Any]) -> None:
        """Write ``state`` (with its revision) as the new snapshot, then empty the journal."""
        data = _encode(state)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".fabric-state-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, self.path)
        self.snapshot_bytes = len(data)
        self.close()
        self.journal_path.open("wb").close()
        self.journal_bytes = 0

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
