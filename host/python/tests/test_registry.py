"""`toolhost.Registry` against real plugins built from this repository:
toolsets files of every kind (Wasm plugins from a file and from https://,
a remote MCP server, tools written in Python), hooks written in Python,
and what the caller's side of a call sees."""

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import threading

import pydantic
import pytest

import toolhost

PLUGINS = os.environ["TOOLHOST_PLUGINS"]
FIXTURES = os.environ["TOOLHOST_FIXTURES"]
EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "example-plugins")


def write_toolsets(tmp_path, toolsets, name="toolsets.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"schema": "toolsets", "toolsets": toolsets}))
    return str(path)


def plugin_toolset(id, wasm, **extra):
    return {"id": id, "kind": "uri", "server": {"url": wasm, **extra.pop("server", {})}, **extra}


# --- toolsets files ---------------------------------------------------------


def test_the_example_toolsets_file_loads_with_its_filters():
    registry = toolhost.Registry.from_file(os.path.join(EXAMPLES, "toolsets.yaml"))
    names = [tool.name for tool in registry.tools()]
    assert "calc__add" in names and "text__word_count" in names
    # `text` leaves out `reverse`; `words` keeps only its counting tools.
    assert "text__reverse" not in names
    assert [n for n in names if n.startswith("words__")] == ["words__word_count"]
    assert sorted(registry.toolsets()) == ["calc", "text", "words"]
    divide = next(tool for tool in registry.tools() if tool.name == "calc__divide")
    assert divide.requires_approval and divide.toolset == "calc" and divide.annotations["readOnlyHint"] is True
    assert registry.call_sync("calc__add", {"a": 2, "b": 3}).text == "5"


def test_model_shapes_list_every_tool_under_its_namespaced_name():
    registry = toolhost.Registry.from_file(os.path.join(EXAMPLES, "toolsets.yaml"))
    names = [tool.name for tool in registry.tools()]
    assert [t["function"]["name"] for t in registry.openai()] == names
    assert all(t["type"] == "function" for t in registry.openai())
    assert [t["name"] for t in registry.anthropic()] == names
    assert [t["name"] for t in registry.mcp()["tools"]] == names
    add = next(t for t in registry.anthropic() if t["name"] == "calc__add")
    assert add["input_schema"]["required"] == ["a", "b"] and add["description"] == "Add two numbers: a + b."


def test_a_bad_toolsets_file_names_each_problem_with_its_pointer(tmp_path):
    path = write_toolsets(tmp_path, [{"id": "calc", "kind": "uri", "server": {}}])
    with pytest.raises(toolhost.LoadError) as refused:
        toolhost.Registry().load(path)
    assert "/toolsets/0/server" in str(refused.value)


def test_a_toolset_that_fails_to_load_is_reported_and_the_rest_serve(tmp_path):
    path = write_toolsets(
        tmp_path,
        [
            plugin_toolset("calc", os.path.join(PLUGINS, "calculator.wasm")),
            plugin_toolset("gone", os.path.join(PLUGINS, "missing.wasm")),
        ],
    )
    registry = toolhost.Registry()
    report = registry.load(path)
    assert [f["toolset"] for f in report["failures"]] == ["gone"]
    assert "missing.wasm" in report["failures"][0]["error"]
    assert registry.toolsets() == ["calc"]
    with pytest.raises(toolhost.LoadError, match="gone"):
        toolhost.Registry.from_file(path)


def test_a_plugin_from_https_is_downloaded_checked_against_its_digest_and_run(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    wasm = open(os.path.join(PLUGINS, "calculator.wasm"), "rb").read()
    (served / "calculator.wasm").write_bytes(wasm)
    server = subprocess.Popen(
        [sys.executable, os.environ["TOOLHOST_HTTPS_SERVER"], str(served), os.environ["TOOLHOST_TLS_CERT"],
         os.environ["TOOLHOST_TLS_KEY"]],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        port = int(server.stdout.readline())
        url = f"https://127.0.0.1:{port}/calculator.wasm"
        digest = "sha256:" + hashlib.sha256(wasm).hexdigest()
        ca = os.environ["TOOLHOST_TLS_CA"]
        good = write_toolsets(tmp_path, [plugin_toolset("calc", url, server={"digest": digest, "caFile": ca})])
        os.environ["TOOLHOST_CACHE_DIR"] = str(tmp_path / "cache")
        assert toolhost.Registry.from_file(good).call_sync("calc__add", {"a": 1, "b": 2}).text == "3"
        swapped = "sha256:" + "0" * 64
        bad = write_toolsets(
            tmp_path, [plugin_toolset("calc", url, server={"digest": swapped, "caFile": ca})], "swapped.json"
        )
        report = toolhost.Registry().load(bad)
        assert [f["toolset"] for f in report["failures"]] == ["calc"]
        assert "digest" in report["failures"][0]["error"]
    finally:
        server.kill()
        server.wait()


def test_a_remote_mcp_server_is_a_toolset_like_any_other(tmp_path):
    toolhost_bin = os.environ["TOOLHOST_BIN"]
    path = write_toolsets(
        tmp_path,
        [
            {
                "id": "remote",
                "kind": "mcp",
                "server": {"command": toolhost_bin, "args": ["serve", os.path.join(PLUGINS, "calculator.wasm")]},
                "tools": [{"name": "divide", "requiresApproval": True}],
            }
        ],
    )
    registry = toolhost.Registry.from_file(path, approve=lambda tool, arguments: arguments["b"] != 0)
    assert sorted(t.name for t in registry.tools()) == [
        "remote__add",
        "remote__divide",
        "remote__multiply",
        "remote__subtract",
    ]
    assert asyncio.run(registry.call("remote__multiply", {"a": 6, "b": 7})).text == "42"
    assert registry.call_sync("remote__divide", {"a": 1, "b": 4}).structured_content == {"result": 0.25}
    with pytest.raises(toolhost.ApprovalDeniedError):
        registry.call_sync("remote__divide", {"a": 1, "b": 0})
    with pytest.raises(toolhost.InvalidArgumentsError):
        registry.call_sync("remote__add", {"a": 1})


# --- tools written in Python ------------------------------------------------


class Point(pydantic.BaseModel):
    x: float
    y: float


class Distance(pydantic.BaseModel):
    distance: float


@toolhost.tool(title="Greeting", annotations={"readOnlyHint": True})
def greet(name: str, times: int = 1) -> str:
    """Greet someone by name."""
    return " ".join(["hello " + name] * times)


SHOUTED_ON = []


async def shout(text: str) -> dict:
    """Say it louder."""
    SHOUTED_ON.append(asyncio.get_running_loop())
    await asyncio.sleep(0)
    return {"loud": text.upper()}


def distance(a: Point, b: Point) -> Distance:
    """The distance between two points."""
    return Distance(distance=((a.x - b.x) ** 2 + (a.y - b.y) ** 2) ** 0.5)


def refuse(reason: str):
    """Refuses, saying why."""
    raise toolhost.ToolError(f"refused: {reason}")


def broken():
    """Fails the way a bug does."""
    return 1 / 0


def lying() -> Distance:
    """Says it answers with a distance, and does not."""
    return toolhost.ToolResult(content=({"type": "text", "text": "far"},), structured={"miles": 3})


@pytest.fixture(scope="module")
def python_tools():
    registry = toolhost.Registry()
    assert registry.add_tools("py", [greet, shout, distance, refuse, broken, lying]) == []
    return registry


def test_python_functions_are_described_from_their_signatures(python_tools):
    tools = {tool.name: tool for tool in python_tools.tools()}
    assert sorted(tools) == ["py__broken", "py__distance", "py__greet", "py__lying", "py__refuse", "py__shout"]
    assert tools["py__greet"].input_schema == {
        "type": "object",
        "properties": {"name": {"title": "Name", "type": "string"}, "times": {"default": 1, "title": "Times", "type": "integer"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    assert tools["py__greet"].title == "Greeting" and tools["py__greet"].description == "Greet someone by name."
    assert tools["py__greet"].annotations == {"readOnlyHint": True}
    assert tools["py__distance"].input_schema["properties"]["a"] == {"$ref": "#/$defs/Point"}
    assert tools["py__distance"].output_schema["required"] == ["distance"]


def test_python_tools_are_called_with_checked_arguments(python_tools):
    assert python_tools.call_sync("py__greet", {"name": "ada", "times": 2}).text == "hello ada hello ada"
    async def awaited():
        result = await python_tools.call("py__shout", {"text": "hi"})
        return result, asyncio.get_running_loop()

    SHOUTED_ON.clear()
    result, loop = asyncio.run(awaited())
    # A coroutine function runs on the loop of the call that awaits it.
    assert result.structured_content == {"loud": "HI"} and SHOUTED_ON == [loop]
    # It runs from a blocking call too, on a loop of its own.
    assert python_tools.call_sync("py__shout", {"text": "hey"}).structured_content == {"loud": "HEY"}
    assert len(SHOUTED_ON) == 2 and SHOUTED_ON[1] is not loop
    # Members the function does not take are refused before it runs.
    with pytest.raises(toolhost.InvalidArgumentsError) as extra:
        python_tools.call_sync("py__greet", {"name": "ada", "mood": "glad"})
    assert extra.value.violations[0]["keyword"] == "additionalProperties"
    far = python_tools.call_sync("py__distance", {"a": {"x": 0, "y": 0}, "b": {"x": 3, "y": 4}})
    assert far.structured_content == {"distance": 5.0}
    with pytest.raises(toolhost.InvalidArgumentsError) as refused:
        python_tools.call_sync("py__distance", {"a": {"x": 0}, "b": {"x": "3", "y": 4}})
    pointers = sorted(v["pointer"] for v in refused.value.violations)
    assert pointers == ["/a/y", "/b/x"]


def test_a_python_tool_error_is_a_result_and_a_bug_is_an_exception(python_tools):
    refused = python_tools.call_sync("py__refuse", {"reason": "no"})
    assert refused.is_error and refused.text == "refused: no"
    with pytest.raises(toolhost.PluginFaultError) as failed:
        python_tools.call_sync("py__broken")
    assert "ZeroDivisionError: division by zero" in str(failed.value)
    # A Python tool's result is checked against its output schema like a
    # plugin's.
    with pytest.raises(toolhost.PluginFaultError) as lied:
        python_tools.call_sync("py__lying")
    assert "distance" in str(lied.value)


def test_a_toolsets_file_applies_its_settings_to_python_tools(tmp_path):
    path = write_toolsets(
        tmp_path,
        [{"id": "py", "kind": "builtin", "tools": [{"name": "greet", "requiresApproval": True}, {"name": "broken", "enabled": False}]}],
    )
    asked = []
    registry = toolhost.Registry(approve=lambda tool, arguments: asked.append((tool.name, arguments)) or True)
    registry.add_tools("py", [greet, broken])
    assert registry.load(path) == {"failures": [], "warnings": []}
    assert [tool.name for tool in registry.tools()] == ["py__greet"]
    assert registry.call_sync("py__greet", {"name": "bo"}).text == "hello bo"
    assert asked == [("py__greet", {"name": "bo"})]


# --- hooks ------------------------------------------------------------------


def approval_registry(approve):
    registry = toolhost.Registry(approve=approve)
    registry.load(os.path.join(EXAMPLES, "toolsets.yaml"))
    return registry


def test_approval_sees_the_tool_and_the_validated_arguments():
    seen = []

    def approve(tool, arguments):
        seen.append((tool.name, tool.annotations, arguments))
        return arguments["b"] != 0 or "dividing by zero is not allowed here"

    registry = approval_registry(approve)
    assert registry.call_sync("calc__divide", {"a": 1, "b": 2}).text == "0.5"
    with pytest.raises(toolhost.ApprovalDeniedError) as denied:
        registry.call_sync("calc__divide", {"a": 1, "b": 0})
    assert denied.value.model_text == "the call to `calc__divide` was not approved: dividing by zero is not allowed here"
    # Tools that do not require approval are not asked about; arguments
    # that are refused never reach the hook.
    registry.call_sync("calc__add", {"a": 1, "b": 0})
    with pytest.raises(toolhost.InvalidArgumentsError):
        registry.call_sync("calc__divide", {"a": 1})
    assert [(name, arguments) for name, _, arguments in seen] == [
        ("calc__divide", {"a": 1, "b": 2}),
        ("calc__divide", {"a": 1, "b": 0}),
    ]
    assert seen[0][1]["readOnlyHint"] is True


def test_an_async_approval_hook_runs_on_the_callers_loop_and_from_blocking_calls():
    loops = []

    async def approve(tool, arguments):
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0)
        return True

    registry = approval_registry(approve)

    async def main():
        result = await registry.call("calc__divide", {"a": 9, "b": 3})
        return result, asyncio.get_running_loop()

    result, loop = asyncio.run(main())
    assert result.text == "3" and loops == [loop]
    assert registry.call_sync("calc__divide", {"a": 8, "b": 2}).text == "4"
    assert len(loops) == 2 and loops[1] is not loop


def test_approval_fails_closed():
    def raising(tool, arguments):
        raise RuntimeError("the policy service is down")

    with pytest.raises(toolhost.ApprovalDeniedError) as denied:
        approval_registry(raising).call_sync("calc__divide", {"a": 1, "b": 1})
    assert "the approval hook failed (RuntimeError: the policy service is down)" in str(denied.value)
    with pytest.raises(toolhost.ApprovalDeniedError, match="no approval hook was given"):
        approval_registry(None).call_sync("calc__divide", {"a": 1, "b": 1})
    with pytest.raises(toolhost.ApprovalDeniedError, match="did not approve"):
        approval_registry(lambda tool, arguments: 1).call_sync("calc__divide", {"a": 1, "b": 1})


def test_a_cancelled_call_cancels_its_coroutine_hook():
    waiting, cancelled = [], []

    async def approve(tool, arguments):
        waiting.append(True)
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return True

    registry = approval_registry(approve)

    async def main():
        task = asyncio.ensure_future(registry.call("calc__divide", {"a": 1, "b": 1}))
        while not waiting:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The hook's task is cancelled on this loop, not left waiting.
        for _ in range(3000):
            if cancelled:
                break
            await asyncio.sleep(0.01)

    asyncio.run(main())
    assert cancelled == [True]


def secrets_registry(tmp_path, **options):
    path = write_toolsets(
        tmp_path,
        [
            plugin_toolset("secrets", os.path.join(FIXTURES, "sdk-secrets.wasm"), secrets=["SERVICE_TOKEN"])
        ],
        f"secrets-{len(os.listdir(tmp_path))}.json",
    )
    return toolhost.Registry.from_file(path, **options)


def test_secrets_come_from_a_mapping_or_a_hook(tmp_path):
    by_mapping = secrets_registry(tmp_path, secrets={"SERVICE_TOKEN": "s3cr3t-value"})
    assert by_mapping.call_sync("secrets__token_length").text == "the token has 12 characters"
    # A tool that echoes its secret has it taken out of the result.
    leaked = by_mapping.call_sync("secrets__leak_token", {"prefix": ">"})
    assert "s3cr3t-value" not in json.dumps(leaked.to_dict())

    asked = []

    async def provider(name):
        asked.append(name)
        return "abc"

    by_hook = secrets_registry(tmp_path, secrets=provider)
    assert by_hook.call_sync("secrets__token_length").text == "the token has 3 characters"
    assert "SERVICE_TOKEN" in asked


def test_a_missing_secret_or_a_failing_provider_refuses_the_call(tmp_path):
    with pytest.raises(toolhost.MissingSecretError) as missing:
        secrets_registry(tmp_path, secrets={}).call_sync("secrets__token_length")
    assert "SERVICE_TOKEN" in str(missing.value)

    def failing(name):
        raise KeyError(name)

    # The provider's own words may quote a secret: they stay out of the
    # message, which names only the secret.
    with pytest.raises(toolhost.MissingSecretError) as failed:
        secrets_registry(tmp_path, secrets=failing).call_sync("secrets__token_length")
    assert "`SERVICE_TOKEN`" in str(failed.value) and "SERVICE_TOKEN'" not in str(failed.value)


# --- the caller's side of a call --------------------------------------------


@pytest.fixture(scope="module")
def conformance():
    registry = toolhost.Registry()
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"conformance-{os.getpid()}.json")
    with open(path, "w") as out:
        json.dump({"schema": "toolsets", "toolsets": [plugin_toolset("c", os.path.join(FIXTURES, "conformance.wasm"))]}, out)
    assert registry.load(path)["failures"] == []
    return registry


def test_content_items_are_typed_objects(conformance):
    image = conformance.call_sync("c__test_image_content").content[0]
    assert isinstance(image, toolhost.ImageContent) and image.mime_type == "image/png" and image.data
    audio = conformance.call_sync("c__test_audio_content").content[0]
    assert isinstance(audio, toolhost.AudioContent) and audio.mime_type == "audio/wav"
    resource = conformance.call_sync("c__test_embedded_resource").content[0]
    assert isinstance(resource, toolhost.EmbeddedResource) and resource.resource["uri"]
    kinds = [type(item).__name__ for item in conformance.call_sync("c__test_multiple_content_types").content]
    assert kinds == ["TextContent", "ImageContent", "EmbeddedResource"]


def test_log_lines_and_progress_reach_the_caller(conformance):
    lines, progress = [], []
    result = conformance.call_sync("c__test_tool_with_logging", on_log=lambda level, line: lines.append((level, line)))
    assert result.text == "Logging test completed"
    assert [line for _, line in lines] == ["Tool execution started", "Tool processing data", "Tool execution completed"]
    conformance.call_sync(
        "c__test_tool_with_progress",
        meta={"progressToken": "p-1"},
        on_progress=lambda done, total, message: progress.append((done, total, message)),
    )
    assert progress == [(0.0, 100.0, "Starting"), (50.0, 100.0, "Halfway"), (100.0, 100.0, "Done")]


def test_elicitation_and_sampling_are_answered_by_the_caller(conformance):
    requests = []

    def answer(method, params):
        requests.append(method)
        if method == "elicitation/create":
            return {"action": "accept", "content": {"username": "ada", "email": "ada@example.com"}}
        return {"role": "assistant", "content": {"type": "text", "text": "four"}, "model": "m"}

    elicited = conformance.call_sync("c__test_elicitation", {"message": "who?"}, on_request=answer)
    assert elicited.text == 'User response: action="accept", content={"email":"ada@example.com","username":"ada"}'

    async def answer_later(method, params):
        await asyncio.sleep(0)
        return answer(method, params)

    sampled = asyncio.run(conformance.call("c__test_sampling", {"prompt": "2+2?"}, on_request=answer_later))
    assert sampled.text == "LLM response: four"
    assert requests == ["elicitation/create", "sampling/createMessage"]
    # Without an answer from the caller, the plugin is told no.
    declined = conformance.call_sync("c__test_sampling", {"prompt": "2+2?"})
    assert declined.is_error and declined.text == "sampling/createMessage refused: this call was made without a client to ask"


def test_an_exception_in_a_hook_never_reaches_the_interpreter(conformance, monkeypatch):
    def broken_log(level, line):
        raise RuntimeError("the log hook broke")

    # It is reported as Python reports an exception nobody can catch.
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", lambda report: unraisable.append(report.exc_value))
    assert conformance.call_sync("c__test_tool_with_logging", on_log=broken_log).text == "Logging test completed"
    assert [str(e) for e in unraisable] == ["the log hook broke"] * 3

    # An async log hook is awaited on the caller's loop, every line in order.
    lines = []

    async def async_log(level, line):
        await asyncio.sleep(0)
        lines.append(line)

    assert asyncio.run(conformance.call("c__test_tool_with_logging", on_log=async_log)).text == "Logging test completed"
    assert lines == ["Tool execution started", "Tool processing data", "Tool execution completed"]

    # An answering hook's exception is not the plugin's to read: it is told
    # only that the caller failed, and the exception is reported here.
    def broken_answer(method, params):
        raise RuntimeError("the answering hook broke at https://internal.example/key=abc")

    unraisable.clear()
    result = conformance.call_sync("c__test_elicitation", {"message": "who?"}, on_request=broken_answer)
    assert "the caller failed to answer elicitation/create" in result.text and "internal" not in result.text
    assert [type(e) for e in unraisable] == [RuntimeError]

    # A ToolError is the refusal the caller means the plugin to read.
    def refusing(method, params):
        raise toolhost.ToolError("the user is away")

    assert "the user is away" in conformance.call_sync("c__test_elicitation", {"message": "who?"}, on_request=refusing).text


def test_output_over_the_limit_is_its_own_error(tmp_path):
    path = write_toolsets(tmp_path, [plugin_toolset("f", os.path.join(FIXTURES, "faults.wasm"))])
    registry = toolhost.Registry.from_file(path)
    with pytest.raises(toolhost.OutputTooLargeError) as large:
        registry.call_sync("f__items", {"count": 5000})
    assert isinstance(large.value, toolhost.PluginFaultError) and large.value.outcome == "output_too_large"
    assert "content items" in str(large.value)
    assert len(registry.call_sync("f__items", {"count": 3}).content) == 3


def test_the_user_id_and_meta_reach_the_plugin(tmp_path):
    path = write_toolsets(tmp_path, [plugin_toolset("h", os.path.join(FIXTURES, "hostile.wasm"))])
    registry = toolhost.Registry.from_file(path)
    assert json.loads(registry.call_sync("h__meta", meta={"trace": "t-1"}).text) == {"trace": "t-1"}


def test_calls_from_threads_and_tasks_run_side_by_side():
    registry = toolhost.Registry.from_file(os.path.join(EXAMPLES, "toolsets.yaml"))
    results = []

    def caller(n):
        for i in range(25):
            results.append(registry.call_sync("calc__add", {"a": n, "b": i}).structured_content["result"])

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    async def tasks():
        return await asyncio.gather(*(registry.call("calc__multiply", {"a": n, "b": 2}) for n in range(20)))

    doubled = [result.structured_content["result"] for result in asyncio.run(tasks())]
    assert sorted(results) == sorted(float(n + i) for n in range(4) for i in range(25))
    assert doubled == [float(2 * n) for n in range(20)]


def test_a_registry_whose_hooks_refer_back_to_it_is_collected():
    import gc
    import weakref

    def cycle():
        box = {}
        registry = toolhost.Registry(approve=lambda tool, arguments: box["registry"] is not None, secrets=lambda name: box and None)

        def whoami() -> str:
            """Says which registry it is in."""
            return repr(box["registry"])

        registry.add_tools("py", [whoami])
        box["registry"] = registry
        assert registry.call_sync("py__whoami").text.startswith("<toolhost.Registry")
        return weakref.ref(registry)

    gone = cycle()
    gc.collect()
    assert gone() is None

    def plugin_cycle():
        box = {}
        plugin = toolhost.Plugin.load(os.path.join(PLUGINS, "calculator.wasm"), secrets=lambda name: box.get(name))
        box["plugin"] = plugin
        return weakref.ref(plugin)

    gone = plugin_cycle()
    gc.collect()
    assert gone() is None
