// Call `add` through the official MCP TypeScript SDK at a paced rate, for
// the front-door bench: CLIENTS clients (a session each, the SDK's defaults:
// its latest protocol, an `initialize` handshake, `Accept: application/json,
// text/event-stream`), together RATE calls a second, each on a fixed
// schedule, for WARMUP seconds and then SECONDS measured.
//
// Usage: node paced.mjs URL RATE CLIENTS SECONDS WARMUP
//
// Prints `measuring` when the measured span starts, then one JSON line:
// calls, elapsed_s, p50_us, p99_us, protocol_version.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, rate, clients, seconds, warmup] = process.argv.slice(2);
const count = Number(clients);
const interval = (count / Number(rate)) * 1000;

const sessions = [];
for (let i = 0; i < count; i++) {
  const transport = new StreamableHTTPClientTransport(new URL(url));
  const client = new Client({ name: "toolhost-bench", version: "0" });
  await client.connect(transport);
  sessions.push({ client, transport });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

// Each client's calls for `span` seconds; the latencies of all, in µs.
async function run(span) {
  const perClient = Math.max(1, Math.floor((span * Number(rate)) / count));
  const start = performance.now();
  const latencies = [];
  await Promise.all(
    sessions.map(async ({ client }, i) => {
      const offset = (interval * i) / count;
      for (let k = 0; k < perClient; k++) {
        await sleep(start + offset + k * interval - performance.now());
        const sent = performance.now();
        const result = await client.callTool({ name: "add", arguments: { a: k, b: 1 } });
        if (result.isError || result.structuredContent?.result !== k + 1) {
          throw new Error(`a wrong answer: ${JSON.stringify(result)}`);
        }
        latencies.push((performance.now() - sent) * 1000);
      }
    }),
  );
  return { latencies, elapsed: (performance.now() - start) / 1000 };
}

await run(Number(warmup));
console.log("measuring");
const { latencies, elapsed } = await run(Number(seconds));
latencies.sort((a, b) => a - b);
const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
console.log(
  JSON.stringify({
    calls: latencies.length,
    elapsed_s: elapsed,
    p50_us: at(0.5),
    p99_us: at(0.99),
    protocol_version: sessions[0].transport.protocolVersion ?? null,
  }),
);
for (const { client } of sessions) {
  await client.close();
}
process.exit(0);
