// The service worker (served at /sw.js, scope /): makes the UI installable and shows Web Push
// notifications of waiting requests; a click opens (or focuses) the request in the UI. It
// caches nothing: the relay is live, and an old page must never answer for a new one.

self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));

// Network only; present so browsers treat the app as installable everywhere.
self.addEventListener('fetch', () => {});

self.addEventListener('push', (event) => {
  let data = {};
  try {
    data = event.data ? event.data.json() : {};
  } catch {
    data = { title: 'codex-relay', body: event.data ? event.data.text() : '' };
  }
  const title = data.title || 'codex-relay';
  event.waitUntil(self.registration.showNotification(title, {
    body: data.body || '',
    tag: data.tag || undefined,
    icon: '/ui/icon-192.png',
    requireInteraction: data.type === 'request.opened',
    data: { url: data.url || '/' },
  }));
});

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  const url = new URL(event.notification.data?.url || '/', self.location.origin);
  // Only this relay's pages.
  const target = url.origin === self.location.origin ? url.href : self.location.origin + '/';
  event.waitUntil((async () => {
    const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
    for (const w of windows) {
      if ('focus' in w) {
        await w.navigate(target).catch(() => {});
        return w.focus();
      }
    }
    return self.clients.openWindow(target);
  })());
});
