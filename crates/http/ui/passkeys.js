// The passkeys view (#/passkeys): your passkeys (named, with their last use, removable) and a
// button that registers one more on this device; the admin sees everyone's and may remove any.
// Risky approvals ask a passkey holder for a fresh passkey check (docs/SECURITY.md).

import { api, get, post } from './api.js';
import { h } from './dom.js';
import { create, stepUp, supported } from './webauthn.js';

/** `call(extra)`; when the relay wants a check with a passkey you have first (a change to
 * your passkeys once you have one), that check for `purpose`, then `call` again with it. */
async function withStepUp(purpose, call) {
  try {
    return await call({});
  } catch (e) {
    if (e.code !== 'step_up_required') throw e;
    return call({ stepUp: await stepUp(purpose) });
  }
}

function when(ms) {
  return ms ? new Date(ms).toLocaleString() : 'never';
}

export function passkeysView(root) {
  const error = h('p', { class: 'form-error', role: 'alert' });
  const status = h('p', { class: 'meta', role: 'status' });
  const list = h('ul', { class: 'rules', 'aria-label': 'Passkeys' });
  const name = h('input', { name: 'name', required: true, maxlength: 60, placeholder: 'e.g. phone', 'aria-label': 'Passkey name' });
  const form = h('form', { class: 'actions', onsubmit: async (e) => {
    e.preventDefault();
    error.textContent = '';
    status.textContent = 'Your device asks for your PIN or biometric…';
    try {
      const { options } = await withStepUp('passkey.register', (extra) => post('/api/passkeys/register', extra));
      const credential = await create(options);
      const made = await post('/api/passkeys', { name: name.value, credential });
      status.textContent = `Passkey “${made.name}” registered.`;
      name.value = '';
      load();
    } catch (err) {
      status.textContent = '';
      error.textContent = err.message;
    }
  } }, name, h('button', { class: 'button small', type: 'submit', disabled: !supported() }, 'Register a passkey'));

  root.append(
    h('h1', {}, 'Passkeys'),
    h('p', { class: 'hint' }, 'A passkey signs you in on the login page without a token, and is asked for again ',
      'when you approve a risky request (one that lets Codex leave the sandbox, reach the network or get more permissions).'),
    ...(supported() ? [] : [h('p', { class: 'form-error' }, 'This browser cannot use passkeys here: open the relay over https or as http://localhost.')]),
    form, status, error, list,
  );

  async function load() {
    try {
      const { passkeys } = await get('/api/passkeys');
      list.replaceChildren(...passkeys.map((k) => h('li', { class: 'rule', dataset: { passkey: k.id } },
        h('strong', {}, k.name),
        h('span', { class: 'meta' }, ` · user ${k.userId} · added ${when(k.createdAt)} · last used ${when(k.lastUsedAt)} `),
        h('button', { class: 'button small', type: 'button', onclick: async () => {
          try {
            await withStepUp(`passkey.remove:${k.id}`, (extra) => api('DELETE', `/api/passkeys/${encodeURIComponent(k.id)}`, extra));
            load();
          } catch (err) { error.textContent = err.message; }
        } }, 'Remove'))));
      if (!passkeys.length) list.replaceChildren(h('li', { class: 'meta' }, 'No passkeys yet.'));
    } catch (err) {
      error.textContent = err.message;
    }
  }
  load();
  return {};
}
