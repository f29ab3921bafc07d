// File changes as coloured diffs: unified diffs line by line, and whole new (or deleted) files
// as all-added (all-removed) lines when Codex sends their content instead of a diff.

import { h } from './dom.js';

function looksUnified(text) {
  return /^(@@|\+\+\+ |--- )/m.test(text);
}

/** The lines of a change as {sign, text} pairs. */
export function diffLines(kind, diff) {
  const text = (diff ?? '').replace(/\n$/, '');
  if (!text) return [];
  const lines = text.split('\n');
  if (!looksUnified(text) && (kind === 'add' || kind === 'delete')) {
    const sign = kind === 'add' ? '+' : '-';
    return lines.map((l) => ({ sign, text: l }));
  }
  return lines.map((l) => {
    if (l.startsWith('@@')) return { sign: '@', text: l };
    if (l.startsWith('+++') || l.startsWith('---')) return { sign: 'h', text: l };
    const c = l[0];
    if (c === '+' || c === '-') return { sign: c, text: l.slice(1) };
    return { sign: ' ', text: l.startsWith(' ') ? l.slice(1) : l };
  });
}

const CLASS = { '+': 'add', '-': 'del', '@': 'hunk', h: 'head', ' ': 'ctx' };

/** The session's directory: paths inside it are shown relative to it. */
let base = null;
export function setBase(dir) {
  base = dir ? dir.replace(/\/+$/, '') + '/' : null;
}

function shown(path) {
  return base && path && path.startsWith(base) ? path.slice(base.length) : path;
}

/** `kind` is add / delete / update (or Codex's `{type: ...}`). */
export function diffBlock(path, kind, diff) {
  const k = typeof kind === 'object' && kind ? kind.type : kind;
  const lines = diffLines(k, diff);
  const adds = lines.filter((l) => l.sign === '+').length;
  const dels = lines.filter((l) => l.sign === '-').length;
  const body = h('div', { class: 'diff-body', role: 'table', 'aria-label': `Changes to ${path}` },
    lines.map((l) => h('div', { class: `dl ${CLASS[l.sign]}`, role: 'row' },
      h('span', { class: 'sign', 'aria-hidden': 'true' }, l.sign === '+' || l.sign === '-' ? l.sign : ' '),
      h('span', { class: 'code', role: 'cell' },
        l.sign === '+' ? h('span', { class: 'sr' }, 'added: ') : null,
        l.sign === '-' ? h('span', { class: 'sr' }, 'removed: ') : null,
        l.text || ' '))));
  return h('div', { class: 'diff' },
    h('div', { class: 'diff-head' },
      h('span', { class: `badge kind-${k}` }, k || 'change'),
      h('code', { class: 'path', title: path }, shown(path)),
      h('span', { class: 'stat' },
        adds ? h('span', { class: 'plus' }, `+${adds}`) : null,
        dels ? h('span', { class: 'minus' }, ` −${dels}`) : null)),
    body);
}
