"""Where the lake lives: a local folder, or an S3 prefix (`SIXNINES_LAKE=s3://bucket/prefix`).

A local lake is a plain `pathlib.Path`, so a local run behaves exactly as it always did (write to a temporary
name, rename into place). An S3 lake is an `S3Path`: a small pathlib-like handle (`/`, `name`, `parent`,
`glob`, `exists`, `read_text`, `write_text`) on a pyarrow `S3FileSystem`, so readers need no second code path
for walking the lake. The functions below (`read_parquet`, `write_bytes`, `remove_tree`, `commit_folder`, …)
take either and do the right thing for each.

Atomicity on S3, which has no rename: a single object is one PUT (a large one one multipart upload), and S3
makes it visible whole or not at all, so single files (result JSON, history files, reports) are written in
place. A *folder* (a landed cell, a Spark table partition, a run's published tables, its quarantine, its
regression results) is written under `<final>/attempt=<token>/` and becomes visible only when
`<final>/_committed.json`, which names that attempt, is PUT last; readers resolve a folder through that marker
(`committed_folder`, `committed_file`), so they never see a half-written folder, and a retry replaces the
earlier attempt by replacing the marker (the old attempt is deleted after the switch). Withdrawing a folder
deletes its marker first (`withdraw_folder`). Locally the same three operations are a rename into place
(`replace_dir`, the only one), the folder itself, and a rename away.

Credentials: inside Airflow, the AWS connection named by `SIXNINES_LAKE_CONN_ID` (default `sixnines_lake_s3`,
an `endpoint_url` extra for MinIO/moto) through the Amazon provider's `AwsBaseHook`; otherwise the standard
AWS environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_ENDPOINT_URL`,
`AWS_DEFAULT_REGION`). `S3Settings` turns either into the pyarrow filesystem and the Spark s3a configuration.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import secrets
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Union

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ..secrecy import scrub_text
from .s3conf import S3Settings, StorageError, s3_settings

COMMIT_MARKER = "_committed.json"
ATTEMPT_PREFIX = "attempt="
_MARKER_VERSION = 1  # _committed.json format; 1: {"schema_version", "attempt", "files"}


# -- S3 paths ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class S3Path:
    """An object or prefix in the lake's bucket, `bucket/key` as pyarrow names it; the pathlib subset the
    lake's readers use. `str()` is the `s3://` URI users see; `spark_uri` the `s3a://` one Spark reads."""

    key: str
    settings: S3Settings = field(compare=False, repr=False)

    @property
    def fs(self) -> pafs.S3FileSystem:
        return self.settings.filesystem()

    def __truediv__(self, part: str | os.PathLike[str]) -> S3Path:
        tail = PurePosixPath(os.fspath(part)).as_posix().strip("/")
        return S3Path(f"{self.key}/{tail}" if tail else self.key, self.settings)

    def __str__(self) -> str:
        return f"s3://{self.key}"

    def __lt__(self, other: S3Path) -> bool:
        return self.key < other.key

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def parent(self) -> S3Path:
        return S3Path(self.key.rsplit("/", 1)[0], self.settings) if "/" in self.key else self

    @property
    def bucket(self) -> str:
        return self.key.split("/", 1)[0]

    def with_name(self, name: str) -> S3Path:
        return self.parent / name

    def relative_to(self, other: S3Path) -> PurePosixPath:
        if not (self.key == other.key or self.key.startswith(other.key + "/")):
            raise ValueError(f"{self} is not under {other}")
        return PurePosixPath(self.key[len(other.key) :].lstrip("/"))

    def spark_uri(self) -> str:
        return f"s3a://{self.key}"

    def _info(self) -> pafs.FileInfo:
        return self.fs.get_file_info(self.key)

    def exists(self) -> bool:
        return self._info().type != pafs.FileType.NotFound

    def is_dir(self) -> bool:
        return self._info().type == pafs.FileType.Directory

    def is_file(self) -> bool:
        return self._info().type == pafs.FileType.File

    def stat(self) -> os.stat_result:
        """Only `st_size` is meaningful (what the CLI prints); a missing object raises FileNotFoundError."""
        info = self._info()
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(str(self))
        return os.stat_result((0, 0, 0, 0, 0, 0, info.size or 0, 0, 0, 0))

    def iterdir(self) -> list[S3Path]:
        infos = self.fs.get_file_info(pafs.FileSelector(self.key, allow_not_found=True))
        return sorted(S3Path(i.path, self.settings) for i in infos)

    def glob(self, pattern: str) -> list[S3Path]:
        """`*`/`?`/`[..]` within path segments (no `**`), one listing per wildcard segment and folder."""
        found = [self]
        parts = PurePosixPath(pattern).parts
        for i, part in enumerate(parts):
            if any(ch in part for ch in "*?["):
                found = [c for f in found for c in f.iterdir() if fnmatch.fnmatchcase(c.name, part)]
            else:
                found = [f / part for f in found]
                if i == len(parts) - 1:
                    found = [f for f in found if f.exists()]
        return sorted(found)

    def read_bytes(self) -> bytes:
        try:
            with self.fs.open_input_stream(self.key) as stream:
                return stream.readall()
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise StorageError(f"{self}: cannot read: {exc}") from exc

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def write_bytes(self, data: bytes) -> int:
        """One PUT: S3 shows the whole object or nothing."""
        with self.fs.open_output_stream(self.key) as stream:
            stream.write(data)
        return len(data)

    def write_text(self, text: str, encoding: str = "utf-8") -> int:
        return self.write_bytes(text.encode(encoding))

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Nothing to do: S3 has no folders, an object's key names its prefixes."""

    def unlink(self, missing_ok: bool = False) -> None:
        try:
            self.fs.delete_file(self.key)
        except FileNotFoundError:
            if not missing_ok:
                raise


