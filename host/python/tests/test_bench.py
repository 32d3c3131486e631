"""The benchmark runs, every line of it (a few calls: its figures are
measured optimised, on the performance page, not here)."""

import os
import subprocess
import sys

PLUGINS = os.environ["TOOLHOST_PLUGINS"]
BENCH = os.path.join(os.path.dirname(__file__), "..", "bench", "bench.py")


def test_the_benchmark_prints_every_line():
    run = subprocess.run(
        [sys.executable, BENCH, PLUGINS, "--calls", "50", "--rounds", "1"], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr
    rows = [line.split(" | ")[0].lstrip("| ") for line in run.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows == [
        "what (50 calls × 1 rounds, median)",
        "do-nothing floor (Python → native, no work)",
        "Rust library, Plugin::call_tool (validated)",
        "toolhost from Python, Plugin.call_sync (validated)",
        "toolhost from Python, Registry.call_sync (validated)",
        "toolhost from Python, await Plugin.call (validated)",
        "Extism's Python SDK, raw (no validation)",
        "LangChain tool.invoke, a Python function doing nothing (floor)",
        "LangChain tool.invoke, toolhost's calculator.add (validated)",
        "Plugin.call_sync from",
        "calculator.add",
        "text.word_count, 2,000 words",
    ], run.stdout
