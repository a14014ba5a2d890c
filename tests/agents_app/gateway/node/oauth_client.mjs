// The TypeScript SDK's OAuth client against the gateway, driven over stdin/stdout (JSON lines): it discovers the
// authorization server from the 401, registers itself, prints the authorization URL for the test's scripted
// browser, reads back the code, exchanges it and then lists and calls as the consenting member.
// usage: node oauth_client.mjs <endpoint-url> <redirect-url>
import readline from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, redirectUrl] = process.argv.slice(2);
const out = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();

const store = { client: undefined, tokens: undefined, verifier: undefined, authorizeUrl: undefined };
const provider = {
  get redirectUrl() { return redirectUrl; },
  get clientMetadata() {
    return { client_name: "TypeScript SDK test client", redirect_uris: [redirectUrl],
             grant_types: ["authorization_code", "refresh_token"], response_types: ["code"],
             token_endpoint_auth_method: "none" };
  },
  clientInformation() { return store.client; },
  saveClientInformation(info) { store.client = info; },
  tokens() { return store.tokens; },
  saveTokens(tokens) { store.tokens = tokens; },
  redirectToAuthorization(authorizationUrl) { store.authorizeUrl = authorizationUrl.toString(); },
  saveCodeVerifier(verifier) { store.verifier = verifier; },
  codeVerifier() { return store.verifier; },
};

const connect = async () => {
  const client = new Client({ name: "toolhub-gateway-ts-oauth-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  await client.connect(transport);
  return { client, transport };
};

try {
  let connected;
  try {
    connected = await connect();
  } catch (error) {
    if (!(error instanceof UnauthorizedError) || !store.authorizeUrl) throw error;
    out({ event: "authorize", url: store.authorizeUrl });
    const answer = JSON.parse((await lines.next()).value);
    const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
    await transport.finishAuth(answer.code);
    connected = await connect();
  }
  const { client } = connected;
  const tools = (await client.listTools()).tools.map((t) => t.name);
  const call = JSON.parse((await lines.next()).value);
  const result = await client.callTool({ name: call.name, arguments: call.arguments ?? {} });
  out({ event: "done", tools, result, access_token: store.tokens?.access_token ?? null,
        client_id: store.client?.client_id ?? null });
  await client.close();
  process.exit(0);
} catch (error) {
  out({ event: "error", message: String(error) });
  process.exit(3);
}
