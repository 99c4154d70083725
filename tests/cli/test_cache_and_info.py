"""`nngpu cache info|clear`, `nngpu info`, `nngpu --version`."""
from __future__ import annotations

import pytest

import nngpu
from nngpu.backends import device_backends
from nngpu.backends.base import cache_dir
from nngpu.cli import main
from nngpu.driver.cache_files import KEY_FILE


def test_cache_dir_variable_and_default(monkeypatch, tmp_path):
    monkeypatch.setenv("NNGPU_CACHE_DIR", str(tmp_path / "k"))
    assert cache_dir() == tmp_path / "k" and (tmp_path / "k").is_dir()
    monkeypatch.delenv("NNGPU_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_dir(create=False) == tmp_path / "x" / "nngpu" / "kernels"  # apart from nngpu/models


def test_info_and_clear_touch_only_cache_entries(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("NNGPU_CACHE_DIR", str(tmp_path))
    if device_backends():
        assert main(["run", "--backend", device_backends()[0], "--repeat", "1"]) == 0
    else:
        (tmp_path / "0123.bin").write_bytes(b"x" * 100)
    (tmp_path / ".0123.bin.77.88").write_bytes(b"half written")
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / KEY_FILE).write_bytes(bytes(32))     # the compilation cache's key stays
    entries = len(list(tmp_path.glob("*.bin"))) + 1
    capsys.readouterr()
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path) in out and f"{entries} entries" in out and "$NNGPU_CACHE_DIR" in out
    assert f"compilation cache key: {tmp_path / KEY_FILE};" in out
    assert main(["cache", "clear"]) == 0
    assert f"removed {entries} entries" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([KEY_FILE, "notes.txt"])


def test_info_names_what_auto_picks(capsys):
    from nngpu.backends import resolve

    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"auto picks: {resolve('auto')}" in out
    assert f"capabilities of {resolve('auto')}" in out
    assert "ADD" in out and "WHILE" in out


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"nngpu {nngpu.__version__}"


def test_help_is_written_for_users(capsys):
    from nngpu.cli import DESCRIPTION

    with pytest.raises(SystemExit) as e:
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert e.value.code == 0 and DESCRIPTION in out and "nngpu COMMAND --help" in out
    assert "add_parser" not in out and "CLIError" not in out  # not the package's docstring for developers
    for command in ("run", "profile", "cts", "kernels", "info", "cache", "serve"):
        assert f" {command} " in out
