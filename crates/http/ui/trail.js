// A notification's or a request's delivery trail: every step per channel and device (queued,
// sent, accepted by the push service, failed and why, opened, skipped), refreshed while shown.

import { get } from './api.js';
import { h } from './dom.js';

const WORD = { queued: 'queued', sent: 'sent', accepted: 'accepted by the push service', failed: 'failed', opened: 'opened', skipped: 'skipped', 'given-up': 'given up' };

function clock(ms) {
  return new Date(ms).toLocaleTimeString();
}

/** A list of `steps` (the API's `deliveries`). */
export function trailList(steps) {
  if (!steps.length) return h('p', { class: 'meta' }, 'No notification sent for this yet.');
  return h('ol', { class: 'trail-steps' }, steps.map((d) => h('li', { dataset: { status: d.status, target: d.target, channel: d.channel } },
    h('span', { class: 'meta' }, clock(d.at)), ' ',
    h('strong', {}, d.target), d.device ? h('span', { class: 'meta' }, ` (${d.device})`) : null, ' ',
    h('span', { class: `badge trail-${d.status}` }, WORD[d.status] ?? d.status),
    d.detail ? h('span', { class: 'meta' }, ` — ${d.detail}`) : null)));
}

/** A collapsible "Notifications" section for `path` (a deliveries URL), refreshed every 3 s
 * while it is in the page and `live()` says so. */
export function trailSection(path, live = () => true) {
  const body = h('div', { class: 'trail-body' });
  const box = h('details', { class: 'trail' }, h('summary', {}, 'Notifications sent'), body);
  async function load() {
    try {
      const { deliveries } = await get(path);
      body.replaceChildren(trailList(deliveries));
      box.dataset.steps = String(deliveries.length);
      box.querySelector('summary').textContent = `Notifications sent (${deliveries.length} steps)`;
    } catch (e) {
      body.replaceChildren(h('p', { class: 'form-error' }, e.message));
    }
  }
  load();
  // Stops once the card has left the page (it is not in it yet when made).
  let seen = false;
  const timer = setInterval(() => {
    if (box.isConnected) seen = true;
    else if (seen) return clearInterval(timer);
    if (live()) load();
  }, 3000);
  return box;
}
