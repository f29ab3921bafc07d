// The web UI's shell: a hash router over the views (list, new session, session, rules, people
// and audit) and the one relay-wide event stream every view listens to.

import { get } from './api.js';
import { openStream } from './stream.js';
import { listView } from './list.js';
import { newView } from './new.js';
import { sessionView } from './session.js';
import { rulesView } from './rules.js';
import { notifyView } from './notify.js';
import { auditView } from './audit.js';

const main = document.getElementById('main');
const conn = document.getElementById('conn');
const waiting = document.getElementById('waiting');

/** Relay events fan out to whoever listens: the current view and the "waiting" indicator. */
const listeners = new Set();
export function onRelayEvent(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

/** Open requests across the relay, by id (for the "N waiting for you" link). */
const pending = new Map();
/** Answered ones: a pending list fetched before an answer must not bring them back. */
const answered = new Set();

function showWaiting() {
  const n = pending.size;
  waiting.hidden = n === 0;
  if (n === 0) return;
  const first = pending.values().next().value;
  waiting.textContent = `${n} waiting`;
  waiting.title = n === 1 ? '1 request waits for an answer' : `${n} requests wait for an answer`;
  waiting.href = `#/s/${encodeURIComponent(first.sessionId)}`;
}

async function loadPending() {
  try {
    const list = await get('/api/codex/permission/pending');
    pending.clear();
    for (const p of list) if (!answered.has(p.id)) pending.set(p.id, p);
    showWaiting();
  } catch {
    /* shown by the views */
  }
}

function dispatch(kind) {
  return (data) => {
    if (kind === 'request_opened') pending.set(data.id, data);
    if (kind === 'request_resolved') {
      pending.delete(data.id);
      answered.add(data.id);
    }
    if (kind === 'request_opened' || kind === 'request_resolved') showWaiting();
    for (const fn of listeners) fn(kind, data);
  };
}

const kinds = ['session_created', 'session_status', 'session_closed', 'session_usage', 'request_opened', 'request_resolved', 'lagged'];
openStream('/api/stream', {
  handlers: Object.fromEntries(kinds.map((k) => [k, dispatch(k)])),
  onState(state) {
    conn.textContent = state === 'live' ? '' : 'reconnecting…';
    conn.dataset.state = state;
  },
  // Whatever happened while we were away: fetch it again.
  onReconnect() {
    loadPending();
    for (const fn of listeners) fn('resync', null);
  },
});
loadPending();

// The signed-in role: what it cannot do is not offered (`data-needs` / `data-lacks` in
// style.css). The relay refuses it anyway; this only spares a click that would fail.
get('/api/me').then((me) => {
  const role = me && me.person && me.person.role;
  if (role) document.body.dataset.role = role;
}).catch(() => { /* shown by the views */ });

let current = null;

function route() {
  const hash = location.hash || '#/';
  if (current && current.leave) current.leave();
  main.replaceChildren();
  // A new view starts at its top, not at the scroll position the last one was left at.
  window.scrollTo(0, 0);
  for (const key of Object.keys(main.dataset)) delete main.dataset[key];
  let m;
  if ((m = hash.match(/^#\/s\/([^/?]+)/))) {
    current = sessionView(main, decodeURIComponent(m[1]), { onRelayEvent });
  } else if (hash.startsWith('#/new')) {
    current = newView(main);
  } else if (hash.startsWith('#/rules')) {
    current = rulesView(main);
  } else if (hash.startsWith('#/notify')) {
    current = notifyView(main);
  } else if (hash.startsWith('#/audit')) {
    current = auditView(main);
  } else {
    current = listView(main, { onRelayEvent });
  }
  for (const a of document.querySelectorAll('[data-nav]')) {
    const page = ['new', 'rules', 'notify', 'audit'].find((p) => hash.startsWith(`#/${p}`)) ?? (hash.startsWith('#/s/') ? 'session' : 'list');
    const active = a.dataset.nav === page;
    if (active) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  main.focus({ preventScroll: true });
}

window.addEventListener('hashchange', route);
// The service worker: installable app, push notifications (see sw.js).
if ('serviceWorker' in navigator) {
  navigator.serviceWorker.register('/sw.js', { scope: '/' }).catch((e) => console.warn('service worker:', e.message));
}
route();
