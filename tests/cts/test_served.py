"""`nngpu cts --service`: corpus cases through a spawned `nngpu serve` on every path judge as they
do in process; the service is stopped at the end however the run ends, and a service that dies
fails the cases left with the reason instead of hanging."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from nngpu.cts import runner
from nngpu.cts.served import read_log, served_device
from nngpu.json_models import load_file

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "nnapi-cts"
# static and zero-sized outputs, float and quantized, 1.0 to 1.3 (a WHILE loop's subgraphs): 7 cases
CASES = ",".join(["add_v1_2_zero_sized", "add_quant8_signed_2", "avg_pool_float_2_all_inputs_as_internal",
                  "while_fib_1_all_tensors_as_inputs_all_inputs_as_internal"])


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", "/tmp/xdgcache")}


def _cts(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    out = tmp_path / "records.jsonl"
    done = subprocess.run([sys.executable, "-m", "nngpu", "cts", "-q", "--backend", "numpy", "--path", "all",
                           "-k", CASES, "--json", str(out), str(CORPUS), *args],
                          capture_output=True, text=True, timeout=300, env=_env())
    return done, [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


def test_cases_through_the_service_judge_as_in_process_on_every_path(tmp_path):
    served, remote = _cts(tmp_path, "--service")
    assert served.returncode == 0, served.stdout + served.stderr
    local = _cts(tmp_path)[1]
    key = lambda r: (r["version"], r["name"], r["path"])  # noqa: E731
    assert len(remote) == 7 * len(runner.PATHS)
    assert {r["path"] for r in remote} == set(runner.PATHS)
    assert sorted((key(r), r["result"], r["detail"]) for r in remote) == \
        sorted((key(r), r["result"], r["detail"]) for r in local)
    assert all(r["result"] == "passed" or (r["path"] == "fenced" and r["result"] == "skipped") for r in remote)


def _a_case():
    return next(c for c in load_file(CORPUS / "V1_2" / "add_v1_2.json.gz") if c.name == "add_v1_2")


def test_a_dead_service_fails_the_case_with_why_not_a_hang():
    with served_device("numpy") as served:
        assert served.gone() is None
        served.proc.send_signal(signal.SIGKILL)
        served.proc.wait(30)
        assert "nngpu serve exited with status -9" in served.gone()
        t0 = time.monotonic()
        records = runner.run_case(served.device, served.backend_name, _a_case(), runner.PATHS)
        assert time.monotonic() - t0 < 30
    assert [r.result for r in records] == ["failed"] * len(runner.PATHS)
    assert "DEVICE_UNAVAILABLE" in records[0].detail


def test_the_service_is_stopped_and_its_folder_removed_even_on_an_interrupt():
    with pytest.raises(KeyboardInterrupt):
        with served_device("numpy") as served:
            proc, folder = served.proc, served.socket_path.parent
            assert folder.stat().st_mode & 0o777 == 0o700
            raise KeyboardInterrupt
    assert proc.returncode == 0  # it stopped on the SIGTERM, cleanly
    assert not folder.exists()


def test_a_service_that_cannot_start_is_a_one_line_error(tmp_path):
    done, _ = _cts(tmp_path, "--service", "--backend", "nosuchbackend")
    assert done.returncode != 0
    assert "nngpu serve exited" in done.stderr and "Traceback" not in done.stderr


def test_the_cts_command_fails_the_cases_left_when_the_service_dies(monkeypatch, capsys):
    from nngpu.cli import main
    from nngpu.cts import served as served_module

    real_served, real_run_case, spawned = served_module.served_device, runner.run_case, []

    def keep(backend):
        with real_served(backend) as served:
            spawned.append(served)
            yield served

    def first_then_kill(*args, **kwargs):  # the real service, killed once the first case has run
        records = real_run_case(*args, **kwargs)
        spawned[0].proc.kill()
        spawned[0].proc.wait(30)
        return records

    monkeypatch.setattr(served_module, "served_device", contextlib.contextmanager(keep))
    monkeypatch.setattr(runner, "run_case", first_then_kill)
    assert main(["cts", "-q", "--service", "--backend", "numpy", "--path", "sync", "-k", CASES, str(CORPUS)]) == 1
    out = capsys.readouterr().out
    assert "1 passed, 6 failed, 0 skipped" in out
    assert out.count("nngpu serve exited with status -9") == 6


def _service_argv(pid: int, proc: subprocess.Popen, deadline: float) -> tuple[int, list[str]]:
    """The runner's `nngpu serve` child and its argv, once it has exec'd (a child seen between fork and
    exec still shows the runner's own command line, and other short-lived children may come and go)."""
    while True:
        assert proc.poll() is None and time.monotonic() < deadline
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            try:
                argv = Path(f"/proc/{child}/cmdline").read_bytes().decode().split("\0")
            except FileNotFoundError:  # gone already
                continue
            if "serve" in argv and "--socket" in argv:
                return int(child), argv
        time.sleep(0.05)


def test_ctrl_c_stops_the_service():
    # the whole corpus: still running when the interrupt comes
    proc = subprocess.Popen([sys.executable, "-m", "nngpu", "cts", "-q", "--service", "--backend", "numpy",
                             "--path", "all", str(CORPUS)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=_env(), start_new_session=True)  # the interrupt reaches the runner alone
    service, argv = _service_argv(proc.pid, proc, time.monotonic() + 120)
    socket_folder = Path(argv[argv.index("--socket") + 1]).parent
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) != 0, proc.stderr.read()
    assert not Path(f"/proc/{service}").exists()  # stopped and reaped
    assert not socket_folder.exists()


def test_reading_the_service_log_leaves_the_offset_the_service_writes_at():
    """The service writes its stderr at the file offset it shares with the reader: a read that
    moved it (a seek to 0, then reading) let the banner be written over at 0, and the wait for it
    ran to its timeout."""
    with tempfile.TemporaryFile() as log:
        os.write(log.fileno(), b"nngpu serve: numpy on /tmp/s.sock\n")
        os.lseek(log.fileno(), 5, os.SEEK_SET)   # where the writer stands, mid-write
        assert read_log(log) == "nngpu serve: numpy on /tmp/s.sock\n"
        assert os.lseek(log.fileno(), 0, os.SEEK_CUR) == 5
