// Single sign-on in Debian's Chromium against a real OpenID provider (oidc-provider, its
// development login form). Each person gets a fresh browser context (no cookies shared):
//  - `alice` (bound by an admin to the user Alice) clicks "Sign in with NAME" on the login
//    page, signs in at the provider and lands in the UI; /api/me says Alice.
//  - that sign-in's callback URL, replayed without the state cookie and then with it put back,
//    is refused; a forged state is refused; after "Log out", a copy of the login cookie is
//    refused.
//  - `mallory` (unknown) is refused with a clear page and stays signed out.
//  - `ivy` accepts an invitation (INVITE_PATH) with the provider and becomes Ivy.
//  - a sign-in whose nonce was changed in the relay's store (RELAY_DB, SQLite) is refused.
//  - with START_BASE set, the sign-in starts on that relay and finishes on BASE (a cluster).
// Prints one JSON line. Usage: node sso.mjs BASE_URL OUT_DIR VARIANT
// (SSO_NAME, INVITE_PATH, RELAY_DB or START_BASE in the env)
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const [base, outDir, variant] = process.argv.slice(2);
mkdirSync(outDir, { recursive: true });
const NAME = process.env.SSO_NAME;
const STEP = 60_000;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-quic'],
});
const findings = { variant };
let ok = false;
let shot = 0;

async function fresh() {
  const ctx = await browser.newContext({ viewport: { width: 1100, height: 800 } });
  const page = await ctx.newPage();
  return { ctx, page };
}

// From `start` (a page with the SSO link `link`) through the provider's login and consent;
// `atProvider` runs while the browser is at the provider's form. Returns the callback URL
// and the state cookie as they were.
async function signIn({ ctx, page }, start, link, login, atProvider) {
  let callback = null;
  page.on('request', (r) => {
    if (r.url().includes('/login/oidc/callback')) callback = r.url();
  });
  await page.goto(start, { waitUntil: 'load' });
  await page.getByRole('link', { name: link }).click();
  await page.locator('input[name="login"]').waitFor({ timeout: STEP });
  const state = (await ctx.cookies()).find((c) => c.name === 'codex_relay_sso');
  if (atProvider) await atProvider();
  await page.locator('input[name="login"]').fill(login);
  await page.locator('input[name="password"]').fill('any password');
  await page.getByRole('button', { name: 'Sign-in' }).click();
  // Back at the relay: refused (an error page), or signed in (a page that moves on to the UI
  // at once, so either may be what is seen).
  const landed = page.locator('#sso-user, #sso-error').or(page.getByRole('heading', { name: 'Sessions' }));
  const consent = page.getByRole('button', { name: 'Continue' });
  await landed.or(consent).first().waitFor({ timeout: STEP });
  if (await consent.isVisible()) await consent.click();
  await landed.first().waitFor({ timeout: STEP });
  await page.waitForLoadState('load');
  await page.screenshot({ path: join(outDir, `${++shot}-${login}.png`) });
  return { callback, state };
}

async function me(page) {
  const res = await page.goto(`${base}/api/me`, { waitUntil: 'load' });
  const text = await res.text();
  let name = null;
  try { name = JSON.parse(text).person?.name ?? null; } catch { /* a login page */ }
  return { status: res.status(), name };
}

async function errorText(page) {
  return (await page.locator('#sso-error').textContent({ timeout: STEP })).trim();
}

try {
  const start = `${process.env.START_BASE || base}/login`;
  const link = `Sign in with ${NAME}`;
  // Alice, bound by the admin.
  const alice = await fresh();
  const { callback, state } = await signIn(alice, start, link, 'alice');
  findings.stateCookie = state ? { sameSite: state.sameSite, httpOnly: state.httpOnly, path: state.path } : null;
  // The signed-in page moves on to the UI by itself.
  await alice.page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: STEP });
  findings.alice = await me(alice.page);
  if (!process.env.START_BASE) {
    // The callback again: no state cookie any more, then the cookie put back (used once).
    await alice.page.goto(callback, { waitUntil: 'load' });
    findings.replayNoCookie = await errorText(alice.page);
    await alice.ctx.addCookies([{ ...state, expires: Math.floor(Date.now() / 1000) + 600 }]);
    await alice.page.goto(callback, { waitUntil: 'load' });
    findings.replayWithCookie = await errorText(alice.page);
    // A state this browser never had.
    const forged = new URL(callback);
    forged.searchParams.set('state', 'forged-state-value');
    await alice.page.goto(forged.href, { waitUntil: 'load' });
    findings.forged = await errorText(alice.page);
    // Still Alice: a refused callback does not end a login.
    findings.aliceAfter = await me(alice.page);
    // Logging out ends the login on the server: a copy of the cookie is refused after it.
    const login = (await alice.ctx.cookies()).find((c) => c.name === 'codex_relay_login');
    await alice.page.goto(base, { waitUntil: 'load' });
    await alice.page.getByRole('button', { name: 'Log out' }).click();
    await alice.page.waitForURL((u) => u.pathname === '/login', { timeout: STEP });
    await alice.ctx.addCookies([login]);
    findings.afterLogout = await me(alice.page);

    // Mallory: unknown to the relay.
    const mallory = await fresh();
    await signIn(mallory, start, link, 'mallory');
    findings.mallory = await errorText(mallory.page);
    findings.malloryMe = await me(mallory.page);

    // Ivy, through her invitation.
    const ivy = await fresh();
    await signIn(ivy, `${base}${process.env.INVITE_PATH}`, `Accept with ${NAME}`, 'ivy');
    await ivy.page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: STEP });
    findings.ivy = await me(ivy.page);

    // Alice again, but the nonce kept for this sign-in is not the one the provider gets.
    const { DatabaseSync } = await import('node:sqlite');
    const tampered = await fresh();
    await signIn(tampered, start, link, 'alice', async () => {
      const db = new DatabaseSync(process.env.RELAY_DB);
      db.exec('PRAGMA busy_timeout = 30000');
      findings.tamperedRows = Number(db.prepare("UPDATE sso_pending SET nonce = 'not-the-nonce-sent'").run().changes);
      db.close();
    });
    findings.wrongNonce = await errorText(tampered.page);
    findings.wrongNonceMe = await me(tampered.page);
  }
  ok = true;
} catch (e) {
  findings.error = e.message.split('\n')[0];
} finally {
  await browser.close();
}
findings.ok = ok;
console.log(JSON.stringify(findings));
process.exit(ok ? 0 : 1);
