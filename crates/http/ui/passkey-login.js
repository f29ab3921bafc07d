// The login page's passkey button: a discoverable, user-verified assertion (no name to type),
// checked by the relay, which signs this browser in as the passkey's user. Its own small file:
// the login page loads nothing else.

const place = document.getElementById('passkey-login');
const usable = place && window.isSecureContext && typeof PublicKeyCredential !== 'undefined'
  && typeof PublicKeyCredential.parseRequestOptionsFromJSON === 'function';

async function call(path, body) {
  const res = await fetch(path, {
    method: 'POST', credentials: 'same-origin',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify(body),
  });
  const data = await res.json().catch(() => null);
  if (!res.ok) throw new Error(data?.error?.message ?? `HTTP ${res.status}`);
  return data;
}

if (usable) {
  // An alert only once there is something to say (the page's own alerts stay the only ones).
  const error = document.createElement('p');
  error.className = 'error';
  const say = (m) => {
    error.textContent = m;
    if (m) error.setAttribute('role', 'alert');
    else error.removeAttribute('role');
  };
  const button = document.createElement('button');
  button.type = 'button';
  button.textContent = 'Sign in with a passkey';
  button.addEventListener('click', async () => {
    say('');
    button.disabled = true;
    try {
      const { options } = await call('/login/passkey/options', {});
      const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(options);
      const cred = await navigator.credentials.get({ publicKey });
      await call('/login/passkey', { credential: cred.toJSON() });
      const next = document.querySelector('input[name="next"]')?.value || '/';
      location.href = next.startsWith('/') && !next.startsWith('//') ? next : '/';
    } catch (e) {
      say(e.message);
      button.disabled = false;
    }
  });
  const or = document.createElement('p');
  or.textContent = 'Or, if you registered a passkey:';
  place.append(or, button, error);
}
