// The form for one approval rule (POST /api/rules): used by the rules view to add and edit
// rules, and by an approval card's "Always allow…" with the rule the relay suggests.

import { post } from './api.js';
import { h } from './dom.js';

const words = (s) => s.split(/\s+/).filter(Boolean);

/** What ticking "outside the sandbox" grants, said where it is ticked (docs/RULES.md). */
export const OUTSIDE_SANDBOX_HINT = 'Without this, the rule answers only what stays in the sandbox (and sessions with no sandbox). '
  + 'With it, it also approves commands and file changes that may run outside the sandbox: under untrusted, Codex runs an approved command '
  + 'again outside the sandbox, without asking, if the sandbox blocks it; under on-request, an approved escalation runs outside it. '
  + 'Never permissions, network access or MCP servers.';
const list = (s) => s.split(/[\n,]+/).map((x) => x.trim()).filter(Boolean);

/**
 * A form for `spec` (a RuleSpec, possibly partial). `onSaved(rule)` runs after the relay took
 * it; `submitLabel` names the button; `onCancel` adds a Cancel button.
 */
export function ruleForm(spec = {}, { onSaved, onCancel, submitLabel = 'Save rule', lockName = false } = {}) {
  const id = `rf-${Math.random().toString(36).slice(2, 8)}`;
  const field = (label, input, hint) => h('label', { class: 'field' },
    h('span', { class: 'label' }, label), input, hint ? h('span', { class: 'hint' }, hint) : null);
  const name = h('input', { type: 'text', name: 'name', required: true, value: spec.name ?? '', readonly: lockName, pattern: '[A-Za-z0-9._-]{1,64}', spellcheck: 'false', autocomplete: 'off' });
  const option = (v, label) => h('option', { value: v, selected: (spec.action ?? 'allow') === v }, label);
  const action = h('select', { name: 'action' }, option('allow', 'Allow'), option('deny', 'Deny'), option('ask', 'Ask a person'));
  const argv = h('input', { type: 'text', name: 'argv', value: (spec.argv ?? []).join(' '), spellcheck: 'false', autocomplete: 'off', placeholder: 'git status' });
  const command = h('input', { type: 'text', name: 'command', value: spec.command ?? '', spellcheck: 'false', autocomplete: 'off', placeholder: 'cargo test *' });
  const cwd = h('input', { type: 'text', name: 'cwd', value: spec.cwd ?? '', spellcheck: 'false', autocomplete: 'off', placeholder: 'any directory' });
  const paths = h('textarea', { name: 'paths', rows: 2, spellcheck: 'false', placeholder: 'src/**/*.rs' }, (spec.paths ?? []).join('\n'));
  const labels = h('input', { type: 'text', name: 'labels', value: (spec.labels ?? []).join(', '), spellcheck: 'false', autocomplete: 'off', placeholder: 'ci, docs' });
  const reason = h('input', { type: 'text', name: 'reason', value: spec.reason ?? '', placeholder: 'what the model is told' });
  const reasonField = field('Reason (deny only)', reason, 'The model reads it and can change course.');
  const outside = h('input', { type: 'checkbox', name: 'outside_sandbox', checked: Boolean(spec.outside_sandbox), 'aria-describedby': `${id}-outside` });
  const outsideField = h('div', { class: 'field outside-sandbox' },
    h('label', { class: 'check' }, outside, h('span', { class: 'label' }, 'Also when it may run outside the sandbox')),
    h('span', { class: 'hint', id: `${id}-outside` }, OUTSIDE_SANDBOX_HINT));
  const error = h('p', { class: 'form-error', role: 'alert', id: `${id}-error` });
  const submit = h('button', { class: 'button primary', type: 'submit' }, submitLabel);
  const showReason = () => {
    reasonField.hidden = action.value !== 'deny';
    outsideField.hidden = action.value !== 'allow';
  };
  action.addEventListener('change', showReason);
  showReason();

  const form = h('form', { class: 'rule-form', 'aria-describedby': `${id}-error`, onsubmit: save },
    h('div', { class: 'row2' }, field('Name', name, 'Shown as who answered: rule:<name>.'), field('Decision', action)),
    field('Command starts with', argv, 'The program and its first words; a line with more than one command is never allowed.'),
    field('Or command matches', command, 'A glob over the command line.'),
    field('Working directory', cwd, 'This directory and everything under it (absolute), or a glob.'),
    field('Files a patch touches', paths, 'Globs, one per line; allow needs every file to match.'),
    field('Session labels', labels, 'Every label listed must be on the session.'),
    reasonField,
    outsideField,
    error,
    h('div', { class: 'actions' }, submit,
      onCancel ? h('button', { class: 'button', type: 'button', onclick: onCancel }, 'Cancel') : null));

  async function save(e) {
    e.preventDefault();
    error.textContent = '';
    const body = { name: name.value.trim(), action: action.value };
    if (words(argv.value).length) body.argv = words(argv.value);
    if (command.value.trim()) body.command = command.value.trim();
    if (cwd.value.trim()) body.cwd = cwd.value.trim();
    if (list(paths.value).length) body.paths = list(paths.value);
    if (list(labels.value).length) body.labels = list(labels.value);
    if (spec.kinds && spec.kinds.length) body.kinds = spec.kinds;
    if (action.value === 'deny' && reason.value.trim()) body.reason = reason.value.trim();
    if (action.value === 'allow' && outside.checked) body.outside_sandbox = true;
    submit.disabled = true;
    try {
      const rule = await post('/api/rules', body);
      if (onSaved) await onSaved(rule);
    } catch (err) {
      error.textContent = err.message;
    } finally {
      submit.disabled = false;
    }
  }
  return form;
}

/** The conditions of a rule in a few words, for lists and cards. */
export function describeRule(r) {
  const parts = [];
  if (r.argv && r.argv.length) parts.push(['command ', h('code', {}, `${r.argv.join(' ')} …`)]);
  if (r.command) parts.push(['command like ', h('code', {}, r.command)]);
  if (r.paths && r.paths.length) parts.push(['files ', h('code', {}, r.paths.join(', '))]);
  if (r.cwd) parts.push(['in ', h('code', {}, r.cwd)]);
  if (r.labels && r.labels.length) parts.push(['labels ', r.labels.join(', ')]);
  if (r.kinds && r.kinds.length) parts.push([r.kinds.join(', ').replaceAll('_', ' ')]);
  if (parts.length === 0) parts.push(['every approval']);
  if (r.outside_sandbox) parts.push([h('strong', { class: 'outside-sandbox' }, 'even outside the sandbox')]);
  return parts.flatMap((p, i) => (i ? ['; ', ...p] : p));
}
