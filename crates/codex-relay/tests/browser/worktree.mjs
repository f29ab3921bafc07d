// Opens a session that works in a git worktree (SESSION_ID) in Debian's Chromium and checks
// the session view shows the worktree's branch and its diff: every changed file (WANT_FILES,
// comma-separated) as a diff block, and the added line WANT_LINE. Prints one JSON line.
// Usage: node worktree.mjs BASE_URL OUT_DIR VARIANT (RELAY_TOKEN, SESSION_ID, WANT_* in the env)
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
  await page.goto(base, { waitUntil: 'load' });
  await page.waitForURL(/\/login/, { timeout: STEP });
  await page.getByLabel('Token').fill(process.env.RELAY_TOKEN);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: STEP });
  await page.goto(`${base}#/s/${encodeURIComponent(process.env.SESSION_ID)}`, { waitUntil: 'load' });
  const panel = page.getByRole('region', { name: 'Worktree changes' });
  const want = process.env.WANT_FILES.split(',');
  for (const file of want) {
    await panel.getByRole('table', { name: `Changes to ${file}` }).waitFor({ timeout: STEP });
  }
  await panel.locator('.dl.add .code', { hasText: process.env.WANT_LINE }).first().waitFor({ timeout: STEP });
  findings.title = await page.locator('.worktree-title').textContent();
  findings.summary = await page.locator('.worktree-summary').textContent();
  findings.files = await panel.locator('.diff .path').allTextContents();
  await page.locator('.worktree').screenshot({ path: join(outDir, 'worktree.png') });
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
