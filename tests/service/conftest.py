"""What a service process holds (fds, threads, memory, read from /proc), and a real `nngpu serve`
process on a socket in a short private folder (a Unix socket path is at most 107 bytes, more
than pytest's tmp_path can promise)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from nngpu.cts.served import read_log
from nngpu.service.wire import IDLE_WORKER_S

START_TIMEOUT_S = 120.0  # a loaded machine imports the driver slowly
ROOT = Path(__file__).resolve().parents[2]


def serve_env(**extra: str) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", "/tmp/xdgcache"),
            **extra}


class Served:
    """`nngpu serve ARGS` running (on numpy unless ARGS name a --device); stderr collected in a file."""

    def __init__(self, socket_path: Path | None, *args: str, env: dict | None = None, wait: bool = True,
                 preexec_fn=None):
        self.path = socket_path
        # read as `nngpu cts --service` reads its service's: with pread, never moving the offset
        # the child writes at (nngpu/cts/served.py)
        self._log = tempfile.TemporaryFile()
        backend = [] if "--device" in args else ["--backend", "numpy"]
        cmd = [sys.executable, "-m", "nngpu", "serve", *backend, *args]
        if socket_path is not None:
            cmd += ["--socket", str(socket_path)]
        self.proc = subprocess.Popen(cmd, stderr=self._log, stdout=subprocess.DEVNULL, env=env or serve_env(),
                                     preexec_fn=preexec_fn)
        if wait:
            self.wait_listening()

    def wait_listening(self) -> None:
        end = time.monotonic() + START_TIMEOUT_S
        while "nngpu serve:" not in self.stderr():
            assert self.proc.poll() is None, f"nngpu serve exited {self.proc.returncode}: {self.stderr()}"
            assert time.monotonic() < end, f"nngpu serve did not start: {self._state()}"
            time.sleep(0.05)

    def _state(self) -> str:
        """What a server that does not come up is doing: its scheduler state, where it waits in
        the kernel, and what it has printed."""
        proc = Path(f"/proc/{self.proc.pid}")
        try:
            state = next(line for line in (proc / "status").read_text().splitlines() if line.startswith("State:"))
            wchan = (proc / "wchan").read_text()
        except (OSError, StopIteration) as e:
            state, wchan = f"unreadable ({e})", ""
        return f"{state}, wchan {wchan or '-'}, stderr: {self.stderr()!r}"

    def stderr(self) -> str:
        return read_log(self._log)

    def exit(self, timeout: float = START_TIMEOUT_S) -> int:
        return self.proc.wait(timeout)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            state = f"{self._state()}; threads: {self._threads()}"   # what it was doing instead of exiting
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"nngpu serve did not exit on {signal.Signals(sig).name}: {state}") from None

    def _threads(self) -> str:
        """Each thread's name, scheduler state and kernel wait channel."""
        out = []
        for task in sorted(Path(f"/proc/{self.proc.pid}/task").glob("*")):
            try:
                comm = (task / "comm").read_text().strip()
                state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
                out.append(f"{comm} {state} {(task / 'wchan').read_text() or '-'}")
            except OSError:
                continue
        return ", ".join(out)


class Process:
    """What a process holds, read from /proc."""

    def __init__(self, pid: int):
        self.pid = pid

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def threads(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/task"))

    def memory(self, key: str = "VmRSS") -> int:
        with open(f"/proc/{self.pid}/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(f"{key}:"))

    def holds(self) -> tuple[int, int]:
        return self.fds(), self.threads()

    def quiet(self, for_s: float = IDLE_WORKER_S + 1, within_s: float = 40.0) -> tuple[int, int]:
        """(fds, threads) once neither has changed for `for_s` (idle workers have retired)."""
        end, last, since = time.monotonic() + within_s, self.holds(), time.monotonic()
        while time.monotonic() - since < for_s and time.monotonic() < end:
            time.sleep(0.1)
            if (now := self.holds()) != last:
                last, since = now, time.monotonic()
        return last

    def settles(self, fds: int, threads: int, within_s: float = 30.0) -> bool:
        """Whether fds and threads come back to at most these within `within_s`."""
        end = time.monotonic() + within_s
        while (now := self.holds())[0] > fds or now[1] > threads:
            if time.monotonic() > end:
                return False
            time.sleep(0.1)
        return True


@pytest.fixture
def short_dir():
    with tempfile.TemporaryDirectory(prefix="nngpu-t", dir="/tmp") as d:
        yield Path(d)


@pytest.fixture
def served(short_dir):
    s = Served(short_dir / "s.sock")
    yield s
    s.stop()


class SessionPair:
    """A service Session on `device` in this process, over a real socketpair, and the client's
    side of it: `link` (what nngpu.connect holds) and `aidl`, the AIDL IDevice over it."""

    def __init__(self, device):
        from nngpu.aidl import AidlDevice
        from nngpu.service.proxy import RemoteDevice, _Link
        from nngpu.service.session import Session

        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.session = Session(device, theirs)
        self.link = _Link(mine)
        self.aidl = AidlDevice(RemoteDevice(self.link))

    def close(self) -> None:
        self.link.close()
