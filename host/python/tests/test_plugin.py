"""The Python package against real plugins built from this repository:
`TOOLHOST_PLUGINS` (the example plugins) and `TOOLHOST_FIXTURES` (the test
fixtures, the hostile one among them) name their directories."""

import asyncio
import os
import subprocess
import sys
import threading
import time

import pytest

import toolhost

PLUGINS = os.environ["TOOLHOST_PLUGINS"]
FIXTURES = os.environ["TOOLHOST_FIXTURES"]


@pytest.fixture(scope="module")
def calculator():
    return toolhost.Plugin.load(os.path.join(PLUGINS, "calculator.wasm"), timeout=10)


@pytest.fixture(scope="module")
def hostile():
    return toolhost.Plugin.load(os.path.join(FIXTURES, "hostile.wasm"), timeout=1)


def test_tools_are_the_plugins_own(calculator):
    tools = {tool.name: tool for tool in calculator.tools()}
    assert sorted(tools) == ["add", "divide", "multiply", "subtract"]
    assert tools["add"].input_schema["required"] == ["a", "b"]
    assert tools["add"].title == "Add" and tools["add"].toolset is None
    assert tools["add"].mcp()["inputSchema"] == tools["add"].input_schema
    assert tools["add"].openai()["function"]["parameters"] == tools["add"].input_schema
    assert tools["add"].anthropic()["input_schema"] == tools["add"].input_schema
    assert calculator.name == "calculator"


def test_a_blocking_call_answers(calculator):
    result = calculator.call_sync("add", {"a": 2, "b": 3})
    assert result.content == [toolhost.TextContent("5")]
    assert result.text == "5" and result.is_error is False
    assert result.structured_content == {"result": 5.0}
    assert result.to_dict() == {"content": [{"type": "text", "text": "5"}], "structuredContent": {"result": 5.0}}


def test_an_awaited_call_answers(calculator):
    result = asyncio.run(calculator.call("multiply", {"a": 6, "b": 7}))
    assert result.text == "42"


def test_a_tool_error_is_a_result_not_an_exception(calculator):
    result = calculator.call_sync("divide", {"a": 1, "b": 0})
    assert result.is_error is True and result.text


def test_bad_arguments_are_refused_before_the_plugin_runs(calculator):
    with pytest.raises(toolhost.InvalidArgumentsError) as refused:
        calculator.call_sync("add", {"a": "two"})
    assert "at /a:" in str(refused.value) and "/b" in str(refused.value)
    assert [(v["pointer"], v["keyword"]) for v in refused.value.violations] == [("/a", "type"), ("/b", "required")]
    assert refused.value.model_text.startswith("invalid arguments for `add`; the tool did not run")
    with pytest.raises(TypeError):
        calculator.call_sync("add", ["not", "a", "dict"])


def test_an_unknown_tool_names_the_ones_there_are(calculator):
    with pytest.raises(toolhost.UnknownToolError) as refused:
        calculator.call_sync("modulo", {})
    assert "`add`" in str(refused.value)


def test_a_missing_plugin_is_a_load_error():
    with pytest.raises(toolhost.LoadError):
        toolhost.Plugin.load(os.path.join(PLUGINS, "missing.wasm"))


def test_a_trap_and_a_runaway_are_exceptions_and_the_plugin_goes_on(hostile):
    with pytest.raises(toolhost.PluginFaultError):
        hostile.call_sync("panic")
    with pytest.raises(toolhost.CallTimeoutError):
        hostile.call_sync("spin")
    assert not hostile.call_sync("ok").is_error


def test_nothing_is_granted_that_was_not_given(hostile):
    result = hostile.call_sync("read_file", {"path": "/etc/passwd"})
    assert result.is_error is True


def test_cancelling_the_task_stops_the_call():
    # A minute of time: only the cancellation can end the spin sooner.
    patient = toolhost.Plugin.load(os.path.join(FIXTURES, "hostile.wasm"), timeout=60)

    async def cancel_a_spin():
        task = asyncio.ensure_future(patient.call("spin"))
        while patient.pool_stats()["busy"] == 0:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_a_spin())
    # The guest stops at once, not after its minute: waited for with a
    # generous deadline, well inside that minute.
    deadline = time.monotonic() + 30
    while patient.pool_stats()["busy"] != 0:
        assert time.monotonic() < deadline, "the cancelled call is still running"
        time.sleep(0.05)
    assert not patient.call_sync("ok").is_error


def test_calls_from_threads_run_side_by_side(calculator):
    results = []

    def caller(n):
        for i in range(50):
            results.append(calculator.call_sync("add", {"a": n, "b": i}).structured_content["result"])

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == sorted(float(n + i) for n in range(4) for i in range(50))


