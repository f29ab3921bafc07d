// Threads of the Codex daemon the terminal uses, in Debian's Chromium against
// `codex-relay serve --attach` (crates/codex-relay/tests/all/attach_serve.rs): both threads are
// listed marked attached; the one another client set to `never` says it no longer asks for
// approval and who set it; the other one's command approval shows as a card and is approved
// there (the test then checks the terminal saw it resolved and the command ran).
// Prints one JSON line of findings; exits non-zero with the reason when a step fails.
// Usage: node attach.mjs BASE_URL OUT_DIR attach
//   (RELAY_TOKEN, ASKING (the thread that asks), NEVER (the thread set to never) in the environment)
import { chromium } from 'playwright-core';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [base, outDir, variant] = process.argv.slice(2);
const { ASKING: asking, NEVER: never, RELAY_TOKEN: token } = process.env;
mkdirSync(outDir, { recursive: true });
const profile = mkdtempSync(join(tmpdir(), 'codex-relay-chromium-'));
const STEP = 60_000;

const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-quic'],
  viewport: { width: 390, height: 844 },
  deviceScaleFactor: 2,
  isMobile: true,
  hasTouch: true,
});
const page = context.pages()[0] ?? (await context.newPage());
const problems = [];
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
page.on('console', (m) => {
  if (m.type() === 'error' && !/Failed to load resource|net::ERR_/.test(m.text())) problems.push(`console: ${m.text()}`);
});
const findings = { variant };
const snap = (name) => page.screenshot({ path: join(outDir, `${name}.png`) });

async function step(name, fn) {
  try {
    return await fn();
  } catch (e) {
    await snap(`FAILED-${name}`).catch(() => {});
    throw new Error(`${name}: ${e.message.split('\n')[0]}`);
  }
}

async function attached() {
  await step('log in', async () => {
    await page.goto(base, { waitUntil: 'load' });
    await page.waitForURL(/\/login/, { timeout: STEP });
    await page.getByLabel('Token').fill(token);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: STEP });
  });
  await step('both threads listed as attached', async () => {
    findings.marks = {};
    for (const id of [asking, never]) {
      const mark = page.locator(`li.session-row[data-id="${id}"] .source.attached`);
      await mark.waitFor({ timeout: STEP });
      findings.marks[id] = await mark.textContent();
    }
    await snap('list');
  });
  await step('the never thread says it asks nobody', async () => {
    await page.goto(`${base}#/s/${encodeURIComponent(never)}`, { waitUntil: 'load' });
    const note = page.locator('.attached-note.asks-nobody');
    await note.waitFor({ timeout: STEP });
    findings.neverNote = await note.textContent();
    // The timeline fills in after the page's header: wait for its note (or give up after a
    // step's time, and report what it held).
    const timeline = page.locator('.timeline');
    await timeline.getByText('no longer asks for approval').first()
      .waitFor({ timeout: STEP }).catch(() => {});
    findings.neverTimeline = await timeline.textContent();
    await snap('never');
  });
  await step('the asking thread shows its card, approved here', async () => {
    await page.goto(`${base}#/s/${encodeURIComponent(asking)}`, { waitUntil: 'load' });
    const note = page.locator('.attached-note:not(.asks-nobody)');
    await note.waitFor({ timeout: STEP });
    findings.askingNote = await note.textContent();
    findings.askingState = await note.getAttribute('data-state');
    const card = page.locator('.card.request.kind-command_approval:not(.resolved)');
    await card.waitFor({ timeout: STEP });
    findings.card = await card.textContent();
    await snap('card');
    await card.getByRole('button', { name: 'Approve', exact: true }).click();
    const done = page.locator('.card.request.kind-command_approval.resolved');
    await done.waitFor({ timeout: STEP });
    findings.resolved = await done.textContent();
    await snap('approved');
  });
}

try {
  if (variant !== 'attach') throw new Error(`unknown variant ${variant}`);
  await attached();
  if (problems.length) throw new Error(problems.join('; '));
  console.log(JSON.stringify({ ok: true, ...findings }));
} catch (e) {
  await snap('FAILED').catch(() => {});
  console.log(JSON.stringify({ ok: false, error: e.message.split('\n')[0], problems, ...findings }));
  process.exitCode = 1;
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
