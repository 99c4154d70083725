"""What a user at a terminal sees: a progress bar on a tty and none in a log; Ctrl-C stops the
command at once with exit 130. These run `nngpu` as a real child process."""
from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time

import pytest

NNGPU = [sys.executable, "-m", "nngpu"]
# Enough cases that the run outlasts the bar's half-second delay.
CTS = ["cts", "--backend", "numpy", "-k", "conv,add,mul,pool", "--version", "V1_0,V1_1,V1_2", "--path", "sync"]


def _terminal() -> tuple[int, int]:
    """A pseudo-terminal of 120 columns, as a real one has a size: (our end, the child's)."""
    ours, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    return ours, child


def _read_all(fd: int, proc: subprocess.Popen, timeout: float = 120.0) -> bytes:
    data, end = b"", time.monotonic() + timeout
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            data += chunk
        elif proc.poll() is not None:
            break
    return data


def test_progress_bar_on_a_terminal():
    main, child = _terminal()
    proc = subprocess.Popen([*NNGPU, *CTS], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=child)
    os.close(child)
    err = _read_all(main, proc).decode(errors="replace")
    os.close(main)
    assert proc.wait(60) == 0
    assert "cts numpy" in err and "case/s" in err and "<" in err  # tqdm's rate and ETA


def test_no_progress_bar_in_a_log():
    done = subprocess.run([*NNGPU, *CTS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0
    assert done.stderr == ""
    assert "passed" in done.stdout


def test_quiet_turns_the_bar_off_on_a_terminal():
    main, child = _terminal()
    proc = subprocess.Popen([*NNGPU, *CTS, "--quiet"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=child)
    os.close(child)
    err = _read_all(main, proc)
    os.close(main)
    assert proc.wait(60) == 0
    assert err == b""


def test_verbose_shows_the_driver_logs():
    done = subprocess.run([*NNGPU, "run", "--backend", "numpy", "--repeat", "1", "-v"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0
    assert "INFO nngpu." in done.stderr


def _interrupt(proc: subprocess.Popen) -> str:
    """Ctrl-C a running `nngpu`: it must exit 130 within 1.5 s, saying only that. Its stdout."""
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - sent < 1.5
    assert proc.returncode == 130
    assert err.strip().splitlines() == ["nngpu: interrupted"]
    return out


def test_ctrl_c_exits_130_at_once():
    proc = subprocess.Popen([*NNGPU, *CTS[:-2], "--path", "all", "-k", ""], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(3)  # into the sweep
    if proc.poll() is not None:
        pytest.fail(f"the sweep ended before the interrupt: {proc.returncode}")
    _interrupt(proc)


def test_ctrl_c_during_a_cold_compile(tmp_path):
    from nngpu.backends import device_backends
    from nngpu.tflite.models import find_model

    model = find_model("pose_detection")
    if "opencl" not in device_backends() or model is None:
        pytest.skip("needs the OpenCL backend and pose_detection (run ci/fetch-models.sh)")
    # Empty kernel caches, nngpu's and PoCL's: the prepare compiles for many seconds.
    env = {**os.environ, "NNGPU_CACHE_DIR": str(tmp_path / "k"), "XDG_CACHE_HOME": str(tmp_path / "x")}
    proc = subprocess.Popen([*NNGPU, "run", str(model), "--backend", "opencl"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while not list((tmp_path / "x").glob("pocl/**/*")) and time.monotonic() < deadline:
        time.sleep(0.1)  # PoCL writes its cache as it compiles
    assert proc.poll() is None, "the run ended before its compile could be interrupted"
    assert "prepare" not in _interrupt(proc)  # it stopped inside the prepare