def test_the_interpreter_runs_while_a_call_blocks():
    # A call of 5 s that another thread makes; this thread runs Python and
    # calls meanwhile.
    slow = toolhost.Plugin.load(os.path.join(FIXTURES, "hostile.wasm"), timeout=5)
    finished = threading.Event()

    def spinner():
        with pytest.raises(toolhost.CallTimeoutError):
            slow.call_sync("spin")
        finished.set()

    thread = threading.Thread(target=spinner)
    thread.start()
    # Were the GIL held through the spinning call, this loop could not run
    # until the spin ended, and would never see it running.
    deadline = time.monotonic() + 30
    while slow.pool_stats()["busy"] == 0:
        assert not finished.is_set(), "the spin ended before this thread could see it running"
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert slow.call_sync("ok").is_error is not True
    assert slow.pool_stats()["busy"] >= 1 and not finished.is_set()
    thread.join()


def test_a_plugin_reads_only_the_secrets_it_is_granted():
    path = os.path.join(FIXTURES, "sdk-secrets.wasm")
    granted = toolhost.Plugin.load(path, grant_secrets=["SERVICE_TOKEN"], secrets={"SERVICE_TOKEN": "abcd"})
    assert granted.call_sync("token_length").text == "the token has 4 characters"
    # The same provider, the secret not granted: the call is refused
    # before the plugin runs.
    ungranted = toolhost.Plugin.load(path, secrets={"SERVICE_TOKEN": "abcd"})
    with pytest.raises(toolhost.MissingSecretError) as refused:
        ungranted.call_sync("token_length")
    assert "`SERVICE_TOKEN`" in str(refused.value) and "abcd" not in str(refused.value)


def test_an_unknown_keyword_is_a_type_error(calculator):
    with pytest.raises(TypeError, match="unexpected keyword argument 'timeout_ms'"):
        calculator.call_sync("add", {"a": 1, "b": 2}, timeout_ms=5)
    # `approved` is a registry's: a plugin has no approvals.
    with pytest.raises(TypeError, match="'approved'"):
        calculator.call_sync("add", {"a": 1, "b": 2}, approved=True)
    assert calculator.call_sync("add", {"a": 1, "b": 2}, timeout=None).text == "3"
    # A bad value names the keyword it was given for.
    with pytest.raises(TypeError, match="keyword `meta`"):
        calculator.call_sync("add", {"a": 1, "b": 2}, meta=["not", "a", "dict"])
    with pytest.raises(TypeError, match="keyword `on_log`: a hook must be callable, not str"):
        calculator.call_sync("add", {"a": 1, "b": 2}, on_log="print")


def test_a_flood_of_log_lines_is_bounded_on_its_way_to_python(hostile):
    lines = []
    result = hostile.call_sync("log_flood", {"lines": 20_000, "bytes": 64}, on_log=lambda level, line: lines.append(line))
    assert not result.is_error
    # The library lets a call log a bounded number of lines (then says it
    # stopped), and the guest only queues them for Python, in a bounded
    # backlog: never 20,000 lines held for the hook.
    assert 0 < len(lines) <= 1024 and all(len(line) <= 256 for line in lines)
    assert lines[-1].startswith("further log lines of this call dropped")


def test_limits_are_the_clis():
    path = os.path.join(FIXTURES, "hostile.wasm")
    # An instruction budget stops a runaway before its minute is up.
    fueled = toolhost.Plugin.load(path, timeout=60, fuel=10_000_000, pool_size=1)
    with pytest.raises(toolhost.PluginFaultError) as spent:
        fueled.call_sync("spin")
    assert spent.value.outcome == "fuel_exhausted"
    assert fueled.pool_stats()["size"] == 1
    # An output cap, in bytes or as a size.
    for cap in (262144, "256KiB"):
        capped = toolhost.Plugin.load(path, max_output_size=cap)
        with pytest.raises(toolhost.OutputTooLargeError):
            capped.call_sync("items", {"count": 2000})
        assert len(capped.call_sync("items", {"count": 2}).content) == 2
    with pytest.raises(ValueError, match="max_output_size"):
        toolhost.Plugin.load(path, max_output_size="lots")


def test_ctrl_c_interrupts_a_blocking_call_and_stops_the_guest():
    script = f"""
import os, signal, threading, time, toolhost
plugin = toolhost.Plugin.load({os.path.join(FIXTURES, "hostile.wasm")!r}, timeout=600)
def interrupt():
    while plugin.pool_stats()["busy"] == 0:
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=interrupt, daemon=True).start()
try:
    plugin.call_sync("spin")
except KeyboardInterrupt:
    print("interrupted")
while plugin.pool_stats()["busy"] != 0:
    time.sleep(0.01)
print("stopped")
"""
    # Ten minutes of spin: only the interruption ends it within the deadline.
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.stdout.split() == ["interrupted", "stopped"], run.stderr
