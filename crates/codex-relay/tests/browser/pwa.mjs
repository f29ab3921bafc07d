// The UI as an installed app, in Debian's Chromium against `serve --demo`: Chromium finds
// nothing missing to install it (manifest, icons, a service worker in control); a push
// subscription made from the UI's Notifications view reaches the relay, and when a request
// opens the relay sends a Web Push to the push endpoint this script runs (RFC 8030): it is
// VAPID-signed by the key the UI subscribed with (RFC 8292) and decrypts with the
// subscription's keys (RFC 8291) to the request's title and link; delivered to the real
// service worker, it shows a notification. Then "Always allow…" on the command's card saves
// a rule and approves, and the card says who answered. Each card says what approving it lets
// Codex do (the patch stays in the sandbox, the command may run outside it), and the rule
// form offers "outside the sandbox", unticked, saying what it grants.
//
// Chromium's PushManager.subscribe() asks Google's push service for an endpoint, which this
// machine cannot reach: the page's PushManager hands out a subscription to this script's
// endpoint instead (keys made here), and the push is handed to the worker through the
// DevTools protocol, as the browser would after receiving it. Everything else is the real
// UI, relay, encryption and worker.
// Usage: node pwa.mjs BASE_URL OUT_DIR (LOGIN_LINK in the environment)
import { chromium } from 'playwright-core';
import { createServer } from 'node:http';
import crypto from 'node:crypto';
import { mkdtempSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [base, outDir] = process.argv.slice(2);
mkdirSync(outDir, { recursive: true });
const STEP = 60_000;
const findings = { variant: 'pwa' };
const b64u = (b) => Buffer.from(b).toString('base64url');

// The push endpoint (the push service's side of RFC 8030), recording what it is sent.
const pushes = [];
const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    pushes.push({ path: req.url, headers: req.headers, body: Buffer.concat(chunks) });
    res.writeHead(201, { location: `${req.url}/msg-${pushes.length}` });
    res.end();
  });
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const endpoint = `http://127.0.0.1:${server.address().port}/wpush/device-1`;

// The browser's side of the subscription: its P-256 key pair and auth secret.
const ecdh = crypto.createECDH('prime256v1');
const uaPublic = ecdh.generateKeys();
const auth = crypto.randomBytes(16);

