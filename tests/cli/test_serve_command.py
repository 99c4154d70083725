"""`nngpu serve`'s security and lifecycle, on real processes: the socket 0600 in a 0700 folder,
peers of another uid refused unless --allow-uid admits them (SO_PEERCRED, tested with a client
process running as another uid), a stale socket replaced, a live one, a symlink or a plain file
never touched, the socket removed on SIGTERM and SIGINT, and each failure one line."""
import os
import signal
import socket
import stat
import subprocess
import sys

import pytest

import nngpu
from nngpu.driver.callbacks import PreparedModelCallback
from nngpu.hal.types import ErrorStatus
from nngpu.service.listen import admitted, peer_uid
from tests.driver.conftest import add_model
from tests.service.conftest import ROOT, Served, serve_env, served, short_dir  # noqa: F401 (fixtures)

OTHER_UID = 65534  # nobody


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _refused(s: Served, fragment: str) -> None:
    """The server exited 1 with one line saying `fragment`."""
    assert s.exit() == 1
    err = s.stderr().strip()
    assert len(err.splitlines()) == 1 and err.startswith("nngpu serve: ") and fragment in err, err


def _serves(path) -> bool:
    with nngpu.connect(path) as device:
        return device.getVersionString()[0] == ErrorStatus.NONE


def test_default_socket_is_0600_in_a_0700_folder(short_dir):
    runtime = short_dir / "run"
    runtime.mkdir(mode=0o755)
    s = Served(None, env=serve_env(XDG_RUNTIME_DIR=str(runtime)))
    try:
        path = runtime / "nngpu" / "nngpu.sock"
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
        assert (_mode(path.parent), _mode(path)) == (0o700, 0o600)
        assert str(path) in s.stderr()
        assert _serves(path)
    finally:
        assert s.stop() == 0
    assert not path.exists()


def test_a_default_folder_open_to_others_is_refused(short_dir):
    runtime = short_dir / "run"
    (runtime / "nngpu").mkdir(parents=True)
    os.chmod(runtime / "nngpu", 0o755)
    _refused(Served(None, env=serve_env(XDG_RUNTIME_DIR=str(runtime)), wait=False), "not a private folder")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_removes_the_socket(short_dir, sig):
    """Also with a client connected and a model prepared: they do not hold the server up."""
    s = Served(short_dir / "s.sock")
    with nngpu.connect(s.path) as device:
        cb = PreparedModelCallback()
        assert device.prepareModel(add_model(), cb) == ErrorStatus.NONE and cb.get(60)[0] == ErrorStatus.NONE
        assert s.stop(sig) == 0
        assert not s.path.exists()
        assert device.getCapabilities()[0] == ErrorStatus.DEVICE_UNAVAILABLE


def test_a_stale_socket_is_replaced(short_dir):
    path = short_dir / "s.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    dead.bind(str(path))
    dead.close()  # the file stays, nobody listens
    s = Served(path)
    try:
        assert _serves(path) and _mode(path) == 0o600
    finally:
        s.stop()


def test_a_live_server_is_never_replaced(served):
    second = Served(served.path, wait=False)
    _refused(second, "another nngpu serve")
    assert _serves(served.path)


def test_a_live_listener_of_another_program_is_never_replaced(short_dir):
    path = short_dir / "s.sock"
    other = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    other.bind(str(path))
    other.listen(1)
    try:
        _refused(Served(path, wait=False), "a server is already listening there")
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
    finally:
        other.close()


def test_a_symlink_or_a_file_is_never_touched(short_dir):
    target = short_dir / "target"
    target.write_text("keep")
    link = short_dir / "link.sock"
    link.symlink_to(target)
    _refused(Served(link, wait=False), "is a symlink")
    _refused(Served(target, wait=False), "is not a socket")
    assert os.path.islink(link) and target.read_text() == "keep"


def test_bad_arguments_are_one_line(short_dir):
    for args, code in ((["--allow-uid", "x"], 2), (["--allow-uid", "-1"], 2), (["--max-clients", "0"], 2),
                       (["--max-clients", "5000"], 2), (["--backend", "nope"], 2),
                       (["--socket", str(short_dir / "none" / "deeper" / "s.sock")], 1)):
        r = subprocess.run([sys.executable, "-m", "nngpu", "serve", *args], capture_output=True, text=True,
                           env=serve_env(), timeout=120)
        assert r.returncode == code and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)


_CLIENT = """
import os, sys, nngpu, nngpu.service.proxy
uid = int(sys.argv[2])  # dropped after the imports: this uid cannot read root's interpreter
os.setgroups([]); os.setgid(uid); os.setuid(uid)
try:
    with nngpu.connect(sys.argv[1]) as d:
        print("served", int(d.getVersionString()[0]))
except ConnectionRefusedError:
    print("refused")
"""


def _client_as(uid: int, path) -> str:
    r = subprocess.run([sys.executable, "-c", _CLIENT, str(path), str(uid)], capture_output=True, text=True,
                       env=serve_env(), cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.mark.skipif(os.getuid() != 0, reason="starting a client as another uid needs root")
@pytest.mark.parametrize("allow", [False, True])
def test_a_peer_of_another_uid_is_refused_unless_admitted(short_dir, allow):
    """The socket loosened by hand (0666 in a 0711 folder) so that the other uid can connect at
    all: SO_PEERCRED still refuses it, unless --allow-uid admits it."""
    path = short_dir / "s.sock"
    s = Served(path, *(["--allow-uid", str(OTHER_UID)] if allow else []))
    try:
        os.chmod(short_dir, 0o711)
        os.chmod(path, 0o666)
        assert _client_as(OTHER_UID, path) == ("served 0" if allow else "refused")
        assert (f"refused a connection from uid {OTHER_UID}" in s.stderr()) != allow
        assert _serves(path)  # this uid is served either way
    finally:
        s.stop()


def test_peer_uid_is_the_connecting_process_uid():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with a, b:
        assert peer_uid(a) == os.getuid()
    assert admitted(os.getuid(), frozenset()) and not admitted(os.getuid() + 1, frozenset())
    assert admitted(os.getuid() + 1, frozenset([os.getuid() + 1]))
