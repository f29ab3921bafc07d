// The new-session form: the prompt and the options of POST /api/sessions that a person picks.

import { post } from './api.js';
import { h } from './dom.js';

export function newView(root) {
  const error = h('p', { class: 'form-error', role: 'alert' });
  const field = (label, input, hint) => h('label', { class: 'field' },
    h('span', { class: 'label' }, label), input, hint ? h('span', { class: 'hint' }, hint) : null);
  const prompt = h('textarea', { name: 'prompt', rows: 5, required: true, placeholder: 'What should Codex do?' });
  const cwd = h('input', { name: 'cwd', type: 'text', autocomplete: 'off', placeholder: "the relay's directory", spellcheck: 'false' });
  const model = h('input', { name: 'model', type: 'text', autocomplete: 'off', placeholder: "Codex's configured model", spellcheck: 'false' });
  const option = (value, label, selected) => h('option', { value, selected }, label);
  const approval = h('select', { name: 'approvalPolicy' },
    option('untrusted', 'Ask before anything not known to be safe', true),
    option('on-request', 'Let Codex decide when to ask'),
    option('never', 'Never ask'),
    option('', "Codex's configured policy"));
  const sandbox = h('select', { name: 'sandbox' },
    option('workspace-write', 'Write in the working directory only', true),
    option('read-only', 'Read only'),
    option('danger-full-access', 'No sandbox (dangerous)'),
    option('', "Codex's configured sandbox"));
  const planMode = h('input', { type: 'checkbox', name: 'planMode' });
  const submit = h('button', { class: 'button primary', type: 'submit' }, 'Start session');

  const form = h('form', { class: 'new-session', onsubmit: start },
    field('Prompt', prompt),
    field('Working directory', cwd, 'Absolute, or relative to where the relay runs.'),
    h('div', { class: 'row2' },
      field('Approvals', approval),
      field('Sandbox', sandbox)),
    field('Model', model),
    h('label', { class: 'check' }, planMode, h('span', {}, 'Plan mode: Codex plans first and may ask you questions')),
    error,
    h('div', { class: 'actions' }, submit, h('a', { class: 'button', href: '#/' }, 'Cancel')));

  root.append(h('h1', {}, 'New session'), form);
  prompt.focus();
  prompt.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) form.requestSubmit();
  });

  async function start(e) {
    e.preventDefault();
    error.textContent = '';
    const body = { prompt: prompt.value.trim() };
    if (!body.prompt) {
      error.textContent = 'Write a prompt first.';
      return;
    }
    for (const [key, el] of [['cwd', cwd], ['model', model], ['approvalPolicy', approval], ['sandbox', sandbox]]) {
      if (el.value.trim()) body[key] = el.value.trim();
    }
    if (planMode.checked) body.planMode = true;
    submit.disabled = true;
    submit.textContent = 'Starting…';
    try {
      const created = await post('/api/sessions', body);
      location.hash = `#/s/${encodeURIComponent(created.sessionId)}`;
    } catch (err) {
      error.textContent = err.message;
      submit.disabled = false;
      submit.textContent = 'Start session';
    }
  }
  return {};
}
