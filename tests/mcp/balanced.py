"""Call tools through a load balancer in front of several `toolhost serve
--http` instances, with the official MCP Python SDK, while one instance is
killed.

Usage:
    balanced.py URL MODE CALLS

MODE is `stateless` (the SDK's default client: protocol 2026-07-28, no
session, any instance answers any request) or `session` (a 2025-11-25
session, which lives on one instance: when that instance is gone the
session's next request fails, and the client opens a new one).

Makes CALLS calls of `calc__add`, each checked; after half of them prints
`halfway` and waits for a line on stdin (the test kills an instance then).
Prints one JSON object: how many calls succeeded, how many failed (with
their errors) or were interrupted with their session, how many of the second
half succeeded, and how many sessions were opened.
"""

import json
import sys

import anyio
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client


def text_of(result):
    return "".join(item.text for item in result.content if getattr(item, "type", None) == "text")


async def halfway():
    print("halfway", flush=True)
    await anyio.to_thread.run_sync(sys.stdin.readline)


async def checked_call(session, n):
    result = await session.call_tool("calc__add", {"a": n, "b": 1})
    if result.is_error or text_of(result) != str(n + 1):
        raise RuntimeError(f"call {n}: unexpected answer {text_of(result)!r}")


async def stateless(url, calls, report):
    async with Client(url) as client:
        report["protocol_version"] = client.protocol_version
        for n in range(calls):
            if n == calls // 2:
                await halfway()
            try:
                await checked_call(client, n)
                report["ok"] += 1
                report["second_half_ok"] += n >= calls // 2
            except Exception as error:  # noqa: BLE001 - every failure is reported
                report["failed"].append(f"{type(error).__name__}: {error}")


async def with_sessions(url, calls, report):
    n = 0
    waited = False
    while n < calls:
        report["sessions"] += 1
        try:
            async with streamable_http_client(url) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    await session.initialize()
                    while n < calls:
                        if n == calls // 2 and not waited:
                            waited = True
                            await halfway()
                        current = n
                        n += 1
                        seen = False
                        try:
                            await checked_call(session, current)
                            report["ok"] += 1
                            report["second_half_ok"] += current >= calls // 2
                            seen = True
                        except Exception as error:  # noqa: BLE001
                            report["failed"].append(f"{type(error).__name__}: {error}")
                            seen = True
                            break
                        finally:
                            # Cancelled with its session: the caller saw it end too.
                            report["interrupted"] += not seen
        except Exception as error:  # noqa: BLE001 - a session that could not close
            report["closing_errors"].append(f"{type(error).__name__}: {error}")
        if report["sessions"] > calls:
            break


async def main():
    url, mode, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
    report = {"ok": 0, "failed": [], "interrupted": 0, "second_half_ok": 0, "sessions": 0, "closing_errors": []}
    if mode == "stateless":
        await stateless(url, calls, report)
    else:
        await with_sessions(url, calls, report)
    print(json.dumps(report), flush=True)


anyio.run(main)
