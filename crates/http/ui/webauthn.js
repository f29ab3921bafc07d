// Passkeys in the browser: WebAuthn's own JSON forms in and out (the relay sends the options
// as JSON, the browser parses them and hands back `credential.toJSON()`), and the step-up a
// risky approval needs (a fresh, user-verified assertion made for that one request).

import { post } from './api.js';

/** Whether this browser can use passkeys here (a secure context with WebAuthn's JSON forms). */
export function supported() {
  return window.isSecureContext && typeof PublicKeyCredential !== 'undefined'
    && typeof PublicKeyCredential.parseRequestOptionsFromJSON === 'function';
}

/** Makes a passkey for the options `POST /api/passkeys/register` gave. */
export async function create(options) {
  const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(options);
  const cred = await navigator.credentials.create({ publicKey });
  return cred.toJSON();
}

/** Asserts with a passkey for the options of a sign-in or a step-up. */
export async function assert(options) {
  const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(options);
  const cred = await navigator.credentials.get({ publicKey });
  return cred.toJSON();
}

/** The step-up of approving request `id`: a challenge for it, then the passkey's assertion. */
export async function stepUp(id) {
  if (!supported()) throw new Error('Approving this needs a passkey, and this browser cannot use one here (it needs https or localhost).');
  const { options } = await post('/api/passkeys/step-up', { request: id });
  return assert(options);
}
