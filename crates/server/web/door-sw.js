// The door app's service worker: keeps the page and its scripts so that the app opens and
// scans with no network. Network first (a new version is picked up when online), the cache
// when offline. The API is never cached: the app keeps its own door list and scans.
// The catalogue of the language in use is kept as it is fetched (and by i18n.js itself).
const CACHE = 'boxoffice-door-v2';
const SHELL = ['/door/', '/door/door.js', '/door/jsqr.js', '/door/manifest.webmanifest', '/door/icon.svg', '/assets/style.css', '/assets/i18n.js'];

self.addEventListener('install', (event) => {
  event.waitUntil(caches.open(CACHE).then((cache) => cache.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil(caches.keys()
    .then((keys) => Promise.all(keys.filter((k) => k !== CACHE).map((k) => caches.delete(k))))
    .then(() => self.clients.claim()));
});

self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== 'GET' || url.origin !== self.location.origin || url.pathname.startsWith('/v1/')) return;
  event.respondWith(fetch(event.request).then((response) => {
    if (response.ok) {
      const copy = response.clone();
      caches.open(CACHE).then((cache) => cache.put(event.request, copy));
    }
    return response;
  }).catch(() => caches.match(event.request, { ignoreVary: true })
    .then((hit) => hit || new Response('offline', { status: 503, headers: { 'content-type': 'text/plain' } }))));
});
