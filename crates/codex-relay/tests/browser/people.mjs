// People in Debian's Chromium: an invitation link (INVITE_PATH) accepted in the browser signs it
// in as the invited viewer, who sees the sessions but is refused the People view (403 naming the
// admin role); the second use of the link is refused; then the admin (RELAY_TOKEN) logs in and
// the People view lists the new user and the audit log's entries. The UI offers each role only
// what it may do: on a session waiting for an approval (SESSION_ID) the viewer has no Approve
// button, no composer and no New session link, and is told why; the admin has them all.
// Prints one JSON line.
// Usage: node people.mjs BASE_URL OUT_DIR VARIANT (RELAY_TOKEN, INVITE_PATH, SESSION_ID in the env)
import { chromium } from 'playwright-core';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [base, outDir, variant] = process.argv.slice(2);
mkdirSync(outDir, { recursive: true });
const profile = mkdtempSync(join(tmpdir(), 'codex-relay-chromium-'));
const STEP = 60_000;
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
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
  const invite = `${base}${process.env.INVITE_PATH}`;
  await page.goto(invite, { waitUntil: 'load' });
  await page.getByRole('heading', { name: 'You are invited' }).waitFor({ timeout: STEP });
  await page.getByRole('button', { name: 'Accept and sign in' }).click();
  await page.getByRole('heading', { name: /Welcome, Paula/ }).waitFor({ timeout: STEP });
  findings.token = (await page.locator('code').textContent()).startsWith('crp_');
  await page.goto(base, { waitUntil: 'load' });
  await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: STEP });
  findings.viewerSeesSessions = true;
  // What a viewer cannot do is not offered.
  const session = `${base}#/s/${encodeURIComponent(process.env.SESSION_ID)}`;
  await page.goto(session, { waitUntil: 'load' });
  await page.getByText('You can watch this request; answering it needs the approver role.').waitFor({ timeout: STEP });
  await page.getByRole('link', { name: 'New session' }).waitFor({ state: 'hidden', timeout: STEP });
  findings.viewerButtons = {
    approve: await page.getByRole('button', { name: 'Approve', exact: true }).count(),
    message: await page.getByRole('textbox', { name: 'Message' }).count(),
    interrupt: await page.getByRole('button', { name: 'Interrupt' }).count(),
  };
  await page.goto(`${base}#/audit`, { waitUntil: 'load' });
  const alert = page.getByRole('alert').filter({ hasText: 'needs the admin role' });
  await alert.first().waitFor({ timeout: STEP });
  findings.viewerRefused = await alert.first().textContent();
  await page.screenshot({ path: join(outDir, 'viewer.png') });
  // The link works once.
  await page.goto(invite, { waitUntil: 'load' });
  findings.again = await page.locator('.error').textContent();
  // The admin.
  await page.goto(`${base}/login`, { waitUntil: 'load' });
  await page.getByLabel('Token').fill(process.env.RELAY_TOKEN);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: STEP });
  await page.goto(session, { waitUntil: 'load' });
  await page.getByRole('button', { name: 'Approve', exact: true }).waitFor({ timeout: STEP });
  findings.adminButtons = {
    approve: await page.getByRole('button', { name: 'Approve', exact: true }).count(),
    message: await page.getByRole('textbox', { name: 'Message' }).count(),
    newSession: await page.getByRole('link', { name: 'New session' }).count(),
    watchOnly: await page.locator('.watch-only:visible').count(),
  };
  await page.goto(`${base}#/audit`, { waitUntil: 'load' });
  await page.getByRole('heading', { name: 'People and audit' }).waitFor({ timeout: STEP });
  const users = page.getByRole('list', { name: 'Users and tokens' });
  await users.getByText('Paula Viewer').waitFor({ timeout: STEP });
  const log = page.getByRole('table', { name: 'Audit log' });
  await log.locator('tr[data-action="invitation.create"]').first().waitFor({ timeout: STEP });
  findings.denied = await log.locator('tr[data-action="access.denied"]').first().textContent();
  findings.exportHref = await page.getByRole('link', { name: 'Export JSONL' }).getAttribute('href');
  await page.screenshot({ path: join(outDir, 'admin.png'), fullPage: true });
  if (problems.length) throw new Error(problems.join('; '));
  ok = true;
} catch (e) {
  findings.error = e.message.split('\n')[0];
  await page.screenshot({ path: join(outDir, 'FAILED.png') }).catch(() => {});
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
findings.ok = ok;
console.log(JSON.stringify(findings));
process.exit(ok ? 0 : 1);
