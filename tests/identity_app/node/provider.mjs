// A real OpenID provider for the company sign-in browser test: node-oidc-provider with its development login and
// consent pages (any account id signs in, no password). Accounts and their groups are read from the JSON file
// named on the command line at every sign-in, so the test changes a person's groups between two sign-ins.
// Usage: node provider.mjs <accounts.json> <client_id> <client_secret> <redirect_uri>; prints {"issuer": ...}.
import fs from "node:fs";
import http from "node:http";
import Provider from "oidc-provider";

const [accountsFile, clientId, clientSecret, redirectUri] = process.argv.slice(2);

const server = http.createServer();
server.listen(0, "127.0.0.1", () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    clients: [{
      client_id: clientId, client_secret: clientSecret, redirect_uris: [redirectUri],
      token_endpoint_auth_method: "client_secret_post", grant_types: ["authorization_code"],
      response_types: ["code"],
    }],
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["given_name", "groups"] },
    conformIdTokenClaims: false,  // the groups claim in the id token too, as Entra ID and Keycloak send it
    pkce: { required: () => true },
    features: { devInteractions: { enabled: true } },
    cookies: { keys: ["toolhub-test-cookie-key"] },
    async findAccount(ctx, id) {
      const accounts = JSON.parse(fs.readFileSync(accountsFile, "utf8"));
      const account = accounts[id];
      if (!account) return undefined;
      return { accountId: id, async claims() { return { sub: id, email_verified: true, ...account }; } };
    },
  });
  provider.proxy = false;
  server.on("request", provider.callback());
  process.stdout.write(JSON.stringify({ issuer }) + "\n");
});
