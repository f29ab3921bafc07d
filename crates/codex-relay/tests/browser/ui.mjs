// Drives Debian's Chromium through codex-relay's web UI against `serve --demo`: start a session,
// approve the file change and the command, reload mid-turn, see the diff and the completed turn,
// follow up. Prints one JSON line of findings; exits non-zero with the reason when a step fails.
// With `restart`, the relay is restarted while a request waits: the script prints `restart-now`
// and reads `restarted` from stdin once the new relay listens at the same address.
// With `plan` (against Codex 0.98, which offers the plan tool), the plan is followed to the end,
// and the relay's note that it recycled the idle Codex process (--codex-max-turns 1) is seen.
// Usage: node ui.mjs BASE_URL OUT_DIR desktop|phone|restart|plan
import { chromium } from 'playwright-core';
import { createInterface } from 'node:readline';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [base, outDir, variant] = process.argv.slice(2);
const phone = variant === 'phone';
mkdirSync(outDir, { recursive: true });
const profile = mkdtempSync(join(tmpdir(), 'codex-relay-chromium-'));
const STEP = 60_000;

const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-quic'],
  viewport: phone ? { width: 390, height: 844 } : { width: 1280, height: 900 },
  deviceScaleFactor: phone ? 2 : 1,
  isMobile: phone,
  hasTouch: phone,
});
const page = context.pages()[0] ?? (await context.newPage());
const problems = [];
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
// A relay that is away (the restart run) makes the browser log refused connections: expected.
page.on('console', (m) => {
  if (m.type() === 'error' && !/Failed to load resource|net::ERR_/.test(m.text())) problems.push(`console: ${m.text()}`);
});
let shot = 0;
const snap = async (name) => {
  shot += 1;
  await page.screenshot({ path: join(outDir, `${String(shot).padStart(2, '0')}-${name}.png`), fullPage: false });
};
const findings = { variant };

async function step(name, fn) {
  try {
    return await fn();
  } catch (e) {
    await snap(`FAILED-${name}`).catch(() => {});
    throw new Error(`${name}: ${e.message.split('\n')[0]}`);
  }
}

/** The seq numbers shown in the timeline and how many envelopes the view applied. */
async function shown() {
  return page.evaluate(() => {
    const seqs = [...document.querySelectorAll('.timeline .ev[data-seq]')].map((e) => Number(e.dataset.seq));
    const root = document.querySelector('main');
    return { seqs, applied: Number(root.dataset.applied || 0), lastSeq: Number(root.dataset.lastSeq || 0) };
  });
}

function unique(xs) {
  return new Set(xs).size === xs.length;
}

/** Every seq of the session applied once, in order, and the same as the relay's log. */
async function consistent(sessionId) {
  const res = await page.evaluate(async (id) => (await fetch(`/api/sessions/${encodeURIComponent(id)}/events?after=0&limit=1000`)).json(), sessionId);
  const view = await shown();
  if (!unique(view.seqs)) throw new Error(`events shown twice: ${view.seqs}`);
  if (view.applied !== res.events.length || view.lastSeq !== res.lastSeq) {
    throw new Error(`the view applied ${view.applied} envelopes up to ${view.lastSeq}; the log has ${res.events.length} up to ${res.lastSeq}`);
  }
  return res.events.length;
}

const lines = createInterface({ input: process.stdin });
const fromTest = lines[Symbol.asyncIterator]();

