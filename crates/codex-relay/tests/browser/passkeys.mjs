// Passkeys in Debian's Chromium with a virtual authenticator (DevTools' WebAuthn domain: CTAP2,
// internal, resident keys, user verification that succeeds): the approver Pia signs in with her
// token, registers a passkey on the Passkeys view, logs out and signs in again with the passkey
// alone. Then the risky request of UI_SESSION (UI_REQUEST) is refused without a step-up (403
// step_up_required), and approved from its card, which asks the passkey; the answer link
// (LINK_PATH, a risky request too) refuses an approval without a passkey and takes one with it.
// Prints one JSON line.
// Usage: node passkeys.mjs BASE_URL OUT_DIR VARIANT (RELAY_TOKEN = Pia's token; UI_SESSION,
// UI_REQUEST, LINK_PATH, LINK_REQUEST in the env)
import { chromium } from 'playwright-core';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [base, outDir, variant] = process.argv.slice(2);
const env = process.env;
mkdirSync(outDir, { recursive: true });
const profile = mkdtempSync(join(tmpdir(), 'codex-relay-chromium-'));
const STEP = 60_000;
const context = await chromium.launchPersistentContext(profile, {
  executablePath: env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-quic'],
  viewport: { width: 1280, height: 900 },
});
const page = context.pages()[0] ?? (await context.newPage());
const problems = [];
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
page.on('console', (m) => {
  if (m.type() === 'error' && !/Failed to load resource|net::ERR_/.test(m.text())) problems.push(`console: ${m.text()}`);
});
const findings = { variant };
let ok = false;
try {
  const cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true,
      isUserVerified: true, automaticPresenceSimulation: true },
  });

  // Signed in with her token, Pia registers a passkey.
  await page.goto(`${base}/login`, { waitUntil: 'load' });
  await page.getByLabel('Token').fill(env.RELAY_TOKEN);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: STEP });
  await page.getByRole('link', { name: 'Passkeys' }).click();
  await page.getByRole('heading', { name: 'Passkeys' }).waitFor({ timeout: STEP });
  await page.getByLabel('Passkey name').fill('laptop');
  await page.getByRole('button', { name: 'Register a passkey' }).click();
  await page.getByRole('status').filter({ hasText: 'registered' }).waitFor({ timeout: STEP });
  const list = page.getByRole('list', { name: 'Passkeys' });
  await list.getByText('laptop').waitFor({ timeout: STEP });
  findings.registered = true;
  const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
  findings.residentKeys = credentials.filter((c) => c.isResidentCredential).length;
  await page.screenshot({ path: join(outDir, 'registered.png') });

  // Log out; the passkey alone signs her in again (no name typed: a discoverable credential).
  await page.getByRole('button', { name: 'Log out' }).click();
  await page.getByRole('button', { name: 'Sign in with a passkey' }).waitFor({ timeout: STEP });
  findings.loggedOut = (await page.evaluate(() => fetch('/api/me').then((r) => r.status)));
  await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
  await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: STEP });
  findings.me = await page.evaluate(() => fetch('/api/me').then((r) => r.json()));

  // A risky approval without the passkey is refused, with how to do it.
  findings.bare = await page.evaluate(async (id) => {
    const r = await fetch('/api/codex/permission/respond', {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id, action: 'allow' }),
    });
    return { status: r.status, body: await r.json() };
  }, env.UI_REQUEST);
  // From its card: Approve asks the passkey, then approves.
  await page.goto(`${base}/#/s/${encodeURIComponent(env.UI_SESSION)}`, { waitUntil: 'load' });
  const card = page.locator(`section[data-request="${env.UI_REQUEST}"]`);
  await card.getByRole('button', { name: 'Approve', exact: true }).click();
  await card.locator('.card-status .badge').waitFor({ timeout: STEP });
  findings.uiDecision = await card.locator('.card-status').textContent();
  await page.screenshot({ path: join(outDir, 'approved.png') });

  // The answer link: an approval posted without the passkey is refused; the page's button
  // asks the passkey and approves.
  await page.context().clearCookies();
  await page.goto(`${base}${env.LINK_PATH}`, { waitUntil: 'load' });
  const approve = page.getByRole('button', { name: 'Approve once with a passkey' });
  await approve.waitFor({ timeout: STEP });
  findings.linkBare = await page.evaluate(async ({ id, path }) => {
    const t = new URL(path, location.href).searchParams.get('t');
    const r = await fetch(`/answer/${id}`, {
      method: 'POST', credentials: 'omit',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ t, a: 'approve' }),
    });
    const html = await r.text();
    return { status: r.status, code: (html.match(/data-code="([^"]+)"/) || [])[1] };
  }, { id: env.LINK_REQUEST, path: env.LINK_PATH });
  await approve.click();
  await page.getByRole('heading', { name: 'Answered' }).waitFor({ timeout: STEP });
  findings.linkDecision = await page.getByRole('status').getAttribute('data-decision');
  await page.screenshot({ path: join(outDir, 'link.png') });
  ok = problems.length === 0;
} catch (e) {
  problems.push(`${e.name}: ${e.message}`);
  await page.screenshot({ path: join(outDir, 'failure.png') }).catch(() => {});
} finally {
  await context.close().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify({ ok, problems, ...findings }));
process.exit(ok ? 0 : 1);
