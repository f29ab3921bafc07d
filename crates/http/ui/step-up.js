// The answer-link page's approve button for a risky request: before the form is sent, a fresh
// passkey assertion (any passkey of someone who may approve, user verified) made for this
// request's challenge goes with it. Declining needs none. The page loads nothing else.

const form = document.querySelector('form[data-step-up]');
if (form) {
  const error = form.querySelector('.error');
  const say = (m) => { error.textContent = m; error.hidden = !m; };
  form.addEventListener('submit', async (event) => {
    if (form.elements.step_up.value) return;
    event.preventDefault();
    say('');
    if (!(window.isSecureContext && typeof PublicKeyCredential !== 'undefined'
      && typeof PublicKeyCredential.parseRequestOptionsFromJSON === 'function')) {
      say('Approving this needs a passkey, and this browser cannot use one here (it needs https or localhost).');
      return;
    }
    const button = form.querySelector('button');
    button.disabled = true;
    try {
      const res = await fetch(`/answer/${encodeURIComponent(form.dataset.stepUp)}/step-up`, {
        method: 'POST', credentials: 'omit',
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: new URLSearchParams({ t: form.elements.t.value }),
      });
      const data = await res.json().catch(() => null);
      if (!res.ok) throw new Error(data?.error?.message ?? `HTTP ${res.status}`);
      const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(data.options);
      const cred = await navigator.credentials.get({ publicKey });
      form.elements.step_up.value = JSON.stringify(cred.toJSON());
      form.submit();
    } catch (e) {
      say(e.message);
      button.disabled = false;
    }
  });
}