async function restartFlow() {
  await step('log in', async () => {
    // Without the cookie the UI sends the browser to the login form.
    await page.goto(base, { waitUntil: 'load' });
    await page.waitForURL(/\/login/, { timeout: STEP });
    await page.getByLabel('Token').fill('wrong');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('alert').waitFor({ timeout: STEP });
    await page.getByLabel('Token').fill(process.env.RELAY_TOKEN);
    await snap('login');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: STEP });
  });
  const sessionId = await step('start a session', async () => {
    await page.goto(`${base}#/new`, { waitUntil: 'load' });
    await page.getByLabel('Prompt').fill('Survive a relay restart');
    await page.getByRole('button', { name: 'Start session' }).click();
    await page.waitForURL(/#\/s\//, { timeout: STEP });
    await page.locator('.card.request.kind-file_change_approval:not(.resolved)').waitFor({ timeout: STEP });
    return decodeURIComponent(page.url().split('#/s/')[1]);
  });
  findings.sessionId = sessionId;
  const before = await shown();
  await step('restart the relay', async () => {
    console.log('restart-now');
    const reply = await fromTest.next();
    if (reply.value !== 'restarted') throw new Error(`the test said ${reply.value}`);
  });
  await step('see what happened while away', async () => {
    // The relay declined the open request on its way down and the turn ended: same page, no
    // reload, the stream reconnected and resumed.
    await page.locator('.card.request.kind-file_change_approval.resolved').waitFor({ timeout: STEP });
    await page.locator('.stream-state[data-state="live"]').waitFor({ timeout: STEP });
    await page.locator('.turn-sep.end').first().waitFor({ timeout: STEP });
    findings.restart = { before: before.lastSeq, after: await consistent(sessionId) };
    await snap('after-restart');
  });
  await step('go on in the new relay', async () => {
    await page.getByLabel('Message').fill('are you back?');
    await page.getByRole('button', { name: 'Send' }).click();
    const card = page.locator('.card.request.kind-command_approval:not(.resolved)');
    await card.waitFor({ timeout: STEP });
    // While the turn waits, the box steers it: the message joins the running turn.
    await page.getByLabel('Message').fill('and tell me what you see');
    await page.getByRole('button', { name: 'Steer' }).click();
    await page.getByText('Added to the running turn.').waitFor({ timeout: STEP });
    await card.getByRole('button', { name: 'Approve', exact: true }).click();
    // The demo model answers the newest message (it looks again, which asks again).
    const again = page.locator('.card.request.kind-command_approval:not(.resolved)');
    await again.waitFor({ timeout: STEP });
    await again.getByRole('button', { name: 'Approve', exact: true }).click();
    await page.locator('.msg.agent', { hasText: 'and tell me what you see' }).waitFor({ timeout: STEP });
    await page.locator('.turn-sep.end.status-completed').first().waitFor({ timeout: STEP });
    const starts = await page.locator('.turn-sep:not(.end)').count();
    if (starts !== 2) throw new Error(`${starts} turns started: the steer did not stay in its turn`);
    await page.locator('.turn-sep.end.status-completed').first().waitFor({ timeout: STEP });
    findings.events = await consistent(sessionId);
    await snap('resumed-turn');
  });
  await step('log out', async () => {
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL(/\/login/, { timeout: STEP });
    // The browser's own cookies, outside the login page (whose policy allows no fetches).
    const res = await context.request.get(new URL('/api/sessions', base).href);
    if (res.status() !== 401) throw new Error(`after logging out the API answered ${res.status()}`);
  });
}

/** Logs in as the test says: the one-time link `serve` printed (one click), or the token. */
async function logIn() {
  if (process.env.LOGIN_LINK) {
    await page.goto(process.env.LOGIN_LINK, { waitUntil: 'load' });
  } else {
    await page.goto(base, { waitUntil: 'load' });
    await page.waitForURL(/\/login/, { timeout: STEP });
    await page.getByLabel('Token').fill(process.env.RELAY_TOKEN);
    await page.getByRole('button', { name: 'Log in' }).click();
  }
  await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: STEP });
  const cookies = await context.cookies();
  const login = cookies.find((c) => c.name === 'codex_relay_login');
  if (!login || !login.httpOnly || login.sameSite !== 'Strict') throw new Error(`no HttpOnly, SameSite=Strict login cookie: ${JSON.stringify(cookies)}`);
  if (process.env.RELAY_TOKEN && login.value.includes(process.env.RELAY_TOKEN)) throw new Error('the cookie carries the token');
}

