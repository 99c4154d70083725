"""Random valid graphs (graphgen.graphs) on every device backend against the numpy reference.

Each graph is prepared once per device and executed for its value sets in RUN_ORDER (the later
set may change input shapes and the values shapes are computed from, so the plan specialises
again, then reuses what it compiled), on the path and with the device options (fusion,
specialisation) the graph drew. The numpy device must give exactly the values the generator
traced with the reference kernels; the device backends must match them within each output's
tolerance.

About 100 distinct graphs by default, 2000 with --full-cts: hypothesis repeats itself (a third
of its examples build a graph already seen, which is skipped), so it draws half as many more.
It runs derandomized without shrinking (each shrink step would compile new kernels), so a
failure names its graph, listed operation by operation."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings

from nngpu.backends import device_backends
from nngpu.driver.device import Device

from .graphgen import graphs
from .graphgen_core import RUN_ORDER, Graph
from .model_builder import execute, prepare

DEFAULT_EXAMPLES, FULL_EXAMPLES = 150, 3000     # about 100 and 2000 distinct graphs
_devices: dict[tuple[str, bool, bool], Device] = {}


def _device(backend: str, fusion: bool, specialise: bool) -> Device:
    if (backend, fusion, specialise) not in _devices:
        _devices[backend, fusion, specialise] = Device(backend, fusion=fusion, specialise=specialise)
    return _devices[backend, fusion, specialise]


def _outputs(graph: Graph, backend: str) -> list[list[np.ndarray]]:
    """The outputs of each execution in RUN_ORDER on one prepared model."""
    prepared = prepare(_device(backend, graph.fusion, graph.specialise), graph.model)
    results = []
    for run in RUN_ORDER:
        r = execute(prepared, graph.model, graph.feeds[run], graph.capacities, graph.path)
        assert r.status == 0, f"{backend}, run {run}: {r.status.name}"
        results.append(r.outputs)
    return results


def check_graph(graph: Graph) -> None:
    for backend in ["numpy", *device_backends()]:
        for run, outputs in zip(RUN_ORDER, _outputs(graph, backend)):
            for k, (got, want, (rtol, atol)) in enumerate(zip(outputs, graph.expected[run], graph.tolerances)):
                what = f"{backend}, run {run}, output {k}"
                assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
                if backend == "numpy" or rtol == atol == 0:
                    np.testing.assert_array_equal(got, want, err_msg=what)
                else:
                    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def test_random_graphs(pytestconfig) -> None:
    count = FULL_EXAMPLES if pytestconfig.getoption("--full-cts") else DEFAULT_EXAMPLES
    seen: set[str] = set()

    @settings(max_examples=count, derandomize=True, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(graph=graphs())
    def run(graph: Graph) -> None:
        if graph.fingerprint() not in seen:
            seen.add(graph.fingerprint())
            check_graph(graph)

    run()
