"""Where and how `nngpu serve` listens: a Unix socket only its owner (and the uids it admits) can use.

- The default socket is $XDG_RUNTIME_DIR/nngpu/nngpu.sock, or /tmp/nngpu-UID/nngpu.sock where
  there is no runtime dir. Its folder is created mode 0700; one that exists must be a real folder
  (not a symlink) owned by this uid and closed to group and others, or the server refuses to start
  (someone else could have made it in /tmp to watch or replace the socket). The folder of a
  --socket path is created mode 0700 if missing, and used as it is otherwise.
- The socket file is made mode 0600 (bound under umask 0177).
- A `PATH.lock` file next to it, held with flock for the server's life, keeps two servers from
  deciding at once that a socket is stale. Lock files stay behind: removing one would let a
  third server lock a new file while the second still holds the old one.
- A socket file left by a server that died (connect: ECONNREFUSED) is replaced; a symlink, a file
  that is not a socket, or a socket with a live listener is never touched: ListenError.
- Each accepted peer's uid (SO_PEERCRED, fixed when it connected) must be this process's uid or
  one of the admitted ones.
"""
from __future__ import annotations

import errno
import fcntl
import os
import socket
import stat
import struct
from pathlib import Path

_UCRED = struct.Struct("3i")  # pid, uid, gid


class ListenError(Exception):
    """The server cannot listen on this path; the message is one line for the user."""


def default_socket_path() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return Path(runtime) / "nngpu" / "nngpu.sock"
    return Path("/tmp") / f"nngpu-{os.getuid()}" / "nngpu.sock"


def socket_dir(folder: Path, strict: bool) -> None:
    """Create `folder` mode 0700; one that exists must be a folder, and (strict: the default
    path's) a private folder of ours."""
    try:
        os.mkdir(folder, 0o700)
        return
    except FileExistsError:
        pass
    except OSError as e:
        raise ListenError(f"{folder}: cannot create it: {e.strerror}") from e
    st = os.lstat(folder)
    if not strict and stat.S_ISDIR(os.stat(folder).st_mode):
        return  # a folder the user named: theirs to choose
    if not stat.S_ISDIR(st.st_mode):
        raise ListenError(f"{folder}: exists and is not a folder (a symlink is not followed)")
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise ListenError(f"{folder}: not a private folder of uid {os.getuid()} (owner {st.st_uid}, "
                          f"mode {stat.S_IMODE(st.st_mode):o}; want 0700)")


def _lock(path: Path) -> int:
    try:
        fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise ListenError(f"{path}.lock: cannot open it: {e.strerror}") from e
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ListenError(f"{path}: another nngpu serve is starting or running there") from None
    return fd


def _clear_stale(path: Path) -> None:
    """Remove a dead server's socket file at `path`; ListenError for anything else there."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise ListenError(f"{path}: is a symlink; not following or removing it")
    if not stat.S_ISSOCK(st.st_mode):
        raise ListenError(f"{path}: exists and is not a socket; not removing it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    probe.settimeout(2.0)
    try:
        probe.connect(str(path))
    except ConnectionRefusedError:  # nobody listens: a stale file
        os.unlink(path)
        return
    except OSError as e:
        what = "a socket of another kind" if e.errno == errno.EPROTOTYPE else e.strerror or str(e)
        raise ListenError(f"{path}: in use ({what}); not removing it") from e
    finally:
        probe.close()
    raise ListenError(f"{path}: a server is already listening there")


class Listener:
    """A listening SEQPACKET socket at a path, removed by close() if it is still the one we made."""

    def __init__(self, path: Path, strict_dir: bool, backlog: int = 16):
        self.path = path
        socket_dir(path.parent, strict_dir)
        self._lock_fd = _lock(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            _clear_stale(path)
            old = os.umask(0o177)  # the file is born 0600: no window where others may connect
            try:
                self.sock.bind(str(path))
            finally:
                os.umask(old)
            st = os.lstat(path)
            self._identity = (st.st_dev, st.st_ino)
            self.sock.listen(backlog)
        except OSError as e:
            self._release()
            raise ListenError(f"{path}: cannot listen: {e.strerror}") from e
        except ListenError:
            self._release()
            raise

    def _release(self) -> None:
        self.sock.close()
        os.close(self._lock_fd)

    def close(self) -> None:
        """Stop listening and remove the socket file, unless another server's file replaced it."""
        try:
            st = os.lstat(self.path)
            if (st.st_dev, st.st_ino) == self._identity:
                os.unlink(self.path)
        except FileNotFoundError:
            pass
        self._release()


def peer_uid(conn: socket.socket) -> int:
    """The uid the peer had when it connected (SO_PEERCRED)."""
    _pid, uid, _gid = _UCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    return uid


def admitted(uid: int, allowed: frozenset[int]) -> bool:
    return uid == os.getuid() or uid in allowed
