// Drive `toolhost serve` with the official MCP TypeScript SDK.
//
// Usage:
//   node client.mjs stdio TOOLHOST_BIN ARG...   (spawns `TOOLHOST_BIN serve ARG...`)
//   node client.mjs http URL [--hold]
//
// Lists the tools, calls calc__add and an unknown tool, and prints one JSON
// line describing what it saw. With --hold it then prints `holding` and
// keeps the session (and the SDK's GET stream) open until the server ends
// it, then prints `closed`.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, target, ...rest] = process.argv.slice(2);
const transport =
  mode === "stdio"
    ? new StdioClientTransport({ command: target, args: ["serve", ...rest], stderr: "ignore" })
    : new StreamableHTTPClientTransport(new URL(target));
const client = new Client({ name: "toolhost-tests", version: "0" });
const closed = new Promise((resolve) => {
  transport.onclose = resolve;
});
await client.connect(transport);

const report = { server: client.getServerVersion()?.name, protocol_version: transport.protocolVersion ?? null };
const listed = await client.listTools();
report.tools = listed.tools.map((t) => t.name).sort();
const add = await client.callTool({ name: "calc__add", arguments: { a: 2, b: 3 } });
report.add = { is_error: Boolean(add.isError), structured: add.structuredContent ?? null };
try {
  await client.callTool({ name: "calc__modulo", arguments: {} });
  report.unknown = { raised: false };
} catch (error) {
  report.unknown = { raised: true, code: error.code ?? null };
}
console.log(JSON.stringify(report));

if (rest.includes("--hold")) {
  console.log("holding");
  await closed;
  console.log("closed");
} else {
  await client.close();
}
process.exit(0);
