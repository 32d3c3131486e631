"""Drive `toolhost serve` with the official MCP Python SDK.

Usage:
    client.py stdio TOOLHOST_BIN ARG...   (spawns `TOOLHOST_BIN serve ARG...`)
    client.py http URL
    client.py auto-stdio TOOLHOST_BIN ARG...
    client.py auto-http URL

`stdio` and `http` drive a `ClientSession` through the initialize handshake
(the SDK's legacy mode); `auto-*` use the SDK's default `Client`, which
probes `server/discover` first and speaks 2026-07-28 when the server offers
it.

Runs a fixed scenario against a server that serves the toolsets of
tests/all/serve.rs (calc__* from the calculator, bad__* from the hostile
fixture) and prints one JSON object describing what it saw, for the Rust test
to assert on. Exceptions propagate: a broken session fails the test.
"""

import json
import sys

import anyio
import mcp.types as types
from mcp import Client, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


def text_of(result):
    return "".join(item.text for item in result.content if getattr(item, "type", None) == "text")


async def scenario(session):
    report = {}
    init = await session.initialize()
    report["server"] = init.server_info.name
    report["list_changed"] = bool(init.capabilities.tools and init.capabilities.tools.list_changed)
    report["protocol_version"] = init.protocol_version
    return await calls(session, report)


async def auto_scenario(client):
    report = {}
    report["server"] = client.server_info.name if client.server_info else None
    tools = client.server_capabilities.tools
    report["list_changed"] = bool(tools and tools.list_changed)
    report["protocol_version"] = client.protocol_version
    return await calls(client, report)


async def calls(session, report):
    """The same calls through a `ClientSession` or a `Client`."""
    listed = await session.list_tools()
    report["tools"] = sorted(tool.name for tool in listed.tools)
    add = next(tool for tool in listed.tools if tool.name == "calc__add")
    report["add_tool"] = {
        "title": add.title,
        "description": add.description,
        "input_type": add.input_schema.get("type"),
        "output_type": (add.output_schema or {}).get("type"),
        "read_only": bool(add.annotations and add.annotations.read_only_hint),
    }

    result = await session.call_tool("calc__add", {"a": 2, "b": 3})
    report["add"] = {"is_error": bool(result.is_error), "text": text_of(result), "structured": result.structured_content}

    bad = await session.call_tool("calc__add", {"a": "two"})
    report["bad_arguments"] = {"is_error": bool(bad.is_error), "text": text_of(bad)}

    failing = await session.call_tool("bad__panic", {})
    report["failing"] = {"is_error": bool(failing.is_error), "text": text_of(failing)}

    tool_error = await session.call_tool("calc__divide", {"a": 1, "b": 0})
    report["tool_error"] = {"is_error": bool(tool_error.is_error), "text": text_of(tool_error)}

    try:
        await session.call_tool("calc__modulo", {})
        report["unknown"] = {"raised": False}
    except Exception as error:  # the SDK raises on JSON-RPC errors
        error_data = getattr(error, "error", None)
        report["unknown"] = {
            "raised": True,
            "code": getattr(error_data, "code", None),
            "message": getattr(error_data, "message", str(error)),
        }
    return report


async def main():
    mode = sys.argv[1]
    if mode == "stdio":
        params = StdioServerParameters(command=sys.argv[2], args=["serve", *sys.argv[3:]])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                report = await scenario(session)
    elif mode == "http":
        async with streamable_http_client(sys.argv[2]) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                report = await scenario(session)
    elif mode == "auto-stdio":
        params = StdioServerParameters(command=sys.argv[2], args=["serve", *sys.argv[3:]])
        async with Client(params) as client:
            report = await auto_scenario(client)
    elif mode == "auto-http":
        async with Client(sys.argv[2]) as client:
            report = await auto_scenario(client)
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps(report))


anyio.run(main)
