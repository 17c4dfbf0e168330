// The door app (issue 19): checks tickets at the entrance, online or offline.
//
// Set up once per event while online: the staff account's token and the event's door bundle
// (GET /v1/admin/events/{id}/door: the event's rotating key, the static codes' public keys,
// the tickets revoked by an exchange, a transfer or a cancellation, those checked in). Then
// every scan is decided here, with no network: the static code's Ed25519 signature
// (WebCrypto), the rotating part (HMAC-SHA256 of the ticket's secret, derived from the
// event's key; within one 15 s step of this device's clock), the revocation list, and this
// device's own scans (first scan wins). Scans queue and are synced when the network is back
// (POST /v1/admin/events/{id}/door/checkins); the server reports duplicates from other
// devices. The page, its scripts and the style are kept by a service worker (door-sw.js).
// Its texts are the `door` catalogue (i18n.js), in the device's language or the one chosen in
// its switch; a scan result names the ticket's holder when the bundle has one (`holders`).

(async () => {
  'use strict';

  await window.i18n.init('door');

  const $ = (id) => document.getElementById(id);
  const { t } = window.i18n;
  const enc = new TextEncoder();
  const dec = new TextDecoder();
  const PREFIX_STATIC = 'BO1.';
  const PREFIX_ROTATING = 'BR1.';

  const store = {
    get(key) { try { return JSON.parse(localStorage.getItem(key)); } catch { return null; } },
    set(key, value) { localStorage.setItem(key, JSON.stringify(value)); },
  };

  function b64d(text) {
    const b64 = text.replace(/-/g, '+').replace(/_/g, '/');
    const bin = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
    return Uint8Array.from(bin, (c) => c.charCodeAt(0));
  }

  function pemToDer(pem) {
    const body = pem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, '');
    return Uint8Array.from(atob(body), (c) => c.charCodeAt(0));
  }

  const deviceId = store.get('door.device') || (() => {
    const id = `door-${crypto.getRandomValues(new Uint32Array(2)).join('')}`;
    store.set('door.device', id);
    return id;
  })();

  /** The event's state on this device: bundle, its keys, scans made, scans to sync. */
  const door = {
    token: store.get('door.token'),
    eventId: store.get('door.event'),
    acceptStatic: store.get('door.static') === true,
    bundle: null,
    keys: [],
    rotatingKey: null,
    revoked: new Set(),
    checkedIn: new Set(),
    holders: new Map(),
    scanned: {},
    pending: [],
    report: [],
  };

  function saveState() {
    store.set(`door.state.${door.eventId}`, { scanned: door.scanned, pending: door.pending, report: door.report });
  }

  async function useBundle(bundle) {
    door.bundle = bundle;
    door.keys = await Promise.all(bundle.publicKeys.map((k) =>
      crypto.subtle.importKey('spki', pemToDer(k.pem), { name: 'Ed25519' }, false, ['verify'])));
    door.rotatingKey = await crypto.subtle.importKey('raw', b64d(bundle.rotatingKey),
      { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
    door.revoked = new Set(bundle.revokedTicketIds);
    door.checkedIn = new Set(bundle.checkedInTicketIds);
    door.holders = new Map((bundle.holders || []).map((holder) => [holder.ticketId, holder.name]));
    const saved = store.get(`door.state.${bundle.eventId}`) || {};
    door.scanned = saved.scanned || {};
    door.pending = saved.pending || [];
    door.report = saved.report || [];
    showBundle();
    $('door-setup').hidden = true;
    $('door-scan').hidden = false;
    showCounts();
    showReport();
  }

  function showBundle() {
    const bundle = door.bundle;
    if (!bundle) return;
    $('door-event-name').textContent = bundle.name;
    $('door-bundle-info').textContent = t('door-bundle-info', {
      generated: window.i18n.shortDateTime(bundle.generatedAt),
      revoked: bundle.revokedTicketIds.length,
      checkedIn: bundle.checkedInTicketIds.length,
    });
  }

  async function api(method, path, body) {
    const res = await fetch(path, {
      method,
      headers: { authorization: `Bearer ${door.token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const data = await res.json().catch(() => null);
    if (!res.ok) throw new Error((data && (data.detail || data.title)) || t('door-http-error', { status: res.status }));
    return data;
  }

  async function loadBundle() {
    const bundle = await api('GET', `/v1/admin/events/${encodeURIComponent(door.eventId)}/door`);
    store.set(`door.bundle.${door.eventId}`, bundle);
    await useBundle(bundle);
  }

  /** Ed25519 over the bytes "BO1." + payload, with any of the bundle's keys. */
  async function verifyStatic(code) {
    const parts = code.split('.');
    if (parts.length !== 3 || `${parts[0]}.` !== PREFIX_STATIC || code.length > 1024) return null;
    let signature;
    try { signature = b64d(parts[2]); } catch { return null; }
    const signed = enc.encode(`${parts[0]}.${parts[1]}`);
    for (const key of door.keys) {
      if (await crypto.subtle.verify({ name: 'Ed25519' }, key, signature, signed)) {
        try { return JSON.parse(dec.decode(b64d(parts[1]))); } catch { return null; }
      }
    }
    return null;
  }

  async function hmac(key, bytes) {
    return new Uint8Array(await crypto.subtle.sign('HMAC', key, bytes));
  }

  /** The rotating part: the step within the window of this device's clock, the tag the
   *  ticket's secret gives. */
  async function verifyRotating(step, tag, ticketId) {
    const now = Math.floor(Date.now() / 1000 / door.bundle.periodSeconds);
    if (Math.abs(step - now) > door.bundle.stepsAccepted) return 'OUT_OF_WINDOW';
    const secret = await hmac(door.rotatingKey, enc.encode(ticketId));
    const key = await crypto.subtle.importKey('raw', secret, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
    const expected = (await hmac(key, enc.encode(`${PREFIX_ROTATING}${step}`))).slice(0, 12);
    let given;
    try { given = b64d(tag); } catch { return 'BAD_TAG'; }
    if (given.length !== expected.length) return 'BAD_TAG';
    let diff = 0;
    for (let i = 0; i < given.length; i++) diff |= given[i] ^ expected[i];
    return diff === 0 ? 'OK' : 'BAD_TAG';
  }

  /** Decides one scanned text: VALID, DUPLICATE, STATIC, REVOKED, OTHER_EVENT or INVALID, and
   *  why (a function of the ticket's seat or area, so it is said in the language of the
   *  moment). */
  async function decide(text) {
    const code = text.trim();
    let staticCode = code;
    let rotating = null;
    if (code.startsWith(PREFIX_ROTATING)) {
      const m = code.match(/^BR1\.(\d{1,12})\.([A-Za-z0-9_-]{1,64})\.(BO1\..+)$/);
      if (!m) return { result: 'INVALID', why: (args) => t('door-why-not-a-code', args) };
      rotating = { step: Number(m[1]), tag: m[2] };
      staticCode = m[3];
    }
    const claims = await verifyStatic(staticCode);
    if (!claims) return { result: 'INVALID', why: (args) => t('door-why-not-signed', args) };
    if (claims.eventId !== door.bundle.eventId) return { result: 'OTHER_EVENT', why: (args) => t('door-why-other-event', args), claims };
    if (door.revoked.has(claims.ticketId)) return { result: 'REVOKED', why: (args) => t('door-why-revoked', args), claims };
    if (rotating) {
      const verdict = await verifyRotating(rotating.step, rotating.tag, claims.ticketId);
      if (verdict === 'OUT_OF_WINDOW') return { result: 'INVALID', why: (args) => t('door-why-old-code', args), claims };
      if (verdict !== 'OK') return { result: 'INVALID', why: (args) => t('door-why-bad-tag', args), claims };
    } else if (!door.acceptStatic) {
      return { result: 'STATIC', why: (args) => t('door-why-static', args), claims };
    }
    if (door.checkedIn.has(claims.ticketId) || door.scanned[claims.ticketId]) {
      return { result: 'DUPLICATE', why: (args) => t('door-why-duplicate', args), claims };
    }
    return { result: 'VALID', why: (args) => (claims.seatId ? t('door-why-seat', args) : t('door-why-tier', args)), claims };
  }

  const TONES = { VALID: [880, 0.12], DUPLICATE: [440, 0.25], STATIC: [440, 0.25], REVOKED: [220, 0.45], OTHER_EVENT: [220, 0.45], INVALID: [220, 0.45] };
  let audio = null;
  function beep(result) {
    try {
      audio = audio || new AudioContext();
      const [frequency, seconds] = TONES[result] || TONES.INVALID;
      const osc = audio.createOscillator();
      const gain = audio.createGain();
      osc.frequency.value = frequency;
      gain.gain.value = 0.2;
      osc.connect(gain).connect(audio.destination);
      osc.start();
      osc.stop(audio.currentTime + seconds);
    } catch { /* no sound on this device */ }
  }

  let last = { text: '', at: 0 };
  async function handle(text) {
    const now = Date.now();
    if (text === last.text && now - last.at < 2000) return null; // the camera sees it twice
    last = { text, at: now };
    const verdict = await decide(text);
    if (verdict.result === 'VALID') {
      door.scanned[verdict.claims.ticketId] = new Date().toISOString();
      door.pending.push({ ticketId: verdict.claims.ticketId, scannedAt: door.scanned[verdict.claims.ticketId], deviceId });
      saveState();
    }
    lastVerdict = verdict;
    showVerdict();
    beep(verdict.result);
    const item = document.createElement('li');
    item.textContent = `${window.i18n.time(new Date())} ${verdict.result} ${verdict.claims ? verdict.claims.ticketId : ''}`;
    $('door-log').prepend(item);
    showCounts();
    if (navigator.onLine) sync();
    return verdict.result;
  }

  const HEADLINES = {
    VALID: () => t('door-result-valid'),
    DUPLICATE: () => t('door-result-duplicate'),
    STATIC: () => t('door-result-static'),
    REVOKED: () => t('door-result-invalid'),
    OTHER_EVENT: () => t('door-result-other-event'),
    INVALID: () => t('door-result-invalid'),
  };

  /** The last scan's result, in the page's language (shown again when it changes). */
  let lastVerdict = null;
  function showVerdict() {
    const box = $('door-result');
    if (!lastVerdict) return;
    delete box.dataset.i18n;
    const verdict = lastVerdict;
    box.dataset.result = verdict.result;
    box.className = `door-result ${verdict.result}`;
    const claims = verdict.claims || {};
    const why = verdict.why({ seat: claims.seatId, tier: claims.tierId || t('door-entry') });
    const holder = claims.ticketId ? door.holders.get(claims.ticketId) : null;
    box.textContent = t('door-result-line', { headline: HEADLINES[verdict.result](), why });
    if (holder) {
      const name = document.createElement('strong');
      name.className = 'door-holder';
      name.dataset.testid = 'door-holder';
      name.textContent = t('door-holder', { name: holder });
      box.append(document.createElement('br'), name);
    }
  }

  function showCounts() {
    $('door-counts').textContent = t('door-counts', { scanned: Object.keys(door.scanned).length, pending: door.pending.length });
  }

  function showReport() {
    const box = $('door-sync-report');
    box.textContent = '';
    const duplicates = door.report.filter((r) => r.result !== 'CHECKED_IN');
    if (!duplicates.length) return;
    const title = document.createElement('p');
    title.className = 'notice info';
    title.textContent = t('door-reported', { list: duplicates.map((r) => `${r.result} ${r.ticketId}`).join(', ') });
    box.append(title);
  }

  /** Sends the scans made since the last sync; a call while one is in flight waits for it. */
  let inflight = null;
  function sync() {
    if (inflight) return inflight;
    if (!door.pending.length) return Promise.resolve();
    const batch = door.pending.slice(0, 500);
    inflight = api('POST', `/v1/admin/events/${encodeURIComponent(door.eventId)}/door/checkins`, { scans: batch })
      .then(({ results }) => {
        door.pending = door.pending.slice(batch.length);
        for (const r of results) {
          door.checkedIn.add(r.ticketId);
          door.report.push(r);
        }
        saveState();
        showReport();
        showCounts();
      })
      .catch(() => { /* offline or refused: kept for the next try */ })
      .finally(() => { inflight = null; });
    return inflight;
  }

  // -- Decoding QR codes: the browser's BarcodeDetector where there is one, else jsQR.

  const canvas = () => $('door-canvas');
  async function decodeFrom(source, width, height) {
    if ('BarcodeDetector' in window) {
      try {
        const found = await new BarcodeDetector({ formats: ['qr_code'] }).detect(source);
        if (found.length) return found[0].rawValue;
      } catch { /* fall back to jsQR */ }
    }
    const c = canvas();
    c.width = width;
    c.height = height;
    const ctx = c.getContext('2d', { willReadFrequently: true });
    ctx.drawImage(source, 0, 0, width, height);
    const image = ctx.getImageData(0, 0, width, height);
    const found = window.jsQR(image.data, width, height, { inversionAttempts: 'dontInvert' });
    return found ? found.data : null;
  }

  async function scanImage(url) {
    const img = new Image();
    img.src = url;
    await img.decode();
    const text = await decodeFrom(img, img.naturalWidth, img.naturalHeight);
    if (!text) {
      lastVerdict = null;
      delete $('door-result').dataset.i18n;
      $('door-result').dataset.result = 'NO_CODE';
      $('door-result').textContent = t('door-no-code');
      return 'NO_CODE';
    }
    last = { text: '', at: 0 };
    return handle(text);
  }

  async function startCamera() {
    const video = $('door-video');
    const stream = await navigator.mediaDevices.getUserMedia({ video: { facingMode: 'environment' } });
    video.srcObject = stream;
    video.hidden = false;
    await video.play();
    const tick = async () => {
      if (video.readyState >= 2) {
        const text = await decodeFrom(video, video.videoWidth, video.videoHeight).catch(() => null);
        if (text) await handle(text);
      }
      requestAnimationFrame(tick);
    };
    tick();
  }

  function showOnline() {
    const badge = $('door-online');
    badge.textContent = navigator.onLine ? t('door-online') : t('door-offline');
    badge.dataset.online = String(navigator.onLine);
    if (navigator.onLine && door.bundle) sync();
  }

  // -- Wiring.

  /** Everything this script wrote, again in the language just chosen. */
  function renderLanguage() {
    showOnline();
    showBundle();
    showCounts();
    showReport();
    showVerdict();
  }
  $('door-language').append(window.i18n.switcher({ 'aria-label': t('door-language'), 'data-testid': 'door-language' }));
  window.i18n.onChange(() => {
    $('door-language').querySelector('select').setAttribute('aria-label', t('door-language'));
    renderLanguage();
  });

  $('door-event').value = door.eventId || '';
  $('door-static').checked = door.acceptStatic;
  $('door-load').addEventListener('click', async () => {
    $('door-setup-error').textContent = '';
    try {
      const account = $('door-account').value.trim();
      const pasted = $('door-token').value.trim();
      if (pasted) {
        door.token = pasted;
      } else if (account) {
        const res = await fetch('/v1/dev/token', {
          method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ accountId: account, admin: true }),
        });
        if (!res.ok) throw new Error(t('door-no-dev-token'));
        door.token = (await res.json()).token;
      }
      door.eventId = $('door-event').value.trim();
      door.acceptStatic = $('door-static').checked;
      store.set('door.token', door.token);
      store.set('door.event', door.eventId);
      store.set('door.static', door.acceptStatic);
      await loadBundle();
    } catch (e) {
      $('door-setup-error').textContent = e.message;
    }
  });
  $('door-camera').addEventListener('click', () => startCamera().catch((e) => {
    delete $('door-result').dataset.i18n;
    $('door-result').textContent = t('door-no-camera', { reason: e.message });
  }));
  $('door-file').addEventListener('change', (ev) => {
    const file = ev.target.files[0];
    if (!file) return;
    // A data URL, not a blob URL: the pages' policy allows images from data: only.
    const reader = new FileReader();
    reader.onload = () => scanImage(reader.result);
    reader.readAsDataURL(file);
  });
  $('door-sync').addEventListener('click', () => sync());
  $('door-refresh').addEventListener('click', () => loadBundle().catch((e) => { $('door-bundle-info').textContent = e.message; }));
  $('door-manual').addEventListener('submit', (ev) => {
    ev.preventDefault();
    last = { text: '', at: 0 };
    handle($('door-code').value);
  });
  window.addEventListener('online', showOnline);
  window.addEventListener('offline', showOnline);
  showOnline();

  // A device set up before opens on its saved list, network or not.
  const saved = door.eventId && store.get(`door.bundle.${door.eventId}`);
  const ready = saved ? useBundle(saved) : Promise.resolve();

  if ('serviceWorker' in navigator) {
    navigator.serviceWorker.register('/door/sw.js', { scope: '/door/' }).catch(() => {});
  }

  // Hooks for the browser test (and for staff who paste a picture from the clipboard).
  window.door = {
    ready: () => ready.then(() => Boolean(door.bundle)),
    scanImage,
    scanText: (text) => { last = { text: '', at: 0 }; return handle(text); },
    pending: () => door.pending.length,
    report: () => door.report.slice(),
    sync,
  };
})();