LakePath = Union[Path, S3Path]  # noqa: UP007 — a runtime alias, used in isinstance-free annotations


def lake_path(location: str | os.PathLike[str] | S3Path, settings: S3Settings | None = None) -> LakePath:
    """A lake location as a path: `s3://bucket/prefix` (or `s3a://`) becomes an S3Path reached with `settings`
    (by default `s3_settings`: a Spark task is handed its driver's instead), anything else a local Path,
    unchanged."""
    if isinstance(location, S3Path):
        return location
    text = os.fspath(location)
    if text.startswith("s3a://"):
        text = "s3://" + text.removeprefix("s3a://")
    if not text.startswith("s3://"):
        return Path(text)
    key = text.removeprefix("s3://").strip("/")
    if not key:
        raise StorageError(f"lake location {text!r}: expected s3://bucket[/prefix]")
    return S3Path(key, settings if settings is not None else s3_settings())


def is_s3(path: object) -> bool:
    return isinstance(path, S3Path)


def spark_uri(path: LakePath) -> str:
    """What Spark reads or writes: `s3a://bucket/key`, or the local path as before."""
    return path.spark_uri() if isinstance(path, S3Path) else str(path)


# -- reading and writing ----------------------------------------------------------------------------------
def _fs_and_key(path: LakePath) -> tuple[pafs.FileSystem | None, str]:
    return (path.fs, path.key) if isinstance(path, S3Path) else (None, str(path))


def read_parquet(path: LakePath, columns: list[str] | None = None) -> pa.Table:
    """One Parquet file, or a folder of part files (a Spark table partition), from either kind of lake."""
    fs, key = _fs_and_key(path)
    return pq.read_table(key, columns=columns, filesystem=fs)


def read_parquet_schema(path: LakePath) -> pa.Schema:
    fs, key = _fs_and_key(path)
    if fs is None:
        return pq.read_schema(key)
    with fs.open_input_file(key) as handle:
        return pq.read_schema(handle)


def write_parquet_object(table: pa.Table, path: S3Path, **options: Any) -> None:
    """A Parquet file as one S3 object (multipart upload for large files; visible only when complete)."""
    pq.write_table(table, path.key, filesystem=path.fs, **options)


def write_bytes(path: LakePath, data: bytes) -> LakePath:
    """Replace a single file atomically: one PUT on S3; a temporary name and a rename on a local disk."""
    if isinstance(path, S3Path):
        path.write_bytes(data)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_text(path: LakePath, text: str) -> LakePath:
    """Write a text record atomically, without any secret this process knows (`secrecy.scrub_text`)."""
    return write_bytes(path, scrub_text(text).encode("utf-8"))


def remove_tree(path: LakePath) -> None:
    """Delete a folder (every object under a prefix) if it exists."""
    if isinstance(path, S3Path):
        with contextlib.suppress(FileNotFoundError):
            path.fs.delete_dir(path.key)
    else:
        shutil.rmtree(path, ignore_errors=True)


# -- folders that appear at once --------------------------------------------------------------------------
def new_attempt(final: S3Path) -> tuple[S3Path, str]:
    """A fresh, invisible folder under `final` to write one attempt into (then `mark_committed`)."""
    token = f"{secrets.token_hex(6)}"
    return final / f"{ATTEMPT_PREFIX}{token}", token


def mark_committed(final: S3Path, token: str) -> S3Path:
    """Make attempt `token` the folder's content (one PUT of the marker), then delete every other attempt."""
    folder = final / f"{ATTEMPT_PREFIX}{token}"
    files = sorted(str(p.relative_to(folder)) for p in _walk(folder))
    marker = {"schema_version": _MARKER_VERSION, "attempt": token, "files": files}
    (final / COMMIT_MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True))
    for other in final.glob(f"{ATTEMPT_PREFIX}*"):
        if other.name != folder.name:
            remove_tree(other)
    return folder


def _walk(folder: S3Path) -> list[S3Path]:
    infos = folder.fs.get_file_info(pafs.FileSelector(folder.key, recursive=True, allow_not_found=True))
    return [S3Path(i.path, folder.settings) for i in infos if i.type == pafs.FileType.File]


