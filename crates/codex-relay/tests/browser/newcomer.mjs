// What a newcomer saw in the web UI, one defect per variant, in Debian's Chromium against
// `serve --demo` (crates/codex-relay/tests/all/browser_newcomer.rs):
//   push-denied   "Enable push on this device" with notifications denied says so, and how to
//                 allow them (the message was written, then overwritten)
//   phone-header  on a phone every header link shows whole (Notifications was clipped to a
//                 sliver, "New session" cut off)
//   scroll        a view opens at its top, not where the last view was scrolled to
//   runs          finished runs show as done, not idle, and each session has its own title
//   focus         no focus ring frames <main> after a navigation
// Prints one JSON line of findings; exits non-zero with the reason when a check fails.
// Usage: node newcomer.mjs BASE_URL OUT_DIR VARIANT (LOGIN_LINK in the environment)
import { chromium } from 'playwright-core';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [base, outDir, variant] = process.argv.slice(2);
const phone = variant === 'phone-header' || variant === 'scroll';
mkdirSync(outDir, { recursive: true });
const profile = mkdtempSync(join(tmpdir(), 'codex-relay-chromium-'));
const STEP = 60_000;

const args = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--no-first-run', '--disable-quic'];
// As a person who clicked "Block" on the browser's question.
if (variant === 'push-denied') args.push('--deny-permission-prompts');
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args,
  viewport: phone ? { width: 390, height: 844 } : { width: 1280, height: 900 },
  deviceScaleFactor: phone ? 2 : 1,
  isMobile: phone,
  hasTouch: phone,
});
const page = context.pages()[0] ?? (await context.newPage());
const problems = [];
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
const findings = { variant };
const snap = (name) => page.screenshot({ path: join(outDir, `${name}.png`) });

async function logIn() {
  await page.goto(process.env.LOGIN_LINK, { waitUntil: 'load' });
  await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: STEP });
}

async function pushDenied() {
  await logIn();
  await page.getByRole('link', { name: 'Notifications' }).click();
  const button = page.locator('#push-toggle');
  await page.waitForFunction(() => !document.querySelector('#push-toggle').disabled, null, { timeout: STEP });
  await button.click();
  // The answer arrives after the browser refused: wait for the button to be usable again.
  await page.waitForFunction(() => !document.querySelector('#push-toggle').disabled, null, { timeout: STEP });
  findings.permission = await page.evaluate(() => Notification.permission);
  findings.said = await page.locator('#push-state').textContent();
  await snap('push-denied');
  if (findings.permission !== 'denied') throw new Error(`the browser did not deny notifications (${findings.permission})`);
  if (!/blocked for this site/.test(findings.said) || !/site settings/.test(findings.said)) {
    throw new Error(`after a denied permission the page says: ${findings.said}`);
  }
}

async function phoneHeader() {
  await logIn();
  const seen = await page.evaluate(() => {
    const width = window.innerWidth;
    const nav = document.querySelector('.top nav').getBoundingClientRect();
    const navEl = document.querySelector('.top nav');
    return {
      width,
      navScrolls: navEl.scrollWidth > navEl.clientWidth + 1,
      items: [...document.querySelectorAll('.top nav a, .top .logout button')].map((a) => {
        const r = a.getBoundingClientRect();
        const style = getComputedStyle(a);
        return {
          text: a.textContent.trim(),
          shown: style.display !== 'none' && r.width > 0,
          left: r.left, right: r.right,
          inNav: a.closest('nav') ? r.left >= nav.left - 0.5 && r.right <= nav.right + 0.5 : true,
          cut: a.scrollWidth > a.clientWidth + 1,
        };
      }),
    };
  });
  findings.header = seen;
  await snap('phone-header');
  for (const i of seen.items) {
    if (!i.shown) throw new Error(`"${i.text}" is not shown on a phone`);
    if (i.left < 0 || i.right > seen.width + 0.5 || !i.inNav || i.cut) {
      throw new Error(`"${i.text}" is clipped on a phone: ${JSON.stringify(i)}`);
    }
  }
  if (seen.navScrolls) throw new Error('the header links scroll sideways (some are hidden)');
  // Each link works from there.
  await page.getByRole('link', { name: 'New session' }).click();
  await page.getByLabel('Prompt').waitFor({ timeout: STEP });
}

