"""calculator.add from Python, side by side in one run: toolhost (arguments
and result validated) against Extism's Python SDK calling the same plugin
raw, against the Rust library's own call in the same process, beside a
do-nothing floor (a Python call into the native module that does nothing);
and through LangChain's own `tool.invoke`, beside a LangChain tool that does
nothing. Rounds alternate the lines, so a busy machine slows them alike;
each line's figure is its median round. Then calls from 1 and 2 threads, of
`add` and of a longer call (`word_count` of 2,000 words).

    python host/python/bench/bench.py target/plugins [--calls N] [--rounds R]

Build the package optimised first (pip's `--config-settings` hands maturin
the profile): the dev profile's numbers say nothing about speed.
"""

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import threading
import time

import toolhost

try:
    from langchain_core.tools import StructuredTool

    from toolhost import langchain as toolhost_langchain
except ImportError:
    toolhost_langchain = None

ARGUMENTS = {"a": 2, "b": 3}


def per_call(function, calls):
    start = time.perf_counter()
    function(calls)
    return (time.perf_counter() - start) / calls


def lines(plugins):
    path = os.path.join(plugins, "calculator.wasm")
    plugin = toolhost.Plugin.load(path, timeout=10)
    registry = toolhost.Registry()
    config = {"schema": "toolsets", "toolsets": [{"id": "calc", "kind": "uri", "server": {"url": path}}]}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as out:
        json.dump(config, out)
    registry.load(out.name)
    os.unlink(out.name)
    assert plugin.call_sync("add", ARGUMENTS).text == "5"

    def floor(n):
        for _ in range(n):
            plugin.name

    def rust(n):
        plugin._rust_call_loop("add", ARGUMENTS, n)

    def python_sync(n):
        for _ in range(n):
            plugin.call_sync("add", ARGUMENTS)

    def registry_sync(n):
        for _ in range(n):
            registry.call_sync("calc__add", ARGUMENTS)

    def python_async(n):
        async def main():
            for _ in range(n):
                await plugin.call("add", ARGUMENTS)

        asyncio.run(main())

    found = [
        ("do-nothing floor (Python → native, no work)", floor),
        ("Rust library, Plugin::call_tool (validated)", rust),
        ("toolhost from Python, Plugin.call_sync (validated)", python_sync),
        ("toolhost from Python, Registry.call_sync (validated)", registry_sync),
        ("toolhost from Python, await Plugin.call (validated)", python_async),
    ]
    try:
        import extism
    except ImportError:
        print("note: `extism` is not installed (pip install extism==1.1.1): its line is left out")
    else:
        raw = extism.Plugin(open(path, "rb").read(), wasi=True)
        request = json.dumps({"method": "tools/call", "params": {"name": "add", "arguments": ARGUMENTS}})
        assert json.loads(raw.call("call", request))["content"][0]["text"] == "5"

        def extism_raw(n):
            for _ in range(n):
                json.loads(raw.call("call", json.dumps({"method": "tools/call", "params": {"name": "add", "arguments": ARGUMENTS}})))

        found.append(("Extism's Python SDK, raw (no validation)", extism_raw))
    if toolhost_langchain is None:
        print("note: `langchain-core` is not installed (pip install langchain-core==1.8.3): its lines are left out")
    else:
        [adapted] = toolhost_langchain.tools(registry, names=["calc__add"])

        def nothing(a: float, b: float) -> str:
            return "5"

        floor_tool = StructuredTool.from_function(nothing, name="nothing", description="Does nothing.")

        def langchain_floor(n):
            for _ in range(n):
                floor_tool.invoke(ARGUMENTS)

        def langchain_toolhost(n):
            for _ in range(n):
                adapted.invoke(ARGUMENTS)

        found.append(("LangChain tool.invoke, a Python function doing nothing (floor)", langchain_floor))
        found.append(("LangChain tool.invoke, toolhost's calculator.add (validated)", langchain_toolhost))
    return plugin, found


def threads(plugin, tool, arguments, count, calls):
    def work():
        for _ in range(calls):
            plugin.call_sync(tool, arguments)

    workers = [threading.Thread(target=work) for _ in range(count)]
    start = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return count * calls / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("plugins", help="the example plugins' directory (target/plugins)")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    plugin, found = lines(options.plugins)
    for _, function in found:
        function(min(options.calls, 2000))
    rounds = {name: [] for name, _ in found}
    for _ in range(options.rounds):
        for name, function in found:
            rounds[name].append(per_call(function, options.calls))
    rust = statistics.median(rounds[found[1][0]])
    print(f"| what ({options.calls} calls × {options.rounds} rounds, median) | µs per call | vs the Rust call |")
    print("| --- | ---: | ---: |")
    for name, times in rounds.items():
        median = statistics.median(times)
        print(f"| {name} | {median * 1e6:.2f} | {(median - rust) * 1e6:+.2f} µs |")
    text = toolhost.Plugin.load(os.path.join(options.plugins, "text.wasm"), timeout=10)
    calls = [
        ("calculator.add", plugin, "add", ARGUMENTS, options.calls),
        ("text.word_count, 2,000 words", text, "word_count", {"text": "word " * 2000}, options.calls // 10),
    ]
    print()
    print("| Plugin.call_sync from | 1 thread, calls/s | 2 threads, calls/s | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for name, target, tool, arguments, count in calls:
        one, two = [], []
        for _ in range(options.rounds):
            one.append(threads(target, tool, arguments, 1, count))
            two.append(threads(target, tool, arguments, 2, count // 2))
        ratio = statistics.median(two) / statistics.median(one)
        print(f"| {name} | {statistics.median(one):,.0f} | {statistics.median(two):,.0f} | {ratio:.2f}× |")


if __name__ == "__main__":
    main()
