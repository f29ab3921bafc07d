// A real OpenID provider for the SSO tests: panva's oidc-provider (certified), with its
// development login form (any login name signs in as the account of that name). One
// confidential client, PKCE required. Listens on a free port on localhost and prints
// {"issuer": "..."}; then reads the client's redirect URIs as one stdin line (space-separated) (the relay's port
// is known only once the relay runs, and the relay needs the issuer first), serves, prints
// {"ready": true}, and exits when its stdin closes.
//
// Environment: OIDC_CLIENT_ID, OIDC_CLIENT_SECRET.
import http from 'node:http';
import { createInterface } from 'node:readline';
import Provider from 'oidc-provider';

const { OIDC_CLIENT_ID, OIDC_CLIENT_SECRET } = process.env;
if (!OIDC_CLIENT_ID || !OIDC_CLIENT_SECRET) {
  console.error('provider.mjs needs OIDC_CLIENT_ID and OIDC_CLIENT_SECRET');
  process.exit(2);
}

const server = http.createServer((_req, res) => {
  res.writeHead(503).end('not configured yet');
});
const lines = createInterface({ input: process.stdin });
lines.once('line', (line) => configure(line.trim().split(/\s+/)));
lines.on('close', () => process.exit(0));
let issuer;
server.listen(0, () => {
  issuer = `http://localhost:${server.address().port}`;
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});

function configure(redirectUris) {
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: OIDC_CLIENT_ID,
        client_secret: OIDC_CLIENT_SECRET,
        redirect_uris: redirectUris,
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    pkce: { required: () => true },
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['name', 'preferred_username'],
    },
    // Any login name is an account: `<name>@example.test`, verified unless the name starts
    // with `unverified`.
    async findAccount(_ctx, id) {
      return {
        accountId: id,
        async claims() {
          return {
            sub: id,
            email: `${id}@example.test`,
            email_verified: !id.startsWith('unverified'),
            name: id,
            preferred_username: id,
          };
        },
      };
    },
    cookies: { keys: ['codex-relay-test-provider-cookie-key'] },
  });
  // Development-mode warnings are expected here; keep the output to what the test reads.
  provider.on('server_error', (_ctx, err) => console.error(`provider error: ${err.message}`));
  server.removeAllListeners('request');
  server.on('request', provider.callback());
  process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
}