async function scroll() {
  await logIn();
  // A finished run's session: a long page on a phone.
  await page.locator('.session-row a').first().click();
  await page.locator('.turn-sep.end').first().waitFor({ timeout: STEP });
  const room = await page.evaluate(() => document.scrollingElement.scrollHeight - window.innerHeight);
  if (room < 200) throw new Error(`the session page is not long enough to scroll (${room}px)`);
  await page.evaluate(() => window.scrollTo(0, document.scrollingElement.scrollHeight));
  await page.waitForFunction(() => window.scrollY > 100, null, { timeout: STEP });
  findings.scrolledTo = await page.evaluate(() => window.scrollY);
  await page.getByRole('link', { name: 'Rules' }).click();
  await page.getByRole('heading', { name: 'Approval rules' }).waitFor({ timeout: STEP });
  findings.rulesAt = await page.evaluate(() => window.scrollY);
  await snap('rules-after-scroll');
  if (findings.rulesAt !== 0) throw new Error(`the Rules page opened scrolled to ${findings.rulesAt}px`);
}

async function runs() {
  await logIn();
  const rows = page.locator('.session-row');
  await page.waitForFunction(() => document.querySelectorAll('.session-row').length >= 2, null, { timeout: STEP });
  findings.rows = await rows.evaluateAll((els) => els.map((e) => ({
    status: e.querySelector('.status-slot .badge').dataset.status,
    label: e.querySelector('.status-slot .badge').textContent,
    preview: e.querySelector('.preview').textContent,
  })));
  await snap('runs');
  for (const r of findings.rows) {
    if (r.status !== 'done') throw new Error(`a finished run shows as ${r.status} (${r.label}): ${JSON.stringify(findings.rows)}`);
  }
  const titles = [];
  for (let i = 0; i < 2; i += 1) {
    await page.goto(`${base}#/`, { waitUntil: 'load' });
    await page.locator('.session-row a').nth(i).click();
    await page.locator('.turn-sep.end').first().waitFor({ timeout: STEP });
    await page.waitForFunction(() => !document.title.startsWith('Session'), null, { timeout: STEP });
    titles.push({ tab: await page.title(), heading: await page.locator('.session-head .title').textContent() });
  }
  findings.titles = titles;
  if (titles[0].tab === titles[1].tab) throw new Error(`two sessions have the same title: ${JSON.stringify(titles)}`);
  if (!titles.every((t) => t.tab.includes(t.heading))) throw new Error(`the tab titles do not name the sessions: ${JSON.stringify(titles)}`);
}

async function focus() {
  await logIn();
  const ring = () => page.evaluate(() => {
    const main = document.querySelector('main');
    const s = getComputedStyle(main);
    return { focused: document.activeElement === main, outline: `${s.outlineStyle} ${s.outlineWidth}` };
  });
  const rings = { load: await ring() };
  // By keyboard: focus the Rules link and press Enter.
  await page.getByRole('link', { name: 'Rules' }).focus();
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'Approval rules' }).waitFor({ timeout: STEP });
  rings.keyboard = await ring();
  // By mouse.
  await page.getByRole('link', { name: 'Notifications' }).click();
  await page.getByRole('heading', { name: 'Notifications' }).waitFor({ timeout: STEP });
  rings.mouse = await ring();
  findings.rings = rings;
  await snap('focus');
  for (const [how, r] of Object.entries(rings)) {
    if (!r.focused) throw new Error(`after ${how} <main> is not focused (a screen reader would not start there)`);
    if (!r.outline.startsWith('none')) throw new Error(`after ${how} a focus ring frames <main>: ${r.outline}`);
  }
}

try {
  const flows = { 'push-denied': pushDenied, 'phone-header': phoneHeader, scroll, runs, focus };
  if (!flows[variant]) throw new Error(`unknown variant ${variant}`);
  await flows[variant]();
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
