"""`nngpu info`: every backend and whether it runs here (with each device it sees, as
`--backend NAME:N` names it), the one `auto` picks, and the capabilities and supported
operations of the chosen backend."""
from __future__ import annotations

from .common import open_device, resolve_backend


def add_parser(sub, common) -> None:
    i = sub.add_parser("info", parents=[common], help="backends, capabilities and supported operations",
                       description=__doc__.split("\n\n")[0])
    i.add_argument("--backend", default="auto", help="whose capabilities to show (default: what auto picks)")
    i.set_defaults(func=run)


def run(args) -> int:
    import os

    from .. import backends
    from ..backends.base import cache_dir
    from ..driver.device import Device
    from ..ops.registry import REGISTRY

    # an unknown name, given or in $NNGPU_BACKEND, is one line before anything is printed
    auto, chosen = resolve_backend("auto"), resolve_backend(args.backend)
    print("backends:")
    for name in backends.names():
        try:
            dev = Device(name)
        except backends.BackendUnavailable as e:
            print(f"  {name:7s} unavailable: {str(e).split(': ', 1)[-1]}")
            continue
        print(f"  {name:7s} {dev.getVersionString()[1]}, type {dev.getType()[1].name}")
        listed = backends.providers()[name].devices
        for k, device in enumerate(listed() if listed else []):   # what --backend NAME:N picks
            print(f"    {name}:{k}  {device}")
    env = os.environ.get("NNGPU_BACKEND")
    print(f"auto picks: {auto}" + (f" (NNGPU_BACKEND={env})" if env else ""))
    dev = open_device(chosen)
    caps = dev.getCapabilities_1_3()[1]
    perf = caps.operandPerformance[0].info
    print(f"capabilities of {dev.backend_name}: execTime {perf.execTime}, powerUsage {perf.powerUsage} "
          f"for {len(caps.operandPerformance)} operand types; IF {caps.ifPerformance.execTime}, "
          f"WHILE {caps.whilePerformance.execTime}; relaxed float32 as float16 "
          f"{caps.relaxedFloat32toFloat16PerformanceTensor.execTime}")
    print(f"kernel cache: {cache_dir(create=False)}")
    print(f"supported operations ({len(REGISTRY)}):")
    names = sorted(t.name for t in REGISTRY)
    for k in range(0, len(names), 4):
        print("  " + "".join(f"{n:32s}" for n in names[k: k + 4]))
    return 0
