"""A hostile MCP server over stdio, for the bounds toolhost keeps on remote
toolsets (`kind: mcp`). Raw JSON-RPC, no SDK: it says what no SDK would.

Usage:
    hostile.py MODE

Modes:
    pages   every `tools/list` page lists one tool and names a next page,
            for ever
    many N  one page of N tools
    twice   lists the tool `a` twice
    relist  after every `tools/list`, `notifications/tools/list_changed`;
            appends a line to $COUNT_FILE for each listing
    error   answers `tools/list` with an error whose message is 1 MiB
"""

import json
import os
import sys

mode = sys.argv[1]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def tool(name):
    return {"name": name, "description": "hostile", "inputSchema": {"type": "object"}}


def answer(request_id, result):
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def list_tools(request_id, params):
    if mode == "pages":
        page = int((params or {}).get("cursor") or 0)
        answer(request_id, {"tools": [tool(f"t{page}")], "nextCursor": str(page + 1)})
    elif mode == "many":
        answer(request_id, {"tools": [tool(f"t{i}") for i in range(int(sys.argv[2]))]})
    elif mode == "twice":
        answer(request_id, {"tools": [tool("a"), tool("b"), tool("a")]})
    elif mode == "relist":
        with open(os.environ["COUNT_FILE"], "a") as count:
            count.write("listed\n")
        answer(request_id, {"tools": [tool("a")]})
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    elif mode == "error":
        message = "x" * (1 << 20)
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32603, "message": message}})


for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if request_id is None or method is None:
        continue
    if method == "initialize":
        answer(
            request_id,
            {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "hostile", "version": "1"},
            },
        )
    elif method == "tools/list":
        list_tools(request_id, message.get("params"))
    elif method == "ping":
        answer(request_id, {})
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no such method"}})
