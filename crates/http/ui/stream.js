// Server-Sent Events that survive a relay restart: reconnects with backoff and resumes after the
// last seq seen (`?after=`), so nothing is lost; callers drop envelopes at or below that seq, so
// nothing is shown twice.

import { get } from './api.js';

/** Whether to try again: yes, unless the relay says no (a 401 sends the person to log in). */
async function probe() {
  try {
    await get('/healthz');
  } catch {
    /* unreachable or unhealthy: try the stream anyway */
  }
  return true;
}

/**
 * Opens `url` and calls `handlers[eventName](data, event)`. `after` is the seq to resume after
 * (per-session streams); the stream remembers the last `id:` it saw. `onState('live' |
 * 'reconnecting' | 'ended' | 'gone')` reports the connection; `retry()` decides whether to
 * reconnect (default: yes). Returns `{close(), lastId()}`.
 */
export function openStream(url, { after = null, handlers = {}, onState = () => {}, onReconnect = null, retry = probe }) {
  let source = null;
  let lastId = after;
  let stopped = false;
  let delay = 500;
  let timer = null;
  let opened = false;

  function connect() {
    if (stopped) return;
    const u = new URL(url, location.href);
    if (lastId !== null && lastId !== undefined) u.searchParams.set('after', String(lastId));
    source = new EventSource(u.toString(), { withCredentials: true });
    source.onopen = () => {
      delay = 500;
      onState('live');
      if (opened && onReconnect) onReconnect();
      opened = true;
    };
    for (const [name, handler] of Object.entries(handlers)) {
      source.addEventListener(name, (ev) => {
        if (ev.lastEventId) lastId = Number(ev.lastEventId);
        let data = null;
        try {
          data = JSON.parse(ev.data);
        } catch {
          data = ev.data;
        }
        handler(data, ev);
      });
    }
    source.addEventListener('end', () => {
      stopped = true;
      source.close();
      onState('ended');
    });
    source.onerror = () => {
      // Reconnect ourselves (the browser gives up for good on some failures, e.g. a 503 while
      // the relay restarts), resuming after the last seq.
      source.close();
      if (stopped) return;
      onState('reconnecting');
      clearTimeout(timer);
      timer = setTimeout(async () => {
        if (await retry()) {
          connect();
        } else {
          stopped = true;
          onState('gone');
        }
      }, delay);
      delay = Math.min(delay * 2, 5000);
    };
  }

  connect();
  return {
    close() {
      stopped = true;
      clearTimeout(timer);
      if (source) source.close();
    },
    lastId: () => lastId,
  };
}