/** RFC 8291: one aes128gcm record, decrypted with the browser's keys. */
function decrypt(body) {
  const salt = body.subarray(0, 16);
  const idlen = body[20];
  const keyid = body.subarray(21, 21 + idlen);
  const sealed = body.subarray(21 + idlen);
  const shared = ecdh.computeSecret(keyid);
  const info = Buffer.concat([Buffer.from('WebPush: info\0'), uaPublic, keyid]);
  const ikm = Buffer.from(crypto.hkdfSync('sha256', shared, auth, info, 32));
  const cek = Buffer.from(crypto.hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: aes128gcm\0'), 16));
  const nonce = Buffer.from(crypto.hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: nonce\0'), 12));
  const d = crypto.createDecipheriv('aes-128-gcm', cek, nonce);
  d.setAuthTag(sealed.subarray(sealed.length - 16));
  const plain = Buffer.concat([d.update(sealed.subarray(0, sealed.length - 16)), d.final()]);
  let end = plain.length - 1;
  while (end > 0 && plain[end] === 0) end -= 1;
  if (plain[end] !== 2) throw new Error('no last-record delimiter');
  return plain.subarray(0, end).toString('utf8');
}

/** RFC 8292: `vapid t=<JWT>, k=<key>`, ES256 by that key, for the endpoint's origin. */
function checkVapid(header, publicKey) {
  const m = /^vapid t=([^,]+), k=(.+)$/.exec(header || '');
  if (!m) throw new Error(`no VAPID authorization: ${header}`);
  if (m[2] !== publicKey) throw new Error('the push names another key than the one the UI subscribed with');
  const [h, c, s] = m[1].split('.');
  const pt = Buffer.from(publicKey, 'base64url');
  const key = crypto.createPublicKey({ key: { kty: 'EC', crv: 'P-256', x: b64u(pt.subarray(1, 33)), y: b64u(pt.subarray(33, 65)) }, format: 'jwk' });
  if (!crypto.verify('sha256', Buffer.from(`${h}.${c}`), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(s, 'base64url'))) throw new Error('the VAPID JWT does not verify');
  const claims = JSON.parse(Buffer.from(c, 'base64url'));
  if (claims.aud !== new URL(endpoint).origin) throw new Error(`aud ${claims.aud}`);
  if (!(claims.exp > Date.now() / 1000)) throw new Error('an expired JWT');
  return claims;
}

const profile = mkdtempSync(join(tmpdir(), 'codex-relay-chromium-'));
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
await context.grantPermissions(['notifications'], { origin: new URL(base).origin });
await context.addInitScript(({ endpoint, p256dh, auth }) => {
  if (!('PushManager' in self)) return;
  const KEY = 'codex-relay-test-push';
  const make = () => ({
    endpoint, expirationTime: null, options: { userVisibleOnly: true },
    toJSON() { return { endpoint, expirationTime: null, keys: { p256dh, auth } }; },
    async unsubscribe() { localStorage.removeItem(KEY); return true; },
  });
  PushManager.prototype.subscribe = async function (opts) {
    const key = opts && opts.applicationServerKey;
    localStorage.setItem('codex-relay-test-key', key ? btoa(String.fromCharCode(...new Uint8Array(key))) : '');
    localStorage.setItem(KEY, '1');
    return make();
  };
  PushManager.prototype.getSubscription = async function () { return localStorage.getItem(KEY) ? make() : null; };
}, { endpoint, p256dh: b64u(uaPublic), auth: b64u(auth) });

const page = context.pages()[0] ?? (await context.newPage());
const problems = [];
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
let shot = 0;
const snap = async (name) => {
  shot += 1;
  await page.screenshot({ path: join(outDir, `${String(shot).padStart(2, '0')}-${name}.png`) });
};
async function step(name, fn) {
  try {
    return await fn();
  } catch (e) {
    await snap(`FAILED-${name}`).catch(() => {});
    console.error(`${name}: ${e.message}`);
    throw new Error(`${name}: ${e.message.split('\n')[0]}`);
  }
}

async function run() {
  const cdp = await context.newCDPSession(page);
  await step('log in', async () => {
    await page.goto(process.env.LOGIN_LINK, { waitUntil: 'load' });
    await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: STEP });
  });
  await step('installable', async () => {
    const manifest = await page.evaluate(async () => {
      const href = document.querySelector('link[rel="manifest"]').href;
      return (await fetch(href)).json();
    });
    if (manifest.display !== 'standalone' || manifest.start_url !== '/' || !manifest.icons.some((i) => i.sizes === '512x512')) {
      throw new Error(`manifest: ${JSON.stringify(manifest)}`);
    }
    await page.evaluate(() => navigator.serviceWorker.ready);
    // Controlled from the next load on.
    await page.reload({ waitUntil: 'load' });
    await page.waitForFunction(() => navigator.serviceWorker.controller !== null, null, { timeout: STEP });
    const { installabilityErrors } = await cdp.send('Page.getInstallabilityErrors');
    if (installabilityErrors.length) throw new Error(`Chromium would not install it: ${JSON.stringify(installabilityErrors)}`);
    const { url, errors, data } = await cdp.send('Page.getAppManifest');
    if (errors.length || !data) throw new Error(`manifest errors: ${JSON.stringify(errors)}`);
    findings.manifest = url;
  });
  const publicKey = await step('subscribe from the UI', async () => {
    await page.getByRole('link', { name: 'Notifications' }).click();
    await page.getByRole('heading', { name: 'Notifications' }).waitFor({ timeout: STEP });
    await page.getByRole('button', { name: 'Enable push on this device' }).click();
    await page.getByText('This device gets push notifications.').waitFor({ timeout: STEP });
    const { publicKey } = await page.evaluate(async () => (await fetch('/api/push/key')).json());
    const given = await page.evaluate(() => localStorage.getItem('codex-relay-test-key'));
    if (Buffer.from(given, 'base64').toString('base64url') !== publicKey) throw new Error('the UI subscribed with another key than the relay\'s');
    await snap('subscribed');
    return publicKey;
  });
  const sessionId = await step('a request opens', async () => {
    await page.getByRole('link', { name: 'New session' }).first().click();
    await page.getByLabel('Prompt').fill('Show me the demo as an app');
    await page.getByRole('button', { name: 'Start session' }).click();
    await page.waitForURL(/#\/s\//, { timeout: STEP });
    await page.locator('.card.request.kind-file_change_approval:not(.resolved)').waitFor({ timeout: STEP });
    return decodeURIComponent(page.url().split('#/s/')[1].split('?')[0]);
  });
  const payload = await step('the push arrives', async () => {
    const deadline = Date.now() + STEP;
    while (pushes.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    if (pushes.length === 0) throw new Error('no push reached the endpoint');
    const p = pushes[0];
    if (p.path !== '/wpush/device-1') throw new Error(`pushed to ${p.path}`);
    if (p.headers['content-encoding'] !== 'aes128gcm') throw new Error(`content-encoding ${p.headers['content-encoding']}`);
    if (!(Number(p.headers.ttl) > 0)) throw new Error(`TTL ${p.headers.ttl}`);
    const claims = checkVapid(p.headers.authorization, publicKey);
    const text = decrypt(p.body);
    const data = JSON.parse(text);
    // The url is the notification's open link: through the relay, which records the opening.
    if (data.sessionId !== sessionId || !data.url.includes(`/n/msg_${data.requestId}_push-`)) throw new Error(`payload ${text}`);
    findings.push = { title: data.title, sub: claims.sub, bytes: p.body.length };
    return text;
  });
  await step('the worker shows it', async () => {
    await cdp.send('ServiceWorker.enable');
    const registrationId = await new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('no service worker registration reported')), STEP);
      cdp.on('ServiceWorker.workerRegistrationUpdated', ({ registrations }) => {
        const r = registrations.find((x) => x.scopeURL === new URL('/', base).href && !x.isDeleted);
        if (r) { clearTimeout(t); resolve(r.registrationId); }
      });
    });
    // Delivered once the worker is active; again every 2 s while nothing shows (a push
    // delivered while the worker was still starting can be dropped on a busy machine).
    await page.evaluate(async () => { await navigator.serviceWorker.ready; });
    const deliver = () => cdp.send('ServiceWorker.deliverPushMessage', { origin: new URL(base).origin, registrationId, data: payload });
    await deliver();
    let delivered = Date.now();
    const deadline = Date.now() + STEP;
    let shown = null;
    while (!shown && Date.now() < deadline) {
      if (Date.now() - delivered > 2000) { await deliver(); delivered = Date.now(); }
      shown = await page.evaluate(async () => {
        const reg = await navigator.serviceWorker.ready;
        const list = await reg.getNotifications();
        return list.length ? { title: list[0].title, body: list[0].body, url: list[0].data.url } : null;
      });
      if (!shown) await new Promise((r) => setTimeout(r, 200));
    }
    if (!shown) throw new Error('the worker showed no notification');
    findings.notification = shown;
    if (findings.notification.title !== findings.push.title) throw new Error(`shown: ${JSON.stringify(findings.notification)}`);
  });
  await step('always allow from the card', async () => {
    // Each card says what approving it lets Codex do: the patch stays in the workspace's
    // sandbox; the command, under untrusted, may run outside it.
    const patchCard = page.locator('.card.request.kind-file_change_approval:not(.resolved)');
    findings.patchReach = await patchCard.locator('.reach').textContent({ timeout: STEP });
    // Its delivery trail: queued, then accepted by the (script's) push service with its 201.
    await patchCard.locator('.trail summary').click();
    await patchCard.locator('.trail li[data-status="accepted"]').waitFor({ timeout: STEP });
    findings.trail = await patchCard.locator('.trail li').allTextContents();
    await snap('trail');
    await patchCard.getByRole('button', { name: 'Approve', exact: true }).click();
    const card = page.locator('.card.request.kind-command_approval:not(.resolved)');
    await card.waitFor({ timeout: STEP });
    findings.commandReach = await card.locator('.reach').textContent({ timeout: STEP });
    await card.getByRole('button', { name: 'Always allow…' }).click();
    const argv = card.getByLabel('Command starts with');
    await argv.waitFor({ timeout: STEP });
    if ((await argv.inputValue()) !== 'python3 hello.py') throw new Error(`suggested ${await argv.inputValue()}`);
    // The opt-in is offered, unticked, with what it grants; the hint says this rule needs it.
    const outside = card.getByRole('checkbox', { name: 'Also when it may run outside the sandbox' });
    if (await outside.isChecked()) throw new Error('outside the sandbox is ticked by default');
    findings.outsideHint = await card.locator('.outside-sandbox .hint').textContent();
    findings.ruleHint = await card.locator('.rule-box > .hint').textContent();
    await outside.check();
    await snap('always-allow');
    await card.getByRole('button', { name: 'Save rule and approve' }).click();
    const done = page.locator('.card.request.kind-command_approval.resolved .card-status');
    await done.waitFor({ timeout: STEP });
    const who = await done.textContent();
    if (!who.includes('by a person (web UI / HTTP)')) throw new Error(`the card says ${who}`);
    findings.answered = who;
    // The demo model then asks its question (the demo lets it in Default mode too).
    const question = page.locator('.card.request.kind-question:not(.resolved)');
    await question.waitFor({ timeout: STEP });
    await question.getByRole('button', { name: 'Keep it', exact: true }).click();
    await page.locator('.turn-sep.end.status-completed').waitFor({ timeout: STEP });
    await page.getByRole('link', { name: 'Rules' }).click();
    const rule = page.locator('.rules .rule[data-rule="allow-python3-hello-py"]');
    await rule.waitFor({ timeout: STEP });
    findings.ruleWhen = await rule.locator('.rule-when').textContent();
    await snap('rules');
  });
  await step('the outbox shows the pushes', async () => {
    await page.getByRole('link', { name: 'Notifications' }).click();
    await page.locator('.outbox tr[data-state="delivered"]').first().waitFor({ timeout: STEP });
    findings.outbox = await page.locator('.outbox tbody tr').count();
    await snap('outbox');
    // A test to this device's push: its own trail, shown as it goes.
    await page.getByRole('button', { name: 'Test push' }).click();
    await page.locator('#test-trail li[data-status="accepted"]').waitFor({ timeout: STEP });
    findings.testTrail = await page.locator('#test-trail li').allTextContents();
  });
}

let ok = false;
try {
  await run();
  if (problems.length) throw new Error(problems.join('; '));
  ok = true;
} catch (e) {
  findings.error = e.message;
}
await context.close();
server.close();
console.log(JSON.stringify({ ok, ...findings }));
process.exit(ok ? 0 : 1);
