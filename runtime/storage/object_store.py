"""An object store (``s3://``) as checkpoint storage sees it: a ``pyarrow.fs.FileSystem`` whose objects are named
by ``bucket/prefix`` paths and shown as URIs; a PUT makes an object visible whole or not at all. Every ``OSError``
becomes a typed storage error naming the object. pyarrow is imported only where it is used (``s3://`` only): a
subtask's process, which imports this module, never loads it (about 50 MB and 50 ms a process)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from barriersim.runtime.storage.atomic_file import WriteFault
from barriersim.runtime.storage.errors import (
    CheckpointStorageWriteError,
    InvalidCheckpointPointerError,
    storage_error_of,
)

OBJECT_STORE_SCHEMES = ("s3",)


class ObjectKind(enum.Enum):
    """What a path of an object store names (pyarrow's ``FileType``)."""

    NOT_FOUND = "NotFound"
    UNKNOWN = "Unknown"
    FILE = "File"
    DIRECTORY = "Directory"


@dataclass(frozen=True)
class ObjectInfo:
    path: str
    base_name: str
    kind: ObjectKind
    size: int | None


def _info(info: Any) -> ObjectInfo:  # a pyarrow.fs.FileInfo (pyarrow is untyped)
    """An ``ObjectInfo`` of a ``pyarrow.fs.FileInfo``."""
    return ObjectInfo(info.path, info.base_name, ObjectKind(info.type.name), info.size)


def is_object_store_uri(uri: str) -> bool:
    return isinstance(uri, str) and urlsplit(uri).scheme in OBJECT_STORE_SCHEMES


def basename(path: str) -> str:
    return path.rstrip("/").rpartition("/")[2]


def parent(path: str) -> str:
    return path.rstrip("/").rpartition("/")[0]


def object_store_filesystem(uri: str) -> tuple[Any, str]:
    """The pyarrow filesystem of an ``s3://`` URI and the path (``bucket/prefix``) it names; the URI's query
    holds the client's options. Raises ``InvalidCheckpointPointerError`` naming the URI."""
    from pyarrow import fs as pafs

    parts = urlsplit(uri)
    if parts.scheme not in OBJECT_STORE_SCHEMES or not parts.netloc:
        raise InvalidCheckpointPointerError(f"{uri!r}: not an object store URI (s3://bucket/path)")
    try:
        filesystem, path = pafs.FileSystem.from_uri(uri)
    except (OSError, ValueError, TypeError) as e:
        raise InvalidCheckpointPointerError(f"{uri!r}: cannot open the object store: {e}") from None
    return filesystem, path.rstrip("/")


class ObjectStore:
    """The objects of ``filesystem`` (a ``pyarrow.fs.FileSystem``), named in messages as ``<scheme>://<path>``."""

    def __init__(self, filesystem: Any, scheme: str = "s3") -> None:
        self.filesystem = filesystem
        self.scheme = scheme

    def uri(self, path: str) -> str:
        return f"{self.scheme}://{path}"

    def path_of(self, pointer: str) -> str:
        """The filesystem path of a URI or path of this store (its query, if any, dropped)."""
        parts = urlsplit(pointer)
        if parts.scheme == self.scheme:
            return f"{parts.netloc}{parts.path}".rstrip("/")
        if parts.scheme:
            raise InvalidCheckpointPointerError(f"{pointer!r}: not a {self.scheme}:// pointer of this storage")
        return pointer.strip("/")

    def info(self, path: str) -> ObjectInfo:
        """What is at ``path`` (an ``OSError`` if the store cannot say)."""
        return _info(self.filesystem.get_file_info(path))

    def kind(self, path: str) -> ObjectKind:
        try:
            return self.info(path).kind
        except OSError as e:
            raise storage_error_of(e, self.uri(path), "looking up the object") from None

    def exists(self, path: str) -> bool:
        return self.kind(path) is not ObjectKind.NOT_FOUND

    def is_file(self, path: str) -> bool:
        return self.kind(path) is ObjectKind.FILE

    def put(self, path: str, data: bytes, fault: WriteFault | None = None) -> None:
        """One PUT: the object is visible whole once it returns, and not at all if it fails or an injected fault
        stops it (an unfinished upload leaves no object)."""
        if fault is not None:
            raise CheckpointStorageWriteError(
                f"{self.uri(path)}: injected write failure ({fault.value}); "
                "the upload did not complete, nothing is visible"
            )
        with self.filesystem.open_output_stream(path) as out:
            out.write(data)

    def get(self, path: str, doing: str) -> bytes:
        try:
            with self.filesystem.open_input_stream(path) as stream:
                data: bytes = stream.readall()
                return data
        except OSError as e:
            raise storage_error_of(e, self.uri(path), doing) from None

    def delete_file(self, path: str) -> None:
        self.filesystem.delete_file(path)

    def delete_dir(self, path: str) -> None:
        self.filesystem.delete_dir(path)

    def create_dir(self, path: str) -> None:
        self.filesystem.create_dir(path, recursive=True)

    def list(self, directory: str, recursive: bool = False) -> list[ObjectInfo]:
        """The objects and directories under ``directory`` (none if it is absent; an ``OSError`` if the store
        cannot say)."""
        from pyarrow.fs import FileSelector

        selector = FileSelector(directory, recursive=recursive, allow_not_found=True)
        return [_info(info) for info in self.filesystem.get_file_info(selector)]
