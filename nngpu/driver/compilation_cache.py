"""Compilation caching (IDevice 1.2 / 1.3): save a prepared model into the client's cache files,
and restore it from them without compiling a kernel.

One model cache file (security-sensitive: the plan's kernel binaries and the model's structure)
and one data cache file (the constants). Restoring decodes the model, validates it again and
rebuilds the plan, whose kernels then load from the saved binaries: the compile, which is
nearly all of a device prepare, is skipped (bench/test_bench_cache.py). The records themselves
are described in cache_files.py."""
from __future__ import annotations

from dataclasses import dataclass

from ..hal.types import Model_1_3
from .cache_codec import CacheFormatError, decode, encode
from ..memory import close_fds
from .cache_files import DATA, MODEL, CacheFileError, cache_fds, check_token, dup_fds, read_record, write_record

NUM_MODEL_CACHE = 1
NUM_DATA_CACHE = 1


class CacheArgumentError(CacheFileError):
    """Cache arguments the spec calls invalid: handle counts, fds per handle, token length."""


def _fds(model_cache, data_cache, token) -> tuple[list[int], bytes]:
    try:
        return cache_fds(model_cache, NUM_MODEL_CACHE, "model cache") + cache_fds(data_cache, NUM_DATA_CACHE,
                                                                                   "data cache"), check_token(token)
    except (CacheFileError, TypeError) as e:
        raise CacheArgumentError(str(e)) from e


@dataclass
class SaveTarget:
    """Where prepareModel saves: private dups of the client's two fds, and the token."""

    model_fd: int
    data_fd: int
    token: bytes

    def save(self, identity: bytes, model: Model_1_3, version: int, binaries: dict[str, bytes]) -> None:
        model_payload, data_payload = encode(model, version, binaries)
        write_record(self.data_fd, DATA, self.token, identity, data_payload)
        write_record(self.model_fd, MODEL, self.token, identity, model_payload)

    def close(self) -> None:
        close_fds([self.model_fd, self.data_fd])


def save_target(model_cache, data_cache, token) -> SaveTarget | None:
    """None when the client asked for no caching (both vectors empty: the token is ignored);
    CacheFileError when it asked in a way the driver cannot honour."""
    if not list(model_cache or []) and not list(data_cache or []):
        return None
    fds, token = _fds(model_cache, data_cache, token)
    model_fd, data_fd = dup_fds(fds)
    return SaveTarget(model_fd, data_fd, token)


def load(model_cache, data_cache, token, identity: bytes) -> tuple[Model_1_3, int, dict[str, bytes]]:
    """(model, HAL version, kernel binaries) of the saved prepared model; CacheArgumentError or
    CacheFileError when the files cannot be used."""
    (model_fd, data_fd), token = _fds(model_cache, data_cache, token)
    model_payload = read_record(model_fd, MODEL, token, identity)
    data_payload = read_record(data_fd, DATA, token, identity)
    try:
        return decode(model_payload, data_payload)
    except CacheFormatError as e:
        raise CacheFileError(str(e)) from e
