// A real TypeScript-SDK MCP client for the gateway tests, driven line by line over stdin/stdout (JSON).
// usage: node client.mjs <endpoint-url> <token> <streamable_http|sse> [elicit]
import readline from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, token, kind, elicitMode] = process.argv.slice(2);
const out = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
const headers = { Authorization: `Bearer ${token}` };
const elicit = elicitMode === "elicit";

const client = new Client(
  { name: "toolhub-gateway-ts-test", version: "1.0.0" },
  { capabilities: elicit ? { elicitation: {} } : {} },
);
let changed = false;
client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
  changed = true;
  out({ event: "list_changed" });
});
if (elicit) {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    out({ event: "elicit", message: request.params.message });
    return { action: "accept", content: { approve: true } };
  });
}

const transport = kind === "sse"
  ? new SSEClientTransport(new URL(url.replace(/\/$/, "") + "/sse"), {
      requestInit: { headers },
      eventSourceInit: { fetch: (u, init) => fetch(u, { ...init, headers: { ...(init?.headers || {}), ...headers } }) },
    })
  : new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });

try {
  await client.connect(transport);
} catch (error) {
  out({ event: "error", message: String(error) });
  process.exit(3);
}
out({ event: "initialized", server: client.getServerVersion(), instructions: client.getInstructions() ?? null,
      capabilities: client.getServerCapabilities() });

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  const cmd = JSON.parse(line);
  try {
    if (cmd.op === "list") {
      out({ event: "tools", tools: (await client.listTools()).tools });
    } else if (cmd.op === "call") {
      out({ event: "result", result: await client.callTool({ name: cmd.name, arguments: cmd.arguments ?? {} }) });
    } else if (cmd.op === "wait_changed") {
      for (let i = 0; i < 600 && !changed; i++) await new Promise((resolve) => setTimeout(resolve, 100));
      out({ event: "waited", changed });
    } else if (cmd.op === "close") {
      await client.close();
      out({ event: "closed" });
      break;
    }
  } catch (error) {
    out({ event: "error", message: String(error) });
  }
}
process.exit(0);
