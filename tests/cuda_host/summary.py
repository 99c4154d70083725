"""The terminal summary of the host CUDA harness: distinct kernels run, matched and skipped
(with the reasons), per test module, added up from the tests' user properties (so it counts
under pytest-xdist too). Called from tests/conftest.py."""
from __future__ import annotations

from collections import Counter, defaultdict

from .run import PROPERTY


def _records(terminalreporter):
    for reports in terminalreporter.stats.values():
        for report in reports:
            for key, value in getattr(report, "user_properties", ()):
                if key == PROPERTY and getattr(report, "when", "call") == "call":
                    yield report.nodeid.split("::")[0], value


def summary_lines(records) -> list[str]:
    by_module: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    reasons: dict[str, Counter] = defaultdict(Counter)
    tests: dict[str, Counter] = defaultdict(Counter)
    for module, value in records:
        by_module[module][value["verdict"]].update(value["kernels"])
        by_module[module]["idle"].update(value.get("idle", ()))
        tests[module][value["verdict"]] += 1
        if value["verdict"] == "skipped":
            reasons[module][value["reason"]] += len(value["kernels"])
    lines = []
    for module in sorted(by_module):
        v = by_module[module]
        run = v["matched"] | v["mismatched"]
        matched = v["matched"] - v["mismatched"]   # a kernel in any mismatching run is not matched
        lines.append(f"{module}: distinct CUDA kernels run {len(run)}, matched {len(matched)}, "
                     f"in mismatching runs {len(v['mismatched'])}, skipped {len(v['skipped'] - run)}, "
                     f"never launched (0 elements, as on CUDA) {len(v['idle'] - run)} "
                     f"(tests: {', '.join(f'{n} {k}' for k, n in sorted(tests[module].items()))})")
        lines += [f"    skipped: {n} x {why}" for why, n in reasons[module].most_common()]
    return lines


def report(terminalreporter) -> None:
    lines = summary_lines(_records(terminalreporter))
    if lines:
        terminalreporter.write_sep("-", "CUDA kernels on the host harness (rendering only, not the CuPy glue)")
        for line in lines:
            terminalreporter.write_line(line)
