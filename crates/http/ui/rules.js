// The approval rules view (#/rules): every rule with where it comes from and what it
// matches, its counters, and a form to add, edit or delete the rules made here.

import { get, del } from './api.js';
import { h } from './dom.js';
import { ruleForm, describeRule } from './ruleform.js';

const ACTION = { allow: 'Allow', deny: 'Deny', ask: 'Ask a person' };

export function rulesView(root) {
  const counts = h('p', { class: 'meta', role: 'status' });
  const listEl = h('ul', { class: 'rules', 'aria-label': 'Rules' });
  const error = h('p', { class: 'form-error', role: 'alert' });
  const editor = h('section', { class: 'card', 'aria-labelledby': 'rule-editor-title' });
  let left = false;

  root.append(
    h('h1', {}, 'Approval rules'),
    h('p', { class: 'hint' }, 'Rules answer command and file-change approvals before anyone is asked. ',
      'Deny wins over ask, ask over allow. An allow answers only what stays in the sandbox (or sessions with none), ',
      'unless it says “even outside the sandbox”: under untrusted an approved command runs outside the sandbox if the sandbox blocks it. ',
      'Rules from the --rules file are read at every start and are edited in that file. ',
      'Who may answer, start and change rules: ', h('a', { href: '#/audit' }, 'people and audit'), '.'),
    counts, error, listEl, editor);
  editor.dataset.needs = 'admin';

  function showEditor(spec, title) {
    editor.replaceChildren(
      h('h2', { id: 'rule-editor-title' }, title),
      ruleForm(spec, {
        lockName: Boolean(spec && spec.name && title.startsWith('Edit')),
        onSaved: () => { showEditor({}, 'New rule'); load(); },
        onCancel: spec && spec.name ? () => showEditor({}, 'New rule') : null,
      }));
  }

  function row(r) {
    const fromFile = r.source === 'file';
    return h('li', { class: `rule action-${r.action}`, dataset: { rule: r.name } },
      h('div', { class: 'rule-head' },
        h('span', { class: `badge verdict-${r.action === 'allow' ? 'ok' : r.action === 'deny' ? 'no' : 'ask'}` }, ACTION[r.action] ?? r.action),
        ' ', h('strong', {}, r.name),
        h('span', { class: 'meta' }, fromFile ? ' · from the rules file' : ' · made here')),
      h('p', { class: 'rule-when' }, describeRule(r)),
      r.reason ? h('p', { class: 'reason' }, 'Model is told: “', r.reason, '”') : null,
      fromFile ? null : h('div', { class: 'actions', dataset: { needs: 'admin' } },
        h('button', { class: 'button small', type: 'button', 'aria-label': `Edit rule ${r.name}`, onclick: () => { showEditor(r, `Edit rule ${r.name}`); editor.scrollIntoView({ block: 'start' }); } }, 'Edit'),
        h('button', { class: 'button small danger-outline', type: 'button', 'aria-label': `Delete rule ${r.name}`, onclick: () => remove(r.name) }, 'Delete')));
  }

  async function remove(name) {
    if (!confirm(`Delete rule ${name}?`)) return;
    try {
      await del(`/api/rules/${encodeURIComponent(name)}`);
      load();
    } catch (e) {
      error.textContent = e.message;
    }
  }

  async function load() {
    try {
      const data = await get('/api/rules');
      if (left) return;
      error.textContent = '';
      const c = data.counts;
      counts.textContent = `Since the relay started: ${c.allowed} allowed and ${c.denied} denied by rules, ${c.asked} left to a person.`;
      listEl.replaceChildren(...(data.rules.length ? data.rules.map(row) : [h('li', { class: 'empty' }, 'No rules yet: every approval asks a person.')]));
    } catch (e) {
      error.textContent = e.message;
    }
  }

  showEditor({}, 'New rule');
  load();
  return { leave() { left = true; } };
}
