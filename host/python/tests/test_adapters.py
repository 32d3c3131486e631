"""The adapters with the real frameworks, installed from PyPI, and no
network model: PydanticAI's `TestModel` and `FunctionModel`, the OpenAI
Agents SDK's runner with a scripted `Model`, LangChain tools invoked sync
and async. Refused arguments, a denied approval, a timeout and a cancelled
task each reach the framework the way it expects, never as a crash."""

import asyncio
import json
import os
import time

import pytest

import toolhost

PLUGINS = os.environ["TOOLHOST_PLUGINS"]
FIXTURES = os.environ["TOOLHOST_FIXTURES"]


def registry_of(tmp_path, toolsets, **options):
    path = tmp_path / "toolsets.json"
    path.write_text(json.dumps({"schema": "toolsets", "toolsets": toolsets}))
    return toolhost.Registry.from_file(str(path), **options)


def uri(id, wasm, **extra):
    return {"id": id, "kind": "uri", "server": {"url": wasm, **extra.pop("server", {})}, **extra}


@pytest.fixture
def examples(tmp_path):
    """Every example plugin; dividing requires approval."""
    return registry_of(
        tmp_path,
        [
            uri("calc", os.path.join(PLUGINS, "calculator.wasm"), tools=[{"name": "divide", "requiresApproval": True}]),
            uri("text", os.path.join(PLUGINS, "text.wasm")),
            uri("clock", os.path.join(PLUGINS, "clock.wasm")),
            uri("doorbell", os.path.join(PLUGINS, "doorbell.wasm")),
        ],
    )


@pytest.fixture
def hostile(tmp_path):
    """The hostile fixture: `spin` runs until the 1 s timeout stops it."""
    return registry_of(tmp_path, [uri("h", os.path.join(FIXTURES, "hostile.wasm"), server={"limits": {"timeout": "1s"}})])


@pytest.fixture
def patient(tmp_path):
    """The hostile fixture with a minute per call: only a cancellation ends
    a `spin` sooner."""
    return registry_of(tmp_path, [uri("h", os.path.join(FIXTURES, "hostile.wasm"), server={"limits": {"timeout": "60s"}})])


async def cancel_when_busy(registry, task):
    """Cancel `task` once the registry's plugin runs a call, and expect it
    cancelled."""
    while registry.pool_stats()["h"]["busy"] == 0:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def guest_stops(registry):
    # The guest stops at once, not after its minute: waited for with a
    # generous deadline well inside that minute.
    deadline = time.monotonic() + 30
    while registry.pool_stats()["h"]["busy"] != 0:
        assert time.monotonic() < deadline, "the cancelled call is still running"
        time.sleep(0.05)
    assert registry.call_sync("h__ok").text == "fine"


# --- PydanticAI -------------------------------------------------------------

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolDenied  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import FunctionModel  # noqa: E402
from pydantic_ai.models.test import TestModel  # noqa: E402

from toolhost.pydantic_ai import ToolhostToolset  # noqa: E402


def parts(messages, kind):
    return [part for message in messages for part in message.parts if isinstance(part, kind)]


def scripted(*turns):
    """A FunctionModel answering each request with the next turn: a list of
    (tool, arguments) calls, or a final text."""
    script = list(turns)

    def answer(messages, info):
        turn = script.pop(0)
        if isinstance(turn, str):
            return ModelResponse(parts=[TextPart(turn)])
        return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call-{len(script)}-{i}") for i, (name, args) in enumerate(turn)])

    return FunctionModel(answer)


def test_pydantic_ai_test_model_calls_every_example_tool(examples):
    toolset = ToolhostToolset(examples, approvals="registry")
    agent = Agent(TestModel(call_tools="all"), toolsets=[toolset])
    result = agent.run_sync("use every tool")
    called = {part.tool_name for part in parts(result.all_messages(), ToolCallPart)}
    answered = {part.tool_name for part in parts(result.all_messages(), (ToolReturnPart, RetryPromptPart))}
    every = {tool.name for tool in examples.tools()}
    assert len(every) >= 10
    assert called == every and answered == every
    # Dividing needs approval and the registry has no hook: the model is
    # told, as a failed tool result, and the run goes on.
    divide = next(p for p in parts(result.all_messages(), (ToolReturnPart, RetryPromptPart)) if p.tool_name == "calc__divide")
    assert divide.outcome == "failed" and "was not approved" in str(divide.content)
    added = next(p for p in parts(result.all_messages(), ToolReturnPart) if p.tool_name == "calc__add")
    assert set(added.content) == {"result"}


