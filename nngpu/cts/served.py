"""`nngpu cts --service`: a spawned `nngpu serve` on a private socket as the runner's device,
stopped (SIGTERM) when the run ends, however it ends."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from ..service.proxy import RemoteDevice, connect

START_TIMEOUT_S = 120.0  # a loaded machine imports the driver slowly
STOP_TIMEOUT_S = 10.0
_BANNER = "nngpu serve: "  # serve's first line on stderr, once it listens: "nngpu serve: BACKEND on PATH"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class ServiceError(Exception):
    """The service did not start."""


class ServedDevice:
    """The proxy of a running `nngpu serve` and what the runner needs to know about it."""

    def __init__(self, device: RemoteDevice, backend_name: str, proc: subprocess.Popen, path: Path, log: IO[bytes]):
        self.device, self.backend_name, self.proc, self.socket_path, self._log = device, backend_name, proc, path, log

    def gone(self) -> str | None:
        """Why the service can no longer serve (None while it can)."""
        code = self.proc.poll()
        if code is not None:
            tail = read_log(self._log).strip().splitlines()[-1:]
            return f"nngpu serve exited with status {code}" + (f": {tail[0]}" if tail else "")
        if not self.device.alive:
            return "the connection to nngpu serve closed"
        return None


def read_log(log: IO[bytes]) -> str:
    """What the service wrote so far, read with pread: the child writes at the file offset it
    shares with us, which a seek would move under its writes (a banner written over at 0 kept a
    wait for it to its timeout: mode "a+b" on TemporaryFile's descriptor never set O_APPEND)."""
    fd = log.fileno()
    return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")


def _wait_listening(proc: subprocess.Popen, log: IO[bytes], path: Path, timeout: float) -> str:
    """The backend name the service announces once it listens (its errors start "nngpu serve: " too)."""
    end = time.monotonic() + timeout
    while True:
        for line in read_log(log).splitlines():
            if line.startswith(_BANNER) and line.endswith(f" on {path}"):
                return line[len(_BANNER):].split(" ", 1)[0]
        if proc.poll() is not None:
            raise ServiceError(f"nngpu serve exited with status {proc.returncode}: {read_log(log).strip()}")
        if time.monotonic() > end:
            raise ServiceError(f"nngpu serve did not start within {timeout:.0f} s")
        time.sleep(0.05)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def served_device(backend: str, start_timeout: float = START_TIMEOUT_S) -> Iterator[ServedDevice]:
    """`nngpu serve --backend BACKEND` on a socket in a fresh 0700 folder, connected."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (_PACKAGE_ROOT, os.environ.get("PYTHONPATH")) if p)}
    # /tmp, not $TMPDIR: a Unix socket path is at most 107 bytes
    with tempfile.TemporaryDirectory(prefix="nngpu-cts-", dir="/tmp") as folder, tempfile.TemporaryFile() as log:
        path = Path(folder) / "s.sock"
        proc = subprocess.Popen([sys.executable, "-m", "nngpu", "serve", "--backend", backend, "--socket", str(path)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, env=env)
        try:
            name = _wait_listening(proc, log, path, start_timeout)
            try:
                device = connect(str(path))
            except OSError as e:
                raise ServiceError(f"cannot connect to nngpu serve on {path}: {e}") from e
            try:
                yield ServedDevice(device, name, proc, path, log)
            finally:
                device.close()
        finally:
            _stop(proc)
