"""Where `nngpu serve` listens (nngpu.service.listen): the default path, the private folder rules,
and a Listener that removes only its own socket file."""
import os
import socket
import stat

import pytest

from nngpu.service.listen import ListenError, Listener, default_socket_path, socket_dir


def test_the_default_path(monkeypatch, short_dir):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(short_dir))
    assert default_socket_path() == short_dir / "nngpu" / "nngpu.sock"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert str(default_socket_path()) == f"/tmp/nngpu-{os.getuid()}/nngpu.sock"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(short_dir / "missing"))
    assert str(default_socket_path()).startswith("/tmp/")


def test_a_strict_folder_must_be_a_private_folder_of_ours(short_dir):
    made = short_dir / "made"
    socket_dir(made, strict=True)
    assert stat.S_IMODE(os.lstat(made).st_mode) == 0o700
    socket_dir(made, strict=True)  # ours already: fine
    (short_dir / "link").symlink_to(made)
    with pytest.raises(ListenError, match="not a folder"):
        socket_dir(short_dir / "link", strict=True)
    os.chmod(made, 0o750)
    with pytest.raises(ListenError, match="not a private folder"):
        socket_dir(made, strict=True)
    socket_dir(made, strict=False)  # a folder the user named is theirs to choose
    if os.getuid() == 0:
        os.chmod(made, 0o700)
        os.chown(made, 65534, 65534)
        with pytest.raises(ListenError, match="owner 65534"):
            socket_dir(made, strict=True)


def test_a_listener_removes_only_its_own_file(short_dir):
    path = short_dir / "s.sock"
    first = Listener(path, strict_dir=False)
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    first.close()
    assert not path.exists()
    second = Listener(path, strict_dir=False)
    os.unlink(path)  # replaced behind its back by someone else's socket
    other = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    other.bind(str(path))
    second.close()
    assert stat.S_ISSOCK(os.lstat(path).st_mode)  # not ours: left alone
    other.close()
