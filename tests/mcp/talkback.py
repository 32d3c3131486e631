"""Plugins that talk back, through `toolhost serve --config FILE`, to the
official MCP Python SDK's client (protocol 2025-11-25, through the
initialize handshake, where a server may send requests during a call).

Usage:
    talkback.py TOOLHOST_BIN CONFIG

The configuration has the `hyper-v2` fixture as toolset `v2` and the
`tool-list-changed` fixture as `grow`. The client answers elicitation,
sampling and roots, asks for log messages at debug, follows progress, and
records every notification; then it lists and reads what the plugins offer
besides tools (prompts, resources, templates, completions). Prints one
JSON object of what it saw.
"""

import json
import sys

import anyio
import mcp.types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def text_of(result):
    return "".join(item.text for item in result.content if getattr(item, "type", None) == "text")


async def main():
    report = {"elicited": [], "sampled": [], "logs": [], "progress": [], "notices": []}
    tools_changed = anyio.Event()
    notices_seen = anyio.Event()

    async def elicit(context, params):
        report["elicited"].append({"message": params.message, "mode": getattr(params, "mode", None)})
        if getattr(params, "mode", None) == "url":
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def sample(context, params):
        report["sampled"].append({"max_tokens": params.max_tokens, "text": params.messages[0].content.text})
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="4"), model="test-model"
        )

    async def roots(context):
        return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])

    async def log(params):
        report["logs"].append({"level": params.level, "logger": params.logger, "data": params.data})

    async def on_message(message):
        method = getattr(getattr(message, "root", message), "method", None) or getattr(message, "method", None)
        if method is None:
            return
        if method == "notifications/tools/list_changed":
            tools_changed.set()
            return
        report["notices"].append(method)
        if method == "notifications/resources/updated":
            notices_seen.set()

    async def progress(done, total, message):
        report["progress"].append({"progress": done, "total": total, "message": message})

    params = StdioServerParameters(command=sys.argv[1], args=["serve", "--config", sys.argv[2]])
    async with stdio_client(params) as (read, write):
        async with ClientSession(
            read,
            write,
            sampling_callback=sample,
            elicitation_callback=elicit,
            list_roots_callback=roots,
            logging_callback=log,
            message_handler=on_message,
        ) as session:
            init = await session.initialize()
            report["protocol"] = init.protocol_version
            await session.set_logging_level("debug")
            report["elicit"] = json.loads(text_of(await session.call_tool("v2__elicit", {"message": "Who?"})))
            report["elicit_url"] = json.loads(
                text_of(await session.call_tool("v2__elicit_url", {"url": "https://auth.example/x"}))
            )
            report["sample"] = json.loads(text_of(await session.call_tool("v2__sample", {"prompt": "2+2?"})))
            report["roots"] = json.loads(text_of(await session.call_tool("v2__roots", {})))
            report["log"] = text_of(await session.call_tool("v2__log", {"message": "disk almost full", "level": "warning"}))
            report["steps"] = text_of(
                await session.call_tool("v2__progress", {"steps": 3}, progress_callback=progress)
            )
            # A resource update reaches a session that subscribed to it.
            await session.subscribe_resource("memo://one")
            report["changed"] = text_of(await session.call_tool("v2__changed", {}))
            with anyio.fail_after(60):
                await notices_seen.wait()
            report["before"] = sorted(tool.name for tool in (await session.list_tools()).tools if tool.name.startswith("grow__"))
            report["add"] = text_of(await session.call_tool("grow__add_tool", {}))
            with anyio.fail_after(60):
                await tools_changed.wait()
            report["after"] = sorted(tool.name for tool in (await session.list_tools()).tools if tool.name.startswith("grow__"))
            report["tool_1"] = text_of(await session.call_tool("grow__tool_1", {}))

            # What the plugins offer besides tools.
            prompts = await session.list_prompts()
            report["prompts"] = [p.name for p in prompts.prompts]
            prompt = await session.get_prompt("v2__greeting", {"name": "Ada"})
            report["prompt"] = prompt.messages[0].content.text
            report["resources"] = [str(r.uri) for r in (await session.list_resources()).resources]
            report["templates"] = [t.uri_template for t in (await session.list_resource_templates()).resource_templates]
            report["read"] = (await session.read_resource("memo://one")).contents[0].text
            report["read_template"] = (await session.read_resource("memo://seven")).contents[0].text
            try:
                await session.read_resource("nope://x")
                report["read_missing"] = "no error"
            except Exception as error:
                report["read_missing"] = {"code": getattr(getattr(error, "error", None), "code", None), "message": str(error)}
            completion = await session.complete(types.PromptReference(type="ref/prompt", name="v2__greeting"), {"name": "name", "value": "b"})
            report["completion"] = completion.completion.values
    print(json.dumps(report))


anyio.run(main)
