"""`nngpu serve`: host one Device, or one per --device, for other processes (nngpu.connect) on a Unix socket.

The socket is mode 0600, by default $XDG_RUNTIME_DIR/nngpu/nngpu.sock (else
/tmp/nngpu-UID/nngpu.sock) in a folder of mode 0700; only peers of this uid are served unless
--allow-uid admits others. A stale socket file is replaced, a live one refused; SIGTERM and
SIGINT stop the server and remove its socket file."""
from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..service.process import MAX_CLIENTS
from .common import int_in, open_device, resolve_backend
from .errors import CLIError

if TYPE_CHECKING:
    from ..service.device_keeper import ServedDevices

log = logging.getLogger("nngpu.cli")


def add_parser(sub, common) -> None:
    s = sub.add_parser("serve", parents=[common], help="host a device for other processes on a Unix socket",
                       description=__doc__.split("\n\n")[0])
    s.add_argument("--socket", metavar="PATH", help="the socket to listen on (default: "
                   "$XDG_RUNTIME_DIR/nngpu/nngpu.sock, else /tmp/nngpu-UID/nngpu.sock)")
    s.add_argument("--backend", help="the device's backend, for one device (default: auto)")
    s.add_argument("--device", metavar="BACKEND[:N]", action="append", default=[],
                   help="serve a device of this backend (cuda:1, opencl:0: nngpu info lists them), named "
                        "nngpu-BACKEND-N; repeat it to serve several, one IDevice each (nngpu.connect(PATH, "
                        "device=NAME) picks one; the first is the default)")
    s.add_argument("--allow-uid", metavar="UID", type=int_in(0, 2**32 - 2), action="append", default=[],
                   help="also serve peers of this uid (repeatable; default: only this uid)")
    s.add_argument("--max-clients", metavar="N", type=int_in(1, 4096), default=MAX_CLIENTS,
                   help="serve at most N connections at once; more are refused and logged (default: %(default)s)")
    s.set_defaults(func=run)


def _served(specs: list[str]) -> "ServedDevices":
    """A device for each of `specs`, by name, each renewed after a device fault; CLIError for
    one that cannot be opened or one named twice."""
    from ..service.codec import MAX_SERVED
    from ..service.device_keeper import DeviceKeeper, ServedDevices

    if len(specs) > MAX_SERVED:
        raise CLIError(f"--device: at most {MAX_SERVED} devices, not {len(specs)}")
    devices: dict[str, DeviceKeeper] = {}
    for spec in specs:
        backend = resolve_backend(spec)
        name = "nngpu-" + backend.replace(":", "-")
        if name in devices:
            raise CLIError(f"--device {spec}: {backend} is served already")
        first = open_device(backend, name)
        devices[name] = DeviceKeeper(lambda b=backend, n=name: open_device(b, n), first)
    return ServedDevices(devices)


class _Stop(Exception):
    """SIGTERM or SIGINT: leave the accept loop and clean up."""


def _stop(signum, _frame) -> None:
    raise _Stop(signal.Signals(signum).name)


def run(args) -> int:
    from ..service.listen import ListenError, Listener, default_socket_path
    from ..service.process import accept_loop

    path = Path(args.socket) if args.socket else default_socket_path()
    if args.device and args.backend:
        raise CLIError("--backend names one device, --device one or more: give one of them")
    devices = _served(args.device or [args.backend or "auto"])
    # Our handlers before the socket exists, so that no signal can leave the file behind.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _stop)
    allowed = frozenset(args.allow_uid)
    listener = None
    try:
        listener = Listener(path, strict_dir=args.socket is None)
        names = ", ".join(f"{n} ({devices.get(n).backend_name})" for n in devices.names())
        print(f"nngpu serve: {names} on {path}"
              + (f", also for uids {', '.join(map(str, sorted(allowed)))}" if allowed else ""),
              file=sys.stderr, flush=True)
        accept_loop(listener.sock, devices, allowed, args.max_clients)
    except ListenError as e:
        raise CLIError(str(e), 1) from e
    except _Stop as e:
        log.info("stopping on %s", e)
    finally:
        if listener is not None:
            listener.close()
    return 0
