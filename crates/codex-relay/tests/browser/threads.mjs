// The thread operations' buttons of a session page, in Debian's Chromium against `serve --demo`
// after one finished demo run: set the model and effort (Model), fork the session (Fork: the
// fork opens, its timeline starts with where it came from and the copied turn), roll the fork
// back (Roll back: its history is empty, the log grows by one event), each checked against the
// API; the log shown stays the relay's, seq for seq. Review's target words parse as the API
// takes them. Prints one JSON line of findings; exits non-zero with the reason when a step fails.
// Usage: node threads.mjs BASE_URL OUT_DIR threads (LOGIN_LINK in the environment)
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
const findings = { variant };
const snap = (name) => page.screenshot({ path: join(outDir, `${name}.png`) });

// The answers the next window.prompt calls get, in order.
const answers = [];
page.on('dialog', async (d) => {
  findings.asked = [...(findings.asked ?? []), d.message()];
  if (answers.length === 0) {
    problems.push(`unexpected dialog: ${d.message()}`);
    await d.dismiss();
    return;
  }
  await d.accept(answers.shift());
});

const api = (path, init) => page.evaluate(async ([p, i]) => {
  const r = await fetch(p, i);
  return { status: r.status, body: await r.json().catch(() => null) };
}, [path, init ?? {}]);

/** The seqs the page shows equal the relay's log, each once. */
async function consistent(id) {
  const log = await api(`/api/sessions/${encodeURIComponent(id)}/events?after=0&limit=1000`);
  const seqs = log.body.events.map((e) => e.seq);
  const contiguous = seqs.every((s, i) => s === i + 1);
  await page.waitForFunction((n) => Number(document.querySelector('main').dataset.lastSeq || 0) >= n, log.body.lastSeq, { timeout: STEP });
  const shown = await page.evaluate(() => [...document.querySelectorAll('.timeline .ev[data-seq]')].map((e) => Number(e.dataset.seq)));
  if (!contiguous) throw new Error(`the log of ${id} is not contiguous: ${seqs}`);
  if (new Set(shown).size !== shown.length) throw new Error(`events shown twice: ${shown}`);
  return log.body.events;
}

async function threads() {
  await page.goto(process.env.LOGIN_LINK, { waitUntil: 'load' });
  await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: STEP });
  const list = await api('/api/sessions');
  const source = list.body.sessions[0].sessionId;
  await page.goto(`${base}#/s/${encodeURIComponent(source)}`, { waitUntil: 'load' });
  await page.locator('.turn-sep.end').first().waitFor({ timeout: STEP });
  const before = (await api(`/api/sessions/${source}`)).body;
  findings.sourceTurns = before.turns;

  // Review's words, as the API takes them.
  findings.reviewTargets = await page.evaluate(async () => {
    const { reviewTarget } = await import('/ui/threads.js');
    return ['', 'base:main', 'commit:abc123', 'look for races'].map(reviewTarget);
  });

  // Model: the model and effort of the next turns.
  answers.push('codex-relay-demo', 'high');
  await page.getByRole('button', { name: 'Model' }).click();
  await page.locator('.notice', { hasText: 'Next turns: codex-relay-demo · high' }).waitFor({ timeout: STEP });
  const chosen = (await api(`/api/sessions/${source}`)).body;
  findings.model = { model: chosen.model, effort: chosen.effort };

  // Fork the whole history: the fork opens.
  answers.push('');
  await page.getByRole('button', { name: 'Fork' }).click();
  await page.waitForFunction((s) => location.hash.startsWith('#/s/') && !location.hash.includes(s), source, { timeout: STEP });
  const fork = decodeURIComponent(await page.evaluate(() => location.hash.slice(4)));
  await page.locator('.ev.forked').waitFor({ timeout: STEP });
  await page.locator('.turn-sep.end').first().waitFor({ timeout: STEP });
  await snap('forked');
  const forked = (await api(`/api/sessions/${fork}`)).body;
  findings.fork = { id: fork, turns: forked.turns, model: forked.model, effort: forked.effort };
  const forkEvents = await consistent(fork);
  findings.forkFirst = forkEvents[0].ev.t;

  // Roll the fork back by one turn.
  answers.push('1');
  await page.getByRole('button', { name: 'Roll back' }).click();
  await page.locator('.ev.rolled-back').waitFor({ timeout: STEP });
  await page.locator('.notice', { hasText: 'Dropped 1 turn(s)' }).waitFor({ timeout: STEP });
  await snap('rolled-back');
  const after = (await api(`/api/sessions/${fork}`)).body;
  findings.afterRollback = after.turns;
  const rolledEvents = await consistent(fork);
  findings.logGrew = rolledEvents.length - forkEvents.length;
  findings.newKinds = rolledEvents.slice(forkEvents.length).map((e) => (e.ev.t === 'codex' ? `codex:${e.ev.method}` : e.ev.t));
  // The source is untouched.
  findings.sourceAfter = (await api(`/api/sessions/${source}`)).body.turns;
}

try {
  if (variant !== 'threads') throw new Error(`unknown variant ${variant}`);
  await threads();
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
