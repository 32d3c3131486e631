"""Call `add` through the official MCP Python SDK at a paced rate, for the
front-door bench: CLIENTS clients, together RATE calls a second, each on a
fixed schedule, for WARMUP seconds and then SECONDS measured.

Usage: paced.py MODE URL RATE CLIENTS SECONDS WARMUP

MODE `default` uses the SDK's default `Client` (which speaks 2026-07-28 to a
server that offers it: no session); `session` a `ClientSession` through the
initialize handshake (a session of the SDK's latest legacy version).

Prints `measuring` when the measured span starts, then one JSON line:
calls, elapsed_s, p50_us, p99_us, protocol_version.
"""

import json
import sys
import time
from contextlib import AsyncExitStack

import anyio
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client


async def open_client(stack, mode, url):
    """A client of `mode` and its protocol version."""
    if mode == "default":
        client = await stack.enter_async_context(Client(url))
        return client, client.protocol_version
    streams = await stack.enter_async_context(streamable_http_client(url))
    session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
    init = await session.initialize()
    return session, init.protocol_version


async def run(clients, rate, span):
    """Each client's calls for `span` seconds: the latencies of all (µs)."""
    count = len(clients)
    interval = count / rate
    per_client = max(1, int(span * rate) // count)
    start = time.monotonic()
    latencies = []

    async def drive(client, i):
        offset = interval * i / count
        for k in range(per_client):
            await anyio.sleep(max(0.0, start + offset + k * interval - time.monotonic()))
            sent = time.perf_counter()
            result = await client.call_tool("add", {"a": k, "b": 1})
            if result.is_error or (result.structured_content or {}).get("result") != k + 1:
                raise RuntimeError(f"a wrong answer: {result}")
            latencies.append((time.perf_counter() - sent) * 1e6)

    async with anyio.create_task_group() as group:
        for i, client in enumerate(clients):
            group.start_soon(drive, client, i)
    return latencies, time.monotonic() - start


async def main():
    mode, url = sys.argv[1], sys.argv[2]
    rate, count, seconds, warmup = float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
    async with AsyncExitStack() as stack:
        opened = [await open_client(stack, mode, url) for _ in range(count)]
        clients = [client for client, _ in opened]
        await run(clients, rate, warmup)
        print("measuring", flush=True)
        latencies, elapsed = await run(clients, rate, seconds)
        latencies.sort()

        def at(q):
            return latencies[min(len(latencies) - 1, int(q * len(latencies)))]

        report = {
            "calls": len(latencies),
            "elapsed_s": elapsed,
            "p50_us": at(0.5),
            "p99_us": at(0.99),
            "protocol_version": str(opened[0][1]),
        }
        print(json.dumps(report), flush=True)


anyio.run(main)
