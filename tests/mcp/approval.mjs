// Approval by elicitation, driven by the official MCP TypeScript SDK.
//
// Usage:
//   node approval.mjs ANSWER stdio TOOLHOST_BIN ARG...   (spawns `TOOLHOST_BIN serve ARG...`)
//   node approval.mjs ANSWER http URL
//
// ANSWER: accept, no, decline or cancel. Calls calc__divide (which requires
// approval) and prints one JSON line: the questions asked and the result.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [answer, mode, target, ...rest] = process.argv.slice(2);
const transport =
  mode === "stdio"
    ? new StdioClientTransport({ command: target, args: ["serve", ...rest], stderr: "ignore" })
    : new StreamableHTTPClientTransport(new URL(target));
const client = new Client({ name: "toolhost-tests", version: "0" }, { capabilities: { elicitation: {} } });
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push({ message: request.params.message, schema: request.params.requestedSchema });
  if (answer === "accept") return { action: "accept", content: { approve: true } };
  if (answer === "no") return { action: "accept", content: { approve: false } };
  return { action: answer };
});
await client.connect(transport);
const divide = await client.callTool({ name: "calc__divide", arguments: { a: 1, b: 4 } });
const text = divide.content.filter((c) => c.type === "text").map((c) => c.text).join("");
console.log(JSON.stringify({ asked, divide: { is_error: Boolean(divide.isError), text } }));
await client.close();
process.exit(0);
