"""Drive `toolhost serve --config FILE` whose toolsets include a remote MCP
server, with the official MCP Python SDK, and watch a `list_changed` of the
remote server reach this client through toolhost.

Usage:
    relay.py TOOLHOST_BIN CONFIG

Lists the tools, calls `calc__add` (a Wasm plugin) and `py__add` (the
remote server), then `py__grow` (the remote server adds a tool and says
so), waits up to a minute for toolhost's `notifications/tools/list_changed`,
lists again and calls the new `py__grown`. Prints one JSON object of what
it saw.
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
    changed = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification) or (
            getattr(message, "method", None) == "notifications/tools/list_changed"
        ):
            changed.set()

    params = StdioServerParameters(command=sys.argv[1], args=["serve", "--config", sys.argv[2]])
    report = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            report["before"] = sorted(tool.name for tool in (await session.list_tools()).tools)
            report["calc_add"] = text_of(await session.call_tool("calc__add", {"a": 2, "b": 3}))
            report["py_add"] = text_of(await session.call_tool("py__add", {"a": 20, "b": 22}))
            bad = await session.call_tool("py__add", {"a": "twenty", "b": 22})
            report["py_add_bad"] = {"is_error": bad.is_error, "text": text_of(bad)}
            report["grow"] = text_of(await session.call_tool("py__grow", {}))
            with anyio.fail_after(60):
                await changed.wait()
            report["after"] = sorted(tool.name for tool in (await session.list_tools()).tools)
            report["grown"] = text_of(await session.call_tool("py__grown", {}))
    print(json.dumps(report))


anyio.run(main)