async function mainFlow() {
  await step('open the list', async () => {
    await logIn();
    await snap('list');
  });

  const prompt = `Show me the demo on a ${variant} screen`;
  const sessionId = await step('start a session', async () => {
    await page.getByRole('link', { name: 'New session' }).first().click();
    await page.getByLabel('Prompt').fill(prompt);
    // On the desktop in plan mode, where Codex lets the model ask a question.
    if (!phone) await page.getByLabel(/Plan mode/).check();
    if (await page.getByLabel('Approvals').inputValue() !== 'untrusted') throw new Error('the form does not default to asking');
    await snap('new-session');
    await page.getByRole('button', { name: 'Start session' }).click();
    await page.waitForURL(/#\/s\//, { timeout: STEP });
    return decodeURIComponent(page.url().split('#/s/')[1]);
  });
  findings.sessionId = sessionId;

  await step('approve the file change', async () => {
    const card = page.locator('.card.request.kind-file_change_approval:not(.resolved)');
    await card.waitFor({ timeout: STEP });
    const added = await card.locator('.dl.add').allTextContents();
    if (!added.some((l) => l.includes('Hello from the codex-relay demo!'))) throw new Error(`the diff shows no added greeting: ${added.join(' | ')}`);
    await snap('file-change-approval');
    await card.getByRole('button', { name: 'Approve', exact: true }).click();
    await page.locator('.card.request.kind-file_change_approval.resolved').waitFor({ timeout: STEP });
  });

  const before = await step('see the command approval', async () => {
    const card = page.locator('.card.request.kind-command_approval:not(.resolved)');
    await card.waitFor({ timeout: STEP });
    const cmd = await card.locator('.cmd').textContent();
    if (!cmd.includes('python3 hello.py')) throw new Error(`the card shows ${cmd}`);
    // Every option beyond Approve / Approve for session / Deny / Cancel is a button of its own
    // (Codex's remembered prefix, where Codex offers one): what the API lists, the card shows.
    const pending = await page.evaluate(async () => (await fetch('/api/codex/permission/pending')).json());
    const open = pending.find((r) => r.kind === 'command_approval');
    findings.extraOptions = {
      api: (open?.options || []).filter((o) => !['approve', 'approve for session', 'deny', 'cancel'].includes(o)),
      buttons: await card.locator('button[data-option]').evaluateAll((bs) => bs.map((b) => b.dataset.option)),
    };
    // The remembered prefix outlives the request: its button says what it lets Codex do and
    // asks again before answering; Back leaves the request open.
    const remember = card.locator('button[data-option="approve with codex rule"]');
    if (await remember.count()) {
      await remember.click();
      const note = card.locator('.rule-box [role=note]');
      await note.waitFor({ timeout: STEP });
      findings.codexRuleWarning = await note.textContent();
      if (!/outside the sandbox/.test(findings.codexRuleWarning)) throw new Error(`the warning says: ${findings.codexRuleWarning}`);
      await card.locator('.rule-box').getByRole('button', { name: 'Back' }).click();
      await card.getByRole('button', { name: 'Approve', exact: true }).waitFor({ timeout: STEP });
    }
    await page.locator('.ev.file .dl.add', { hasText: 'Hello from the codex-relay demo!' }).first().waitFor({ timeout: STEP });
    await snap('command-approval');
    return shown();
  });

  await step('reload mid-turn', async () => {
    const status = await page.locator('.session-head .status-slot .badge').getAttribute('data-status');
    if (status !== 'awaiting_approval') throw new Error(`expected the turn to wait for approval, status ${status}`);
    await page.reload({ waitUntil: 'load' });
    await page.locator('.card.request.kind-command_approval:not(.resolved)').waitFor({ timeout: STEP });
    await page.waitForFunction((n) => Number(document.querySelector('main').dataset.lastSeq || 0) >= n, before.lastSeq, { timeout: STEP });
    const after = await shown();
    const missing = before.seqs.filter((s) => !after.seqs.includes(s));
    if (missing.length) throw new Error(`events lost by the reload: ${missing}`);
    if (!unique(after.seqs)) throw new Error(`events shown twice: ${after.seqs}`);
    if (after.applied !== after.lastSeq) throw new Error(`applied ${after.applied} envelopes up to seq ${after.lastSeq}: a gap or a repeat`);
    findings.reload = { before: before.seqs.length, after: after.seqs.length, lastSeq: after.lastSeq };
    await snap('after-reload');
  });

  await step('approve the command', async () => {
    const card = page.locator('.card.request.kind-command_approval:not(.resolved)');
    await card.getByRole('button', { name: phone ? 'Approve for session' : 'Approve', exact: true }).click();
  });

  // The demo lets the model ask in Default mode too (the phone's session), not only in plan mode.
  await step('answer the question', async () => {
    const card = page.locator('.card.request.kind-question:not(.resolved)');
    await card.waitFor({ timeout: STEP });
    await snap('question');
    await card.getByRole('button', { name: 'Keep it', exact: true }).click();
    await page.locator('.card.request.kind-question.resolved').waitFor({ timeout: STEP });
  });

  await step('see the turn complete', async () => {
    await page.locator('.turn-sep.end.status-completed').waitFor({ timeout: STEP });
    await page.locator('.msg.agent', { hasText: 'You picked "Keep it"' }).waitFor({ timeout: STEP });
    if (await page.getByText('did not reach you').count()) throw new Error('the demo says its question did not reach the person');
    await page.locator('.tool-CodexBash .output', { hasText: 'Hello from the codex-relay demo!' }).first().waitFor({ timeout: STEP });
    await page.locator('.msg.agent', { hasText: 'it printed' }).waitFor({ timeout: STEP });
    const status = await page.locator('.session-head .status-slot .badge').getAttribute('data-status');
    if (status !== 'idle') throw new Error(`status ${status} after the turn`);
    await snap('turn-completed');
  });

  await step('follow up', async () => {
    await page.getByLabel('Message').fill('thanks, what is in the workspace now?');
    await page.getByRole('button', { name: 'Send' }).click();
    // The demo model looks at the workspace with `ls -la`, which asks first as well.
    const card = page.locator('.card.request.kind-command_approval:not(.resolved)');
    await card.waitFor({ timeout: STEP });
    if (phone) {
      // Deny, with a reason for the model.
      await card.getByRole('button', { name: 'Deny…' }).click();
      await card.getByLabel('Reason for denying').fill('not on my phone');
      await card.getByRole('button', { name: 'Deny', exact: true }).click();
      await page.locator('.card.request.resolved', { hasText: 'not on my phone' }).waitFor({ timeout: STEP });
      await page.locator('.tool-CodexBash .badge.declined').waitFor({ timeout: STEP });
      // The reason reached the model (the demo model quotes it).
      await page.locator('.msg.agent', { hasText: 'Your reason reached me: "not on my phone"' }).waitFor({ timeout: STEP });
    } else {
      await card.getByRole('button', { name: 'Approve', exact: true }).click();
      await page.locator('.msg.agent', { hasText: 'hello.py' }).last().waitFor({ timeout: STEP });
    }
    await page.locator('.turn-sep.end.status-completed').nth(1).waitFor({ timeout: STEP });
    findings.followUp = await page.locator('.msg.agent').last().textContent();
    await snap('follow-up');
  });

  await step('interrupt a waiting turn', async () => {
    await page.getByLabel('Message').fill('once more');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.locator('.card.request.kind-command_approval:not(.resolved)').waitFor({ timeout: STEP });
    await page.getByRole('button', { name: 'Interrupt' }).click();
    await page.locator('.turn-sep.end.status-cancelled').waitFor({ timeout: STEP });
    await page.locator('.session-head .badge[data-status="interrupted"]').waitFor({ timeout: STEP });
    // What became of the approval the turn waited for (the engine's business; reported).
    findings.openAfterInterrupt = await page.locator('.card.request:not(.resolved)').count();
    await snap('interrupted');
  });

  await step('a clean history', async () => {
    findings.events = await consistent(sessionId);
  });

  await step('the list shows the session', async () => {
    await page.getByRole('link', { name: 'Back to sessions' }).click();
    const row = page.locator(`.session-row[data-id="${sessionId}"]`);
    await row.waitFor({ timeout: STEP });
    const text = await row.textContent();
    if (!text.includes('tokens')) throw new Error(`the row shows no token usage: ${text}`);
    findings.row = text.replace(/\s+/g, ' ').trim();
    await snap('list-after');
  });

}

/** Codex 0.98 offers the plan tool: the plan appears, then is kept current where it was. */
async function planFlow() {
  await step('log in', logIn);
  await step('start a session', async () => {
    await page.goto(`${base}#/new`, { waitUntil: 'load' });
    await page.getByLabel('Prompt').fill('Show me the plan');
    await page.getByRole('button', { name: 'Start session' }).click();
    await page.waitForURL(/#\/s\//, { timeout: STEP });
  });
  await step('see the plan and approve', async () => {
    await page.locator('.ev.plan .step.in_progress', { hasText: 'Write a small Python script' }).waitFor({ timeout: STEP });
    await snap('plan');
    for (const kind of ['file_change_approval', 'command_approval']) {
      const card = page.locator(`.card.request.kind-${kind}:not(.resolved)`);
      await card.waitFor({ timeout: STEP });
      await card.getByRole('button', { name: 'Approve', exact: true }).click();
    }
  });
  await step('see the plan done', async () => {
    await page.locator('.turn-sep.end.status-completed').waitFor({ timeout: STEP });
    const plans = await page.locator('.ev.plan').count();
    const done = await page.locator('.ev.plan .step.completed').count();
    if (plans !== 1 || done !== 3) throw new Error(`${plans} plan blocks with ${done} steps done`);
    await page.locator('.ev.plan').scrollIntoViewIfNeeded();
    await snap('plan-done');
  });
  // The relay runs with --codex-max-turns 1: the idle process is recycled and the log says so.
  await step('see the recycle note', async () => {
    const note = page.locator('.timeline .ev.notice', { hasText: 'replaced by a fresh process' });
    await note.waitFor({ timeout: STEP });
    const text = await note.textContent();
    if (!text.startsWith('Note: ')) throw new Error(`the note reads ${text}`);
    findings.note = text;
    const status = await page.locator('.session-head .status-slot .badge').getAttribute('data-status');
    if (status !== 'idle') throw new Error(`status ${status} after the recycle`);
    await snap('recycle-note');
  });
  await step('an unknown session says so and stops trying', async () => {
    await page.goto(`${base}#/s/no-such-session`, { waitUntil: 'load' });
    await page.locator('.stream-state[data-state="gone"]').waitFor({ timeout: STEP });
    const notice = await page.locator('.notice').first().textContent();
    if (!notice.includes('unknown session')) throw new Error(`the page says ${notice}`);
  });
}

try {
  await ({ restart: restartFlow, plan: planFlow }[variant] ?? mainFlow)();
  const overflow = await page.evaluate(() => document.scrollingElement.scrollWidth - window.innerWidth);
  if (overflow > 1) problems.push(`the page scrolls sideways by ${overflow}px`);
  if (problems.length) throw new Error(problems.join('; '));
  console.log(JSON.stringify({ ok: true, ...findings }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, error: e.message, problems, ...findings }));
  process.exitCode = 1;
} finally {
  lines.close();
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
