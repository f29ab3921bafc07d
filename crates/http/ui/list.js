// The session list: status, what it is about, cwd, model and token usage; kept current from the
// relay-wide stream.

import { get } from './api.js';
import { h, ago, tokens, statusBadge, shortPath } from './dom.js';

/** A row's badge: an idle session that no Codex holds any more (a `run` that ended, a session
 * of an earlier start) is done with its work, not waiting; a message resumes it. */
function rowBadge(s) {
  if (s.status === 'idle' && !s.live) {
    const badge = statusBadge('idle');
    badge.dataset.status = 'done';
    badge.textContent = 'done';
    badge.title = 'Its last turn finished; a message resumes it.';
    return badge;
  }
  return statusBadge(s.status ?? (s.live ? 'idle' : 'stored'));
}

/** Where a session comes from, when not from this relay: a thread of the Codex daemon the
 * terminal uses (attached, docs/ATTACH.md), or a thread another Codex client made. */
function sourceMark(s) {
  if (s.source === 'codex-daemon') {
    return h('span', { class: 'source attached', title: 'A thread of the Codex daemon the terminal uses; the terminal and this relay answer the same requests' }, 'attached: Codex daemon');
  }
  return s.owned ? null : h('span', { class: 'source' }, `from ${s.source}`);
}

export function listView(root, { onRelayEvent }) {
  const rows = new Map();
  const tbody = h('ul', { class: 'sessions', 'aria-label': 'Sessions' });
  const notice = h('p', { class: 'notice', role: 'status' });
  const more = h('button', { class: 'button', hidden: true, onclick: () => load(cursor) }, 'Load more');
  let cursor = null;

  root.append(
    // Passkeys are this device's sign-in and step-up (kept off the header, which is full on a phone).
    h('div', { class: 'page-head' }, h('h1', {}, 'Sessions'), h('a', { class: 'button small', href: '#/passkeys' }, 'Passkeys')),
    notice, tbody, more);

  function row(s) {
    const id = s.sessionId;
    const pendingBadge = h('span', { class: 'badge pending', hidden: true });
    const li = h('li', { class: 'session-row', dataset: { id } },
      h('a', { class: 'row-link', href: `#/s/${encodeURIComponent(id)}` },
        h('span', { class: 'row-top' },
          h('span', { class: 'status-slot' }, rowBadge(s)),
          pendingBadge,
          h('span', { class: 'preview' }, s.preview || '(no message yet)')),
        h('span', { class: 'row-meta' },
          h('span', { class: 'cwd', title: s.cwd || '' }, shortPath(s.cwd) || '—'),
          h('span', { class: 'model' }, s.model || ''),
          h('span', { class: 'usage' }, tokens(s.usage) || ''),
          h('span', { class: 'when' }, ago(s.updatedAt)),
          sourceMark(s))));
    rows.set(id, { li, data: s, pendingBadge, pending: new Set() });
    return li;
  }

  function update(id, patch) {
    const r = rows.get(id);
    if (!r) return;
    Object.assign(r.data, patch);
    if (patch.status) r.li.querySelector('.status-slot').replaceChildren(rowBadge(r.data));
    if ('usage' in patch) r.li.querySelector('.usage').textContent = tokens(patch.usage) || '';
    r.li.querySelector('.when').textContent = ago(Date.now());
  }

  function showPending(id) {
    const r = rows.get(id);
    if (!r) return;
    r.pendingBadge.hidden = r.pending.size === 0;
    r.pendingBadge.textContent = `${r.pending.size} waiting`;
  }

  async function load(after) {
    try {
      const q = new URLSearchParams({ limit: '50' });
      if (after) q.set('cursor', after);
      const page = await get(`/api/sessions?${q}`);
      if (!after) {
        tbody.replaceChildren();
        rows.clear();
      }
      for (const s of page.sessions) tbody.append(row(s));
      cursor = page.nextCursor;
      more.hidden = !cursor;
      notice.textContent = rows.size ? '' : 'No sessions yet. Start one with “New session”.';
      const open = await get('/api/codex/permission/pending');
      for (const p of open) rows.get(p.sessionId)?.pending.add(p.id);
      for (const id of rows.keys()) showPending(id);
    } catch (e) {
      notice.textContent = e.message;
    }
  }

  async function refresh(id) {
    try {
      const s = await get(`/api/sessions/${encodeURIComponent(id)}`);
      update(id, { status: s.status, usage: s.usage, model: s.model });
    } catch {
      /* the row keeps what it had */
    }
  }

  const off = onRelayEvent((kind, d) => {
    switch (kind) {
      case 'session_created':
        if (!rows.has(d.sessionId)) {
          tbody.prepend(row({ ...d, preview: null, owned: true, updatedAt: Date.now() }));
          notice.textContent = '';
          refresh(d.sessionId);
        }
        break;
      case 'session_status':
      case 'session_closed':
        // A status from this relay's stream: a session it runs now (or has just closed).
        update(d.sessionId, { status: d.status ?? (kind === 'session_closed' ? 'closed' : undefined), live: kind === 'session_status' });
        break;
      case 'session_usage':
        update(d.sessionId, { usage: d.usage });
        break;
      case 'request_opened':
        rows.get(d.sessionId)?.pending.add(d.id);
        showPending(d.sessionId);
        break;
      case 'request_resolved':
        rows.get(d.sessionId)?.pending.delete(d.id);
        showPending(d.sessionId);
        break;
      case 'resync':
      case 'lagged':
        load(null);
        break;
      default:
        break;
    }
  });

  load(null);
  return { leave: off };
}
