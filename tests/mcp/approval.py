"""Approval by elicitation, driven by the official MCP Python SDK.

Usage:
    approval.py MODE ANSWER stdio TOOLHOST_BIN ARG...   (spawns `TOOLHOST_BIN serve ARG...`)
    approval.py MODE ANSWER http URL

MODE is `legacy` (a `ClientSession` through the initialize handshake) or
`auto` (the SDK's default `Client`: 2026-07-28 when offered, where the
question comes back as an `input_required` result). ANSWER is what the user
says: `accept` (yes), `no` (accepts the form, answers no), `decline`,
`cancel`, `slow` (answers yes after 5 s), or `none` (the client declares no
elicitation at all).

Calls calc__divide (which requires approval) and calc__add (which does not),
and prints one JSON object: the questions asked and both results.
"""

import json
import sys

import anyio
import mcp.types as types
from mcp import Client, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

mode, answer, transport, *target = sys.argv[1:]
asked = []


async def elicit(context, params):
    asked.append({"message": params.message, "schema": params.requested_schema})
    if answer == "slow":
        await anyio.sleep(5)
        return types.ElicitResult(action="accept", content={"approve": True})
    if answer == "accept":
        return types.ElicitResult(action="accept", content={"approve": True})
    if answer == "no":
        return types.ElicitResult(action="accept", content={"approve": False})
    return types.ElicitResult(action=answer)


callback = None if answer == "none" else elicit


def text_of(result):
    return "".join(item.text for item in result.content if getattr(item, "type", None) == "text")


async def calls(session, version):
    divide = await session.call_tool("calc__divide", {"a": 1, "b": 4})
    add = await session.call_tool("calc__add", {"a": 2, "b": 3})
    return {
        "protocol_version": version,
        "asked": asked,
        "divide": {"is_error": bool(divide.is_error), "text": text_of(divide)},
        "add": {"is_error": bool(add.is_error), "text": text_of(add)},
    }


async def main():
    if mode == "legacy":
        if transport == "stdio":
            params = StdioServerParameters(command=target[0], args=["serve", *target[1:]])
            async with stdio_client(params) as (read, write):
                async with ClientSession(read, write, elicitation_callback=callback) as session:
                    init = await session.initialize()
                    report = await calls(session, init.protocol_version)
        else:
            async with streamable_http_client(target[0]) as streams:
                async with ClientSession(streams[0], streams[1], elicitation_callback=callback) as session:
                    init = await session.initialize()
                    report = await calls(session, init.protocol_version)
    else:
        server = StdioServerParameters(command=target[0], args=["serve", *target[1:]]) if transport == "stdio" else target[0]
        async with Client(server, elicitation_callback=callback) as client:
            report = await calls(client, client.protocol_version)
    print(json.dumps(report))


anyio.run(main)