def committed_folder(final: LakePath) -> LakePath | None:
    """Where a folder's committed content is: the folder itself on a local disk (renamed into place whole),
    the attempt its marker names on S3; None when nothing was committed."""
    if not isinstance(final, S3Path):
        return final if final.is_dir() else None
    try:
        marker = json.loads((final / COMMIT_MARKER).read_text())
    except FileNotFoundError:
        return None
    if marker.get("schema_version") != _MARKER_VERSION:
        raise StorageError(f"{final / COMMIT_MARKER}: marker schema_version {marker.get('schema_version')!r}")
    return final / f"{ATTEMPT_PREFIX}{marker['attempt']}"


def commit_folder(staging: Path, final: LakePath) -> LakePath:
    """Publish a finished local staging folder as `final`, replacing an earlier version atomically; returns
    where its files now are. Locally: rename into place (the old version is renamed away first); on S3: upload
    as a new attempt, then the marker."""
    if not isinstance(final, S3Path):
        replace_dir(staging, final)
        return final
    folder, token = new_attempt(final)
    for file in sorted(p for p in staging.rglob("*") if p.is_file()):
        upload(file, folder / file.relative_to(staging).as_posix())
    committed = mark_committed(final, token)
    shutil.rmtree(staging, ignore_errors=True)
    return committed


def replace_dir(staging: Path, final: Path) -> None:
    """The one local "rename a folder into place": a finished folder becomes `final` in one rename; an earlier
    version is renamed away first (a reader sees the old folder, then for an instant none, then the new one,
    never a mix) and removed after. `staging` must be on the same file system (a sibling, or under the lake)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    old = None
    if final.exists():
        old = final.with_name(f".replaced-{final.name}-{secrets.token_hex(4)}")
        os.replace(final, old)
    os.replace(staging, final)
    if old is not None:
        shutil.rmtree(old)


def local_staging(final: Path) -> Path:
    """A fresh hidden sibling of `final` to build a folder in before `replace_dir` (hidden: the lake's readers
    glob `key=value` names, which a leading dot never matches)."""
    staging = final.with_name(f".staging-{final.name}-{secrets.token_hex(4)}")
    staging.mkdir(parents=True)
    return staging


def write_folder(final: LakePath, files: Mapping[str, bytes]) -> LakePath:
    """Write a small folder held in memory (published tables, a quarantine, regression results) so that it
    appears whole or not at all, replacing an earlier version: locally a staging sibling renamed into place,
    on S3 one object per file under a new attempt and then the marker. Returns where the files are (the folder
    itself locally, the committed attempt on S3); a failure leaves the earlier version visible."""
    if isinstance(final, S3Path):
        folder, token = new_attempt(final)
        try:
            for name, data in sorted(files.items()):
                (folder / name).write_bytes(data)
        except BaseException:
            remove_tree(folder)  # best effort: without its marker the attempt is invisible anyway
            raise
        return mark_committed(final, token)
    staging = local_staging(final)
    try:
        for name, data in files.items():
            target = staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        replace_dir(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final


def withdraw_folder(final: LakePath) -> None:
    """Remove a committed folder so that readers stop seeing it at once: on S3 the marker goes first (one
    DELETE; the attempts are then unreachable) and the objects after it; locally the folder is renamed away
    and then deleted. Nothing there is not an error."""
    if isinstance(final, S3Path):
        (final / COMMIT_MARKER).unlink(missing_ok=True)
        remove_tree(final)
        return
    if not final.exists():
        return
    gone = final.with_name(f".withdrawn-{final.name}-{secrets.token_hex(4)}")
    os.replace(final, gone)
    shutil.rmtree(gone)


def committed_file(final: LakePath, name: str) -> LakePath | None:
    """File `name` of a committed folder (`committed_folder`), or None when the folder or the file is absent."""
    folder = committed_folder(final)
    if folder is None:
        return None
    path = folder / name
    return path if path.exists() else None


def upload(local: Path, target: S3Path) -> None:
    pafs.copy_files(str(local), target.key, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=target.fs)


def put_folder(local: Path, target: LakePath) -> None:
    """Copy every file of a local folder under `target` (on S3 one object each, each complete or absent)."""
    if isinstance(target, S3Path):
        if any(p.is_file() for p in local.rglob("*")):
            pafs.copy_files(str(local), target.key, pafs.LocalFileSystem(), target.fs)
        return
    shutil.copytree(local, target, dirs_exist_ok=True)


def get_folder(source: LakePath, local: Path) -> None:
    """Copy every file under `source` into a local folder (nothing when `source` does not exist)."""
    local.mkdir(parents=True, exist_ok=True)
    if isinstance(source, S3Path):
        if source.is_dir():
            pafs.copy_files(source.key, str(local), source.fs, pafs.LocalFileSystem())
        return
    if source.is_dir():
        shutil.copytree(source, local, dirs_exist_ok=True)
