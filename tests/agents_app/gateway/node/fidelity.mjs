// The TypeScript SDK's view of one MCP server, for the gateway's fidelity test: list the tools and call each of
// the fidelity fixture's tools (progress, elicitation and sampling answered by this client), print one JSON line.
// usage: node fidelity.mjs stdio <command> <script>        (a direct connection)
//        node fidelity.mjs <streamable_http|sse> <url> <token> <prefix>   (through the gateway)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CreateMessageRequestSchema, ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [kind, a, b, prefix = ""] = process.argv.slice(2);
let transport;
if (kind === "stdio") {
  transport = new StdioClientTransport({ command: a, args: [b] });
} else {
  const headers = { Authorization: `Bearer ${b}` };
  transport = kind === "sse"
    ? new SSEClientTransport(new URL(a.replace(/\/$/, "") + "/sse"), {
        requestInit: { headers },
        eventSourceInit: { fetch: (u, init) => fetch(u, { ...init, headers: { ...(init?.headers || {}), ...headers } }) },
      })
    : new StreamableHTTPClientTransport(new URL(a), { requestInit: { headers } });
}

const client = new Client({ name: "toolhub-fidelity-ts", version: "1.0.0" },
                          { capabilities: { elicitation: {}, sampling: {} } });
client.setRequestHandler(ElicitRequestSchema, async (request) =>
  ({ action: "accept", content: { city: `Lyon (${request.params.message})` } }));
client.setRequestHandler(CreateMessageRequestSchema, async (request) => ({
  role: "assistant", model: "client-model", stopReason: "endTurn",
  content: { type: "text", text: `Bonjour! (${request.params.messages[0].content.text})` },
}));

await client.connect(transport);
const tools = (await client.listTools()).tools;
const calls = { forecast: { city: "Lyon" }, explode: { why: "bad" }, bare: {}, countdown: {}, ask: {}, think: {} };
const results = {};
const progress = [];
for (const [name, args] of Object.entries(calls)) {
  const options = name === "countdown"
    ? { onprogress: (p) => progress.push([p.progress, p.total ?? null, p.message ?? null]) } : undefined;
  results[name] = await client.callTool({ name: prefix + name, arguments: args }, undefined, options);
}
process.stdout.write(JSON.stringify({ tools, results, progress }) + "\n");
await client.close();
process.exit(0);
