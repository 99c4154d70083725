"""The compilation cache's files: the handles a client passes, and one sealed record per file.

A record is a fixed header, the payload and a MAC:

    magic "NNGPUCC\\0" | format u32 | kind u32 | token 32 B | identity 32 B | payload length u64
    | payload | HMAC-SHA256 of everything before it

The identity is the SHA-256 of what decides whether a prepared model is valid here (nngpu
version, backend, device, driver, plan options). The MAC is keyed with a secret of this
driver's (one random key per user, kept 0600 beside the kernel cache): a plain digest would
catch corruption, but anyone could compute it for a crafted model cache, and the model cache
holds kernel binaries this driver loads and runs. A file is read once, whole, into memory and
checked there, so a file changed while it is read (the TOCTOU tests) fails the check rather than
being parsed half old, half new. Every mismatch raises CacheFileError: the caller answers
GENERAL_FAILURE."""
from __future__ import annotations

import fcntl
import hashlib
import hmac
import logging
import os
import secrets
import struct
import threading

from ..backends.base import cache_dir
from ..hal.types import Constant, NativeHandle
from ..memory import close_fds

log = logging.getLogger("nngpu.cache")

MAGIC = b"NNGPUCC\0"
FORMAT = 1
MODEL, DATA = 1, 2                      # the record kinds: security-sensitive cache, constants
_HEADER = struct.Struct("<8sII32s32sQ")
_MAC = hashlib.sha256().digest_size
KEY_FILE = "compilation-cache.key"     # not *.bin: `nngpu cache clear` keeps it
_key_lock = threading.Lock()
_keys: dict[str, bytes] = {}            # by key file path: read once a process


class CacheFileError(Exception):
    """A cache file that cannot be used: wrong handle, access mode, identity, token, or content."""


def cache_fds(handles, needed: int, what: str) -> list[int]:
    """The one fd of each of `needed` handles (the spec's vec<handle>, each holding one fd)."""
    handles = list(handles)
    if len(handles) != needed:
        raise CacheFileError(f"{len(handles)} {what} handles given, {needed} needed")
    fds = []
    for k, handle in enumerate(handles):
        if not isinstance(handle, NativeHandle) or len(handle.fds) != 1 or not isinstance(handle.fds[0], int):
            raise CacheFileError(f"{what} handle {k} must hold exactly one file descriptor")
        fds.append(handle.fds[0])
    return fds


def check_token(token) -> bytes:
    token = bytes(token)
    if len(token) != Constant.BYTE_SIZE_OF_CACHE_TOKEN:
        raise CacheFileError(f"a cache token has {Constant.BYTE_SIZE_OF_CACHE_TOKEN} bytes, not {len(token)}")
    return token


def _check_mode(fd: int) -> None:
    """The spec's cache fds are opened read-write; anything else is refused, as VTS expects."""
    try:
        mode = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
    except OSError as e:
        raise CacheFileError(f"fd {fd}: {e.strerror}") from e
    if mode != os.O_RDWR:
        raise CacheFileError(f"fd {fd} is not open for reading and writing")


def dup_fds(fds: list[int]) -> list[int]:
    """Private copies of the client's fds (checked read-write), for a task that outlives the call."""
    out: list[int] = []
    try:
        for fd in fds:
            _check_mode(fd)
            out.append(os.dup(fd))
    except (OSError, CacheFileError):
        close_fds(out)
        raise
    return out


def _key() -> bytes:
    path = cache_dir() / KEY_FILE
    with _key_lock:
        if str(path) in _keys:
            return _keys[str(path)]
        _keys[str(path)] = key = _load_or_create_key(path)
        return key


def _load_or_create_key(path) -> bytes:
    """The key at `path`, else a new one. Written whole to a private file and linked into place,
    so a process racing this one reads either no key or all of it."""
    try:
        if not path.exists():
            tmp = path.with_name(f".{KEY_FILE}.{os.getpid()}.{threading.get_ident()}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass    # another process made it first: use theirs
            finally:
                tmp.unlink()
        key = path.read_bytes()
    except OSError as e:
        raise CacheFileError(f"no cache key at {path}: {e.strerror}") from e
    if len(key) != 32:
        raise CacheFileError(f"{path} is not a cache key")
    return key


def identity_digest(identity: str) -> bytes:
    return hashlib.sha256(identity.encode()).digest()


def _mac(data: bytes) -> bytes:
    return hmac.new(_key(), data, hashlib.sha256).digest()


def write_record(fd: int, kind: int, token: bytes, identity: bytes, payload: bytes) -> None:
    """Replace the file's content with one record (positioned writes: the fd's offset is the
    client's and may be anywhere)."""
    body = _HEADER.pack(MAGIC, FORMAT, kind, token, identity, len(payload)) + payload
    data = body + _mac(body)
    os.ftruncate(fd, 0)
    done = 0
    view = memoryview(data)
    while done < len(data):
        done += os.pwrite(fd, view[done:], done)


def _read_all(fd: int, limit: int) -> bytes:
    chunks, offset = [], 0
    while True:
        chunk = os.pread(fd, min(1 << 24, limit + 1 - offset), offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)
        if offset > limit:
            raise CacheFileError("the file is longer than its record")


def read_record(fd: int, kind: int, token: bytes, identity: bytes, max_bytes: int = 1 << 34) -> bytes:
    """The payload of the file's record, after checking mode, header, length and MAC."""
    _check_mode(fd)
    try:
        head = os.pread(fd, _HEADER.size, 0)
        if len(head) < _HEADER.size:
            raise CacheFileError("the file is shorter than a record header")
        magic, version, got_kind, _, _, length = _HEADER.unpack(head)
        if magic != MAGIC or version != FORMAT or got_kind != kind:
            raise CacheFileError("not an nngpu cache record of this format and kind")
        if length > max_bytes:
            raise CacheFileError(f"a payload of {length} bytes is beyond the limit")
        held = os.fstat(fd).st_size  # a header that declares more than the file holds: refused unread
        if held < _HEADER.size + length + _MAC:
            raise CacheFileError(f"the record declares {_HEADER.size + length + _MAC} bytes, the file holds {held}")
        data = _read_all(fd, _HEADER.size + length + _MAC)
    except OSError as e:
        raise CacheFileError(f"cannot read: {e.strerror}") from e
    if len(data) != _HEADER.size + length + _MAC:
        raise CacheFileError(f"{len(data)} bytes, the record needs {_HEADER.size + length + _MAC}")
    body, mac = data[:-_MAC], data[-_MAC:]
    if not hmac.compare_digest(mac, _mac(body)):
        raise CacheFileError("the record's MAC does not match (corrupted or not written by this driver)")
    # Checked after the MAC, on the bytes it covers (the header read first may be stale).
    _, _, got_kind, got_token, got_identity, _ = _HEADER.unpack(body[:_HEADER.size])
    if got_kind != kind:
        raise CacheFileError("a record of another kind")
    if got_identity != identity:
        raise CacheFileError("saved by another nngpu version, backend, device or driver")
    if not hmac.compare_digest(got_token, token):
        raise CacheFileError("saved under another token")
    return body[_HEADER.size:]