def test_pydantic_ai_refused_arguments_are_a_retry_prompt_the_model_corrects(examples):
    model = scripted([("calc__add", {"a": 2})], [("calc__add", {"a": 2, "b": 40})], "done")
    result = Agent(model, toolsets=[ToolhostToolset(examples)]).run_sync("add")
    retried, answered = parts(result.all_messages(), ToolReturnPart)
    assert retried.outcome == "retried" and retried.retry.cause == "model_retry"
    assert "at /b:" in retried.content and "the tool did not run" in retried.content
    assert answered.content == {"result": 42.0} and answered.outcome == "success"
    assert result.output == "done"


def test_pydantic_ai_approval_is_its_own_deferred_approval(examples):
    agent = Agent(
        scripted([("calc__divide", {"a": 1, "b": 4})], "approved", [("calc__divide", {"a": 1, "b": 0})], "denied"),
        toolsets=[ToolhostToolset(examples)],
        output_type=[str, DeferredToolRequests],
    )
    first = agent.run_sync("divide")
    assert isinstance(first.output, DeferredToolRequests)
    [call] = first.output.approvals
    assert call.tool_name == "calc__divide"
    approved = agent.run_sync(
        message_history=first.all_messages(), deferred_tool_results=DeferredToolResults(approvals={call.tool_call_id: True})
    )
    assert parts(approved.all_messages(), ToolReturnPart)[-1].content == {"result": 0.25}
    second = agent.run_sync("divide again", message_history=approved.all_messages())
    [call] = second.output.approvals
    denied = agent.run_sync(
        message_history=second.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={call.tool_call_id: ToolDenied("not today")}),
    )
    assert parts(denied.all_messages(), ToolReturnPart)[-1].content == "not today"
    assert denied.output == "denied"


def test_pydantic_ai_a_timeout_is_a_failed_tool_result(hostile):
    result = Agent(scripted([("h__spin", {})], "gave up"), toolsets=[ToolhostToolset(hostile)]).run_sync("spin")
    [failed] = [p for p in parts(result.all_messages(), (ToolReturnPart, RetryPromptPart)) if p.tool_name == "h__spin"]
    assert failed.outcome == "failed" and "time" in str(failed.content) and result.output == "gave up"


def test_pydantic_ai_cancelling_the_run_stops_the_guest(patient):
    agent = Agent(scripted([("h__spin", {})], "never"), toolsets=[ToolhostToolset(patient)])

    async def main():
        await cancel_when_busy(patient, asyncio.ensure_future(agent.run("spin")))

    asyncio.run(main())
    guest_stops(patient)


# --- OpenAI Agents SDK ------------------------------------------------------

from agents import Agent as OpenAIAgent  # noqa: E402
from agents import ModelResponse as OpenAIModelResponse  # noqa: E402
from agents import Runner, Usage, set_tracing_disabled  # noqa: E402
from agents.items import ToolCallOutputItem  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from toolhost.openai_agents import function_tools  # noqa: E402

set_tracing_disabled(True)


class ScriptedModel(Model):
    """Answers each request with the next turn: a list of (tool,
    arguments) calls, or a final text."""

    def __init__(self, *turns):
        self.turns = list(turns)
        self.calls = 0

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs, tracing, **_):
        turn = self.turns.pop(0)
        if isinstance(turn, str):
            output = [
                ResponseOutputMessage(
                    id="m",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text=turn, annotations=[])],
                )
            ]
        else:
            output = []
            for name, arguments in turn:
                self.calls += 1
                output.append(
                    ResponseFunctionToolCall(
                        type="function_call",
                        call_id=f"call-{self.calls}",
                        name=name,
                        arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
                        status="completed",
                    )
                )
        return OpenAIModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the tests do not stream")


def outputs(result):
    return [item.output for item in result.new_items if isinstance(item, ToolCallOutputItem)]


def test_openai_agents_runner_calls_tools_and_reads_their_failures(examples):
    model = ScriptedModel(
        [("calc__add", {"a": 2, "b": 3}), ("text__word_count", {"text": "one two"}), ("calc__add", {"a": 2}), ("calc__add", "{not json")],
        "done",
    )
    agent = OpenAIAgent(name="a", model=model, tools=function_tools(examples))
    result = asyncio.run(Runner.run(agent, "go"))
    added, counted, refused, garbled = outputs(result)
    assert json.loads(added) == {"result": 5.0}
    assert json.loads(counted)["words"] == 2
    assert "at /b:" in refused and "the tool did not run" in refused
    assert "not JSON" in garbled
    assert result.final_output == "done"


