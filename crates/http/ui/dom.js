// Small DOM helpers shared by the views: element building, time and token formatting.

/** Builds an element: h('button', {class: 'x', onclick: f}, 'Label', child, ...). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (key === 'class') {
      el.className = value;
    } else if (key === 'dataset') {
      Object.assign(el.dataset, value);
    } else if (key === 'value' || key === 'checked') {
      el[key] = value;
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** "3 min ago", "just now", or a date for old times (unix milliseconds). */
export function ago(ms) {
  if (!ms) return '';
  const s = Math.round((Date.now() - ms) / 1000);
  if (s < 10) return 'just now';
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(ms).toLocaleDateString();
}

/** Total tokens of a usage value, whichever shape it came in ({total: {...}} or flat). */
export function tokens(usage) {
  if (!usage) return null;
  const u = usage.total ?? usage;
  const n = u.total_tokens ?? u.totalTokens ?? null;
  if (n === null || n === undefined) return null;
  return n >= 10000 ? `${(n / 1000).toFixed(1)}k tokens` : `${n} tokens`;
}

export const STATUS_LABEL = {
  active: 'working',
  awaiting_approval: 'needs approval',
  awaiting_input: 'needs an answer',
  idle: 'idle',
  interrupted: 'interrupted',
  error: 'error',
  closed: 'closed',
};

export function statusBadge(status) {
  const s = status || 'unknown';
  return h('span', { class: `badge status-${s}`, dataset: { status: s } }, STATUS_LABEL[s] ?? s);
}

/** A session is running a turn in these states (interrupt and steer make sense). */
export function running(status) {
  return status === 'active' || status === 'awaiting_approval' || status === 'awaiting_input';
}

/** `/bin/bash -lc 'cmd'` (how Codex runs commands) shown as `cmd`. */
export function shellCommand(cmd) {
  const m = /^\/bin\/(?:ba|z)?sh -lc '(.*)'$/s.exec(cmd || '');
  return m && !m[1].includes("'") ? m[1] : cmd;
}

/** The last path component, for narrow screens. */
export function shortPath(p) {
  if (!p) return '';
  const parts = p.split('/').filter(Boolean);
  return parts.length > 2 ? `…/${parts.slice(-2).join('/')}` : p;
}

/** Who resolved a request (`by` of request-resolved), in words: a person through which front,
 * a rule (linked to the rules), a timeout or a restart. */
export function whoAnswered(by, byUser) {
  const b = by || '';
  // A named user: their name and role, the front in the tooltip (the relay's own token keeps
  // the front's words).
  // A risky approval stepped up with a passkey says so.
  if (byUser && byUser.name && byUser.id !== 'admin-token') {
    const passkey = /^passkey /.test(byUser.device || '') ? ', with a passkey' : '';
    return h('span', { class: 'who-person', title: `${byUser.role} · ${b}${byUser.device ? ` · ${byUser.device}` : ''}` }, `${byUser.name} (${byUser.role}${passkey})`);
  }
  if (b.startsWith('rule:')) return h('a', { href: '#/rules', class: 'who-rule' }, `rule ${b.slice(5)}`);
  const words = {
    http: 'a person (web UI / HTTP)',
    mcp: 'a person (MCP client)',
    'mcp-elicitation': 'a person (MCP client form)',
    'answer-link': 'a person (answer link)',
    legacy: 'a person (legacy MCP client)',
    timeout: 'nobody: timed out',
    'turn-ended': 'the turn ending first',
    'codex-exit': 'Codex exiting',
    'session-closed': 'the session closing',
    'relay-restart': 'a relay restart',
    'relay-shutdown': 'the relay shutting down',
  };
  return words[b] ?? `a person (${b})`;
}
