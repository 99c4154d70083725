"""`nngpu cts --json` writes each record as it is judged (issue 22, part 8): a run stopped part
way, as a time limit stops it, leaves the records of the cases it finished, each a whole line."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "nnapi-cts"


def test_a_run_stopped_part_way_keeps_the_records_it_judged(tmp_path):
    out = tmp_path / "records.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "nngpu", "cts", "-q", "--backend", "numpy", "--json", str(out),
                             str(CORPUS)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists() and out.read_text().count("\n") >= 20:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before it could be stopped part way"
        proc.send_signal(signal.SIGTERM)   # as `timeout` stops a step
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = out.read_text().splitlines()
    records = [json.loads(line) for line in lines if line.endswith("}")]
    assert len(records) >= 20 and len(lines) - len(records) <= 1   # at most the line being written
    assert all(r["result"] in ("passed", "skipped") for r in records)
