"""A remote MCP server on the official MCP Python SDK, for the tests of
toolsets of `kind: mcp` (toolhost as the client).

Usage:
    server.py stdio
    server.py http PORT

Tools: `add` (two integers), `echo` (a text), `token_ok` (whether the
request's `x-token` header is the value of $EXPECTED_TOKEN), `leak_token`
(answers with that header: the host must redact it), `pid` (the server's
process id) and `die` (the process exits at once: a server that dies
mid-session). `env` answers with an environment variable (a command's
server gets only the environment it is granted); `calls_seen` counts the
calls of `add` that reached the server. `chatty` sends the value of the
environment variable it is named in a log message and in a progress
notification, then answers `said`. `hang` never answers; `big` answers
with `n` bytes of text. `grow` adds a tool, `grown`, and
tells the client its tools changed (`notifications/tools/list_changed`).
"""

import asyncio
import os
import sys

from mcp.server.mcpserver import Context, MCPServer

mcp = MCPServer("toolhost-test-server")
calls = 0


def counted():
    global calls
    calls += 1


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    counted()
    return a + b


@mcp.tool()
def echo(text: str) -> str:
    """Answer with the text."""
    return text


@mcp.tool()
def token_ok(ctx: Context) -> str:
    """Whether the x-token header is the expected one."""
    headers = ctx.headers or {}
    return "yes" if headers.get("x-token") == os.environ.get("EXPECTED_TOKEN") else "no"


@mcp.tool()
def leak_token(ctx: Context) -> str:
    """Answer with the x-token header."""
    headers = ctx.headers or {}
    return "the token is " + headers.get("x-token", "<none>")


@mcp.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@mcp.tool()
def die() -> str:
    """Exit at once."""
    os._exit(3)


@mcp.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `grown` and say the tools changed."""

    def grown() -> str:
        """A tool added while the server runs."""
        return "grown"

    mcp.add_tool(grown, name="grown")
    await ctx.session.send_tool_list_changed()
    return "grew"


@mcp.tool()
def env(name: str) -> str:
    """The value of an environment variable, or <unset>."""
    return os.environ.get(name, "<unset>")


@mcp.tool()
def meta(ctx: Context) -> str:
    """The request's `_meta` keys, sorted, comma-separated."""
    found = ctx.request_context.meta or {}
    return ",".join(sorted(found.keys()))


@mcp.tool()
async def chatty(name: str, ctx: Context) -> str:
    """Send the environment variable's value in a log message and a progress notification."""
    value = os.environ.get(name, "<unset>")
    await ctx.session.send_log_message("info", {"said": value}, logger="chatty")
    await ctx.session.send_progress_notification("chatty", 1, total=2, message="said " + value)
    return "said"


@mcp.tool()
async def hang() -> str:
    """Never answer (the client's limit ends the call)."""
    await asyncio.sleep(3600)
    return "late"


@mcp.tool()
def big(n: int) -> str:
    """A text of n bytes."""
    return "x" * n


@mcp.tool()
def calls_seen() -> str:
    """How many calls of `add` reached the server."""
    return str(calls)


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        mcp.run()
    else:
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
