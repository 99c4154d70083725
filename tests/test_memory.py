import fcntl
import os
import subprocess
import sys

import numpy as np
import pytest

from nngpu.memory import MemoryError_, allocate_shared, memory_from_fd, memory_from_file


def test_shared_pool_is_zeroed_writable_and_bounds_checked():
    mem = allocate_shared(64)
    assert mem.name == "ashmem" and mem.size == 64
    assert bytes(mem.map()) == bytes(64)
    mem.view(8, 4)[:] = b"abcd"
    assert bytes(mem.view(8, 4)) == b"abcd"
    with pytest.raises(MemoryError_):
        mem.view(60, 8)
    with pytest.raises(MemoryError_):
        mem.view(-1, 2)


def test_another_process_sees_the_same_pages():
    mem = allocate_shared(16)
    mem.array(np.float32)[:] = np.arange(4, dtype=np.float32)
    code = (
        "import mmap, os, sys, numpy as np;"
        "fd = int(sys.argv[1]); m = mmap.mmap(fd, 16);"
        "a = np.frombuffer(m, dtype=np.float32); print(a.sum()); a[0] = 42"
    )
    out = subprocess.run([sys.executable, "-c", code, str(mem.fd)], pass_fds=[mem.fd],
                         capture_output=True, text=True, check=True)
    assert float(out.stdout) == 6.0
    assert mem.array(np.float32)[0] == 42.0


def test_mmap_fd_memory_with_offset(tmp_path):
    path = tmp_path / "weights.bin"
    data = np.arange(5000, dtype=np.int32)
    path.write_bytes(data.tobytes())
    mem = memory_from_file(str(path), size=400, offset=4000 * 4)
    assert mem.name == "mmap_fd" and not mem.mapped  # a file can be truncated by anyone: pread only
    assert list(mem.read(0, 12).view(np.int32)) == [4000, 4001, 4002]
    mem.write(4, np.int32(-7).tobytes())
    assert np.frombuffer(path.read_bytes(), np.int32)[4001] == -7
    with pytest.raises(MemoryError_):
        mem.view(0, 4)  # never mapped


def test_closed_memory_cannot_be_mapped():
    mem = allocate_shared(8)
    mem.close()
    with pytest.raises(MemoryError_):
        mem.map()


def test_pools_nngpu_makes_are_sealed_against_resizing():
    mem = allocate_shared(4096)
    seals = fcntl.fcntl(mem.fd, fcntl.F_GET_SEALS)
    assert seals & fcntl.F_SEAL_SHRINK and seals & fcntl.F_SEAL_GROW
    with pytest.raises(PermissionError):
        os.ftruncate(mem.fd, 0)
    with pytest.raises(PermissionError):
        os.ftruncate(mem.fd, 8192)
    assert mem.mapped and len(mem.map()) == 4096


def _unsealed(data: bytes) -> int:
    fd = os.memfd_create("client-pool", os.MFD_CLOEXEC)
    os.write(fd, data)
    return fd


def test_an_unsealed_pool_is_read_and_written_without_a_mapping():
    mem = memory_from_fd("ashmem", 16, _unsealed(bytes(range(16))))
    assert not mem.mapped
    with pytest.raises(MemoryError_):
        mem.map()
    assert bytes(mem.read(4, 4)) == bytes([4, 5, 6, 7])
    mem.write(0, b"\xff\xfe")
    assert bytes(mem.read(0, 3)) == b"\xff\xfe\x02"
    with pytest.raises(MemoryError_):
        mem.read(12, 8)  # still bounds-checked against the declared size


def test_a_shrunk_unsealed_pool_is_an_error_not_a_fault():
    mem = memory_from_fd("ashmem", 4096, _unsealed(bytes(4096)))
    assert mem.read(4000, 96).sum() == 0
    os.ftruncate(mem.fd, 100)  # what a hostile client does to the fd it shares
    with pytest.raises(MemoryError_, match="shrank"):
        mem.read(4000, 96)
    with pytest.raises(MemoryError_, match="shrank"):
        mem.write(4000, bytes(96))
    assert os.fstat(mem.fd).st_size == 100  # the write did not grow it back
    assert len(mem.read(0, 100)) == 100  # what is left still reads


def test_a_sealed_pool_smaller_than_declared_is_not_mapped():
    fd = os.memfd_create("liar", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, 64)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    mem = memory_from_fd("ashmem", 8192, fd)
    assert not mem.mapped  # mapping 8192 bytes of a 64-byte file would fault past its end
    with pytest.raises(MemoryError_):
        mem.read(4096, 16)
    assert memory_from_fd("ashmem", 64, os.dup(fd)).mapped
