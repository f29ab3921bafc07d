// The notifications view (#/notify): Web Push on this device (subscribe / unsubscribe), a test
// per channel with its delivery trail, and the relay's outbox: every notification with its
// target, state, attempts and last error.

import { get, post } from './api.js';
import { h, ago } from './dom.js';
import { trailList } from './trail.js';

/** What to do when the browser refuses notifications to this site. */
const BLOCKED = 'Notifications are blocked for this site: allow them in the browser\'s site settings (the icon left of the address), then enable push again.';

const STATE = { pending: 'retrying', delivered: 'delivered', skipped: 'skipped', failed: 'gave up' };

function b64urlToBytes(s) {
  const pad = '='.repeat((4 - (s.length % 4)) % 4);
  const raw = atob((s + pad).replace(/-/g, '+').replace(/_/g, '/'));
  return Uint8Array.from(raw, (c) => c.charCodeAt(0));
}

/** The service worker's registration, registered by app.js. */
async function registration() {
  if (!('serviceWorker' in navigator)) throw new Error('This browser has no service workers.');
  return navigator.serviceWorker.ready;
}

export function notifyView(root) {
  const pushState = h('p', { class: 'meta', role: 'status', id: 'push-state' });
  const pushButton = h('button', { class: 'button primary', type: 'button', id: 'push-toggle' }, 'Enable push on this device');
  const counts = h('p', { class: 'meta', role: 'status' });
  const rows = h('tbody', {});
  const error = h('p', { class: 'form-error', role: 'alert' });
  const tests = h('div', { class: 'card-controls', id: 'test-buttons' });
  const testTrail = h('div', { id: 'test-trail', role: 'status' });
  let left = false;
  let subscribed = null;
  let testTimer = null;

  /** Shows the trails of the test notifications `ids` until each is done with. */
  function follow(ids) {
    clearInterval(testTimer);
    const show = async () => {
      const all = [];
      for (const id of ids) all.push(...(await get(`/api/notifications/${encodeURIComponent(id)}/deliveries`)).deliveries);
      if (left) return;
      testTrail.replaceChildren(trailList(all));
      const done = ids.every((id) => all.some((d) => d.notificationId === id && ['sent', 'accepted', 'skipped'].includes(d.status)
        || (d.notificationId === id && d.status === 'failed' && /not retried|given up/.test(d.detail ?? ''))));
      if (done) clearInterval(testTimer);
    };
    show().catch((e) => { testTrail.textContent = e.message; });
    testTimer = setInterval(() => show().catch(() => {}), 1500);
  }

  async function loadChannels() {
    try {
      const { channels } = await get('/api/notifications/channels');
      tests.replaceChildren(...(channels.length ? channels.map((c) => {
        const b = h('button', { class: 'button', type: 'button', dataset: { channel: c } }, `Test ${c}`);
        b.addEventListener('click', async () => {
          testTrail.textContent = 'Sending…';
          try {
            const { notifications } = await post('/api/notifications/test', { channel: c });
            follow(notifications);
          } catch (e) {
            testTrail.textContent = e.message;
          }
        });
        return b;
      }) : [h('p', { class: 'meta' }, 'No channel: give serve a notify file (docs/NOTIFY.md).')]));
    } catch (e) {
      tests.textContent = e.message;
    }
  }

  root.append(
    h('h1', {}, 'Notifications'),
    h('section', { class: 'card', 'aria-labelledby': 'push-title' },
      h('h2', { id: 'push-title' }, 'Push to this device'),
      h('p', { class: 'hint' }, 'A notification when a request waits for you, even with the page closed. Install the app (the browser\'s “Install” or “Add to Home Screen”) for the best result on a phone.'),
      pushState, pushButton),
    h('section', { class: 'card', 'aria-labelledby': 'test-title' },
      h('h2', { id: 'test-title' }, 'Send a test'),
      h('p', { class: 'hint' }, 'Sends a test notification on one channel and shows what became of it.'),
      tests, testTrail),
    h('h2', {}, 'Sent and waiting'), counts, error,
    h('div', { class: 'table-wrap' }, h('table', { class: 'outbox' },
      h('thead', {}, h('tr', {}, ['When', 'What', 'To', 'State', 'Attempts', 'Last error'].map((t) => h('th', { scope: 'col' }, t)))),
      rows)));

  /** Shows whether this device is subscribed; `problem` (what the last attempt hit) stays
   * shown in front of it rather than being replaced. */
  async function showPush(problem = '') {
    const say = (text) => { pushState.textContent = problem ? `${problem} ${text}` : text; };
    try {
      const reg = await registration();
      subscribed = await reg.pushManager.getSubscription();
      pushButton.textContent = subscribed ? 'Stop push on this device' : 'Enable push on this device';
      pushButton.disabled = false;
      if (!subscribed && 'Notification' in window && Notification.permission === 'denied') {
        say(BLOCKED);
      } else {
        say(subscribed ? 'This device gets push notifications.' : 'This device gets no push notifications.');
      }
      pushState.dataset.problem = problem ? 'yes' : '';
    } catch (e) {
      say(e.message);
      pushButton.disabled = true;
    }
  }

  pushButton.addEventListener('click', async () => {
    pushButton.disabled = true;
    let problem = '';
    try {
      const reg = await registration();
      if (subscribed) {
        await post('/api/push/unsubscribe', { endpoint: subscribed.endpoint });
        await subscribed.unsubscribe();
      } else {
        const allowed = await Notification.requestPermission();
        // Denied: the state line says what to do; otherwise the prompt was dismissed.
        if (allowed === 'denied') throw new Error('Push was not enabled:');
        if (allowed !== 'granted') throw new Error('Push was not enabled: notifications were not allowed.');
        const { publicKey } = await get('/api/push/key');
        const sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: b64urlToBytes(publicKey) });
        const json = sub.toJSON();
        await post('/api/push/subscriptions', { endpoint: json.endpoint, keys: json.keys, label: navigator.userAgent.slice(0, 120) });
      }
    } catch (e) {
      problem = e.message;
    }
    await showPush(problem);
  });

  async function load() {
    try {
      const data = await get('/api/notifications?limit=100');
      if (left) return;
      error.textContent = '';
      counts.textContent = Object.entries(data.counts).map(([k, n]) => `${n} ${STATE[k] ?? k}`).join(' · ') || 'Nothing sent yet.';
      rows.replaceChildren(...data.notifications.map((n) => h('tr', { dataset: { id: n.id, state: n.state } },
        h('td', {}, ago(n.createdAt)),
        h('td', {}, n.title ?? n.event, n.sessionId ? [' ', h('a', { href: `#/s/${encodeURIComponent(n.sessionId)}` }, 'open')] : null),
        h('td', {}, n.target),
        h('td', {}, h('span', { class: `badge state-${n.state}` }, STATE[n.state] ?? n.state)),
        h('td', {}, String(n.attempts)),
        h('td', { class: 'meta' }, n.lastError ?? ''))));
    } catch (e) {
      error.textContent = e.message;
    }
  }

  showPush();
  loadChannels();
  load();
  const timer = setInterval(load, 5000);
  return { leave() { left = true; clearInterval(timer); clearInterval(testTimer); } };
}