def test_openai_agents_approval_is_the_sdks_interruption(examples):
    model = ScriptedModel([("calc__divide", {"a": 3, "b": 4})], "approved", [("calc__divide", {"a": 1, "b": 0})], "rejected")
    agent = OpenAIAgent(name="a", model=model, tools=function_tools(examples))

    async def main():
        first = await Runner.run(agent, "divide")
        [ask] = first.interruptions
        state = first.to_state()
        state.approve(ask)
        approved = await Runner.run(agent, state)
        second = await Runner.run(agent, approved.to_input_list() + [{"role": "user", "content": "again"}])
        [ask] = second.interruptions
        state = second.to_state()
        state.reject(ask)
        rejected = await Runner.run(agent, state)
        return approved, rejected

    approved, rejected = asyncio.run(main())
    assert json.loads(outputs(approved)[-1]) == {"result": 0.75}
    assert approved.final_output == "approved"
    assert "result" not in outputs(rejected)[-1] and rejected.final_output == "rejected"


def test_openai_agents_a_timeout_is_a_tool_output(hostile):
    agent = OpenAIAgent(name="a", model=ScriptedModel([("h__spin", {})], "gave up"), tools=function_tools(hostile))
    result = asyncio.run(Runner.run(agent, "spin"))
    assert "time" in outputs(result)[0] and result.final_output == "gave up"


def test_openai_agents_cancelling_the_run_stops_the_guest(patient):
    agent = OpenAIAgent(name="a", model=ScriptedModel([("h__spin", {})], "never"), tools=function_tools(patient))

    async def main():
        await cancel_when_busy(patient, asyncio.ensure_future(Runner.run(agent, "spin")))

    asyncio.run(main())
    guest_stops(patient)


# --- LangChain --------------------------------------------------------------

from langchain_core.messages import ToolMessage  # noqa: E402

from toolhost.langchain import tools as langchain_tools  # noqa: E402


def by_name(tools):
    return {tool.name: tool for tool in tools}


def test_langchain_tools_run_sync_and_async(examples):
    tools = by_name(langchain_tools(examples))
    assert set(tools) == {tool.name for tool in examples.tools()}
    assert tools["calc__add"].invoke({"a": 1, "b": 2}) == "3"
    assert asyncio.run(tools["calc__multiply"].ainvoke({"a": 6, "b": 7})) == "42"
    message = tools["calc__add"].invoke({"type": "tool_call", "id": "c1", "name": "calc__add", "args": {"a": 1, "b": 2}})
    assert isinstance(message, ToolMessage) and message.content == "3" and message.status == "success"
    assert message.artifact.structured_content == {"result": 3.0}
    assert tools["calc__add"].args_schema["required"] == ["a", "b"]


def test_langchain_failures_are_error_messages(examples, hostile):
    add = by_name(langchain_tools(examples))["calc__add"]
    refused = add.invoke({"type": "tool_call", "id": "c2", "name": "calc__add", "args": {"a": 1}})
    assert refused.status == "error" and "at /b:" in refused.content
    divide = by_name(langchain_tools(examples))["calc__divide"]
    denied = asyncio.run(divide.ainvoke({"type": "tool_call", "id": "c3", "name": "calc__divide", "args": {"a": 1, "b": 2}}))
    assert denied.status == "error" and "was not approved" in denied.content
    spin = by_name(langchain_tools(hostile))["h__spin"]
    timed_out = spin.invoke({"type": "tool_call", "id": "c4", "name": "h__spin", "args": {}})
    assert timed_out.status == "error" and "time" in timed_out.content


def test_langchain_approval_goes_to_the_registrys_hook(tmp_path):
    registry = registry_of(
        tmp_path,
        [uri("calc", os.path.join(PLUGINS, "calculator.wasm"), tools=[{"name": "divide", "requiresApproval": True}])],
        approve=lambda tool, arguments: arguments["b"] != 0 or "not by zero",
    )
    divide = by_name(langchain_tools(registry))["calc__divide"]
    assert divide.invoke({"a": 1, "b": 8}) == "0.125"
    assert "not by zero" in divide.invoke({"type": "tool_call", "id": "c", "name": "calc__divide", "args": {"a": 1, "b": 0}}).content


def test_langchain_cancelling_the_task_stops_the_guest(patient):
    spin = by_name(langchain_tools(patient))["h__spin"]

    async def main():
        await cancel_when_busy(patient, asyncio.ensure_future(spin.ainvoke({})))

    asyncio.run(main())
    guest_stops(patient)
