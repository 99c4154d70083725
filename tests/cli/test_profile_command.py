"""`nngpu profile MODEL`: the per-op-type table over the --repeat runs, the prepare phases, the
--trace and --plot outputs, and --plot's missing extra reported before any work."""
from __future__ import annotations

import json
import re
import sys

import pytest

from nngpu.cli import main
from nngpu.cli.common import DEMO_MODEL
from nngpu.named_model import load_model
from nngpu.profiling import REST

from ..test_profiling import needs_opencl, write_small_model


def table(out: str) -> list[list[str]]:
    """The op table's rows (columns split at two or more spaces), without its header and total."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("op type"))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("total "))
    return [re.split(r"\s{2,}", line.strip()) for line in lines[start + 1:end]]


def test_table_has_the_op_types_and_adds_up(capsys):
    assert main(["profile", str(DEMO_MODEL), "--backend", "numpy", "--repeat", "3", "-q"]) == 0
    out = capsys.readouterr().out
    rows = table(out)
    names = {r[0] for r in rows}
    assert names == {op.type.name for op in load_model(DEMO_MODEL).model.operations} | {REST}
    assert all(r[1] == "op" and r[2] == "1" for r in rows if r[0] != REST)
    assert sum(float(r[-1]) for r in rows) == pytest.approx(100.0, abs=0.1 * len(rows))
    assert re.search(r"^prepare [\d.]+ ms$", out, re.M) and re.search(r"^validate\s+1\s+[\d.]+$", out, re.M)
    assert "over 3 runs after the first and 1 warm-up" in out


@needs_opencl
def test_device_table_has_kernels_gemm_host_and_transfers(capsys, tmp_path):
    model = write_small_model(tmp_path / "small.json")
    assert main(["profile", str(model), "--backend", "opencl", "--repeat", "2", "--warmup", "0", "-q"]) == 0
    out = capsys.readouterr().out
    kinds = {(r[0], r[1]) for r in table(out)}
    assert {("CONV_2D", "gemm"), ("CONV_2D", "kernel"), ("EMBEDDING_LOOKUP", "host"), ("ADD", "kernel"),
            ("upload", "transfer"), ("download", "transfer")} <= kinds
    assert re.search(r"^  compile\s+\d+\s+[\d.]+$", out, re.M)  # inside "build executor"
    # kernels and GEMMs carry their time on the device (profiling events), transfers and host steps none
    rows = {(r[0], r[1]): r for r in table(out)}
    assert "device µs" in out and float(rows["ADD", "kernel"][-1]) > 0 and float(rows["CONV_2D", "gemm"][-1]) > 0
    assert len(rows["EMBEDDING_LOOKUP", "host"]) == len(rows["ADD", "kernel"]) - 1


def test_trace_has_every_run(capsys, tmp_path):
    trace = tmp_path / "t.json"
    assert main(["profile", str(DEMO_MODEL), "--backend", "numpy", "--repeat", "2", "--warmup", "2",
                 "--trace", str(trace), "-q"]) == 0
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(e.get("cat") == "execution" for e in events) == 1 + 2 + 2
    assert "trace written to" in capsys.readouterr().out


def test_plot(capsys, tmp_path):
    pytest.importorskip("matplotlib", reason="--plot needs the optional extra 'plot' (matplotlib)")
    svg = tmp_path / "ops.svg"
    assert main(["profile", str(DEMO_MODEL), "--backend", "numpy", "--repeat", "2", "--plot", str(svg), "-q"]) == 0
    assert "<svg" in svg.read_text() and "CONV_2D" in svg.read_text()
    assert f"chart written to {svg}" in capsys.readouterr().out


def test_plot_without_matplotlib_fails_before_the_work(capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert main(["profile", str(DEMO_MODEL), "--backend", "numpy", "--plot", str(tmp_path / "ops.svg")]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == "nngpu profile: --plot needs an optional dependency: pip install 'nngpu[plot]'"
    assert captured.out == "" and not (tmp_path / "ops.svg").exists()


def test_output_paths_checked_first(capsys, tmp_path):
    assert main(["profile", str(DEMO_MODEL), "--backend", "numpy", "--trace", str(tmp_path / "no" / "t.json")]) == 2
    captured = capsys.readouterr()
    assert "does not exist" in captured.err and captured.out == ""
