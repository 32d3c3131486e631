"""Call `toolhost serve --http` that checks bearer tokens, with the official
MCP Python SDK sending one.

Usage:
    bearer.py URL TOKEN TOOL ARGS_JSON

Lists the tools the token may see and calls TOOL with ARGS_JSON. Prints one
JSON object: the tool names and the call's text and isError.
"""

import json
import sys

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def text_of(result):
    return "".join(item.text for item in result.content if getattr(item, "type", None) == "text")


async def main():
    url, token, tool, arguments = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as client:
        async with streamable_http_client(url, http_client=client) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                tools = sorted(tool.name for tool in (await session.list_tools()).tools)
                result = await session.call_tool(tool, arguments)
    print(json.dumps({"tools": tools, "call": {"is_error": bool(result.is_error), "text": text_of(result)}}))


anyio.run(main)
