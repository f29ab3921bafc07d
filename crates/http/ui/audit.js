// The people and audit view (#/audit, admin): who may do what (users, their personal tokens
// with last use and a revoke button, an invitation form) and the audit log of who did what,
// when and from where, with filters and a JSONL export.

import { get, post, del } from './api.js';
import { h } from './dom.js';

const ROLES = ['viewer', 'approver', 'operator', 'admin'];

function when(ms) {
  return ms ? new Date(ms).toLocaleString() : '—';
}

export function auditView(root) {
  const error = h('p', { class: 'form-error', role: 'alert' });
  const people = h('ul', { class: 'rules', 'aria-label': 'Users and tokens' });
  const invited = h('p', { class: 'meta', role: 'status' });
  const name = h('input', { name: 'name', required: true, placeholder: 'name to invite', 'aria-label': 'Name' });
  const role = h('select', { name: 'role', 'aria-label': 'Role' }, ...ROLES.map((r) => h('option', { value: r }, r)));
  const invite = h('form', { class: 'actions', onsubmit: async (e) => {
    e.preventDefault();
    try {
      const inv = await post('/api/invitations', { name: name.value, role: role.value });
      invited.replaceChildren('Send this link to ', inv.name, ' (it works once): ', h('code', {}, inv.url));
      name.value = '';
      load();
    } catch (err) { error.textContent = err.message; }
  } }, name, role, h('button', { class: 'button small', type: 'submit' }, 'Invite'));

  const filters = {};
  const inputs = ['user', 'action', 'session'].map((k) => h('input', { name: k, placeholder: k, 'aria-label': `Filter by ${k}` }));
  const exportLink = h('a', { class: 'button small', download: 'codex-relay-audit.jsonl' }, 'Export JSONL');
  const form = h('form', { class: 'actions', onsubmit: (e) => { e.preventDefault(); loadAudit(); } },
    ...inputs, h('button', { class: 'button small', type: 'submit' }, 'Filter'), exportLink);
  const log = h('table', { class: 'audit', 'aria-label': 'Audit log' });

  root.append(
    h('h1', {}, 'People and audit'),
    h('p', { class: 'hint' }, 'Viewers read; approvers also answer requests; operators also start, steer and interrupt sessions; ',
      'admins also change rules, notifications, users and tokens. The relay’s own token is the admin. ',
      'Revoking a token or disabling a user takes effect on the next request, on every relay of the store.'),
    error, h('h2', {}, 'Users'), people, invite, invited, h('h2', {}, 'Audit log'), form, log);

  async function revoke(id) {
    if (!confirm(`Revoke token ${id}?`)) return;
    try { await del(`/api/tokens/${encodeURIComponent(id)}`); load(); } catch (e) { error.textContent = e.message; }
  }

  async function load() {
    try {
      const [{ users }, { tokens }] = await Promise.all([get('/api/users'), get('/api/tokens')]);
      people.replaceChildren(...users.map((u) => h('li', { class: 'rule', dataset: { user: u.id } },
        h('div', { class: 'rule-head' }, h('strong', {}, u.name), h('span', { class: 'meta' }, ` · ${u.role}${u.disabledAt ? ' · disabled' : ''}`)),
        ...tokens.filter((t) => t.userId === u.id).map((t) => h('p', { class: 'meta', dataset: { token: t.id } },
          `${t.label || t.id} · ${t.role}${t.sessions ? ` · sessions ${t.sessions.join(', ')}` : ''} · last used ${when(t.lastUsedAt)}`,
          t.revokedAt ? ` · revoked ${when(t.revokedAt)}` : h('button', { class: 'button small danger-outline', type: 'button', onclick: () => revoke(t.id) }, 'Revoke'))))));
    } catch (e) {
      error.textContent = e.message;
    }
  }

  async function loadAudit() {
    for (const i of inputs) filters[i.name] = i.value.trim();
    const q = new URLSearchParams(Object.entries(filters).filter(([, v]) => v)).toString();
    exportLink.href = `/api/audit/export${q ? `?${q}` : ''}`;
    try {
      const { entries } = await get(`/api/audit?limit=500${q ? `&${q}` : ''}`);
      log.replaceChildren(
        h('tr', {}, ...['When', 'Who', 'Action', 'Session', 'Request', 'Decision / rule', 'From'].map((t) => h('th', {}, t))),
        ...entries.reverse().map((e) => h('tr', { dataset: { action: e.action } },
          h('td', {}, when(e.at)),
          h('td', { title: e.person.device || '' }, `${e.person.name} (${e.person.role}, ${e.person.front})`),
          h('td', {}, e.action),
          h('td', {}, e.session ? h('a', { href: `#/s/${encodeURIComponent(e.session)}` }, e.session.slice(0, 8)) : ''),
          h('td', {}, e.request || ''),
          h('td', {}, e.decision || e.rule || ''),
          h('td', {}, e.ip || ''))));
    } catch (err) {
      error.textContent = err.message;
    }
  }

  load();
  loadAudit();
  return {};
}
