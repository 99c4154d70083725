import subprocess
import sys

import numpy as np
import pytest

from nngpu.memory import MemoryError_, allocate_shared, memory_from_file


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
    assert mem.name == "mmap_fd"
    assert list(mem.array(np.int32, 0, 3)) == [4000, 4001, 4002]


def test_closed_memory_cannot_be_mapped():
    mem = allocate_shared(8)
    mem.close()
    with pytest.raises(MemoryError_):
        mem.map()
