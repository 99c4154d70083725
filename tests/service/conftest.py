"""A real `nngpu serve` process on a socket in a short private folder (a Unix socket path is at
most 107 bytes, more than pytest's tmp_path can promise)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

START_TIMEOUT_S = 120.0  # a loaded machine imports the driver slowly
ROOT = Path(__file__).resolve().parents[2]


def serve_env(**extra: str) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", "/tmp/xdgcache"),
            **extra}


class Served:
    """`nngpu serve ARGS` running; stderr collected in a file."""

    def __init__(self, socket_path: Path | None, *args: str, env: dict | None = None, wait: bool = True,
                 preexec_fn=None):
        self.path = socket_path
        self._log = tempfile.TemporaryFile()
        cmd = [sys.executable, "-m", "nngpu", "serve", "--backend", "numpy", *args]
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
            assert time.monotonic() < end, "nngpu serve did not start"
            time.sleep(0.05)

    def stderr(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def exit(self, timeout: float = START_TIMEOUT_S) -> int:
        return self.proc.wait(timeout)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise


@pytest.fixture
def short_dir():
    with tempfile.TemporaryDirectory(prefix="nngpu-t", dir="/tmp") as d:
        yield Path(d)


@pytest.fixture
def served(short_dir):
    s = Served(short_dir / "s.sock")
    yield s
    s.stop()
