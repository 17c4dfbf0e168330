// boxoffice storefront: event list → waiting room → seat map → hold → checkout → order.
// Plain JavaScript, no framework, no build step. Served at /assets/app.js.
//
// Pages are hash routes: #/ (events), #/events/{id} (queue + seat map + hold + pay),
// #/orders (my orders), #/orders/{id} (an order with its tickets and QR codes),
// #/transfers (tickets offered to me and by me), #/events/{id}/waitlist (the group waiting list).
// The seat map is one <canvas> of every seat, kept live from the server's Server-Sent Events
// without refetching the snapshot. Test hooks live on window.boxoffice.
// Every text it shows is a message of the `storefront` catalogue (i18n.js: `t(id, args)`),
// and numbers, money, dates and times are written as the page's language writes them.
'use strict';

(() => {
  // ---------------------------------------------------------------------------------------
  // Small helpers

  const $ = (selector, root = document) => root.querySelector(selector);
  const { t } = window.i18n;

  /** Builds an element: h('button', {class: 'btn', onclick}, 'text', child, ...). */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name.startsWith('on') && typeof value === 'function') {
        el.addEventListener(name.slice(2), value);
      } else if (name === 'class') {
        el.className = value;
      } else if (name === 'style') {
        // Through CSSOM: the Content Security Policy refuses style attributes.
        el.style.cssText = String(value);
      } else if (name === 'dataset') {
        Object.assign(el.dataset, value);
      } else if (name === 'text') {
        el.textContent = value;
      } else if (value === true) {
        el.setAttribute(name, '');
      } else {
        el.setAttribute(name, String(value));
      }
    }
    append(el, children);
    return el;
  }

  function append(el, ...children) {
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  function clear(el, ...children) {
    el.replaceChildren();
    return append(el, children);
  }

  function uuid() {
    if (crypto.randomUUID) return crypto.randomUUID();
    const b = crypto.getRandomValues(new Uint8Array(16));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const x = [...b].map((v) => v.toString(16).padStart(2, '0')).join('');
    return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  /** Minor units → "€129.00" / "129,00 €" in the event's currency. */
  const money = (minor, currency) => window.i18n.money(minor, currency);
  const when = (iso) => window.i18n.dateTime(iso);
  const number = (n) => window.i18n.number(Number(n));

  function duration(seconds) {
    seconds = Math.max(0, Math.round(seconds));
    if (seconds < 60) return seconds <= 5 ? t('storefront-duration-few-seconds') : t('storefront-duration-seconds', { count: seconds });
    const minutes = Math.round(seconds / 60);
    if (minutes < 60) return t('storefront-duration-minutes', { count: minutes });
    const hours = Math.floor(minutes / 60);
    const rest = minutes % 60;
    return rest ? t('storefront-duration-hours-minutes', { hours, minutes: rest }) : t('storefront-duration-hours', { hours });
  }

  const clock = (ms) => {
    const s = Math.max(0, Math.ceil(ms / 1000));
    return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
  };

  function announce(text) {
    const el = $('#announce');
    // Clearing first makes screen readers repeat an identical message.
    el.textContent = '';
    requestAnimationFrame(() => { el.textContent = text; });
  }

  let toastTimer = 0;
  function toast(text, kind = 'info') {
    const el = $('#toast');
    clear(el, h('div', { class: kind }, text));
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => el.replaceChildren(), kind === 'error' ? 8000 : 5000);
  }

  // ---------------------------------------------------------------------------------------
  // Session: the account token (sessionStorage), per-event queue tickets and admissions.

  const store = {
    get(key) {
      try { return JSON.parse(sessionStorage.getItem(key)); } catch { return null; }
    },
    set(key, value) {
      try { sessionStorage.setItem(key, JSON.stringify(value)); } catch { /* private mode */ }
    },
    del(key) {
      try { sessionStorage.removeItem(key); } catch { /* private mode */ }
    },
  };

  function jwtClaims(token) {
    try {
      const part = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
      return JSON.parse(atob(part + '='.repeat((4 - (part.length % 4)) % 4)));
    } catch {
      return null;
    }
  }

  const session = {
    get token() {
      const s = store.get('bo.session');
      if (!s) return null;
      if (s.exp && s.exp * 1000 < Date.now()) {
        store.del('bo.session');
        return null;
      }
      return s.token;
    },
    get account() { return (store.get('bo.session') || {}).account || null; },
    signIn(token, account) {
      const claims = jwtClaims(token) || {};
      store.set('bo.session', { token, account: account || claims.sub || 'unknown', exp: claims.exp });
      renderAccount();
    },
    signOut() {
      store.del('bo.session');
      renderAccount();
    },
    key(kind, eventId) { return `bo.${kind}.${this.account}.${eventId}`; },
  };

  // ---------------------------------------------------------------------------------------
  // The API

  class ApiError extends Error {
    constructor(status, problem, headers) {
      super((problem && (problem.detail || problem.title)) || t('storefront-error-http', { status }));
      this.status = status;
      this.problem = problem || {};
      this.code = this.problem.code || (status === 0 ? 'NETWORK' : `HTTP_${status}`);
      this.headers = headers;
    }
  }

  async function api(method, path, { body, headers = {}, key, auth = true } = {}) {
    const all = { Accept: 'application/json', ...headers };
    const token = session.token;
    if (auth && token) all.Authorization = `Bearer ${token}`;
    if (body !== undefined) all['Content-Type'] = 'application/json';
    if (key) all['Idempotency-Key'] = key;
    let response;
    try {
      response = await fetch(path, {
        method,
        headers: all,
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: 'no-store',
      });
    } catch {
      throw new ApiError(0, { code: 'NETWORK', detail: t('storefront-error-network') });
    }
    const text = await response.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch { data = null; }
    }
    if (!response.ok) {
      if (response.status === 401 && auth && token) {
        session.signOut();
      }
      throw new ApiError(response.status, data, response.headers);
    }
    return { data, headers: response.headers, status: response.status };
  }

  /** A user-facing sentence for an API error. */
  function explain(error, event) {
    const p = (error && error.problem) || {};
    switch (error && error.code) {
      case 'NETWORK': return t('storefront-error-network');
      case 'SEATS_UNAVAILABLE': {
        const ids = p.unavailableSeatIds || [];
        // Best available: say what would succeed rather than "try again".
        if (typeof p.largestBlock === 'number') {
          return p.largestBlock === 0
            ? t('storefront-error-none-left-there')
            : t('storefront-error-largest-block', { count: p.largestBlock });
        }
        return ids.length
          ? t('storefront-error-seats-taken', { count: ids.length, seats: ids.join(', ') })
          : t('storefront-error-seats-unavailable');
      }
      case 'SOLD_OUT': return t('storefront-error-sold-out');
      case 'TRANSFER_CONFLICT': return p.detail ? t('storefront-error-transfer-conflict-because', { detail: p.detail }) : t('storefront-error-transfer-conflict');
      case 'TRANSFER_CLOSED': return t('storefront-error-transfer-closed');
      case 'WAITLIST_CONFLICT': return t('storefront-error-waitlist-conflict');
      case 'PURCHASE_LIMIT':
        return event ? t('storefront-error-purchase-limit', { count: event.maxTicketsPerAccount }) : t('storefront-error-purchase-limit-reached');
      case 'SALE_NOT_OPEN':
        return event ? t('storefront-error-sale-opens', { when: when(event.onSaleAt) }) : t('storefront-error-sale-not-open');
      case 'EVENT_CANCELLED': return t('storefront-error-event-cancelled');
      case 'ACCESS_CODE_REQUIRED': return t('storefront-error-access-code-required');
      case 'ACCESS_CODE_INVALID': return t('storefront-error-access-code-invalid');
      case 'ACCESS_CODE_USED_UP': return t('storefront-error-access-code-used-up');
      case 'OUTSIDE_PHASE': return t('storefront-error-outside-phase');
      case 'PHASE_ENDED': return t('storefront-error-phase-ended');
      case 'ADMISSION_REQUIRED':
      case 'ADMISSION_INVALID': return t('storefront-error-admission');
      case 'HOLD_EXPIRED': return t('storefront-error-hold-expired');
      case 'HOLD_IN_CHECKOUT': return t('storefront-error-hold-in-checkout');
      case 'HOLDERS_REQUIRED': return t('storefront-error-holders-required');
      case 'HOLDER_CHANGE_CLOSED': return t('storefront-error-holder-change-closed');
      case 'WALLET_NOT_CONFIGURED': return t('storefront-error-wallet-not-configured');
      case 'TICKETS_NOT_ISSUED': return t('storefront-error-tickets-not-issued');
      case 'RATE_LIMITED':
      case 'UNAVAILABLE':
      case 'PAYMENTS_UNAVAILABLE': return t('storefront-error-busy');
      case 'UNAUTHENTICATED': return t('storefront-error-sign-in-again');
      case 'NOT_FOUND': return t('storefront-error-not-found');
      case 'QUEUE_FULL': return t('storefront-error-queue-full');
      case 'IDEMPOTENCY_IN_PROGRESS': return t('storefront-error-in-progress');
      case 'VALIDATION': return p.detail ? t('storefront-error-validation-because', { detail: p.detail }) : t('storefront-error-validation');
      default:
        if (error && error.status >= 500) return t('storefront-error-server');
        return (error && error.message) || t('storefront-error-unknown');
    }
  }

  const isAdmissionError = (e) => e && (e.code === 'ADMISSION_REQUIRED' || e.code === 'ADMISSION_INVALID');

  // ---------------------------------------------------------------------------------------
  // Header: account and sign in

  function renderAccount() {
    const box = $('#account');
    if (session.token) {
      clear(box,
        h('span', { class: 'who', 'data-testid': 'signed-in-as' }, t('storefront-signed-in-as'), ' ', h('strong', {}, session.account)),
        h('button', { class: 'btn small', type: 'button', onclick: () => { session.signOut(); route(); } }, t('storefront-sign-out')));
      $('#signin-panel').hidden = true;
    } else {
      clear(box, h('button', {
        class: 'btn small', type: 'button', 'data-testid': 'open-signin',
        onclick: () => showSignin(true),
      }, t('storefront-sign-in')));
    }
  }

  function showSignin(focus) {
    const panel = $('#signin-panel');
    panel.hidden = false;
    const input = $('#signin-account');
    if (!input.value) input.value = `fan-${Math.random().toString(16).slice(2, 6)}`;
    if (focus) input.focus();
  }

  function setupSignin() {
    const form = $('#signin-form');
    const error = $('#signin-error');
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      error.textContent = '';
      const accountId = $('#signin-account').value.trim();
      const button = $('[data-testid="signin-submit"]');
      button.disabled = true;
      try {
        const { data } = await api('POST', '/v1/dev/token', { body: { accountId, admin: false }, auth: false });
        session.signIn(data.token, data.accountId);
        saveAccountLocale(true);
        announce(t('storefront-announce-signed-in', { account: data.accountId }));
        route();
      } catch (e) {
        error.textContent = e.status === 404
          ? t('storefront-signin-no-demo')
          : explain(e);
        if (e.status === 404) form.querySelector('details').open = true;
      } finally {
        button.disabled = false;
      }
    });
    $('#signin-token-use').addEventListener('click', () => {
      error.textContent = '';
      const token = $('#signin-token').value.trim();
      const claims = jwtClaims(token);
      if (!claims || !claims.sub) {
        error.textContent = t('storefront-signin-bad-token');
        return;
      }
      session.signIn(token, claims.sub);
      saveAccountLocale(true);
      route();
    });
  }

  // ---------------------------------------------------------------------------------------
  // Page lifecycle: every page gets a scope whose timers and streams die with it.

  class Scope {
    constructor() {
      this.alive = true;
      this.cleanups = [];
    }
    add(fn) { this.cleanups.push(fn); }
    timeout(fn, ms) {
      const id = setTimeout(() => { if (this.alive) fn(); }, ms);
      this.add(() => clearTimeout(id));
      return id;
    }
    interval(fn, ms) {
      const id = setInterval(() => { if (this.alive) fn(); }, ms);
      this.add(() => clearInterval(id));
      return id;
    }
    on(target, type, fn, options) {
      target.addEventListener(type, fn, options);
      this.add(() => target.removeEventListener(type, fn, options));
    }
    sleep(ms) {
      return new Promise((resolve) => this.timeout(resolve, ms));
    }
    dispose() {
      this.alive = false;
      for (const fn of this.cleanups.splice(0)) {
        try { fn(); } catch { /* ignore */ }
      }
    }
  }

  let scope = new Scope();
  /** The event page shown, if any (a language switch waits while it pays). */
  let eventPage = null;
  const view = () => $('#view');

  function route() {
    scope.dispose();
    scope = new Scope();
    window.boxoffice = testHooks(null);
    const hash = location.hash || '#/';
    for (const a of document.querySelectorAll('.site-header nav a')) {
      const target = a.getAttribute('href');
      if (target === hash || (target === '#/orders' && hash.startsWith('#/orders'))) {
        a.setAttribute('aria-current', 'page');
      } else {
        a.removeAttribute('aria-current');
      }
    }
    let m;
    eventPage = null;
    if ((m = hash.match(/^#\/events\/([^/?#]+)$/))) {
      eventPage = new EventPage(scope, decodeURIComponent(m[1]));
      eventPage.start();
    } else if ((m = hash.match(/^#\/events\/([^/?#]+)\/waitlist$/))) {
      waitlistPage(scope, decodeURIComponent(m[1]));
    } else if (hash === '#/transfers') {
      transfersPage(scope);
    } else if ((m = hash.match(/^#\/orders\/([^/?#]+)$/))) {
      orderPage(scope, decodeURIComponent(m[1]));
    } else if (hash === '#/orders') {
      ordersPage(scope);
    } else {
      eventsPage(scope);
    }
  }

  function pageTitle(text) {
    document.title = t('storefront-page-title', { page: text });
  }

  function needSignin(container, what) {
    showSignin(false);
    clear(container, h('div', { class: 'card', 'data-testid': 'need-signin' },
      h('h2', {}, t('storefront-sign-in-to-continue')),
      h('p', {}, what),
      h('button', { class: 'btn primary', type: 'button', onclick: () => showSignin(true) }, t('storefront-sign-in'))));
  }

  // ---------------------------------------------------------------------------------------
  // #/ — the event list

  async function eventsPage(scope) {
    pageTitle(t('storefront-events-title'));
    const root = clear(view(), h('h1', { 'data-testid': 'events-heading' }, t('storefront-events-heading')));
    const list = h('ul', { class: 'events', 'data-testid': 'event-list', 'aria-busy': 'true' });
    const status = h('p', { class: 'muted' }, t('storefront-events-loading'));
    const more = h('button', { class: 'btn', type: 'button', hidden: true }, t('storefront-events-more'));
    append(root, status, list, h('div', { class: 'actions' }, more));
    let cursor = null;
    async function load() {
      more.disabled = true;
      try {
        const q = cursor ? `?limit=50&cursor=${encodeURIComponent(cursor)}` : '?limit=50';
        const { data } = await api('GET', `/v1/events${q}`, { auth: false });
        if (!scope.alive) return;
        for (const event of data.events) list.append(eventCard(event));
        cursor = data.nextCursor || null;
        more.hidden = !cursor;
        status.textContent = list.children.length ? '' : t('storefront-events-none');
        status.hidden = !status.textContent;
      } catch (e) {
        status.hidden = false;
        status.className = 'notice error';
        status.textContent = explain(e);
      } finally {
        more.disabled = false;
        list.setAttribute('aria-busy', 'false');
      }
    }
    more.addEventListener('click', load);
    await load();
  }

  function eventCard(event) {
    const seats = event.sections.reduce((n, s) => n + s.rows * s.seatsPerRow, 0)
      + event.tiers.reduce((n, t) => n + t.capacity, 0);
    const prices = [...event.sections.map((s) => s.allInPriceMinor ?? s.priceMinor), ...event.tiers.map((t) => t.allInPriceMinor ?? t.priceMinor)];
    const from = prices.length ? Math.min(...prices) : 0;
    const href = `#/events/${encodeURIComponent(event.eventId)}`;
    return h('li', { class: 'card event-card', 'data-testid': 'event-card', 'data-event-id': event.eventId },
      h('h2', {}, h('a', { href }, event.name)),
      h('p', { class: 'meta' }, when(event.startsAt)),
      h('p', { class: 'meta', 'data-testid': 'event-places' }, t('storefront-event-places', { count: seats, price: money(from, event.currency) })),
      event.waitingRoom && event.waitingRoom.enabled ? h('p', {}, h('span', { class: 'badge queue' }, t('storefront-waiting-room-badge'))) : null,
      h('div', { class: 'actions' },
        h('a', { class: 'btn primary', href, 'data-testid': 'choose-seats' }, t('storefront-choose-seats'),
          h('span', { class: 'visually-hidden' }, ' ', t('storefront-choose-seats-for', { event: event.name })))));
  }

  // ---------------------------------------------------------------------------------------
  // #/events/{id} — waiting room, seat map, hold, checkout

  // The simulator's test cards; `name` and `note` are message ids.
  const CARDS = [
    { token: 'pm_card_visa', name: () => t('storefront-card-visa'), note: () => t('storefront-card-visa-note') },
    { token: 'pm_card_threeDSecure2Required', name: () => t('storefront-card-3ds'), note: () => t('storefront-card-3ds-note') },
    { token: 'pm_card_chargeDeclined', name: () => t('storefront-card-declined'), note: () => t('storefront-card-declined-note') },
    { token: 'pm_sim_slow', name: () => t('storefront-card-slow'), note: () => t('storefront-card-slow-note') },
  ];

  class EventPage {
    constructor(scope, eventId) {
      this.scope = scope;
      this.eventId = eventId;
      this.event = null;
      this.map = null;
      this.hold = null;
      this.busy = false;
      this.holdKeys = new Map();
      this.payKeys = new Map();
      this.skewMs = 0;
    }

    async start() {
      pageTitle(t('storefront-event-title'));
      const root = clear(view(),
        h('p', { class: 'crumbs' }, h('a', { href: '#/' }, t('storefront-back-to-events'))));
      this.head = h('div', { class: 'event-head' }, h('h1', {}, t('storefront-loading')));
      this.body = h('div', {});
      append(root, this.head, this.body);
      try {
        const { data } = await api('GET', `/v1/events/${encodeURIComponent(this.eventId)}`, { auth: false });
        this.event = data;
      } catch (e) {
        clear(this.head, h('h1', {}, t('storefront-event-not-found')));
        clear(this.body, h('p', { class: 'notice error' }, explain(e)));
        return;
      }
      if (!this.scope.alive) return;
      const ev = this.event;
      pageTitle(ev.name);
      clear(this.head,
        h('h1', { 'data-testid': 'event-name' }, ev.name),
        h('span', { class: 'muted' }, when(ev.startsAt)),
        ev.waitingRoom.enabled ? h('span', { class: 'badge queue' }, t('storefront-waiting-room-badge')) : null);
      if (ev.status === 'CANCELLED') {
        clear(this.body, h('p', { class: 'notice error', 'data-testid': 'event-cancelled' },
          t('storefront-event-cancelled')));
        return;
      }
      if (!session.token) {
        needSignin(this.body, t('storefront-sign-in-for-seats'));
        return;
      }
      this.queueBox = h('div', { hidden: true });
      this.shopBox = h('div', { hidden: true });
      this.phaseBox = h('div', {});
      append(clear(this.body), this.phaseBox, this.queueBox, this.shopBox);
      await this.phases();
      if (!this.scope.alive) return;
      if (ev.waitingRoom.enabled && !this.admission()) {
        await this.waitingRoom();
        if (!this.scope.alive) return;
      }
      this.shop();
    }

    // -- Sale phases ------------------------------------------------------------------

    /** The sale's phases with their windows; a code entry for each presale lane not over. */
    async phases() {
      const phases = this.event.phases || [];
      this.lane = null;
      if (!phases.length) return;
      const now = Date.now();
      const open = (p) => Date.parse(p.startsAt) <= now && (!p.endsAt || now < Date.parse(p.endsAt));
      const items = [];
      for (const p of phases) {
        const ended = p.endsAt && Date.parse(p.endsAt) <= now;
        const window = p.endsAt
          ? t('storefront-phase-window', { from: when(p.startsAt), to: when(p.endsAt) })
          : t('storefront-phase-from', { from: when(p.startsAt) });
        const state = ended ? t('storefront-phase-ended') : open(p) ? t('storefront-phase-open') : t('storefront-phase-later');
        const item = h('li', { class: 'phase', 'data-testid': `phase-${p.phaseId}` },
          h('strong', {}, p.name), ' ',
          p.access === 'code' ? h('span', { class: 'badge' }, t('storefront-phase-code-badge')) : null, ' ',
          h('span', { class: 'muted' }, `${window} · ${state}`));
        if (p.access === 'code' && !ended) item.append(await this.codeEntry(p, open(p)));
        items.push(item);
      }
      clear(this.phaseBox, h('section', { class: 'card phases', 'data-testid': 'phases', 'aria-labelledby': 'phases-title' },
        h('h2', { id: 'phases-title' }, t('storefront-phases-title')),
        h('ul', { class: 'phase-list' }, items)));
    }

    /** A presale lane's code entry, or "unlocked" once the account redeemed a code. */
    async codeEntry(phase, openNow) {
      const base = `/v1/events/${encodeURIComponent(this.eventId)}/phases/${encodeURIComponent(phase.phaseId)}/access`;
      const box = h('div', { class: 'code-entry' });
      const unlocked = () => {
        if (openNow) this.lane = phase.phaseId;
        clear(box, h('p', { class: 'notice ok', 'data-testid': `phase-unlocked-${phase.phaseId}` },
          t('storefront-phase-unlocked', { phase: phase.name })));
      };
      try {
        const { data } = await api('GET', base);
        if (data.redeemed) { unlocked(); return box; }
      } catch (e) { /* the entry below still works */ }
      const id = `code-${phase.phaseId}`;
      const input = h('input', { id, name: 'code', autocomplete: 'off', required: true, maxlength: '40',
        spellcheck: 'false', 'data-testid': `phase-code-${phase.phaseId}` });
      const problem = h('p', { class: 'notice error', role: 'alert' });
      const form = h('form', { class: 'field-row', 'data-testid': `phase-code-form-${phase.phaseId}` },
        h('label', { for: id }, t('storefront-phase-code-label')), input,
        h('button', { class: 'btn primary', type: 'submit', 'data-testid': `phase-code-submit-${phase.phaseId}` },
          t('storefront-phase-code-submit')));
      form.addEventListener('submit', async (ev) => {
        ev.preventDefault();
        problem.textContent = '';
        try {
          await api('POST', base, { body: { code: input.value.trim() } });
          unlocked();
          announce(t('storefront-phase-unlocked', { phase: phase.name }));
        } catch (e) {
          problem.textContent = explain(e, this.event);
        }
      });
      clear(box, form, problem);
      return box;
    }

    // -- Waiting room ------------------------------------------------------------------

    admission() {
      const a = store.get(session.key('admission', this.eventId));
      if (!a || !a.token) return null;
      if (a.expiresAt && Date.parse(a.expiresAt) < Date.now() + 5000) return null;
      return a;
    }

    admissionHeaders() {
      const a = this.event.waitingRoom.enabled ? this.admission() : null;
      return a ? { 'Admission-Token': a.token } : {};
    }

    dropAdmission() {
      store.del(session.key('admission', this.eventId));
    }

    /** Back to the waiting room (the admission ended); `then` runs once admitted again. */
    async requeue(reason, then) {
      this.dropAdmission();
      this.shopBox.hidden = true;
      await this.waitingRoom(reason);
      if (!this.scope.alive) return;
      this.shopBox.hidden = false;
      if (this.map) this.map.resize();
      this.renderSession();
      if (then) await then();
    }

    async waitingRoom(reason) {
      const scope = this.scope;
      const box = this.queueBox;
      box.hidden = false;
      const position = h('p', { class: 'big', 'data-testid': 'queue-position' }, '…');
      const ahead = h('dd', { 'data-testid': 'queue-ahead' }, '…');
      const wait = h('dd', { 'data-testid': 'queue-wait' }, '…');
      const state = h('dd', { 'data-testid': 'queue-state' }, t('storefront-queue-joining'));
      const bar = h('span', { style: 'width: 0%' });
      const progress = h('div', { class: 'progress', role: 'progressbar', 'aria-label': t('storefront-queue-progress'), 'aria-valuemin': '0', 'aria-valuemax': '100', 'aria-valuenow': '0' }, bar);
      const updated = h('p', { class: 'hint' }, '');
      const problem = h('p', { class: 'notice error', role: 'alert' });
      const action = h('div', { class: 'actions' });
      clear(box, h('section', { class: 'card waiting', 'data-testid': 'waiting-room', 'aria-labelledby': 'wr-title' },
        h('h2', { id: 'wr-title' }, t('storefront-queue-title')),
        reason ? h('p', { class: 'notice info' }, reason) : null,
        h('p', {}, t('storefront-queue-explain')),
        h('p', { class: 'muted', style: 'margin: 0' }, t('storefront-queue-place')),
        position,
        progress,
        h('dl', {},
          h('div', {}, h('dt', {}, t('storefront-queue-ahead')), ahead),
          h('div', {}, h('dt', {}, t('storefront-queue-wait')), wait),
          h('div', {}, h('dt', {}, t('storefront-queue-status')), state)),
        h('p', { class: 'hint' }, h('span', { class: 'pulse', 'aria-hidden': 'true' }), t('storefront-queue-live')),
        updated, problem, action));
      const ticketKey = session.key('queue', this.eventId);
      let firstAhead = null;
      let lastAnnounced = 0;
      const show = (s) => {
        const aheadOfYou = s.aheadOfYou !== undefined ? s.aheadOfYou : Math.max(0, (s.position || 1) - 1);
        if (firstAhead === null || aheadOfYou > firstAhead) firstAhead = aheadOfYou;
        position.textContent = s.position ? `#${number(s.position)}` : '—';
        ahead.textContent = number(aheadOfYou);
        wait.textContent = s.status === 'ADMITTED' ? t('storefront-queue-wait-none') : (s.estimatedWaitSeconds !== undefined ? duration(s.estimatedWaitSeconds) : '…');
        state.textContent = {
          WAITING: () => t('storefront-queue-state-waiting'),
          ADMITTED: () => t('storefront-queue-state-admitted'),
          EXPIRED: () => t('storefront-queue-state-expired'),
          SOLD_OUT: () => t('storefront-queue-state-sold-out'),
        }[s.status]?.() || s.status;
        if (s.status === 'WAITING') {
          // What is left, told before admission (issue 35): everything held, or only small
          // blocks left together.
          const notes = [];
          if (s.reason === 'ALL_HELD') notes.push(t('storefront-queue-all-held'));
          if (s.largestBlock !== undefined) notes.push(s.largestBlock > 0 ? t('storefront-queue-largest-block', { count: s.largestBlock }) : t('storefront-queue-no-block'));
          if (notes.length) clear(problem, notes.join(' '));
          else clear(problem);
          problem.className = notes.length ? 'notice info' : 'notice error';
          problem.setAttribute('data-testid', 'queue-left');
        }
        if (s.status === 'CANCELLED') {
          problem.className = 'notice error';
          wait.textContent = '—';
          clear(problem, t('storefront-queue-cancelled'));
        }
        if (s.status === 'SOLD_OUT') {
          problem.className = 'notice error';
          wait.textContent = '—';
          clear(problem, t('storefront-queue-sold-out'), ' ',
            h('a', { href: `#/events/${encodeURIComponent(this.eventId)}/waitlist`, 'data-testid': 'join-waitlist-link' }, t('storefront-queue-waitlist-link')));
        }
        const pct = s.status === 'ADMITTED' ? 100 : firstAhead ? Math.round(100 * (1 - aheadOfYou / firstAhead)) : 0;
        bar.style.width = `${pct}%`;
        progress.setAttribute('aria-valuenow', String(pct));
        updated.textContent = t('storefront-queue-updated', { time: window.i18n.time(new Date()) });
        const now = Date.now();
        if (now - lastAnnounced > 30000 && s.status === 'WAITING') {
          lastAnnounced = now;
          announce(t('storefront-announce-queue', { count: aheadOfYou }));
        }
      };
      const join = async () => {
        const { data } = await api('POST', `/v1/events/${encodeURIComponent(this.eventId)}/queue`, { body: {}, key: uuid() });
        store.set(ticketKey, data.queueTicket);
        show({ ...data, aheadOfYou: Math.max(0, data.position - 1) });
        return data.queueTicket;
      };
      let ticket = store.get(ticketKey);
      let retryMs = 0;
      let soldOutAnnounced = false;
      while (scope.alive) {
        try {
          if (!ticket) ticket = await join();
          if (retryMs) await scope.sleep(retryMs);
          if (!scope.alive) return;
          const res = await api('GET', `/v1/events/${encodeURIComponent(this.eventId)}/queue/status`, {
            headers: { 'Queue-Ticket': ticket },
          });
          problem.textContent = '';
          const s = res.data;
          show(s);
          if (s.status === 'SOLD_OUT' && soldOutAnnounced === false) {
            soldOutAnnounced = true;
            announce(t('storefront-announce-sold-out'));
          } else if (s.status !== 'SOLD_OUT') {
            soldOutAnnounced = false;
          }
          if (s.status === 'CANCELLED') {
            announce(t('storefront-announce-cancelled'));
            return;
          }
          if (s.status === 'ADMITTED') {
            store.set(session.key('admission', this.eventId), { token: s.admissionToken, expiresAt: s.admissionExpiresAt });
            announce(t('storefront-announce-your-turn'));
            box.hidden = true;
            return;
          }
          if (s.status === 'EXPIRED') {
            problem.className = 'notice error';
            problem.textContent = t('storefront-queue-expired');
            await new Promise((resolve) => {
              clear(action, h('button', { class: 'btn primary', type: 'button', onclick: resolve }, t('storefront-queue-join-again')));
            });
            action.replaceChildren();
            store.del(ticketKey);
            ticket = null;
            retryMs = 0;
            continue;
          }
          const hint = Number(res.headers.get('Retry-After'));
          retryMs = Math.min(30, Math.max(1, Number.isFinite(hint) && hint > 0 ? hint : 2)) * 1000;
        } catch (e) {
          if (!scope.alive) return;
          if (e.code === 'UNAUTHENTICATED') {
            needSignin(this.body, t('storefront-queue-sign-in-expired'));
            return new Promise(() => {});
          }
          if (e.code === 'QUEUE_TICKET_INVALID' || (e.status === 404 && ticket)) {
            store.del(ticketKey);
            ticket = null;
            retryMs = 0;
            continue;
          }
          if (e.code === 'WAITING_ROOM_DISABLED') {
            box.hidden = true;
            return;
          }
          problem.className = 'notice error';
          problem.textContent = t('storefront-queue-retrying', { error: explain(e) });
          const hint = e.headers ? Number(e.headers.get('Retry-After')) : NaN;
          retryMs = (Number.isFinite(hint) && hint > 0 ? hint : 3) * 1000;
        }
      }
    }

    // -- Shop: seat map and side panel --------------------------------------------------

    shop() {
      const ev = this.event;
      this.shopBox.hidden = false;
      const canvas = h('canvas', {
        tabindex: '0', role: 'application', 'data-testid': 'seatmap',
        'aria-roledescription': t('storefront-map-role'),
        'aria-label': t('storefront-map-label', { event: ev.name }),
        'aria-describedby': 'map-keys',
      });
      const liveStatus = h('div', { class: 'map-status', 'data-testid': 'map-status', 'aria-hidden': 'true' }, t('storefront-loading'));
      const loading = h('div', { class: 'map-loading', 'data-testid': 'map-loading' }, t('storefront-map-loading'));
      const legend = h('ul', { class: 'legend', 'aria-label': t('storefront-legend') });
      const zoomIn = h('button', { class: 'btn small', type: 'button', 'aria-label': t('storefront-zoom-in'), 'data-testid': 'zoom-in' }, '+');
      const zoomOut = h('button', { class: 'btn small', type: 'button', 'aria-label': t('storefront-zoom-out'), 'data-testid': 'zoom-out' }, '−');
      const fit = h('button', { class: 'btn small', type: 'button', 'data-testid': 'zoom-fit' }, t('storefront-zoom-fit'));
      const hasSeats = ev.sections.length > 0;
      this.pick = h('section', { class: 'card', 'aria-labelledby': 'pick-title', 'data-testid': 'pick-panel' });
      this.best = h('section', { class: 'card', 'aria-labelledby': 'best-title' });
      this.tierBox = h('section', { class: 'card', 'aria-labelledby': 'tier-title' });
      this.sessionBox = h('p', { class: 'hint', 'data-testid': 'admission-info' });
      this.message = h('div', { class: 'notice', role: 'alert', 'data-testid': 'shop-message' });
      const side = h('aside', { class: 'side', 'aria-label': t('storefront-side-label') }, this.message, this.pick,
        hasSeats ? this.best : null, ev.tiers.length ? this.tierBox : null, this.sessionBox);
      const mapCard = hasSeats ? h('section', { class: 'card map-card', 'aria-labelledby': 'map-title' },
        h('div', { class: 'map-tools' },
          h('h2', { id: 'map-title', class: 'h-small', style: 'margin: 0 .4rem 0 0' }, t('storefront-map-title')),
          zoomOut, zoomIn, fit, h('span', { class: 'spacer' })),
        h('div', { class: 'map-wrap' }, canvas, liveStatus, loading),
        legend,
        h('p', { class: 'keys', id: 'map-keys' },
          t('storefront-map-keys-pointer'), ' ',
          h('kbd', {}, '←'), h('kbd', {}, '↑'), h('kbd', {}, '→'), h('kbd', {}, '↓'), ' ', t('storefront-map-keys-move'), ' ',
          h('kbd', {}, 'Enter'), ' ', t('storefront-map-keys-select'), ' ', h('kbd', {}, '+'), ' ', h('kbd', {}, '−'), ' ', t('storefront-map-keys-zoom'), ' ',
          h('kbd', {}, 'Page Up'), ' ', h('kbd', {}, 'Page Down'), ' ', t('storefront-map-keys-section'))) : null;
      clear(this.shopBox, h('div', { class: hasSeats ? 'shop' : '' }, mapCard, side));
      this.renderSession();
      this.scope.interval(() => this.renderSession(), 15000);

      if (hasSeats) {
        this.map = new SeatMap(canvas, ev, {
          scope: this.scope,
          status: liveStatus,
          loading,
          onSelection: () => this.renderPick(),
          onTaken: (ids) => this.say(t('storefront-selection-taken', { count: ids.length, seats: ids.join(', ') }), 'warn'),
          onTiers: () => this.renderTiers(),
        });
        zoomIn.addEventListener('click', () => this.map.zoomBy(1.6));
        zoomOut.addEventListener('click', () => this.map.zoomBy(1 / 1.6));
        fit.addEventListener('click', () => this.map.fit());
        this.renderLegend(legend);
        this.renderBest();
        this.scope.interval(() => this.renderLeft(), 1000);
        window.boxoffice = testHooks(this);
        this.map.load();
      }
      if (ev.tiers.length) this.renderTiers();
      this.renderPick();
      this.restoreHold();
    }

    say(text, kind = 'error') {
      this.message.className = `notice ${kind}`;
      this.message.textContent = text || '';
    }

    renderSession() {
      if (!this.sessionBox) return;
      const a = this.event.waitingRoom.enabled ? this.admission() : null;
      this.sessionBox.textContent = a && a.expiresAt
        ? t('storefront-session-until', { time: window.i18n.time(a.expiresAt) })
        : '';
    }

    renderLegend(legend) {
      const bands = this.map.bands;
      clear(legend,
        bands.map((b) => h('li', {}, h('span', { class: 'swatch', style: `background:${b.color}` }),
          t('storefront-legend-band', { price: money(b.price, this.event.currency), sections: b.sections.join(', ') }))),
        h('li', {}, h('span', { class: 'swatch held', style: `background:${COLORS.held}` }), t('storefront-legend-held')),
        h('li', {}, h('span', { class: 'swatch', style: `background:${COLORS.sold}` }), t('storefront-legend-sold')),
        h('li', {}, h('span', { class: 'swatch selected' }), t('storefront-legend-selection')),
        h('li', {}, h('span', { class: 'swatch mine' }), t('storefront-legend-mine')));
    }

    renderBest() {
      const ev = this.event;
      const max = ev.maxSeatsPerHold || 6;
      const qty = h('select', { id: 'best-qty', 'data-testid': 'best-qty' },
        Array.from({ length: max }, (_, i) => h('option', { value: String(i + 1), selected: i === 1 }, String(i + 1))));
      const section = h('select', { id: 'best-section', 'data-testid': 'best-section' },
        h('option', { value: '' }, t('storefront-best-any-section')),
        ev.sections.map((s) => h('option', { value: s.name }, t('storefront-section-price', { section: s.name, price: money(s.allInPriceMinor ?? s.priceMinor, ev.currency) }))));
      // What the party accepts when no block of its size is left (the API's `together`).
      const together = h('select', { id: 'best-together', 'data-testid': 'best-together' },
        h('option', { value: 'prefer' }, t('storefront-best-together-prefer')),
        h('option', { value: 'required' }, t('storefront-best-together-required')),
        h('option', { value: 'no' }, t('storefront-best-together-no')));
      const submit = h('button', { class: 'btn', type: 'submit', 'data-testid': 'best-submit' }, t('storefront-best-submit'));
      this.leftList = h('ul', { class: 'left-list', 'data-testid': 'best-left', 'aria-live': 'polite' });
      const form = h('form', { 'aria-labelledby': 'best-title' },
        h('h2', { id: 'best-title' }, t('storefront-best-title')),
        h('p', { class: 'hint' }, t('storefront-best-hint')),
        h('div', { class: 'form-grid' },
          h('div', {}, h('label', { for: 'best-qty' }, t('storefront-best-seats')), qty),
          h('div', {}, h('label', { for: 'best-section' }, t('storefront-best-section')), section),
          h('div', { class: 'full' }, h('label', { for: 'best-together' }, t('storefront-best-seating')), together),
          h('div', { class: 'full' }, submit)),
        h('h3', { class: 'h-small left-title' }, t('storefront-best-left-title')),
        this.leftList);
      form.addEventListener('submit', (e) => {
        e.preventDefault();
        const best = { quantity: Number(qty.value), together: together.value };
        if (section.value) best.section = section.value;
        this.placeHold({ bestAvailable: best });
      });
      clear(this.best, form);
      this.renderLeft();
    }

    /** What is left together per section, from the live map (as the server counts it). */
    renderLeft() {
      if (!this.leftList || !this.map || !this.map.loaded) return;
      const blocks = this.map.largestBlocks();
      const text = blocks.map((b) => `${b.name}:${b.largest}`).join(' ');
      if (text === this.leftText) return;
      this.leftText = text;
      clear(this.leftList, blocks.map((b) => h('li', { 'data-section': b.name, 'data-largest': String(b.largest) },
        b.largest === 0 ? t('storefront-left-none', { section: b.name }) : t('storefront-left-seats', { section: b.name, count: b.largest }))));
    }

    renderTiers() {
      const ev = this.event;
      if (!ev.tiers.length) return;
      const max = ev.maxSeatsPerHold || 6;
      const avail = this.map ? this.map.tierAvailable : new Map();
      const tier = h('select', { id: 'tier-id' }, ev.tiers.map((area) => {
        const left = avail.has(area.tierId) ? avail.get(area.tierId) : area.available;
        return h('option', { value: area.tierId }, left !== undefined
          ? t('storefront-tier-option-left', { tier: area.name, price: money(area.allInPriceMinor ?? area.priceMinor, ev.currency), count: left })
          : t('storefront-tier-option', { tier: area.name, price: money(area.allInPriceMinor ?? area.priceMinor, ev.currency) }));
      }));
      const qty = h('select', { id: 'tier-qty' }, Array.from({ length: max }, (_, i) => h('option', { value: String(i + 1) }, String(i + 1))));
      const old = this.tierBox.querySelector('form');
      if (old) {
        // Keep the user's choice while availability updates.
        tier.value = old.querySelector('#tier-id').value;
        qty.value = old.querySelector('#tier-qty').value;
        if (old.contains(document.activeElement)) return;
      }
      const form = h('form', {},
        h('h2', { id: 'tier-title' }, t('storefront-tier-title')),
        h('div', { class: 'form-grid' },
          h('div', { class: 'full' }, h('label', { for: 'tier-id' }, t('storefront-tier-area')), tier),
          h('div', {}, h('label', { for: 'tier-qty' }, t('storefront-tier-tickets')), qty),
          h('div', {}, h('button', { class: 'btn', type: 'submit' }, t('storefront-tier-hold')))));
      form.addEventListener('submit', (e) => {
        e.preventDefault();
        this.placeHold({ tierId: tier.value, quantity: Number(qty.value) });
      });
      clear(this.tierBox, form);
    }

    /** The side panel: the selection, or the hold with its countdown and payment. */
    renderPick() {
      const ev = this.event;
      if (this.hold) return this.renderHold();
      const selected = this.map ? this.map.selectedIds() : [];
      const max = ev.maxSeatsPerHold || 6;
      const total = selected.reduce((sum, id) => sum + this.map.priceOf(id), 0);
      const holdBtn = h('button', {
        class: 'btn primary wide', type: 'button', 'data-testid': 'hold-button',
        disabled: selected.length === 0 || this.busy,
        onclick: () => this.placeHold({ seatIds: this.map.selectedIds() }),
      }, selected.length ? t('storefront-hold-seats-count', { count: selected.length }) : t('storefront-hold-seats'));
      clear(this.pick,
        h('h2', { id: 'pick-title' }, t('storefront-selection-title')),
        selected.length === 0
          ? h('p', { class: 'muted', 'data-testid': 'selection-empty' }, this.map
            ? t('storefront-selection-empty', { count: max })
            : t('storefront-selection-tiers'))
          : [
            h('ul', { class: 'seat-list', 'data-testid': 'selection' }, selected.map((id) => h('li', { 'data-seat-id': id },
              h('span', {}, seatLabel(id)),
              h('span', { class: 'price' }, money(this.map.priceOf(id), ev.currency)),
              h('button', {
                class: 'btn small', type: 'button', 'aria-label': t('storefront-selection-remove', { seat: seatLabel(id) }),
                onclick: () => this.map.toggle(this.map.indexOf(id)),
              }, '✕')))),
            h('p', { class: 'total' }, h('span', {}, t('storefront-total')), h('span', { 'data-testid': 'selection-total' }, money(total, ev.currency))),
          ],
        this.typePicker(),
        this.map ? holdBtn : null,
        selected.length ? h('div', { class: 'actions' }, h('button', {
          class: 'btn small', type: 'button', onclick: () => this.map.clearSelection(),
        }, t('storefront-selection-clear'))) : null);
    }

    async placeHold(body) {
      if (this.busy || this.hold) return;
      const types = this.typesPicked();
      if (types) body = { ...body, ticketTypes: types };
      this.busy = true;
      this.say('');
      this.renderPick();
      // A fan who unlocked the presale open now buys in it.
      if (this.lane && !body.phaseId) body = { ...body, phaseId: this.lane };
      const digest = JSON.stringify(body);
      // The same request after a lost answer reuses its key: the server replays, never holds twice.
      if (!this.holdKeys.has(digest)) this.holdKeys.set(digest, uuid());
      if (this.map) this.map.pending = new Set(this.map.selected);
      try {
        const res = await api('POST', `/v1/events/${encodeURIComponent(this.eventId)}/holds`, {
          body, key: this.holdKeys.get(digest), headers: this.admissionHeaders(),
        });
        this.holdKeys.delete(digest);
        if (!this.scope.alive) return;
        this.busy = false;
        this.setHold(res.data, res.headers);
        announce(t('storefront-announce-held', { count: res.data.seats.length || res.data.quantity || 0 }));
        if (body.bestAvailable && this.map && res.data.seats.length) {
          this.map.showSeat(res.data.seats[0].seatId, Math.max(this.map.scale(), 10));
        }
        if (res.data.split) {
          this.say(t('storefront-hold-split', { count: res.data.seats.length }), 'info');
        }
      } catch (e) {
        this.busy = false;
        if (this.map) {
          this.map.pending.clear();
          this.map.dropUnavailableSelection();
        }
        if (e.status && e.status < 500 && e.code !== 'RATE_LIMITED' && e.code !== 'IDEMPOTENCY_IN_PROGRESS') {
          this.holdKeys.delete(digest);
        }
        if (!this.scope.alive) return;
        if (isAdmissionError(e)) {
          this.renderPick();
          await this.requeue(explain(e), () => this.placeHold(body));
          return;
        }
        if (e.code === 'SEATS_UNAVAILABLE' && this.map) {
          for (const id of e.problem.unavailableSeatIds || []) this.map.deselect(id);
        }
        this.say(explain(e, this.event));
        this.renderPick();
      }
    }

    setHold(hold, headers) {
      this.hold = hold;
      if (this.map) this.map.pending.clear();
      const serverDate = headers && Date.parse(headers.get('Date') || '');
      // The countdown follows the server's clock when ours is clearly off.
      const skew = Number.isFinite(serverDate) ? serverDate - Date.now() : 0;
      this.skewMs = Math.abs(skew) > 2000 ? skew : 0;
      store.set(session.key('hold', this.eventId), hold.holdId);
      if (this.map) {
        this.map.setMine(hold.seats.map((s) => s.seatId));
        this.map.clearSelection(true);
        this.map.locked = true;
      }
      this.warned = false;
      this.renderHold();
      if (this.countdown) clearInterval(this.countdown);
      this.countdown = this.scope.interval(() => this.tick(), 500);
      this.tick();
    }

    clearHold() {
      this.hold = null;
      if (this.countdown) clearInterval(this.countdown);
      this.countdown = null;
      store.del(session.key('hold', this.eventId));
      if (this.map) {
        this.map.setMine([]);
        this.map.locked = false;
      }
      this.renderPick();
    }

    async restoreHold() {
      const holdId = store.get(session.key('hold', this.eventId));
      if (!holdId || this.hold) return;
      try {
        const { data, headers } = await api('GET', `/v1/holds/${encodeURIComponent(holdId)}`);
        if (!this.scope.alive) return;
        if (data.status === 'HELD' && !this.hold) this.setHold(data, headers);
        else store.del(session.key('hold', this.eventId));
      } catch {
        store.del(session.key('hold', this.eventId));
      }
    }

    tick() {
      if (!this.hold || !this.timerEl) return;
      const left = Date.parse(this.hold.expiresAt) - (Date.now() + this.skewMs);
      this.timerEl.textContent = clock(left);
      this.timerEl.classList.toggle('low', left < 60000);
      if (left < 60000 && !this.warned && left > 0) {
        this.warned = true;
        announce(t('storefront-announce-one-minute'));
      }
      if (left <= 0 && !this.paying) {
        this.clearHold();
        this.say(t('storefront-hold-expired'), 'warn');
        announce(t('storefront-announce-hold-expired'));
      }
    }

    /** Counts per ticket type before holding (issue 40); none when the event sells one type. */
    typePicker() {
      const ev = this.event;
      const types = ev.ticketTypes || [];
      if (!types.length) return null;
      if (!this.typeBox) {
        const all = [{ typeId: 'standard', name: t('storefront-type-standard') }, ...types];
        this.typeBox = h('fieldset', { class: 'types', 'data-testid': 'type-picker' },
          h('legend', {}, t('storefront-types-title')),
          h('p', { class: 'hint' }, t('storefront-types-hint')),
          all.map((type) => h('label', {}, h('span', {}, type.name),
            h('input', { type: 'number', min: '0', max: String(ev.maxSeatsPerHold || 6), value: '0', inputmode: 'numeric',
              'data-type-id': type.typeId, 'data-testid': `type-count-${type.typeId}` }))));
      }
      return this.typeBox;
    }

    /** The picked counts (`{typeId: n}`), or null when none was picked (all standard). */
    typesPicked() {
      if (!this.typeBox) return null;
      const counts = {};
      for (const input of this.typeBox.querySelectorAll('input[data-type-id]')) {
        const n = Math.max(0, Math.floor(Number(input.value) || 0));
        if (n > 0) counts[input.dataset.typeId] = n;
      }
      return Object.keys(counts).length ? counts : null;
    }

    /** The promo code field of the hold panel (kept across re-renders). */
    promoField() {
      if (!this.promoInput) {
        this.promoInput = h('input', { id: 'promo-code', type: 'text', maxlength: '32', autocomplete: 'off', 'data-testid': 'promo-code' });
      }
      return h('div', { class: 'promo' }, h('label', { for: 'promo-code' }, t('storefront-promo-label')), this.promoInput);
    }

    renderHold() {
      const ev = this.event;
      const hold = this.hold;
      this.timerEl = h('span', { class: 'countdown', role: 'timer', 'aria-live': 'off', 'data-testid': 'hold-countdown' }, '');
      const items = hold.seats.length
        ? hold.seats.map((s) => h('li', { 'data-seat-id': s.seatId, 'data-ticket-type': s.ticketType || 'standard' },
          h('span', {}, seatLabel(s.seatId), s.ticketType && s.ticketType !== 'standard' ? ` · ${typeName(ev, s.ticketType)}` : ''),
          h('span', { class: 'price' }, money(s.priceMinor, ev.currency))))
        : [h('li', {}, h('span', {}, t('storefront-tier-quantity', { count: hold.quantity, tier: tierName(ev, hold.tierId) })),
          h('span', { class: 'price' }, money(hold.totalMinor, hold.currency)))];
      const cards = h('fieldset', { class: 'cards' },
        h('legend', {}, t('storefront-pay-test-card')),
        CARDS.map((c, i) => h('label', {},
          h('input', { type: 'radio', name: 'card', value: c.token, checked: i === 0, 'data-testid': `card-${c.token}` }),
          h('span', {}, h('span', { class: 'card-name' }, c.name()), h('span', { class: 'card-note' }, c.note(), ' · ', h('code', {}, c.token))))));
      this.payBtn = h('button', { class: 'btn primary wide', type: 'submit', 'data-testid': 'pay-button' }, t('storefront-pay', { amount: money(hold.totalMinor, hold.currency) }));
      this.payStatus = h('p', { class: 'notice info', role: 'status', 'data-testid': 'pay-status' });
      const release = h('button', { class: 'btn danger', type: 'button', 'data-testid': 'release-button' }, t('storefront-release'));
      const form = h('form', {},
        h('h2', { id: 'pick-title' }, t('storefront-held-title')),
        h('p', { style: 'margin:0' }, t('storefront-time-left')),
        this.timerEl,
        h('ul', { class: 'seat-list', 'data-testid': 'hold-seats' }, items),
        h('p', { class: 'total' }, h('span', {}, t('storefront-total')), h('span', { 'data-testid': 'hold-total' }, money(hold.totalMinor, hold.currency))),
        priceBreakdown(hold, 'hold-breakdown'),
        this.promoField(),
        this.renderHolders(hold),
        cards, this.payBtn, this.payStatus,
        h('div', { class: 'actions' }, release));
      form.addEventListener('submit', (e) => {
        e.preventDefault();
        const card = form.querySelector('input[name=card]:checked');
        this.pay(card ? card.value : 'pm_card_visa');
      });
      release.addEventListener('click', () => this.release());
      clear(this.pick, form);
      this.tick();
    }

    /** Before payment: a holder's name per ticket, and the event's own questions
     *  (`holderPolicy`; without one, names are optional and there are no questions). */
    renderHolders(hold) {
      const policy = holderPolicy(this.event);
      const tickets = hold.seats.length
        ? hold.seats.map((s) => ({ key: { seatId: s.seatId }, label: seatLabel(s.seatId) }))
        : Array.from({ length: hold.quantity || 0 }, (_, i) => ({
          key: { unit: i + 1 },
          label: t('storefront-holder-unit', { unit: i + 1, tier: tierName(this.event, hold.tierId) }),
        }));
      this.holderFields = tickets.map((ticket, i) => {
        const nameId = `holder-${i}-name`;
        const name = h('input', {
          id: nameId, required: policy.nameRequired, maxlength: String(HOLDER_NAME_CHARS_MAX),
          autocomplete: i === 0 ? 'name' : 'off', 'data-testid': 'holder-name',
        });
        const answers = policy.questions.map((question, k) => {
          const id = `holder-${i}-q${k}`;
          const input = questionInput(question, id);
          return { question, input, row: h('div', {}, h('label', { for: id }, question.label), input) };
        });
        return {
          key: ticket.key, name, answers,
          box: h('div', { class: 'holder-ticket', 'data-testid': 'holder-ticket' },
            h('strong', {}, ticket.label),
            h('div', {}, h('label', { for: nameId }, policy.nameRequired ? t('storefront-holder-name') : t('storefront-holder-name-optional')), name),
            answers.map((a) => a.row)),
        };
      });
      if (!this.holderFields.length) return null;
      return h('fieldset', { class: 'holders', 'data-testid': 'holders' },
        h('legend', {}, t('storefront-holders-title')),
        h('p', { class: 'hint', style: 'margin:0' }, policy.nameRequired ? t('storefront-holders-hint-required') : t('storefront-holders-hint-optional')),
        this.holderFields.map((f) => f.box));
    }

    /** The holders typed in, as `PUT /v1/holds/{id}/holders` takes them; null when none was. */
    holdersTyped() {
      const holders = [];
      for (const field of this.holderFields || []) {
        const name = field.name.value.trim();
        const answers = {};
        for (const { question, input } of field.answers) {
          if (input.value.trim()) answers[question.questionId] = input.value.trim();
        }
        if (!name && !Object.keys(answers).length) continue;
        holders.push({ ...field.key, name, ...(Object.keys(answers).length ? { answers } : {}) });
      }
      return holders.length ? holders : null;
    }

    async release() {
      if (!this.hold || this.paying) return;
      const holdId = this.hold.holdId;
      try {
        await api('DELETE', `/v1/holds/${encodeURIComponent(holdId)}`);
      } catch (e) {
        if (e.code !== 'NOT_FOUND') {
          this.say(explain(e, this.event));
          return;
        }
      }
      if (!this.scope.alive) return;
      this.clearHold();
      this.say(t('storefront-released'), 'info');
      announce(t('storefront-released'));
    }

    async pay(card) {
      if (!this.hold || this.paying) return;
      const hold = this.hold;
      this.paying = true;
      this.payBtn.disabled = true;
      this.say('');
      const holders = this.holdersTyped();
      if (holders) {
        this.payStatus.textContent = t('storefront-holders-saving');
        try {
          await api('PUT', `/v1/holds/${encodeURIComponent(hold.holdId)}/holders`, { body: { holders } });
        } catch (e) {
          this.paying = false;
          if (!this.scope.alive) return;
          if (this.payBtn) this.payBtn.disabled = false;
          if (this.payStatus) this.payStatus.textContent = '';
          this.say(explain(e, this.event));
          return;
        }
      }
      this.payStatus.textContent = card === 'pm_sim_slow' ? t('storefront-pay-contacting-slow') : t('storefront-pay-contacting');
      const promoCode = this.promoInput ? this.promoInput.value.trim() : '';
      const keyName = `${hold.holdId}/${card}/${promoCode}`;
      if (!this.payKeys.has(keyName)) this.payKeys.set(keyName, uuid());
      let order;
      try {
        const checkoutBody = promoCode ? { paymentMethodToken: card, promoCode } : { paymentMethodToken: card };
        const res = await api('POST', `/v1/holds/${encodeURIComponent(hold.holdId)}/checkout`, {
          body: checkoutBody, key: this.payKeys.get(keyName), headers: this.admissionHeaders(),
        });
        order = res.data;
      } catch (e) {
        this.paying = false;
        if (!this.scope.alive) return;
        if (this.payBtn) this.payBtn.disabled = false;
        if (this.payStatus) this.payStatus.textContent = '';
        if (isAdmissionError(e)) {
          await this.requeue(explain(e), () => this.pay(card));
          return;
        }
        if (e.code === 'HOLD_EXPIRED') {
          this.clearHold();
        } else if (e.code === 'HOLDERS_REQUIRED') {
          // Not an answer to keep: the next try, holders given, is a new checkout.
          this.payKeys.delete(keyName);
          const missing = (this.holderFields || []).find((f) => !f.name.value.trim());
          if (missing) missing.name.focus();
        } else if (e.code === 'HOLD_IN_CHECKOUT') {
          const existing = await findOrderOfHold(hold.holdId);
          if (existing) {
            location.hash = `#/orders/${encodeURIComponent(existing.orderId)}`;
            return;
          }
        }
        this.say(explain(e, this.event));
        return;
      }
      store.set(session.key('order', this.eventId), order.orderId);
      await this.follow(order, hold);
    }

    /** Follows an order until it is confirmed (→ order page) or cancelled. */
    async follow(order, hold) {
      const scope = this.scope;
      let asked3ds = false;
      let delay = 700;
      for (;;) {
        if (!scope.alive) return;
        if (order.orderStatus === 'CONFIRMED') {
          // A confirmed order ends this shopping trip: the next one goes through the door again.
          this.dropAdmission();
          this.paying = false;
          this.clearHold();
          announce(t('storefront-announce-paid'));
          location.hash = `#/orders/${encodeURIComponent(order.orderId)}`;
          return;
        }
        if (order.orderStatus === 'CANCELLED') {
          this.paying = false;
          this.clearHold();
          const why = order.paymentStatus === 'FAILED' || order.paymentStatus === 'VOIDED'
            ? t('storefront-pay-declined')
            : t('storefront-pay-cancelled');
          this.say(why);
          announce(why);
          return;
        }
        if (order.nextAction && order.nextAction.url && !asked3ds) {
          asked3ds = true;
          if (this.payStatus) this.payStatus.textContent = t('storefront-pay-waiting-bank');
          const url = order.nextAction.url;
          const amount = money(hold.totalMinor, hold.currency);
          const how = await bankChallenge(url, amount);
          if (!this.payStatus) continue;
          if (how === 'dismissed') {
            clear(this.payStatus, t('storefront-pay-bank-waiting'), ' ',
              h('button', { class: 'btn small', type: 'button', onclick: () => bankChallenge(url, amount) }, t('storefront-pay-open-confirmation')));
          } else {
            this.payStatus.textContent = t('storefront-pay-checking');
          }
        } else if (this.payStatus && order.paymentStatus !== 'REQUIRES_ACTION') {
          this.payStatus.textContent = t('storefront-pay-confirming');
        }
        await scope.sleep(delay);
        delay = Math.min(delay * 1.3, 3000);
        try {
          const res = await api('GET', `/v1/orders/${encodeURIComponent(order.orderId)}`);
          order = res.data;
        } catch (e) {
          if (this.payStatus) this.payStatus.textContent = t('storefront-pay-still-checking', { error: explain(e) });
        }
      }
    }
  }

  async function findOrderOfHold(holdId) {
    try {
      const { data } = await api('GET', '/v1/orders?limit=100');
      return data.orders.find((o) => o.holdId === holdId) || null;
    } catch {
      return null;
    }
  }

  /** A ticket type's display name (issue 40). */
  function typeName(event, typeId) {
    const type = (event.ticketTypes || []).find((x) => x.typeId === typeId);
    return type ? type.name : typeId;
  }

  /** What an all-in price is made of: face, discount, fees, tax, order fees (issue 40). */
  function priceBreakdown(priced, testid) {
    const b = priced.breakdown;
    if (!b || (b.feesMinor === 0 && b.taxMinor === 0 && b.orderFeesMinor === 0 && b.discountMinor === 0)) return null;
    const row = (label, amount, key) => h('li', { 'data-part': key }, h('span', {}, label), h('span', { class: 'price' }, money(amount, priced.currency)));
    return h('ul', { class: 'breakdown', 'data-testid': testid },
      row(t('storefront-breakdown-face'), b.faceMinor, 'face'),
      b.discountMinor ? row(t('storefront-breakdown-discount'), -b.discountMinor, 'discount') : null,
      b.feesMinor ? row(t('storefront-breakdown-fees'), b.feesMinor, 'fees') : null,
      b.orderFeesMinor ? row(t('storefront-breakdown-order-fees'), b.orderFeesMinor, 'order-fees') : null,
      // Tax in the prices (VAT) adds nothing to the total; tax on top does.
      b.taxMinor ? row(b.totalMinor === b.faceMinor + b.feesMinor + b.orderFeesMinor
        ? t('storefront-breakdown-tax-included') : t('storefront-breakdown-tax-added'), b.taxMinor, 'tax') : null);
  }

  function seatLabel(seatId) {
    const m = /^(.*)-(\d+)-(\d+)$/.exec(seatId);
    return m ? t('storefront-seat-label', { section: m[1], row: m[2], seat: m[3] }) : seatId;
  }

  /** The name of a standing area (its id when the event does not list it). */
  function tierName(event, tierId) {
    return ((event && event.tiers) || []).find((area) => area.tierId === tierId)?.name || tierId;
  }

  /** Longest holder name and answer the page lets one type, in characters (the server
   *  judges too). */
  const HOLDER_NAME_CHARS_MAX = 200;
  const HOLDER_ANSWER_CHARS_MAX = 200;

  /** The event's rules for ticket holders; absent = names optional, no questions. */
  function holderPolicy(event) {
    const policy = (event && event.holderPolicy) || {};
    return {
      nameRequired: policy.nameRequired === true,
      questions: Array.isArray(policy.questions) ? policy.questions : [],
      changeCutoffSeconds: policy.changeCutoffSeconds,
    };
  }

  /** An input for one of the event's questions (`kind` TEXT or DATE). */
  function questionInput(question, id, value) {
    return h('input', {
      id, type: question.kind === 'DATE' ? 'date' : 'text', required: question.required === true,
      maxlength: question.kind === 'DATE' ? undefined : String(HOLDER_ANSWER_CHARS_MAX),
      value: value || undefined, 'data-testid': 'holder-answer', 'data-question-id': question.questionId,
    });
  }

  // ---------------------------------------------------------------------------------------
  // 3-D Secure: the shopper's bank asks for a confirmation (the payment simulator's page).

  function bankChallenge(url, amount) {
    const dialog = $('#threeds');
    const confirm = $('#threeds-confirm');
    const fail = $('#threeds-fail');
    const error = $('#threeds-error');
    $('#threeds-amount').textContent = amount;
    error.textContent = '';
    return new Promise((resolve) => {
      const done = (how) => {
        confirm.onclick = null;
        fail.onclick = null;
        dialog.oncancel = null;
        if (dialog.open) dialog.close();
        resolve(how);
      };
      const answer = async (ok) => {
        confirm.disabled = true;
        fail.disabled = true;
        const target = ok ? url : url.replace(/\/complete(?=$|[?#])/, '/fail');
        try {
          // The bank lives on another origin; its answer is not for us to read.
          await fetch(target, { method: 'GET', mode: 'no-cors', cache: 'no-store', credentials: 'omit' });
          done(ok ? 'confirmed' : 'failed');
        } catch {
          error.textContent = t('storefront-bank-unreachable');
        } finally {
          confirm.disabled = false;
          fail.disabled = false;
        }
      };
      confirm.onclick = () => answer(true);
      fail.onclick = () => answer(false);
      // Escape leaves the payment pending; the order page can bring the dialog back.
      dialog.oncancel = () => done('dismissed');
      dialog.showModal();
      confirm.focus();
    });
  }

  // ---------------------------------------------------------------------------------------
  // The seat map

  const COLORS = {
    background: '#fbfcfe',
    held: '#868d98',
    sold: '#2e3440',
    stage: '#d5dbe5',
    label: '#1b1f24',
    cursor: '#1a1a8c',
    mine: '#00e5ff',
  };
  // Price bands, most expensive first (distinct hues, each ≥ 3:1 against the background).
  const BAND_COLORS = ['#b5179e', '#d62828', '#c75a00', '#9a7b00', '#4f8a00', '#1b8a5a',
    '#00838f', '#1e6fd9', '#5e3dc8', '#8d5a97'];

  const AVAILABLE = 0;
  const HELD = 1;
  const SOLD = 2;
  const STATUS_NAMES = ['AVAILABLE', 'HELD', 'SOLD'];
  const STATUS_CODES = { AVAILABLE, HELD, SOLD };

  // World layout, in seat units (one seat = 1 × 1).
  const GAP_X = 6;
  const GAP_Y = 3;
  const LABEL_H = 4;
  const STAGE_H = 6;
  const STAGE_GAP = 3;
  const MARGIN = 3;
  /** Below this many pixels per seat the map is drawn from a one-pixel-per-seat bitmap. */
  const VECTOR_MIN_SCALE = 5;
  const SCALE_MAX = 64;

  function hexToAbgr(hex) {
    const n = parseInt(hex.slice(1), 16);
    const r = (n >> 16) & 255;
    const g = (n >> 8) & 255;
    const b = n & 255;
    return (255 << 24) | (b << 16) | (g << 8) | r; // little-endian RGBA in a Uint32
  }

  class SeatMap {
    constructor(canvas, event, opts) {
      this.canvas = canvas;
      this.ctx = canvas.getContext('2d', { alpha: false });
      this.event = event;
      this.opts = opts;
      this.scope = opts.scope;
      this.sections = [];
      let offset = 0;
      for (const s of event.sections) {
        this.sections.push({ name: s.name, rows: s.rows, perRow: s.seatsPerRow, price: s.allInPriceMinor ?? s.priceMinor, offset, x: 0, y: 0 });
        offset += s.rows * s.seatsPerRow;
      }
      this.count = offset;
      this.byName = new Map(this.sections.map((s, i) => [s.name, i]));
      this.sectionOf = new Uint16Array(this.count);
      this.sections.forEach((s, i) => this.sectionOf.fill(i, s.offset, s.offset + s.rows * s.perRow));
      this.status = new Uint8Array(this.count);
      this.expires = new Float64Array(this.count);
      this.held = new Set(); // indexes of HELD seats with a deadline (expire on screen)
      this.selected = new Set();
      // Selected seats of a hold request in flight: the stream may show them HELD (by us)
      // before the answer arrives, which is no reason to drop them.
      this.pending = new Set();
      this.mine = new Set();
      this.cursor = 0;
      this.version = -1;
      this.loaded = false;
      this.streaming = false;
      this.locked = false;
      this.focused = false;
      this.tierAvailable = new Map();
      this.view = { scale: 1, tx: 0, ty: 0 };
      this.userMoved = false;
      this.chain = Promise.resolve();
      // Price bands.
      const prices = [...new Set(this.sections.map((s) => s.price))].sort((a, b) => b - a);
      this.bands = prices.map((price, i) => ({
        price,
        color: BAND_COLORS[i % BAND_COLORS.length],
        sections: this.sections.filter((s) => s.price === price).map((s) => s.name),
      }));
      const colorOfPrice = new Map(this.bands.map((b) => [b.price, b.color]));
      this.sectionColor = this.sections.map((s) => colorOfPrice.get(s.price));
      this.palette = {
        available: this.sectionColor.map(hexToAbgr),
        held: hexToAbgr(COLORS.held),
        sold: hexToAbgr(COLORS.sold),
      };
      this.buf = document.createElement('canvas');
      this.bindInput();
      this.resizeObserver = new ResizeObserver(() => this.resize());
      this.resizeObserver.observe(canvas);
      this.scope.add(() => this.resizeObserver.disconnect());
      this.scope.add(() => this.closeStream());
      this.scope.interval(() => this.expireHolds(), 1000);
      this.resize();
    }

    // -- Ids and statuses --

    idOf(i) {
      const s = this.sections[this.sectionOf[i]];
      const k = i - s.offset;
      return `${s.name}-${Math.floor(k / s.perRow) + 1}-${(k % s.perRow) + 1}`;
    }

    indexOf(seatId) {
      const m = /^(.*)-(\d+)-(\d+)$/.exec(seatId || '');
      if (!m) return -1;
      const si = this.byName.get(m[1]);
      if (si === undefined) return -1;
      const s = this.sections[si];
      const row = Number(m[2]);
      const num = Number(m[3]);
      if (row < 1 || row > s.rows || num < 1 || num > s.perRow) return -1;
      return s.offset + (row - 1) * s.perRow + (num - 1);
    }

    effective(i, now = Date.now()) {
      const st = this.status[i];
      return st === HELD && this.expires[i] <= now ? AVAILABLE : st;
    }

    statusOf(seatId) {
      const i = this.indexOf(seatId);
      return i < 0 ? null : STATUS_NAMES[this.effective(i)];
    }

    priceOf(seatId) {
      const i = this.indexOf(seatId);
      return i < 0 ? 0 : this.sections[this.sectionOf[i]].price;
    }

    pixel(i, now) {
      const st = this.effective(i, now);
      if (st === SOLD) return this.palette.sold;
      if (st === HELD) return this.palette.held;
      return this.palette.available[this.sectionOf[i]];
    }

    setStatus(i, code, expiresAt) {
      this.status[i] = code;
      this.expires[i] = code === HELD && expiresAt ? Date.parse(expiresAt) || Infinity : Infinity;
      if (code === HELD && Number.isFinite(this.expires[i])) this.held.add(i);
      else this.held.delete(i);
      if (this.pixels) {
        const s = this.sections[this.sectionOf[i]];
        const k = i - s.offset;
        this.pixels[(s.y + Math.floor(k / s.perRow)) * this.bufW + s.x + (k % s.perRow)] = this.pixel(i);
        this.bufDirty = true;
      }
    }

    expireHolds() {
      const now = Date.now();
      let changed = false;
      for (const i of this.held) {
        if (this.expires[i] <= now) {
          this.held.delete(i);
          this.setStatus(i, AVAILABLE);
          changed = true;
        }
      }
      if (changed) this.requestDraw();
    }

    // -- Loading: snapshot, then the change stream --

    async load() {
      this.loaded = false;
      this.closeStream();
      this.opts.loading.hidden = false;
      this.setLive(t('storefront-loading'));
      for (let attempt = 0; this.scope.alive; attempt++) {
        try {
          const { data } = await api('GET', `/v1/events/${encodeURIComponent(this.event.eventId)}/seatmap`, { auth: false });
          if (!this.scope.alive) return;
          this.applySnapshot(data);
          break;
        } catch (e) {
          this.opts.loading.textContent = t('storefront-map-load-failed', { error: explain(e) });
          await this.scope.sleep(Math.min(10000, 1000 * 2 ** attempt));
        }
      }
      if (!this.scope.alive) return;
      this.opts.loading.hidden = true;
      this.loaded = true;
      this.openStream();
      this.requestDraw();
    }

    applySnapshot(snapshot) {
      this.status.fill(AVAILABLE);
      this.expires.fill(Infinity);
      this.held.clear();
      const seats = snapshot.seats || [];
      for (let k = 0; k < seats.length; k++) {
        const seat = seats[k];
        // Seats come in layout order; parse the id only when that does not hold.
        let i = k;
        if (k >= this.count || this.idOf(k) !== seat.seatId) i = this.indexOf(seat.seatId);
        if (i < 0) continue;
        const code = STATUS_CODES[seat.status] ?? AVAILABLE;
        this.status[i] = code;
        if (code === HELD) {
          this.expires[i] = seat.holdExpiresAt ? Date.parse(seat.holdExpiresAt) || Infinity : Infinity;
          if (Number.isFinite(this.expires[i])) this.held.add(i);
        }
      }
      this.version = Number(snapshot.version) || 0;
      this.applyTiers(snapshot.tiers);
      this.paintBuffer();
      this.dropUnavailableSelection();
    }

    /** Each section's most free seats side by side in one row, now (held past deadline = free). */
    largestBlocks() {
      const now = Date.now();
      return this.sections.map((s) => {
        let largest = 0;
        for (let r = 0; r < s.rows; r++) {
          let run = 0;
          const first = s.offset + r * s.perRow;
          for (let i = first; i < first + s.perRow; i++) {
            run = this.effective(i, now) === AVAILABLE ? run + 1 : 0;
            if (run > largest) largest = run;
          }
        }
        return { name: s.name, largest };
      });
    }

    applyTiers(tiers) {
      if (!Array.isArray(tiers) || !tiers.length) return;
      for (const t of tiers) this.tierAvailable.set(t.tierId, t.available);
      if (this.opts.onTiers) this.opts.onTiers();
    }

    openStream() {
      this.closeStream();
      if (!this.scope.alive || typeof EventSource === 'undefined') {
        this.poll();
        return;
      }
      const url = `/v1/events/${encodeURIComponent(this.event.eventId)}/seatmap/stream?since=${this.version}`;
      const es = new EventSource(url);
      this.es = es;
      es.onopen = () => {
        this.streaming = true;
        this.setLive();
      };
      es.onmessage = (e) => {
        let batch;
        try { batch = JSON.parse(e.data); } catch { return; }
        this.enqueue(() => this.applyBatch(batch));
      };
      es.addEventListener('reset', () => {
        // The server cannot fill the gap: refetch the snapshot and reopen.
        this.enqueue(() => this.load());
      });
      es.onerror = () => {
        this.streaming = false;
        if (es.readyState === EventSource.CLOSED) {
          // The stream is gone for good (the browser gave up): poll the changes instead.
          this.closeStream();
          this.poll();
        } else {
          this.setLive(t('storefront-map-reconnecting'));
        }
      };
    }

    closeStream() {
      if (this.es) {
        this.es.close();
        this.es = null;
      }
      this.streaming = false;
      if (this.pollTimer) clearTimeout(this.pollTimer);
      this.pollTimer = 0;
    }

    /** Fallback when Server-Sent Events are unavailable: the changes endpoint every 2 s. */
    poll() {
      this.setLive(t('storefront-map-polling'));
      const step = () => {
        this.pollTimer = setTimeout(() => this.enqueue(async () => {
          if (!this.scope.alive) return;
          await this.catchUp();
          step();
        }), 2000);
      };
      step();
    }

    enqueue(task) {
      this.chain = this.chain.then(task).catch(() => {});
      return this.chain;
    }

    /** Changes since our version through the changes endpoint (410: refetch the snapshot). */
    async catchUp() {
      try {
        const { data } = await api('GET',
          `/v1/events/${encodeURIComponent(this.event.eventId)}/seatmap/changes?since=${this.version}`, { auth: false });
        this.applyChanges(data);
      } catch (e) {
        if (e.status === 410 || e.code === 'SNAPSHOT_TOO_OLD') await this.load();
      }
    }

    async applyBatch(batch) {
      if (!this.loaded) return;
      const to = Number(batch.toVersion);
      if (Number.isFinite(to) && to <= this.version) return; // already applied (a replay)
      const from = Number(batch.fromVersion);
      if (Number.isFinite(from) && from > this.version) {
        // We missed a batch: fetch what lies between, then apply this one.
        await this.catchUp();
        if (Number.isFinite(to) && to <= this.version) return;
      }
      this.applyChanges(batch);
    }

    applyChanges(batch) {
      const before = this.version;
      let changed = false;
      for (const c of batch.changes || []) {
        if (c.version !== undefined && Number(c.version) <= before) continue;
        const i = this.indexOf(c.seatId);
        if (i < 0) continue;
        this.setStatus(i, STATUS_CODES[c.status] ?? AVAILABLE, c.holdExpiresAt);
        changed = true;
      }
      const to = Number(batch.toVersion);
      if (Number.isFinite(to) && to > this.version) this.version = to;
      if (batch.tiers) this.applyTiers(batch.tiers);
      if (changed) {
        this.dropUnavailableSelection();
        this.requestDraw();
      } else {
        this.setLive();
      }
    }

    dropUnavailableSelection() {
      const taken = [];
      for (const i of this.selected) {
        if (this.effective(i) !== AVAILABLE && !this.pending.has(i)) {
          this.selected.delete(i);
          taken.push(this.idOf(i));
        }
      }
      if (taken.length) {
        if (this.opts.onTaken) this.opts.onTaken(taken);
        if (this.opts.onSelection) this.opts.onSelection();
      }
    }

    setLive(text) {
      if (text) {
        this.opts.status.textContent = text;
        return;
      }
      let available = 0;
      const now = Date.now();
      for (let i = 0; i < this.count; i++) if (this.effective(i, now) === AVAILABLE) available++;
      this.available = available;
      const counts = { available, count: this.count };
      this.opts.status.textContent = this.streaming ? t('storefront-map-status-live', counts) : t('storefront-map-status-updating', counts);
    }

    // -- Selection --

    selectedIds() {
      return [...this.selected].map((i) => this.idOf(i));
    }

    toggle(i, quiet) {
      if (i < 0 || i >= this.count) return false;
      const id = this.idOf(i);
      if (this.locked) {
        announce(t('storefront-map-locked'));
        toast(t('storefront-map-locked'));
        return false;
      }
      if (this.selected.has(i)) {
        this.selected.delete(i);
        if (!quiet) announce(t('storefront-announce-seat-removed', { seat: seatLabel(id), count: this.selected.size }));
      } else {
        const st = this.effective(i);
        if (st !== AVAILABLE) {
          const msg = st === SOLD ? t('storefront-seat-is-sold', { seat: seatLabel(id) }) : t('storefront-seat-is-held', { seat: seatLabel(id) });
          announce(msg);
          if (!quiet) toast(msg);
          return false;
        }
        const max = this.event.maxSeatsPerHold || 6;
        if (this.selected.size >= max) {
          const msg = t('storefront-selection-max', { count: max });
          announce(msg);
          toast(msg);
          return false;
        }
        this.selected.add(i);
        if (!quiet) {
          announce(t('storefront-announce-seat-selected', {
            seat: seatLabel(id), price: money(this.sections[this.sectionOf[i]].price, this.event.currency), count: this.selected.size,
          }));
        }
      }
      this.cursor = i;
      if (this.opts.onSelection) this.opts.onSelection();
      this.requestDraw();
      return true;
    }

    deselect(seatId) {
      const i = this.indexOf(seatId);
      if (i >= 0 && this.selected.delete(i)) {
        if (this.opts.onSelection) this.opts.onSelection();
        this.requestDraw();
      }
    }

    clearSelection(quiet) {
      this.selected.clear();
      if (!quiet) announce(t('storefront-announce-selection-cleared'));
      if (this.opts.onSelection) this.opts.onSelection();
      this.requestDraw();
    }

    setMine(seatIds) {
      this.mine = new Set(seatIds.map((id) => this.indexOf(id)).filter((i) => i >= 0));
      this.requestDraw();
    }

    // -- Layout and view --

    resize() {
      const rect = this.canvas.getBoundingClientRect();
      if (rect.width < 2 || rect.height < 2) return;
      const dpr = window.devicePixelRatio || 1;
      this.dpr = dpr;
      this.width = rect.width;
      this.height = rect.height;
      this.canvas.width = Math.round(rect.width * dpr);
      this.canvas.height = Math.round(rect.height * dpr);
      const cols = this.bestColumns(rect.width, rect.height);
      if (cols !== this.cols) {
        this.layout(cols);
        this.fit();
      } else if (!this.userMoved) {
        this.fit();
      } else {
        this.clampView();
      }
      this.requestDraw();
    }

    cellSize() {
      const w = Math.max(...this.sections.map((s) => s.perRow)) + GAP_X;
      const hgt = Math.max(...this.sections.map((s) => s.rows)) + LABEL_H + GAP_Y;
      return [w, hgt];
    }

    bestColumns(width, height) {
      const n = this.sections.length;
      const [cw, ch] = this.cellSize();
      let best = 1;
      let bestScale = 0;
      for (let c = 1; c <= n; c++) {
        const r = Math.ceil(n / c);
        const ww = c * cw - GAP_X + 2 * MARGIN;
        const wh = STAGE_H + STAGE_GAP + r * ch - GAP_Y + 2 * MARGIN;
        const s = Math.min(width / ww, height / wh);
        if (s > bestScale * 1.0001) {
          bestScale = s;
          best = c;
        }
      }
      return best;
    }

    layout(cols) {
      this.cols = cols;
      const [cw, ch] = this.cellSize();
      const maxPerRow = cw - GAP_X;
      const rowsN = Math.ceil(this.sections.length / cols);
      this.grid = [];
      this.sections.forEach((s, i) => {
        const col = i % cols;
        const row = Math.floor(i / cols);
        s.col = col;
        s.row = row;
        s.x = MARGIN + col * cw + Math.floor((maxPerRow - s.perRow) / 2);
        s.y = MARGIN + STAGE_H + STAGE_GAP + row * ch + LABEL_H;
        (this.grid[row] ||= [])[col] = i;
      });
      this.worldW = cols * cw - GAP_X + 2 * MARGIN;
      this.worldH = STAGE_H + STAGE_GAP + rowsN * ch - GAP_Y + 2 * MARGIN;
      this.stage = { x: MARGIN + this.worldW * 0.2, y: MARGIN, w: this.worldW * 0.6 - 2 * MARGIN, h: STAGE_H };
      this.paintBuffer();
    }

    /** One pixel per seat: the overview drawing, updated seat by seat as changes arrive. */
    paintBuffer() {
      if (!this.worldW) return;
      this.bufW = Math.ceil(this.worldW);
      this.bufH = Math.ceil(this.worldH);
      this.buf.width = this.bufW;
      this.buf.height = this.bufH;
      this.bctx = this.buf.getContext('2d');
      this.image = this.bctx.createImageData(this.bufW, this.bufH);
      this.pixels = new Uint32Array(this.image.data.buffer);
      const now = Date.now();
      for (const s of this.sections) {
        for (let r = 0; r < s.rows; r++) {
          const base = (s.y + r) * this.bufW + s.x;
          const first = s.offset + r * s.perRow;
          for (let c = 0; c < s.perRow; c++) this.pixels[base + c] = this.pixel(first + c, now);
        }
      }
      this.bufDirty = true;
      this.requestDraw();
    }

    scale() { return this.view.scale; }

    fitScale() {
      return Math.min(this.width / this.worldW, this.height / this.worldH);
    }

    fit() {
      if (!this.width || !this.worldW) return;
      const s = this.fitScale();
      this.view = { scale: s, tx: (this.width - this.worldW * s) / 2, ty: (this.height - this.worldH * s) / 2 };
      this.userMoved = false;
      this.requestDraw();
    }

    clampView() {
      const v = this.view;
      const min = this.fitScale() * 0.8;
      v.scale = Math.min(SCALE_MAX, Math.max(min, v.scale));
      // Keep at least a third of the canvas over the venue.
      const w = this.worldW * v.scale;
      const hh = this.worldH * v.scale;
      v.tx = Math.min(this.width * 0.66, Math.max(this.width * 0.34 - w, v.tx));
      v.ty = Math.min(this.height * 0.66, Math.max(this.height * 0.34 - hh, v.ty));
    }

    zoomAt(px, py, factor) {
      const v = this.view;
      const wx = (px - v.tx) / v.scale;
      const wy = (py - v.ty) / v.scale;
      v.scale *= factor;
      this.clampView();
      v.tx = px - wx * v.scale;
      v.ty = py - wy * v.scale;
      this.clampView();
      this.userMoved = true;
      this.requestDraw();
    }

    zoomBy(factor) {
      const c = this.seatCenterLocal(this.cursor);
      const inside = this.focused && c && c.x >= 0 && c.y >= 0 && c.x <= this.width && c.y <= this.height;
      this.zoomAt(inside ? c.x : this.width / 2, inside ? c.y : this.height / 2, factor);
    }

    /** Centres a seat at `pxPerSeat` pixels per seat. */
    showSeat(seatId, pxPerSeat = 20) {
      const i = typeof seatId === 'number' ? seatId : this.indexOf(seatId);
      if (i < 0) return false;
      const { wx, wy } = this.seatWorld(i);
      const v = this.view;
      v.scale = Math.min(SCALE_MAX, Math.max(this.fitScale() * 0.8, pxPerSeat));
      v.tx = this.width / 2 - (wx + 0.5) * v.scale;
      v.ty = this.height / 2 - (wy + 0.5) * v.scale;
      this.clampView();
      this.userMoved = true;
      this.draw();
      return true;
    }

    seatWorld(i) {
      const s = this.sections[this.sectionOf[i]];
      const k = i - s.offset;
      return { wx: s.x + (k % s.perRow), wy: s.y + Math.floor(k / s.perRow), s, row: Math.floor(k / s.perRow), col: k % s.perRow };
    }

    seatCenterLocal(i) {
      if (i < 0 || !this.width) return null;
      const { wx, wy } = this.seatWorld(i);
      const v = this.view;
      return { x: v.tx + (wx + 0.5) * v.scale, y: v.ty + (wy + 0.5) * v.scale };
    }

    /** The seat's centre in viewport (client) coordinates, for clicking it. */
    seatCenter(seatId) {
      const c = this.seatCenterLocal(this.indexOf(seatId));
      if (!c) return null;
      const rect = this.canvas.getBoundingClientRect();
      const visible = c.x >= 0 && c.y >= 0 && c.x <= rect.width && c.y <= rect.height;
      return { x: rect.left + c.x, y: rect.top + c.y, visible, size: this.view.scale };
    }

    hit(px, py) {
      const v = this.view;
      const wx = (px - v.tx) / v.scale;
      const wy = (py - v.ty) / v.scale;
      for (const s of this.sections) {
        if (wx >= s.x && wx < s.x + s.perRow && wy >= s.y && wy < s.y + s.rows) {
          return s.offset + Math.floor(wy - s.y) * s.perRow + Math.floor(wx - s.x);
        }
      }
      return -1;
    }

    // -- Input --

    bindInput() {
      const c = this.canvas;
      const on = (type, fn, opts) => this.scope.on(c, type, fn, opts);
      const pointers = new Map();
      let drag = null;
      let pinch = null;
      const local = (e) => {
        const r = c.getBoundingClientRect();
        return { x: e.clientX - r.left, y: e.clientY - r.top };
      };
      on('pointerdown', (e) => {
        this.keyboardMode = false;
        if (e.button !== 0 && e.pointerType === 'mouse') return;
        c.setPointerCapture(e.pointerId);
        pointers.set(e.pointerId, local(e));
        if (pointers.size === 1) {
          const p = local(e);
          drag = { x: p.x, y: p.y, tx: this.view.tx, ty: this.view.ty, moved: false };
        } else if (pointers.size === 2) {
          const [a, b] = [...pointers.values()];
          pinch = { dist: Math.hypot(a.x - b.x, a.y - b.y) || 1, scale: this.view.scale };
          if (drag) drag.moved = true;
        }
      });
      on('pointermove', (e) => {
        if (!pointers.has(e.pointerId)) return;
        const p = local(e);
        pointers.set(e.pointerId, p);
        if (pointers.size === 2 && pinch) {
          const [a, b] = [...pointers.values()];
          const dist = Math.hypot(a.x - b.x, a.y - b.y) || 1;
          const target = pinch.scale * (dist / pinch.dist);
          this.zoomAt((a.x + b.x) / 2, (a.y + b.y) / 2, target / this.view.scale);
        } else if (drag) {
          const dx = p.x - drag.x;
          const dy = p.y - drag.y;
          if (!drag.moved && Math.hypot(dx, dy) > 5) {
            drag.moved = true;
            c.classList.add('dragging');
          }
          if (drag.moved) {
            this.view.tx = drag.tx + dx;
            this.view.ty = drag.ty + dy;
            this.clampView();
            this.userMoved = true;
            this.requestDraw();
          }
        }
      });
      const end = (e) => {
        if (!pointers.has(e.pointerId)) return;
        pointers.delete(e.pointerId);
        if (pointers.size < 2) pinch = null;
        if (e.type === 'pointerup' && drag && !drag.moved && pointers.size === 0) {
          const p = local(e);
          const i = this.hit(p.x, p.y);
          if (i >= 0) this.toggle(i);
        }
        if (pointers.size === 0) {
          drag = null;
          c.classList.remove('dragging');
        } else if (pointers.size === 1) {
          const [p] = [...pointers.values()];
          drag = { x: p.x, y: p.y, tx: this.view.tx, ty: this.view.ty, moved: true };
        }
      };
      on('pointerup', end);
      on('pointercancel', end);
      on('wheel', (e) => {
        e.preventDefault();
        const p = local(e);
        const delta = e.deltaMode === 1 ? e.deltaY * 16 : e.deltaY;
        this.zoomAt(p.x, p.y, Math.exp(-delta * 0.0018));
      }, { passive: false });
      on('focus', () => {
        this.focused = true;
        // The seat cursor shows for keyboard users (focus by Tab), not after a click or tap.
        this.keyboardMode = c.matches(':focus-visible');
        this.announceCursor(t('storefront-cursor-map'));
        this.requestDraw();
      });
      on('blur', () => {
        this.focused = false;
        this.requestDraw();
      });
      on('keydown', (e) => this.onKey(e));
    }

    onKey(e) {
      this.keyboardMode = true;
      const step = e.shiftKey ? 10 : 1;
      let handled = true;
      switch (e.key) {
        case 'ArrowLeft': this.moveCursor(-step, 0); break;
        case 'ArrowRight': this.moveCursor(step, 0); break;
        case 'ArrowUp': this.moveCursor(0, -step); break;
        case 'ArrowDown': this.moveCursor(0, step); break;
        case 'PageUp': this.jumpSection(-1); break;
        case 'PageDown': this.jumpSection(1); break;
        case 'Home': this.moveCursor(-1e6, 0); break;
        case 'End': this.moveCursor(1e6, 0); break;
        case 'Enter':
        case ' ':
          this.toggle(this.cursor);
          break;
        case '+':
        case '=': this.zoomBy(1.6); break;
        case '-':
        case '_': this.zoomBy(1 / 1.6); break;
        case '0': this.fit(); break;
        default: handled = false;
      }
      if (handled) e.preventDefault();
    }

    moveCursor(dx, dy) {
      let { s, row, col } = this.seatWorld(this.cursor);
      let si = this.sectionOf[this.cursor];
      col += dx;
      row += dy;
      const big = Math.abs(dx) >= 1e6;
      if (col < 0 || col >= s.perRow) {
        const next = big ? undefined : (this.grid[s.row] || [])[s.col + Math.sign(dx)];
        if (next === undefined) {
          col = Math.max(0, Math.min(s.perRow - 1, col));
        } else {
          si = next;
          s = this.sections[si];
          col = dx < 0 ? s.perRow - 1 : 0;
          row = Math.min(row, s.rows - 1);
        }
      }
      if (row < 0 || row >= s.rows) {
        const next = (this.grid[s.row + Math.sign(dy)] || [])[s.col];
        if (next === undefined) {
          row = Math.max(0, Math.min(s.rows - 1, row));
        } else {
          si = next;
          s = this.sections[si];
          row = dy < 0 ? s.rows - 1 : 0;
          col = Math.min(col, s.perRow - 1);
        }
      }
      this.cursor = s.offset + row * s.perRow + col;
      this.revealCursor();
      this.announceCursor('');
    }

    jumpSection(delta) {
      const si = (this.sectionOf[this.cursor] + delta + this.sections.length) % this.sections.length;
      const { row, col } = this.seatWorld(this.cursor);
      const s = this.sections[si];
      this.cursor = s.offset + Math.min(row, s.rows - 1) * s.perRow + Math.min(col, s.perRow - 1);
      this.revealCursor();
      this.announceCursor(t('storefront-cursor-section', { section: s.name }));
    }

    revealCursor() {
      if (this.view.scale < 8) {
        this.showSeat(this.cursor, 14);
        return;
      }
      const c = this.seatCenterLocal(this.cursor);
      const m = this.view.scale * 2;
      if (c.x < m || c.y < m || c.x > this.width - m || c.y > this.height - m) {
        this.showSeat(this.cursor, this.view.scale);
      } else {
        this.requestDraw();
      }
    }

    announceCursor(prefix) {
      const i = this.cursor;
      const id = this.idOf(i);
      const st = this.effective(i);
      const state = this.mine.has(i) ? t('storefront-seat-state-mine')
        : this.selected.has(i) ? t('storefront-seat-state-selected')
          : st === SOLD ? t('storefront-seat-state-sold') : st === HELD ? t('storefront-seat-state-held') : t('storefront-seat-state-available');
      const line = t('storefront-announce-cursor', { seat: seatLabel(id), price: money(this.sections[this.sectionOf[i]].price, this.event.currency), state });
      announce(prefix ? `${prefix} ${line}` : line);
    }

    // -- Drawing --

    requestDraw() {
      if (this.frame) return;
      this.frame = requestAnimationFrame(() => {
        this.frame = 0;
        this.draw();
      });
    }

    draw() {
      if (!this.scope.alive || !this.width || !this.worldW) return;
      const ctx = this.ctx;
      const { scale: s, tx, ty } = this.view;
      const now = Date.now();
      // Clear every device pixel (the CSS size may be fractional).
      ctx.setTransform(1, 0, 0, 1, 0, 0);
      ctx.fillStyle = COLORS.background;
      ctx.fillRect(0, 0, this.canvas.width, this.canvas.height);
      ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);

      // Stage.
      const st = this.stage;
      ctx.fillStyle = COLORS.stage;
      ctx.fillRect(tx + st.x * s, ty + st.y * s, st.w * s, st.h * s);
      const stageFont = Math.max(9, Math.min(22, st.h * s * 0.5));
      if (st.h * s >= 9) {
        // The label sits in the visible part of the stage.
        const left = Math.max(tx + st.x * s, 0);
        const right = Math.min(tx + (st.x + st.w) * s, this.width);
        if (right - left > 60) {
          ctx.fillStyle = COLORS.label;
          ctx.font = `700 ${stageFont}px system-ui, sans-serif`;
          ctx.textAlign = 'center';
          ctx.textBaseline = 'middle';
          ctx.fillText(t('storefront-map-stage'), (left + right) / 2, ty + (st.y + st.h / 2) * s);
        }
      }

      // Section names above the sections, when there is room for them.
      const labelFont = Math.min(20, LABEL_H * s * 0.7);
      const labelsAbove = labelFont >= 10;
      if (labelsAbove) {
        ctx.fillStyle = COLORS.label;
        ctx.font = `700 ${labelFont}px system-ui, sans-serif`;
        ctx.textAlign = 'center';
        ctx.textBaseline = 'bottom';
        for (const sec of this.sections) {
          const y = ty + sec.y * s - Math.max(2, s * 0.6);
          const left = Math.max(tx + sec.x * s, 0);
          const right = Math.min(tx + (sec.x + sec.perRow) * s, this.width);
          if (right - left < 40 || y < -40 || y > this.height + 40) continue;
          const text = t('storefront-section-price', { section: sec.name, price: money(sec.price, this.event.currency) });
          // Centred on the visible part of the section, so it stays in view when zoomed in.
          const half = ctx.measureText(text).width / 2 + 4;
          const centre = tx + (sec.x + sec.perRow / 2) * s;
          const x = right - left > 2 * half ? Math.min(Math.max(centre, left + half), right - half) : (left + right) / 2;
          ctx.fillText(text, x, y);
        }
      }

      if (s < VECTOR_MIN_SCALE) {
        if (this.bufDirty) {
          this.bctx.putImageData(this.image, 0, 0);
          this.bufDirty = false;
        }
        ctx.imageSmoothingEnabled = false;
        ctx.drawImage(this.buf, tx, ty, this.bufW * s, this.bufH * s);
      } else {
        this.drawSeats(ctx, s, tx, ty, now);
      }
      if (!labelsAbove) this.drawNamesInside(ctx, s, tx, ty);
      this.drawMarks(ctx, s, tx, ty);
      if (this.loaded) this.setLive();
    }

    /** Overview: each section's name written over it, outlined so it reads on any colour. */
    drawNamesInside(ctx, s, tx, ty) {
      ctx.textAlign = 'center';
      ctx.textBaseline = 'middle';
      ctx.lineJoin = 'round';
      for (const sec of this.sections) {
        const size = Math.min(26, sec.rows * s * 0.45, (sec.perRow * s) / Math.max(2, sec.name.length));
        if (size < 8) continue;
        ctx.font = `800 ${size}px system-ui, sans-serif`;
        const x = tx + (sec.x + sec.perRow / 2) * s;
        const y = ty + (sec.y + sec.rows / 2) * s;
        ctx.lineWidth = Math.max(2, size / 6);
        ctx.strokeStyle = 'rgba(0, 0, 0, .75)';
        ctx.strokeText(sec.name, x, y);
        ctx.fillStyle = '#fff';
        ctx.fillText(sec.name, x, y);
      }
    }

    /** Zoomed in: every visible seat as a square, one path per colour. */
    drawSeats(ctx, s, tx, ty, now) {
      const size = s * (s >= 12 ? 0.8 : 0.84);
      const pad = (s - size) / 2;
      const inset = size * 0.14;
      const paths = new Map();
      const pathFor = (key) => {
        let p = paths.get(key);
        if (!p) {
          p = new Path2D();
          paths.set(key, p);
        }
        return p;
      };
      for (let si = 0; si < this.sections.length; si++) {
        const sec = this.sections[si];
        const c0 = Math.max(0, Math.floor(-tx / s - sec.x));
        const c1 = Math.min(sec.perRow - 1, Math.ceil((this.width - tx) / s - sec.x));
        const r0 = Math.max(0, Math.floor(-ty / s - sec.y));
        const r1 = Math.min(sec.rows - 1, Math.ceil((this.height - ty) / s - sec.y));
        if (c0 > c1 || r0 > r1) continue;
        const availKey = this.sectionColor[si];
        for (let r = r0; r <= r1; r++) {
          const y = ty + (sec.y + r) * s + pad;
          const base = sec.offset + r * sec.perRow;
          for (let c = c0; c <= c1; c++) {
            const i = base + c;
            const code = this.effective(i, now);
            if (code === HELD) {
              // Smaller squares: held seats differ by shape too, not by colour alone.
              pathFor(COLORS.held).rect(tx + (sec.x + c) * s + pad + inset, y + inset, size - 2 * inset, size - 2 * inset);
            } else {
              pathFor(code === SOLD ? COLORS.sold : availKey).rect(tx + (sec.x + c) * s + pad, y, size, size);
            }
          }
        }
        // Row numbers on the left when there is room.
        if (s >= 14) {
          ctx.fillStyle = COLORS.label;
          ctx.font = `${Math.min(13, s * 0.6)}px system-ui, sans-serif`;
          ctx.textAlign = 'right';
          ctx.textBaseline = 'middle';
          for (let r = r0; r <= r1; r++) {
            ctx.fillText(String(r + 1), tx + sec.x * s - 4, ty + (sec.y + r + 0.5) * s);
          }
        }
      }
      for (const [color, path] of paths) {
        ctx.fillStyle = color;
        ctx.fill(path);
      }
    }

    /** Selection, your hold and the keyboard cursor, drawn on top at a readable size. */
    drawMarks(ctx, s, tx, ty) {
      const box = (i, min) => {
        const { wx, wy } = this.seatWorld(i);
        const size = Math.max(min, s * 0.84);
        const cx = tx + (wx + 0.5) * s;
        const cy = ty + (wy + 0.5) * s;
        return [cx - size / 2, cy - size / 2, size, size];
      };
      for (const i of this.mine) {
        const [x, y, w, hh] = box(i, 10);
        ctx.fillStyle = COLORS.mine;
        ctx.fillRect(x, y, w, hh);
        ctx.lineWidth = 2;
        ctx.strokeStyle = '#000';
        ctx.strokeRect(x, y, w, hh);
      }
      for (const i of this.selected) {
        const [x, y, w, hh] = box(i, 8);
        ctx.fillStyle = '#fff';
        ctx.fillRect(x, y, w, hh);
        ctx.lineWidth = Math.max(2.5, Math.min(4, s * 0.18));
        ctx.strokeStyle = '#000';
        ctx.strokeRect(x, y, w, hh);
        if (w >= 12) {
          ctx.fillStyle = '#000';
          ctx.beginPath();
          ctx.arc(x + w / 2, y + hh / 2, w * 0.18, 0, Math.PI * 2);
          ctx.fill();
        }
      }
      if (this.focused && this.keyboardMode) {
        const [x, y, w, hh] = box(this.cursor, 9);
        ctx.lineWidth = 3;
        ctx.strokeStyle = COLORS.cursor;
        ctx.strokeRect(x - 3, y - 3, w + 6, hh + 6);
        ctx.lineWidth = 1.5;
        ctx.strokeStyle = '#fff';
        ctx.strokeRect(x - 1, y - 1, w + 2, hh + 2);
      }
    }
  }

  /** window.boxoffice: hooks for the end-to-end test (and the curious). */
  function testHooks(page) {
    const map = page && page.map;
    return {
      ready: () => Boolean(map && map.loaded),
      streaming: () => Boolean(map && map.streaming),
      version: () => (map ? map.version : null),
      seatStatus: (id) => (map ? map.statusOf(id) : null),
      seatCenter: (id) => (map ? map.seatCenter(id) : null),
      showSeat: (id, px) => (map ? map.showSeat(id, px) : false),
      selectSeat: (id) => (map ? map.toggle(map.indexOf(id)) : false),
      selected: () => (map ? map.selectedIds() : []),
      hold: () => (page ? page.hold : null),
      largestBlocks: () => (map && map.loaded ? map.largestBlocks() : null),
      eventId: () => (page ? page.eventId : null),
    };
  }

  // ---------------------------------------------------------------------------------------
  // #/orders/{id} — an order and its tickets

  const qrCache = new Map();

  async function loadQr(ticketId) {
    if (qrCache.has(ticketId)) return qrCache.get(ticketId);
    const res = await fetch(`/v1/tickets/${encodeURIComponent(ticketId)}/qr.svg`, {
      headers: { Authorization: `Bearer ${session.token}` },
    });
    if (!res.ok) throw new ApiError(res.status, null);
    const text = await res.text();
    const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
    const svg = doc.documentElement;
    if (!svg || svg.nodeName.toLowerCase() !== 'svg') throw new Error('not an SVG');
    // Only shapes: drop anything scriptable.
    for (const el of svg.querySelectorAll('script, foreignObject')) el.remove();
    for (const el of [svg, ...svg.querySelectorAll('*')]) {
      for (const attr of [...el.attributes]) if (/^on/i.test(attr.name)) el.removeAttribute(attr.name);
    }
    qrCache.set(ticketId, svg);
    return svg;
  }

  /** The ticket's live code: made on this device every 15 s from the ticket's secret (only its
   *  owner is given it), so that a screenshot stops working a few seconds later. */
  async function rotatingQr(scope, ticket, box, hint) {
    const { data } = await api('GET', `/v1/tickets/${encodeURIComponent(ticket.ticketId)}/rotating`);
    const key = await crypto.subtle.importKey('raw', b64urlDecode(data.secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
    let shown = null;
    const draw = async () => {
      const now = Date.now() / 1000;
      const step = Math.floor(now / data.periodSeconds);
      hint.textContent = t('storefront-ticket-live-code', { seconds: Math.ceil((step + 1) * data.periodSeconds - now) });
      if (step === shown) return;
      shown = step;
      const mac = new Uint8Array(await crypto.subtle.sign('HMAC', key, new TextEncoder().encode(`BR1.${step}`)));
      const tag = btoa(String.fromCharCode(...mac.slice(0, 12))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
      const code = `BR1.${step}.${tag}.${data.staticCode}`;
      const qrCode = window.qrcode(0, 'L');
      qrCode.addData(code);
      qrCode.make();
      const svg = new DOMParser().parseFromString(qrCode.createSvgTag({ cellSize: 2, margin: 2, scalable: true }), 'image/svg+xml').documentElement;
      svg.setAttribute('aria-hidden', 'true');
      svg.setAttribute('focusable', 'false');
      box.dataset.code = code;
      clear(box, svg);
    };
    await draw();
    for (;;) {
      await scope.sleep(1000);
      if (!scope.alive) return;
      await draw();
    }
  }

  function b64urlDecode(text) {
    const b64 = text.replace(/-/g, '+').replace(/_/g, '/');
    return Uint8Array.from(atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4)), (c) => c.charCodeAt(0));
  }

  async function orderPage(scope, orderId) {
    pageTitle(t('storefront-order-title'));
    const root = clear(view(), h('p', { class: 'crumbs' }, h('a', { href: '#/orders' }, t('storefront-back-to-orders'))));
    if (!session.token) {
      needSignin(root.appendChild(h('div')), t('storefront-sign-in-for-order'));
      return;
    }
    const heading = h('h1', { 'data-testid': 'order-heading', tabindex: '-1' }, t('storefront-order-loading'));
    const summary = h('div', {});
    const notice = h('div', { class: 'notice info', role: 'status', 'data-testid': 'order-notice' });
    const delivery = h('div', { class: 'delivery', 'data-testid': 'order-delivery', hidden: true });
    const ticketsTitle = h('h2', { hidden: true }, t('storefront-order-tickets'));
    const tickets = h('ul', { class: 'tickets', 'data-testid': 'tickets' });
    const back = h('p', { class: 'actions' });
    append(root, h('section', { class: 'card stack' }, heading, notice, summary, delivery), h('section', { class: 'stack', style: 'margin-top:1rem' }, ticketsTitle, tickets), back);
    const wallets = new Wallets(scope);
    let event = null;
    const shown = new Set();
    let delay = 800;
    let challenged = false;
    const started = Date.now();
    for (;;) {
      if (!scope.alive) return;
      let order;
      try {
        ({ data: order } = await api('GET', `/v1/orders/${encodeURIComponent(orderId)}`));
      } catch (e) {
        if (!scope.alive) return;
        if (e.status === 404) {
          heading.textContent = t('storefront-order-not-found');
          notice.className = 'notice error';
          notice.textContent = explain(e);
          return;
        }
        notice.textContent = t('storefront-retrying', { error: explain(e) });
        await scope.sleep(3000);
        continue;
      }
      if (!scope.alive) return;
      if (!event) {
        try {
          ({ data: event } = await api('GET', `/v1/events/${encodeURIComponent(order.eventId)}`, { auth: false }));
        } catch {
          event = { name: t('storefront-event-title'), eventId: order.eventId };
        }
        clear(back,
          h('a', { class: 'btn', href: `#/events/${encodeURIComponent(order.eventId)}`, 'data-testid': 'back-to-event' }, t('storefront-back-to-map')),
          h('a', { class: 'btn', href: '#/' }, t('storefront-all-events')));
      }
      const expected = order.seats.length || order.quantity || 0;
      const title = {
        CONFIRMED: () => t('storefront-order-confirmed'),
        PENDING_PAYMENT: () => t('storefront-order-pending'),
        CANCELLED: () => t('storefront-order-cancelled'),
        REFUNDED: () => t('storefront-order-refunded'),
      }[order.orderStatus]?.() || order.orderStatus;
      if (heading.textContent !== title) {
        heading.textContent = title;
        pageTitle(title);
        if (order.orderStatus !== 'PENDING_PAYMENT') announce(title);
      }
      clear(summary, h('dl', { class: 'order-summary' },
        h('dt', {}, t('storefront-order-event')), h('dd', {}, event.name, event.startsAt ? ` · ${when(event.startsAt)}` : ''),
        h('dt', {}, t('storefront-order-order')), h('dd', { class: 'mono', 'data-testid': 'order-id' }, order.orderId),
        h('dt', {}, t('storefront-order-status')), h('dd', {}, h('span', { class: `status-pill ${order.orderStatus}`, 'data-testid': 'order-status' }, orderStatusText(order.orderStatus))),
        h('dt', {}, t('storefront-order-payment')), h('dd', {}, paymentStatusText(order.paymentStatus)),
        h('dt', {}, order.seats.length ? t('storefront-order-seats') : t('storefront-order-tickets-count')),
        h('dd', {}, order.seats.length ? order.seats.map((s) => s.seatId).join(', ') : t('storefront-tier-quantity', { count: order.quantity, tier: tierName(event, order.tierId) })),
        h('dt', {}, t('storefront-total')), h('dd', {}, money(order.totalMinor, order.currency), priceBreakdown(order, 'order-breakdown')),
        ...((order.refunds || []).length ? [h('dt', {}, t('storefront-order-refunds')), h('dd', { 'data-testid': 'order-refunds' },
          order.refunds.map((r) => (r.failure
            ? t('storefront-refund-line-failed', { amount: money(r.amountMinor, r.currency), status: refundStatusText(r.status), failure: r.failure })
            : t('storefront-refund-line', { amount: money(r.amountMinor, r.currency), status: refundStatusText(r.status) }))).join(', '))] : [])));
      if (order.orderStatus === 'CANCELLED') {
        notice.className = 'notice error';
        notice.textContent = t('storefront-order-payment-failed');
        return;
      }
      if (order.orderStatus === 'PENDING_PAYMENT') {
        notice.className = 'notice info';
        if (order.nextAction && order.nextAction.url) {
          notice.textContent = t('storefront-order-bank-confirm');
          if (!challenged) {
            challenged = true;
            clear(notice, t('storefront-order-bank-confirm'), ' ',
              h('button', { class: 'btn small', type: 'button', onclick: () => bankChallenge(order.nextAction.url, money(order.totalMinor, order.currency)) }, t('storefront-order-bank-button')));
          }
        } else {
          notice.textContent = t('storefront-order-confirming');
        }
      } else {
        notice.className = 'notice ok';
        notice.textContent = order.tickets.length >= expected
          ? t('storefront-order-show-qr')
          : t('storefront-order-issuing');
      }
      if (order.orderStatus === 'CONFIRMED' && order.tickets.length >= expected && delivery.hidden) {
        delivery.hidden = false;
        clear(delivery, pdfButton(scope, order), wallets.note);
      }
      for (const ticket of order.tickets) {
        if (shown.has(ticket.ticketId)) continue;
        shown.add(ticket.ticketId);
        ticketsTitle.hidden = false;
        const qr = h('div', { class: 'qr', 'data-testid': 'ticket-qr', role: 'img', 'aria-label': t('storefront-ticket-qr-label', { ticket: ticket.seatId ? seatLabel(ticket.seatId) : tierName(event, order.tierId) }) }, t('storefront-ticket-qr-loading'));
        const usable = ticket.status === 'VALID';
        const owned = usable && order.orderStatus === 'CONFIRMED';
        tickets.append(h('li', { class: `card ticket${usable ? '' : ' void'}`, 'data-testid': 'ticket', 'data-ticket-id': ticket.ticketId },
          h('span', { class: 'seat' }, ticket.seatId || ticket.tierId || t('storefront-ticket')),
          h('span', { class: 'muted' }, ticket.seatId ? seatLabel(ticket.seatId)
            : ((event.tiers || []).find((x) => x.tierId === ticket.tierId) || { name: t('storefront-ticket-standing') }).name),
          usable ? qr : h('p', { class: 'notice info', 'data-testid': 'ticket-void' }, voidText(ticket)),
          h('span', { class: 'code mono', title: ticket.code }, ticket.code),
          holderBox(event, ticket, owned),
          owned ? wallets.buttons(ticket) : null,
          owned ? giveForm(order, ticket) : null,
          owned && event.refundPolicy ? refundForm(order, ticket, event.refundPolicy) : null));
        if (!usable) continue;
        const hint = h('span', { class: 'rotating-hint', 'data-testid': 'rotating-hint' });
        qr.after(hint);
        rotatingQr(scope, ticket, qr, hint).catch(() => loadQr(ticket.ticketId).then((svg) => {
          const copy = svg.cloneNode(true);
          copy.setAttribute('aria-hidden', 'true');
          copy.setAttribute('focusable', 'false');
          clear(qr, copy);
          hint.textContent = '';
        }).catch(() => { qr.textContent = t('storefront-ticket-qr-unavailable'); }));
      }
      if (order.orderStatus === 'CONFIRMED' && order.tickets.length >= expected) return;
      // Tickets are issued shortly after confirmation; keep looking for a while, then slower.
      await scope.sleep(delay);
      delay = Date.now() - started > 60000 ? 5000 : Math.min(delay * 1.2, 2000);
    }
  }

  const orderStatusText = (status) => ({
    CONFIRMED: () => t('storefront-status-confirmed'),
    PENDING_PAYMENT: () => t('storefront-status-pending-payment'),
    CANCELLED: () => t('storefront-status-cancelled'),
    REFUNDED: () => t('storefront-status-refunded'),
  }[status]?.() || status.replace('_', ' ').toLowerCase());

  const paymentStatusText = (status) => ({
    AUTHORIZING: () => t('storefront-payment-authorizing'),
    REQUIRES_ACTION: () => t('storefront-payment-requires-action'),
    AUTHORIZED: () => t('storefront-payment-authorized'),
    UNKNOWN: () => t('storefront-payment-unknown'),
    CAPTURED: () => t('storefront-payment-captured'),
    VOIDED: () => t('storefront-payment-voided'),
    FAILED: () => t('storefront-payment-failed'),
  }[status]?.() || String(status).replace('_', ' ').toLowerCase());

  const refundStatusText = (status) => ({
    PENDING: () => t('storefront-refund-pending'),
    SUCCEEDED: () => t('storefront-refund-succeeded'),
    FAILED: () => t('storefront-refund-failed'),
  }[status]?.() || String(status).toLowerCase());

  /** Why a ticket shown on the order page no longer gets in. */
  function voidText(ticket) {
    if (ticket.voidReason === 'REFUND') return t('storefront-ticket-refunded');
    if (ticket.voidReason === 'EVENT_CANCELLED') return t('storefront-ticket-event-cancelled');
    return {
      VOIDED: () => t('storefront-ticket-voided'),
      CHECKED_IN: () => t('storefront-ticket-checked-in'),
      EXCHANGING: () => t('storefront-ticket-exchanging'),
    }[ticket.status]?.() || ticket.status;
  }

  /** A file the API serves to the signed-in account (a PDF, a wallet pass), as a blob. */
  async function fetchBlob(path) {
    let response;
    try {
      response = await fetch(path, { headers: { Authorization: `Bearer ${session.token}` }, cache: 'no-store' });
    } catch {
      throw new ApiError(0, { code: 'NETWORK' });
    }
    if (!response.ok) {
      let problem = null;
      try { problem = await response.json(); } catch { problem = null; }
      throw new ApiError(response.status, problem, response.headers);
    }
    return response.blob();
  }

  /** Offers `blob` as a download named `filename`: the link is clicked once and stays on the
   *  page (the object URL is freed when the page goes). */
  function offerDownload(scope, link, blob, filename) {
    const url = URL.createObjectURL(blob);
    scope.add(() => URL.revokeObjectURL(url));
    link.href = url;
    link.download = filename;
    link.hidden = false;
    link.click();
  }

  /** "PDF tickets": every ticket of the order in one PDF, in the page's language. */
  function pdfButton(scope, order) {
    const link = h('a', { class: 'btn small', hidden: true, 'data-testid': 'pdf-link' }, t('storefront-pdf-save'));
    const status = h('span', { class: 'hint', role: 'status', 'data-testid': 'pdf-status' });
    const button = h('button', { class: 'btn', type: 'button', 'data-testid': 'pdf-tickets' }, t('storefront-pdf-tickets'));
    button.addEventListener('click', async () => {
      button.disabled = true;
      status.textContent = t('storefront-pdf-preparing');
      try {
        const blob = await fetchBlob(`/v1/orders/${encodeURIComponent(order.orderId)}/tickets.pdf?lang=${window.i18n.locale()}`);
        if (!scope.alive) return;
        offerDownload(scope, link, blob, `tickets-${order.orderId}.pdf`);
        status.textContent = '';
      } catch (e) {
        status.textContent = explain(e);
      } finally {
        button.disabled = false;
      }
    });
    return [button, link, status];
  }

  /** The wallet buttons of an order's tickets: Apple Wallet (a .pkpass file) and Google
   *  Wallet (a "save" link opened in a new tab). When the server says a wallet is not set up
   *  (409 WALLET_NOT_CONFIGURED), that wallet's buttons are disabled on every ticket and the
   *  order says why. */
  class Wallets {
    constructor(scope) {
      this.scope = scope;
      this.off = { apple: false, google: false };
      this.all = { apple: [], google: [] };
      this.note = h('p', { class: 'hint', 'data-testid': 'wallet-note', hidden: true });
    }

    disable(kind) {
      this.off[kind] = true;
      for (const button of this.all[kind]) button.disabled = true;
      this.note.hidden = false;
      this.note.textContent = this.off.apple && this.off.google ? t('storefront-wallet-none') : this.off.apple ? t('storefront-wallet-no-apple') : t('storefront-wallet-no-google');
    }

    buttons(ticket) {
      const status = h('span', { class: 'hint', role: 'status', 'data-testid': 'wallet-status' });
      const passLink = h('a', { class: 'btn small', hidden: true, 'data-testid': 'apple-wallet-link' }, t('storefront-wallet-apple-save'));
      const googleLink = h('a', { class: 'btn small', hidden: true, target: '_blank', rel: 'noopener', 'data-testid': 'google-wallet-link' }, t('storefront-wallet-google-open'));
      const apple = h('button', { class: 'btn small', type: 'button', 'data-testid': 'apple-wallet', disabled: this.off.apple }, t('storefront-wallet-apple'));
      const google = h('button', { class: 'btn small', type: 'button', 'data-testid': 'google-wallet', disabled: this.off.google }, t('storefront-wallet-google'));
      this.all.apple.push(apple);
      this.all.google.push(google);
      const failed = (kind, e) => {
        if (e.code === 'WALLET_NOT_CONFIGURED') {
          this.disable(kind);
          status.textContent = '';
        } else {
          status.textContent = explain(e);
        }
      };
      apple.addEventListener('click', async () => {
        apple.disabled = true;
        status.textContent = t('storefront-wallet-preparing');
        try {
          const blob = await fetchBlob(`/v1/tickets/${encodeURIComponent(ticket.ticketId)}/wallet/apple?lang=${window.i18n.locale()}`);
          if (!this.scope.alive) return;
          offerDownload(this.scope, passLink, new Blob([blob], { type: 'application/vnd.apple.pkpass' }), `${ticket.ticketId}.pkpass`);
          status.textContent = '';
        } catch (e) {
          failed('apple', e);
        } finally {
          apple.disabled = this.off.apple;
        }
      });
      google.addEventListener('click', async () => {
        google.disabled = true;
        status.textContent = t('storefront-wallet-preparing');
        try {
          const { data } = await api('GET', `/v1/tickets/${encodeURIComponent(ticket.ticketId)}/wallet/google?lang=${window.i18n.locale()}`);
          if (!this.scope.alive) return;
          // Only a web address: a "javascript:" link must never be opened from here.
          const saveUrl = data && typeof data.saveUrl === 'string' && /^https:\/\//i.test(data.saveUrl) ? data.saveUrl : null;
          if (!saveUrl) throw new ApiError(502, { detail: t('storefront-wallet-bad-link') });
          googleLink.href = saveUrl;
          googleLink.hidden = false;
          window.open(saveUrl, '_blank', 'noopener');
          status.textContent = '';
        } catch (e) {
          failed('google', e);
        } finally {
          google.disabled = this.off.google;
        }
      });
      return h('div', { class: 'delivery', 'data-testid': 'wallets' }, apple, passLink, google, googleLink, status);
    }
  }

  /** The ticket's holder, and for its owner a form to change it (the event's questions
   *  again); the server refuses once changes have closed (409 HOLDER_CHANGE_CLOSED). */
  function holderBox(event, ticket, owned) {
    const policy = holderPolicy(event);
    const shown = h('p', { class: 'holder', 'data-testid': 'ticket-holder' });
    const show = (holder) => {
      shown.textContent = holder && holder.name ? t('storefront-ticket-holder', { name: holder.name }) : t('storefront-ticket-no-holder');
    };
    show(ticket.holder);
    if (!owned) return ticket.holder ? shown : null;
    const nameId = `holder-change-${ticket.ticketId}`;
    const name = h('input', {
      id: nameId, required: true, maxlength: String(HOLDER_NAME_CHARS_MAX), autocomplete: 'off',
      value: (ticket.holder && ticket.holder.name) || undefined, 'data-testid': 'holder-change-name',
    });
    const given = (ticket.holder && ticket.holder.answers) || {};
    const answers = policy.questions.map((question, k) => {
      const id = `${nameId}-q${k}`;
      const input = questionInput(question, id, given[question.questionId]);
      return { question, input, row: h('div', { class: 'field-row' }, h('label', { for: id }, question.label), input) };
    });
    const result = h('p', { class: 'hint', role: 'status' });
    const submit = h('button', { class: 'btn small', type: 'submit', 'data-testid': 'holder-change-submit' }, t('storefront-holder-change-submit'));
    const form = h('form', { class: 'give stack', 'data-testid': 'holder-change-form' },
      h('div', { class: 'field-row' }, h('label', { for: nameId }, t('storefront-holder-name')), name),
      answers.map((a) => a.row),
      h('div', {}, submit),
      result);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      submit.disabled = true;
      result.textContent = t('storefront-holder-change-saving');
      const body = { name: name.value.trim() };
      if (answers.length) {
        body.answers = {};
        for (const { question, input } of answers) if (input.value.trim()) body.answers[question.questionId] = input.value.trim();
      }
      try {
        const { data } = await api('PUT', `/v1/tickets/${encodeURIComponent(ticket.ticketId)}/holder`, { body });
        const holder = (data && data.holder) || { name: body.name, answers: body.answers };
        show(holder);
        result.textContent = t('storefront-holder-changed', { name: holder.name });
        announce(result.textContent);
        submit.disabled = false;
      } catch (e) {
        result.textContent = explain(e);
        // Closed for good: nothing more to try here.
        submit.disabled = e.code === 'HOLDER_CHANGE_CLOSED';
      }
    });
    return h('div', {}, shown,
      h('details', { class: 'give-box' }, h('summary', { 'data-testid': 'holder-change-open' }, ticket.holder ? t('storefront-holder-change') : t('storefront-holder-add')), form));
  }

  /** "Refund": gives one ticket back within the event's refund policy (the server judges the
   * cutoff by its clock and says so when it has passed). */
  function refundForm(order, ticket, policy) {
    const result = h('p', { class: 'hint', role: 'status' });
    const key = uuid();
    const button = h('button', { class: 'btn small', type: 'button', 'data-testid': 'refund-submit' }, t('storefront-refund-submit'));
    button.addEventListener('click', async () => {
      button.disabled = true;
      result.textContent = t('storefront-refund-asking');
      try {
        const { data } = await api('POST', `/v1/orders/${encodeURIComponent(order.orderId)}/refunds`, {
          body: { ticketIds: [ticket.ticketId] }, key,
        });
        result.textContent = t('storefront-refund-requested', { amount: money(data.amountMinor, data.currency) });
        announce(result.textContent);
      } catch (e) {
        button.disabled = false;
        result.textContent = explain(e);
      }
    });
    return h('details', { class: 'give-box' }, h('summary', { 'data-testid': 'refund-open' }, t('storefront-refund')),
      h('div', { class: 'stack' }, h('p', { class: 'hint' }, policy.keepFeeMinor
        ? t('storefront-refund-hint-fee', { fee: money(policy.keepFeeMinor, order.currency) })
        : t('storefront-refund-hint')), button, result));
  }

  /** "Give to someone": offers one ticket of the order to another account. */
  function giveForm(order, ticket) {
    const input = h('input', { id: `give-${ticket.ticketId}`, required: true, maxlength: '64', autocomplete: 'off',
      pattern: '[A-Za-z0-9_.\\-]{1,64}', 'data-testid': 'give-account' });
    const result = h('p', { class: 'hint', role: 'status' });
    const key = uuid();
    const form = h('form', { class: 'give stack', 'data-testid': 'give-form' },
      h('label', { for: `give-${ticket.ticketId}` }, t('storefront-give-label')),
      h('div', { class: 'field-row' }, input,
        h('button', { class: 'btn small', type: 'submit', 'data-testid': 'give-submit' }, t('storefront-give-submit'))),
      result);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      result.textContent = t('storefront-give-offering');
      try {
        await api('POST', `/v1/orders/${encodeURIComponent(order.orderId)}/transfers`, {
          body: { ticketIds: [ticket.ticketId], toAccountId: input.value.trim() }, key,
        });
        result.textContent = t('storefront-give-offered', { account: input.value.trim() });
        announce(result.textContent);
      } catch (e) {
        result.textContent = explain(e);
      }
    });
    return h('details', { class: 'give-box' }, h('summary', { 'data-testid': 'give-open' }, t('storefront-give')), form);
  }

  // ---------------------------------------------------------------------------------------
  // #/transfers — tickets offered to me, and by me

  async function transfersPage(scope) {
    pageTitle(t('storefront-transfers-title'));
    const root = clear(view(), h('h1', {}, t('storefront-transfers-title')));
    if (!session.token) {
      needSignin(root.appendChild(h('div')), t('storefront-sign-in-for-transfers'));
      return;
    }
    const received = h('div', { class: 'card', 'data-testid': 'transfers-received' }, h('p', { class: 'muted' }, t('storefront-loading')));
    const given = h('div', { class: 'card', 'data-testid': 'transfers-given' }, h('p', { class: 'muted' }, t('storefront-loading')));
    append(root, h('h2', {}, t('storefront-transfers-received')), received, h('h2', {}, t('storefront-transfers-given')), given);
    const table = (list, actions) => h('table', { class: 'data' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, t('storefront-transfers-offered')), h('th', { scope: 'col' }, t('storefront-transfers-from-to')),
        h('th', { scope: 'col' }, t('storefront-transfers-tickets')), h('th', { scope: 'col' }, t('storefront-transfers-status')), h('th', { scope: 'col' }, ''))),
      h('tbody', {}, list.map((transfer) => h('tr', { 'data-testid': 'transfer-row', 'data-transfer-id': transfer.transferId },
        h('td', {}, when(transfer.createdAt)),
        h('td', {}, `${transfer.fromAccountId} → ${transfer.toAccountId}`),
        h('td', {}, number(transfer.ticketIds.length)),
        h('td', {}, h('span', { class: `status-pill ${transfer.status}`, 'data-testid': 'transfer-status' }, transferStatusText(transfer.status))),
        h('td', {}, transfer.status === 'OFFERED' ? actions(transfer) : (transfer.newOrderId && transfer.toAccountId === session.account
          ? h('a', { href: `#/orders/${encodeURIComponent(transfer.newOrderId)}`, 'data-testid': 'transfer-order' }, t('storefront-transfers-your-tickets')) : null))))));
    const act = async (transfer, verb, method, path) => {
      try {
        const { data } = await api(method, path, { key: uuid() });
        if (!scope.alive) return;
        if (verb === 'accept') {
          announce(t('storefront-transfers-accepted'));
          location.hash = `#/orders/${encodeURIComponent(data.newOrderId)}`;
          return;
        }
        toast(verb === 'decline' ? t('storefront-transfers-declined') : t('storefront-transfers-withdrawn'));
        load();
      } catch (e) {
        toast(explain(e), 'error');
      }
    };
    async function load() {
      try {
        const [{ data: r }, { data: g }] = await Promise.all([
          api('GET', '/v1/transfers?role=received'), api('GET', '/v1/transfers?role=given')]);
        if (!scope.alive) return;
        clear(received, r.transfers.length ? table(r.transfers, (transfer) => h('span', { class: 'actions' },
          h('button', { class: 'btn primary small', type: 'button', 'data-testid': 'transfer-accept',
            onclick: () => act(transfer, 'accept', 'POST', `/v1/transfers/${encodeURIComponent(transfer.transferId)}/accept`) }, t('storefront-transfers-accept')),
          h('button', { class: 'btn small', type: 'button', 'data-testid': 'transfer-decline',
            onclick: () => act(transfer, 'decline', 'POST', `/v1/transfers/${encodeURIComponent(transfer.transferId)}/decline`) }, t('storefront-transfers-decline'))))
          : h('p', {}, t('storefront-transfers-none-received')));
        clear(given, g.transfers.length ? table(g.transfers, (transfer) => h('button', { class: 'btn small', type: 'button', 'data-testid': 'transfer-withdraw',
          onclick: () => act(transfer, 'withdraw', 'DELETE', `/v1/transfers/${encodeURIComponent(transfer.transferId)}`) }, t('storefront-transfers-withdraw')))
          : h('p', {}, t('storefront-transfers-none-given')));
      } catch (e) {
        clear(received, h('p', { class: 'notice error' }, explain(e)));
      }
    }
    await load();
  }

  const transferStatusText = (status) => ({
    OFFERED: () => t('storefront-transfer-status-offered'),
    ACCEPTED: () => t('storefront-transfer-status-accepted'),
    DECLINED: () => t('storefront-transfer-status-declined'),
    WITHDRAWN: () => t('storefront-transfer-status-withdrawn'),
    EXPIRED: () => t('storefront-transfer-status-expired'),
    CANCELLED: () => t('storefront-transfer-status-cancelled'),
  }[status]?.() || String(status).toLowerCase());

  // ---------------------------------------------------------------------------------------
  // #/events/{id}/waitlist — the group waiting list

  async function waitlistPage(scope, eventId) {
    pageTitle(t('storefront-waitlist-title'));
    const root = clear(view(), h('p', { class: 'crumbs' }, h('a', { href: `#/events/${encodeURIComponent(eventId)}` }, t('storefront-back-to-event'))),
      h('h1', {}, t('storefront-waitlist-title')));
    if (!session.token) {
      needSignin(root.appendChild(h('div')), t('storefront-sign-in-for-waitlist'));
      return;
    }
    let event;
    try {
      ({ data: event } = await api('GET', `/v1/events/${encodeURIComponent(eventId)}`, { auth: false }));
    } catch (e) {
      root.append(h('p', { class: 'notice error' }, explain(e)));
      return;
    }
    if (!scope.alive) return;
    const saved = session.key('waitlist', eventId);
    const status = h('div', { class: 'card stack', 'data-testid': 'waitlist-status', role: 'status' });
    const quantity = h('input', { id: 'wl-quantity', type: 'number', min: '1', max: String(event.maxSeatsPerHold), value: '2', required: true, 'data-testid': 'waitlist-quantity' });
    const together = h('input', { id: 'wl-together', type: 'checkbox', checked: true, 'data-testid': 'waitlist-together' });
    const key = uuid();
    const form = h('form', { class: 'card stack', 'data-testid': 'waitlist-form' },
      h('p', {}, t('storefront-waitlist-explain', { event: event.name, duration: duration(event.waitlistOfferTtlSeconds || 600) })),
      h('div', { class: 'field-row' }, h('label', { for: 'wl-quantity' }, t('storefront-waitlist-seats')), quantity),
      h('div', { class: 'field-row' }, together, h('label', { for: 'wl-together' }, t('storefront-waitlist-together'))),
      h('button', { class: 'btn primary', type: 'submit', 'data-testid': 'waitlist-join' }, t('storefront-queue-waitlist-link')));
    append(root, form, status);
    status.hidden = true;
    const show = (entry) => {
      status.hidden = false;
      form.hidden = entry.status === 'WAITING' || entry.status === 'OFFERED' || entry.status === 'PURCHASED';
      const text = {
        WAITING: () => t('storefront-waitlist-waiting', { position: entry.position, count: entry.quantity }),
        OFFERED: () => t('storefront-waitlist-offered', { until: when(entry.expiresAt) }),
        PURCHASED: () => t('storefront-waitlist-purchased'),
        LAPSED: () => t('storefront-waitlist-lapsed'),
        LEFT: () => t('storefront-waitlist-left'),
      }[entry.status]?.() || entry.status;
      clear(status, h('p', { 'data-testid': 'waitlist-state', 'data-status': entry.status }, text));
      if (entry.status === 'OFFERED') {
        const payKey = uuid();
        status.append(h('p', { class: 'actions' }, h('button', { class: 'btn primary', type: 'button', 'data-testid': 'waitlist-pay',
          onclick: async () => {
            try {
              const { data: order } = await api('POST', `/v1/holds/${encodeURIComponent(entry.holdId)}/checkout`,
                { body: { paymentMethodToken: 'pm_card_visa' }, key: payKey });
              location.hash = `#/orders/${encodeURIComponent(order.orderId)}`;
            } catch (e) { toast(explain(e), 'error'); }
          } }, t('storefront-waitlist-pay'))));
      }
      if (entry.status === 'WAITING') {
        status.append(h('p', { class: 'actions' }, h('button', { class: 'btn', type: 'button', 'data-testid': 'waitlist-leave',
          onclick: async () => {
            try {
              const { data } = await api('DELETE', `/v1/events/${encodeURIComponent(eventId)}/waitlist/${encodeURIComponent(entry.waitlistId)}`);
              show(data);
            } catch (e) { toast(explain(e), 'error'); }
          } }, t('storefront-waitlist-leave'))));
      }
    };
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      try {
        const { data } = await api('POST', `/v1/events/${encodeURIComponent(eventId)}/waitlist`, {
          body: { quantity: Number(quantity.value), together: together.checked }, key,
        });
        store.set(saved, data.waitlistId);
        show(data);
        announce(t('storefront-waitlist-joined'));
      } catch (e) {
        toast(explain(e), 'error');
      }
    });
    // Follow a saved entry: its place moves, and an offer comes when seats do.
    for (;;) {
      const id = store.get(saved);
      if (id) {
        try {
          const { data } = await api('GET', `/v1/events/${encodeURIComponent(eventId)}/waitlist/${encodeURIComponent(id)}`);
          if (!scope.alive) return;
          show(data);
          if (data.status !== 'WAITING' && data.status !== 'OFFERED') return;
        } catch (e) {
          if (e.status === 404) store.del(saved);
        }
      }
      await scope.sleep(3000);
      if (!scope.alive) return;
    }
  }

  // ---------------------------------------------------------------------------------------
  // #/orders — my orders

  async function ordersPage(scope) {
    pageTitle(t('storefront-orders-title'));
    const root = clear(view(), h('h1', {}, t('storefront-orders-title')));
    if (!session.token) {
      needSignin(root.appendChild(h('div')), t('storefront-sign-in-for-orders'));
      return;
    }
    const body = h('div', { class: 'card' }, h('p', { class: 'muted' }, t('storefront-loading')));
    root.append(body);
    try {
      const { data } = await api('GET', '/v1/orders?limit=50');
      if (!scope.alive) return;
      if (!data.orders.length) {
        clear(body, h('p', {}, t('storefront-orders-none'), ' ', h('a', { href: '#/' }, t('storefront-orders-find-event'))));
        return;
      }
      clear(body, h('table', { class: 'data' },
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, t('storefront-orders-placed')), h('th', { scope: 'col' }, t('storefront-order-seats')),
          h('th', { scope: 'col' }, t('storefront-order-status')), h('th', { scope: 'col', class: 'num' }, t('storefront-total')))),
        h('tbody', {}, data.orders.map((o) => h('tr', {},
          h('td', {}, h('a', { href: `#/orders/${encodeURIComponent(o.orderId)}` }, when(o.createdAt))),
          h('td', {}, o.seats.length ? o.seats.map((s) => s.seatId).join(', ') : t('storefront-tier-quantity', { count: o.quantity, tier: o.tierId })),
          h('td', {}, h('span', { class: `status-pill ${o.orderStatus}` }, orderStatusText(o.orderStatus))),
          h('td', { class: 'num' }, money(o.totalMinor, o.currency)))))));
    } catch (e) {
      clear(body, h('p', { class: 'notice error' }, explain(e)));
    }
  }

  // ---------------------------------------------------------------------------------------

  /** The account's language, which its mail is written in (`PUT /v1/me`): the page's, when
   *  the fan chooses one, or at sign-in when the account has none yet. Best effort: the page
   *  works on whatever the answer. */
  async function saveAccountLocale(onlyIfUnset) {
    if (!session.token) return;
    try {
      if (onlyIfUnset) {
        const { data } = await api('GET', '/v1/me');
        if (data && data.locale) return;
      }
      await api('PUT', '/v1/me', { body: { locale: window.i18n.locale() } });
    } catch {
      // The mail stays in the account's language so far.
    }
  }

  /** The language switch in the header; a choice renders the header and the page again. */
  function setupLanguage() {
    const box = $('#language');
    const label = h('label', { for: 'language-select', 'data-i18n': 'storefront-language' }, t('storefront-language'));
    clear(box, label, window.i18n.switcher({ id: 'language-select', 'data-testid': 'language-select' }));
    window.i18n.onChange(() => {
      saveAccountLocale(false);
      renderAccount();
      // Rendering the page again restarts it; a payment under way is followed to its end
      // first (its order page then opens in the new language).
      if (eventPage && eventPage.paying) return;
      route();
    });
  }

  window.i18n.init('storefront').then(() => {
    setupLanguage();
    setupSignin();
    renderAccount();
    window.addEventListener('hashchange', () => {
      route();
      $('#main').focus({ preventScroll: true });
    });
    route();
  });
})();
