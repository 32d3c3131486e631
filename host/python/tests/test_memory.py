"""No leak over 100,000 calls from Python: the process's resident memory
after them is what it was after a warm-up, within a margin far below what
a leak of even a hundred bytes a call would add."""

import asyncio
import os

import toolhost

PLUGINS = os.environ["TOOLHOST_PLUGINS"]
FIXTURES = os.environ["TOOLHOST_FIXTURES"]

# 100,000 calls leaking 100 bytes each would add 10 MB.
MARGIN = 4 << 20


def resident_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_hundred_thousand_calls_leave_memory_flat():
    registry = toolhost.Registry()
    registry.load(os.path.join(os.path.dirname(__file__), "..", "..", "..", "example-plugins", "toolsets.yaml"))

    def calls(count):
        for i in range(count):
            result = registry.call_sync("calc__add", {"a": i, "b": 1})
            assert result.structured_content["result"] == i + 1
            result.content
            result.text

    calls(20_000)
    before = resident_bytes()
    calls(100_000)
    grown = resident_bytes() - before
    assert grown < MARGIN, f"resident memory grew {grown} bytes over 100,000 calls"


def test_failing_awaited_and_python_tool_calls_leave_memory_flat():
    hostile = toolhost.Plugin.load(os.path.join(FIXTURES, "hostile.wasm"), timeout=5)
    registry = toolhost.Registry()

    def double(n: int) -> int:
        return n * 2

    registry.add_tools("py", [double])

    async def rounds(count):
        for i in range(count):
            try:
                hostile.call_sync("ok", {"unexpected": "x" * 64})
                await hostile.call("error")
            except toolhost.PluginFaultError as fault:
                assert fault.outcome
            assert (await registry.call("py__double", {"n": i})).text == str(2 * i)

    asyncio.run(rounds(2_000))
    before = resident_bytes()
    asyncio.run(rounds(10_000))
    grown = resident_bytes() - before
    assert grown < MARGIN, f"resident memory grew {grown} bytes over 30,000 calls"
