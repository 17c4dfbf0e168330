// boxoffice admin page: create an event, watch its sales and waiting room live, read its
// reports (figures per section and tier, sales over time, CSV downloads).
// Plain JavaScript, served at /assets/admin.js.
'use strict';

(() => {
  const $ = (selector, root = document) => root.querySelector(selector);

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
      else if (name === 'class') el.className = value;
      // Through CSSOM: the Content Security Policy refuses style attributes.
      else if (name === 'style') el.style.cssText = String(value);
      else if (value === true) el.setAttribute(name, '');
      else el.setAttribute(name, String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  function clear(el, ...children) {
    el.replaceChildren();
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  function uuid() {
    if (crypto.randomUUID) return crypto.randomUUID();
    return [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, '0')).join('');
  }

  const num = (n) => Number(n || 0).toLocaleString();

  const moneyFormats = new Map();
  function money(minor, currency) {
    let fmt = moneyFormats.get(currency);
    if (!fmt) {
      try { fmt = new Intl.NumberFormat(undefined, { style: 'currency', currency }); } catch { fmt = new Intl.NumberFormat(); }
      moneyFormats.set(currency, fmt);
    }
    return fmt.format(minor / 10 ** fmt.resolvedOptions().maximumFractionDigits);
  }
  /** Major units typed in a form ("59.90") → minor units for the currency. */
  function toMinor(value, currency) {
    let digits = 2;
    try { digits = new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits; } catch { /* default */ }
    return Math.round(Number(value) * 10 ** digits);
  }

  function toast(text, kind = 'info') {
    const el = $('#toast');
    clear(el, h('div', { class: kind }, text));
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => el.replaceChildren(), 6000);
  }

  // -- Session ------------------------------------------------------------------------------

  const KEY = 'bo.admin';
  const session = {
    get() {
      try {
        const s = JSON.parse(sessionStorage.getItem(KEY));
        if (s && s.exp && s.exp * 1000 < Date.now()) return null;
        return s;
      } catch { return null; }
    },
    set(token, account) {
      let exp;
      try { exp = JSON.parse(atob(token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/'))).exp; } catch { exp = undefined; }
      sessionStorage.setItem(KEY, JSON.stringify({ token, account, exp }));
    },
    clear() { sessionStorage.removeItem(KEY); },
  };

  class ApiError extends Error {
    constructor(status, problem) {
      super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
      this.status = status;
      this.code = (problem && problem.code) || (status ? `HTTP_${status}` : 'NETWORK');
    }
  }

  async function api(method, path, { body, key, auth = true } = {}) {
    const headers = { Accept: 'application/json' };
    const s = session.get();
    if (auth && s) headers.Authorization = `Bearer ${s.token}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (key) headers['Idempotency-Key'] = key;
    let res;
    try {
      res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
    } catch {
      throw new ApiError(0, { detail: 'The server cannot be reached.' });
    }
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { data = null; }
    if (!res.ok) {
      if (res.status === 401 && auth) {
        session.clear();
        show();
      }
      throw new ApiError(res.status, data);
    }
    return data;
  }

  function show() {
    const s = session.get();
    $('#signin').hidden = Boolean(s);
    $('#console').hidden = !s;
    const box = $('#account');
    if (s) {
      clear(box, h('span', { class: 'who' }, 'Operator ', h('strong', {}, s.account)),
        h('button', { class: 'btn small', type: 'button', onclick: () => { session.clear(); show(); } }, 'Sign out'));
      loadEvents();
    } else {
      box.replaceChildren();
      stopWatching();
    }
  }

  $('#signin-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const error = $('#signin-error');
    error.textContent = '';
    const accountId = $('#signin-account').value.trim();
    try {
      const data = await api('POST', '/v1/dev/token', { body: { accountId, admin: true }, auth: false });
      session.set(data.token, data.accountId);
      show();
    } catch (err) {
      error.textContent = err.status === 404
        ? 'This server does not offer demo sign-in: paste an admin token below.'
        : err.message;
      if (err.status === 404) $('#signin-form details').open = true;
    }
  });
  $('#signin-token-use').addEventListener('click', () => {
    const token = $('#signin-token').value.trim();
    let claims = null;
    try { claims = JSON.parse(atob(token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/'))); } catch { claims = null; }
    if (!claims || !claims.sub) {
      $('#signin-error').textContent = 'That does not look like a token.';
      return;
    }
    if (claims.role !== 'admin') {
      $('#signin-error').textContent = 'That token is not an operator token (role admin).';
      return;
    }
    session.set(token, claims.sub);
    show();
  });

  // -- Create an event -------------------------------------------------------------------

  const sectionsBody = $('#sections');
  let createKey = uuid();

  function sectionRow(values = {}) {
    const n = sectionsBody.children.length + 1;
    const cell = (name, label, attrs) => h('td', {}, h('input', { name, 'aria-label': `${label} of section ${n}`, required: true, ...attrs }));
    const row = h('tr', {},
      cell('name', 'Name', { value: values.name || String.fromCharCode(64 + Math.min(n, 26)), maxlength: '32' }),
      cell('rows', 'Rows', { type: 'number', min: '1', value: values.rows || 10 }),
      cell('perRow', 'Seats per row', { type: 'number', min: '1', value: values.perRow || 20 }),
      cell('price', 'Price', { type: 'number', min: '0', step: '0.01', value: values.price ?? '49.00' }),
      h('td', {}, h('button', {
        class: 'btn small', type: 'button', 'aria-label': `Remove section ${n}`,
        onclick: () => { row.remove(); createKey = uuid(); },
      }, '✕')));
    sectionsBody.append(row);
  }

  $('#add-section').addEventListener('click', () => sectionRow());
  $('#stadium').addEventListener('click', () => {
    sectionsBody.replaceChildren();
    'ABCDEFGHIJ'.split('').forEach((name, i) => sectionRow({ name, rows: 50, perRow: 100, price: (129 - 10 * i).toFixed(2) }));
    if (!$('#ev-name').value) $('#ev-name').value = 'Stadium Night';
    createKey = uuid();
  });

  function localInput(date) {
    const pad = (n) => String(n).padStart(2, '0');
    return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
  }
  const starts = new Date(Date.now() + 30 * 86400000);
  starts.setHours(20, 0, 0, 0);
  $('#ev-starts').value = localInput(starts);
  sectionRow({ name: 'A', rows: 10, perRow: 20, price: '49.00' });
  // Any edit makes it a new request: a new idempotency key.
  $('#create-form').addEventListener('input', () => { createKey = uuid(); });

  $('#create-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const error = $('#create-error');
    const created = $('#created');
    error.textContent = '';
    created.textContent = '';
    const currency = $('#ev-currency').value.trim().toUpperCase();
    const name = $('#ev-name').value.trim();
    if (!name) { error.textContent = 'Give the event a name.'; $('#ev-name').focus(); return; }
    if (!$('#ev-starts').value) { error.textContent = 'Set when the event starts.'; $('#ev-starts').focus(); return; }
    const body = {
      name,
      startsAt: new Date($('#ev-starts').value).toISOString(),
      currency,
      holdTtlSeconds: Number($('#ev-ttl').value),
      maxSeatsPerHold: Number($('#ev-maxseats').value),
      maxTicketsPerAccount: Number($('#ev-maxtickets').value),
      sections: [...sectionsBody.children].map((row) => ({
        name: row.querySelector('[name=name]').value.trim(),
        rows: Number(row.querySelector('[name=rows]').value),
        seatsPerRow: Number(row.querySelector('[name=perRow]').value),
        priceMinor: toMinor(row.querySelector('[name=price]').value, currency),
      })),
      waitingRoom: {
        enabled: $('#wr-enabled').checked,
        policy: $('#wr-policy').value,
        maxActiveShoppers: Number($('#wr-max').value),
      },
    };
    if ($('#ev-onsale').value) body.onSaleAt = new Date($('#ev-onsale').value).toISOString();
    const tierId = $('#tier-id').value.trim();
    if (tierId) {
      body.tiers = [{
        tierId,
        name: $('#tier-name').value.trim() || tierId,
        capacity: Number($('#tier-capacity').value),
        priceMinor: toMinor($('#tier-price').value || 0, currency),
      }];
    }
    if (!body.sections.length && !body.tiers) { error.textContent = 'Add at least one section or a standing tier.'; return; }
    const button = $('[data-testid="create-submit"]');
    button.disabled = true;
    button.textContent = 'Creating…';
    try {
      const event = await api('POST', '/v1/admin/events', { body, key: createKey });
      createKey = uuid();
      const link = `/#/events/${encodeURIComponent(event.eventId)}`;
      clear(created, 'Created ', h('strong', {}, event.name), ' — id ',
        h('code', { 'data-testid': 'created-event-id' }, event.eventId), '. ',
        h('a', { href: link, target: '_blank', rel: 'noopener' }, 'Open it in the storefront'));
      toast(`Event “${event.name}” created.`);
      await loadEvents(event.eventId);
    } catch (err) {
      error.textContent = err.message;
    } finally {
      button.disabled = false;
      button.textContent = 'Create event';
    }
  });

  // -- Live stats ------------------------------------------------------------------------

  const watch = $('#watch');
  let timer = 0;
  let previous = null;

  async function loadEvents(select) {
    const events = [];
    let cursor = null;
    try {
      for (let page = 0; page < 10; page++) {
        const data = await api('GET', `/v1/events?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { auth: false });
        events.push(...data.events);
        cursor = data.nextCursor;
        if (!cursor) break;
      }
    } catch (err) {
      clear($('#live'), h('p', { class: 'notice error' }, err.message));
      return;
    }
    const keep = select || watch.value || (events.length ? events[events.length - 1].eventId : '');
    clear(watch, events.length ? null : h('option', { value: '' }, 'No events yet'),
      events.slice().reverse().map((ev) => h('option', { value: ev.eventId, selected: ev.eventId === keep }, `${ev.name} (${ev.eventId.slice(-8)})`)));
    if (keep) watch.value = keep;
    startWatching();
    loadReport();
  }

  $('#refresh-events').addEventListener('click', () => loadEvents());
  watch.addEventListener('change', () => { previous = null; startWatching(); loadReport(); });

  function stopWatching() {
    clearTimeout(timer);
    timer = 0;
  }

  function startWatching() {
    stopWatching();
    if (!watch.value) return;
    const id = watch.value;
    const tick = async () => {
      await refresh(id);
      if (watch.value === id && session.get()) timer = setTimeout(tick, 2000);
    };
    tick();
  }

  async function refresh(id) {
    let event;
    try {
      event = await api('GET', `/v1/events/${encodeURIComponent(id)}`, { auth: false });
    } catch (err) {
      clear($('#live'), h('p', { class: 'notice error' }, err.message));
      return;
    }
    if (watch.value !== id) return;
    renderSales(event);
    $('#live-updated').textContent = `Updated ${new Date().toLocaleTimeString()} · refreshes every 2 s`;
    if (event.waitingRoom.enabled) {
      try {
        const q = await api('GET', `/v1/admin/events/${encodeURIComponent(id)}/queue`);
        if (watch.value === id) renderQueue(id, q);
      } catch (err) {
        clear($('#queue'), h('p', { class: 'notice error' }, err.message));
      }
    } else {
      clear($('#queue'), h('p', { class: 'muted' }, 'This event has no waiting room: fans hold seats directly.'));
    }
  }

  function renderSales(event) {
    const parts = [...event.sections.map((s) => ({ label: `Section ${s.name}`, capacity: s.rows * s.seatsPerRow, price: s.priceMinor, ...s })),
      ...event.tiers.map((t) => ({ label: t.name, price: t.priceMinor, ...t }))];
    const total = { available: 0, held: 0, sold: 0, revenue: 0, capacity: 0 };
    for (const p of parts) {
      total.available += p.available || 0;
      total.held += p.held || 0;
      total.sold += p.sold || 0;
      total.capacity += p.capacity || 0;
      total.revenue += (p.sold || 0) * p.price;
    }
    const now = Date.now();
    let rate = '';
    if (previous && previous.id === event.eventId && now > previous.at) {
      const perMinute = ((total.sold - previous.sold) * 60000) / (now - previous.at);
      rate = `${perMinute.toFixed(perMinute < 10 ? 1 : 0)}/min`;
    }
    previous = { id: event.eventId, sold: total.sold, at: now };
    const stat = (label, value, testid) => h('div', {}, h('dt', {}, label), h('dd', { 'data-testid': testid }, value));
    clear($('#live'),
      h('p', {}, h('strong', {}, event.name), ` · starts ${new Date(event.startsAt).toLocaleString()} · on sale ${new Date(event.onSaleAt).toLocaleString()}`),
      h('dl', { class: 'stats' },
        stat('Sold', num(total.sold), 'stat-sold'),
        stat('Held', num(total.held), 'stat-held'),
        stat('Available', num(total.available), 'stat-available'),
        stat('Revenue', money(total.revenue, event.currency), 'stat-revenue'),
        rate ? stat('Sales rate', rate, 'stat-rate') : null),
      h('table', { class: 'data' },
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Area'), h('th', { scope: 'col', class: 'num' }, 'Price'),
          h('th', { scope: 'col', class: 'num' }, 'Sold'), h('th', { scope: 'col', class: 'num' }, 'Held'),
          h('th', { scope: 'col', class: 'num' }, 'Available'), h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Share sold')))),
        h('tbody', {}, parts.map((p) => {
          const cap = p.capacity || 1;
          return h('tr', {},
            h('th', { scope: 'row' }, p.label),
            h('td', { class: 'num' }, money(p.price, event.currency)),
            h('td', { class: 'num' }, num(p.sold)),
            h('td', { class: 'num' }, num(p.held)),
            h('td', { class: 'num' }, num(p.available)),
            h('td', {}, h('div', { class: 'meter', 'aria-hidden': 'true' },
              h('span', { class: 'sold', style: `width:${(100 * (p.sold || 0)) / cap}%` }),
              h('span', { class: 'held', style: `width:${(100 * (p.held || 0)) / cap}%` }))));
        }))));
  }

  function renderQueue(id, q) {
    const stat = (label, value, testid) => h('div', {}, h('dt', {}, label), h('dd', { 'data-testid': testid }, value));
    const box = $('#queue');
    const focusedId = document.activeElement && box.contains(document.activeElement) ? document.activeElement.id : null;
    const typing = focusedId === 'rate-cap' ? document.getElementById('rate-cap').value : null;
    const cap = h('input', { id: 'rate-cap', type: 'number', min: '1', max: '100000', placeholder: 'no cap', value: typing ?? q.maxReleasePerSecond ?? '', style: 'max-width:8rem' });
    clear(box,
      h('dl', { class: 'stats' },
        stat('Waiting', num(q.waiting), 'queue-waiting'),
        stat('Joined', num(q.joined), 'queue-joined'),
        stat('Admitted', num(q.admitted), 'queue-admitted'),
        stat('Active shoppers', `${num(q.activeShoppers)} / ${num(q.maxActiveShoppers)}`, 'queue-active'),
        stat('Release rate', `${num(q.releaseRatePerSecond)}/s`, 'queue-rate'),
        stat('Serving up to', `#${num(q.serving)}`, 'queue-serving')),
      h('p', {}, h('strong', {}, q.soldOut ? 'Sold out: release stopped. ' : q.paused ? 'Release paused. ' : 'Releasing. '), h('span', { class: 'muted' }, q.reason)),
      h('p', { class: 'hint' }, `Policy ${q.policy} · state ${q.stateBackend} · ${num(q.polls)} status polls answered here`),
      q.settings ? h('p', { class: 'hint', 'data-testid': 'queue-settings' },
        `Starts at ${num(q.settings.startReleasePerSecond)}/s, at most ${num(q.settings.maxReleasePerSecond)}/s · backs off above ${num(q.settings.targetHoldP99Ms)} ms hold p99 · claim window ${num(q.settings.claimWindowSeconds)} s · admission ${num(q.settings.admissionTtlSeconds)} s`) : null,
      (q.decisions || []).length ? h('details', {},
        h('summary', {}, `Last ${q.decisions.length} decisions`),
        h('ol', { class: 'decisions', 'data-testid': 'queue-decisions' },
          ...q.decisions.slice().reverse().slice(0, 20).map((d) => h('li', {},
            h('time', { datetime: d.at }, new Date(d.at).toLocaleTimeString()), ' ',
            h('strong', {}, `${d.kind} ${num(d.releaseRatePerSecond)}/s`), ' ',
            h('span', { class: 'muted' }, d.reason))))) : null,
      h('div', { class: 'actions' },
        h('button', {
          class: `btn ${q.paused ? 'primary' : 'danger'}`, type: 'button', id: 'pause-toggle',
          'data-testid': q.paused ? 'queue-resume' : 'queue-pause',
          onclick: () => control(id, { paused: !q.paused }),
        }, q.paused ? 'Resume release' : 'Pause release')),
      h('form', {
        class: 'field-row', style: 'margin-top:.6rem',
        onsubmit: (e) => {
          e.preventDefault();
          if (cap.value) control(id, { maxReleasePerSecond: Number(cap.value) });
        },
      }, h('label', { for: 'rate-cap' }, 'Max release per second'), cap, h('button', { class: 'btn small', type: 'submit' }, 'Apply')));
    if (focusedId) {
      const again = document.getElementById(focusedId);
      if (again) again.focus();
    }
  }

  async function control(id, body) {
    try {
      const q = await api('PUT', `/v1/admin/events/${encodeURIComponent(id)}/queue`, { body });
      renderQueue(id, q);
      toast(q.paused ? 'Release paused.' : 'Release running.');
    } catch (err) {
      toast(err.message, 'error');
    }
  }

  // -- Reports ---------------------------------------------------------------------------

  const SVG_NS = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs, ...children) {
    const el = document.createElementNS(SVG_NS, tag);
    for (const [name, value] of Object.entries(attrs || {})) el.setAttribute(name, String(value));
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  const bucketNames = { 60: 'minute', 300: '5 minutes', 3600: 'hour', 86400: 'day' };
  let reportSeq = 0;

  async function loadReport() {
    const id = watch.value;
    const seq = ++reportSeq;
    if (!id || !session.get()) {
      $('#report').replaceChildren();
      $('#report-chart').replaceChildren();
      $('#report-queue').replaceChildren();
      $('#report-downloads').replaceChildren();
      return;
    }
    const bucket = $('#report-bucket').value;
    const base = `/v1/admin/events/${encodeURIComponent(id)}/report`;
    try {
      const [report, timeline] = await Promise.all([
        api('GET', base),
        api('GET', `${base}/timeline?bucketSeconds=${bucket}`),
      ]);
      if (seq !== reportSeq) return;
      renderReport(report);
      renderTimeline(timeline);
      renderDownloads(base, bucket);
      $('#report-updated').textContent = `Figures as of ${new Date(report.asOf).toLocaleString()} (store clock)`;
    } catch (err) {
      if (seq === reportSeq) clear($('#report'), h('p', { class: 'notice error' }, err.message));
    }
  }

  $('#report-refresh').addEventListener('click', () => loadReport());
  $('#report-bucket').addEventListener('change', () => loadReport());

  function renderReport(report) {
    const m = (minor) => money(minor, report.currency);
    const cells = (f) => [
      h('td', { class: 'num' }, num(f.capacity)),
      h('td', { class: 'num' }, num(f.heldNow)),
      h('td', { class: 'num' }, num(f.sold)),
      h('td', { class: 'num' }, num(f.comps)),
      h('td', { class: 'num' }, num(f.checkedIn)),
      h('td', { class: 'num' }, m(f.revenueMinor)),
      h('td', { class: 'num' }, m(f.refundsDueMinor))];
    const col = (label) => h('th', { scope: 'col', class: 'num' }, label);
    const t = report.totals;
    clear($('#report'),
      h('table', { class: 'data', 'data-testid': 'report-lines' },
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Area'), col('Capacity'), col('Held now'), col('Sold'),
          col('Comps'), col('Checked in'), col('Revenue'), col('Refunds due'))),
        h('tbody', {}, report.lines.map((line) => h('tr', { 'data-testid': `report-line-${line.id}` },
          h('th', { scope: 'row' }, line.kind === 'section' ? `Section ${line.name}` : line.name),
          cells(line)))),
        h('tfoot', {}, h('tr', { class: 'sum', 'data-testid': 'report-total' }, h('th', { scope: 'row' }, 'Total'), cells(t)))),
      h('p', { class: 'hint' }, `Confirmed orders: ${num(t.ordersConfirmed)}, their payments charged ${m(t.chargedMinor)}. `,
        'Revenue is the face value of what is sold now; refunds due are owed back (exchanges to cheaper seats, payments of cancelled orders). boxoffice has no complimentary tickets.'));
  }

  function salesChart(timeline) {
    const buckets = timeline.buckets;
    const width = 720;
    const height = 180;
    const left = 40;
    const bottom = 24;
    const top = 8;
    const plotW = width - left - 8;
    const plotH = height - top - bottom;
    const most = Math.max(1, ...buckets.map((b) => b.seats));
    // A bar is never wider than 24 units: a few buckets are a few bars, not a wall.
    const step = Math.min(24, buckets.length ? plotW / buckets.length : plotW);
    const per = bucketNames[timeline.bucketSeconds] || `${timeline.bucketSeconds} s`;
    const fmt = (at) => new Date(at).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
    const bars = buckets.map((b, i) => {
      const barH = (plotH * b.seats) / most;
      return svg('rect', {
        class: 'bar', x: (left + i * step).toFixed(2), y: (top + plotH - barH).toFixed(2),
        width: Math.max(step - (step > 3 ? 1 : 0), 0.5).toFixed(2), height: barH.toFixed(2),
      }, svg('title', {}, `${new Date(b.start).toLocaleString()}: ${b.seats} seats in ${b.orders} orders`));
    });
    const sold = buckets.reduce((n, b) => n + b.seats, 0);
    return svg('svg', {
      class: 'chart', viewBox: `0 0 ${width} ${height}`, role: 'img', 'data-testid': 'sales-chart',
      'aria-label': `Seats sold per ${per}: ${sold} in ${buckets.length} buckets, at most ${most} in one`,
    },
    svg('line', { class: 'axis', x1: left, y1: top + plotH, x2: width - 8, y2: top + plotH }),
    svg('line', { class: 'axis', x1: left, y1: top, x2: left, y2: top + plotH }),
    svg('text', { x: left - 6, y: top + 10, 'text-anchor': 'end' }, String(most)),
    svg('text', { x: left - 6, y: top + plotH, 'text-anchor': 'end' }, '0'),
    buckets.length ? svg('text', { x: left, y: height - 6 }, fmt(buckets[0].start)) : null,
    step * buckets.length >= 120 ? svg('text', { x: left + step * buckets.length, y: height - 6, 'text-anchor': 'end' }, fmt(timeline.to)) : null,
    bars);
  }

  function renderTimeline(timeline) {
    const per = bucketNames[timeline.bucketSeconds] || `${timeline.bucketSeconds} s`;
    clear($('#report-chart'),
      timeline.buckets.length ? salesChart(timeline) : h('p', { class: 'muted' }, 'The sale has not opened yet.'),
      h('p', { class: 'hint' }, `Seats sold per ${per} from the on-sale. In all: ${num(timeline.totals.seats)} seats, ${num(timeline.totals.orders)} orders, `,
        `${money(timeline.totals.chargedMinor, timeline.currency)} charged (exchanges and transfers are not sales).`,
        timeline.truncated ? ' Only the first 1,440 buckets are drawn: choose longer ones to see the rest.' : ''));
    const q = timeline.queue;
    const stat = (label, value, testid) => h('div', {}, h('dt', {}, label), h('dd', { 'data-testid': testid }, value));
    clear($('#report-queue'), q
      ? [h('dl', { class: 'stats' },
        stat('Joined the queue', num(q.joined), 'report-joined'),
        stat('Admitted', num(q.admitted), 'report-admitted'),
        stat('Sales', num(timeline.totals.orders), 'report-sales'),
        stat('Conversion', q.conversion === null ? '—' : `${(100 * q.conversion).toFixed(1)} %`, 'report-conversion')),
      h('p', { class: 'hint' }, 'Conversion: sales per admission. The waiting room keeps its totals, not their history.')]
      : h('p', { class: 'muted' }, 'No waiting room: no admission figures.'));
  }

  async function download(path, fallback) {
    const s = session.get();
    if (!s) return;
    try {
      const res = await fetch(path, { headers: { Authorization: `Bearer ${s.token}` }, cache: 'no-store' });
      if (!res.ok) throw new Error(`The download failed (HTTP ${res.status}).`);
      const named = /filename="([^"]+)"/.exec(res.headers.get('content-disposition') || '');
      const url = URL.createObjectURL(await res.blob());
      const a = h('a', { href: url, download: named ? named[1] : fallback });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (err) {
      toast(err.message, 'error');
    }
  }

  function renderDownloads(base, bucket) {
    // Plain links name the files; a click fetches them with the operator's token.
    const link = (href, label, testid) => h('a', {
      class: 'btn small', href, download: '', 'data-testid': testid,
      onclick: (e) => { e.preventDefault(); download(href, `${testid}.csv`); },
    }, label);
    clear($('#report-downloads'),
      link(`${base}.csv`, 'Download the report (CSV)', 'report-csv'), ' ',
      link(`${base}/timeline.csv?bucketSeconds=${bucket}`, 'Download sales over time (CSV)', 'timeline-csv'));
  }

  show();
})();

// -- Webhooks panel (issue 19, item 5) ------------------------------------------------------
// Endpoints (register, enable/disable, delete), the delivery log of one endpoint (newest
// first, in pages) and a replay button. Self-contained: it reads the operator's token from
// the session the block above keeps, and shows itself whenever the console is shown.
(() => {
  const $ = (selector) => document.querySelector(selector);
  const EVENT_TYPES = [
    ['order.confirmed', 'Order confirmed'],
    ['order.cancelled', 'Order cancelled'],
    ['tickets.issued', 'Tickets issued'],
    ['tickets.transferred', 'Tickets transferred'],
    ['exchange.completed', 'Exchange completed'],
    ['refund.due', 'Refund due'],
    ['refund.succeeded', 'Refund paid back'],
    ['refund.failed', 'Refund failed (money still owed)'],
    ['event.cancelled', 'Event cancelled (and its refunds done)'],
  ];
  const PAGE = 20;

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
      else if (name === 'class') el.className = value;
      else if (value === true) el.setAttribute(name, '');
      else el.setAttribute(name, String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  function token() {
    try { return (JSON.parse(sessionStorage.getItem('bo.admin')) || {}).token; } catch { return undefined; }
  }

  async function call(method, path, body, key) {
    const headers = { Accept: 'application/json', Authorization: `Bearer ${token()}` };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (key) headers['Idempotency-Key'] = key;
    let res;
    try {
      res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
    } catch {
      throw new Error('The server cannot be reached.');
    }
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { data = null; }
    if (!res.ok) throw new Error((data && (data.detail || data.title)) || `HTTP ${res.status}`);
    return data;
  }

  const when = (at) => (at ? new Date(at).toLocaleString() : '—');
  let selected = null;

  function say(text, kind = 'info') {
    const el = $('#toast');
    el.replaceChildren(h('div', { class: kind }, text));
    setTimeout(() => el.replaceChildren(), 6000);
  }

  async function loadEndpoints() {
    const box = $('#webhook-endpoints');
    let list;
    try {
      list = await call('GET', '/v1/admin/webhooks');
    } catch (err) {
      box.replaceChildren(h('p', { class: 'notice error' }, err.message));
      return;
    }
    if (!list.endpoints.length) {
      box.replaceChildren(h('p', { class: 'hint' }, 'No endpoint yet.'));
      return;
    }
    box.replaceChildren(h('table', { class: 'data' },
      h('thead', {}, h('tr', {}, ['URL', 'Events', 'State', ''].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, list.endpoints.map((ep) => h('tr', { 'data-testid': 'webhook-endpoint' },
        h('td', {}, h('code', {}, ep.url)),
        h('td', {}, ep.eventTypes.join(', ')),
        h('td', {}, ep.enabled ? 'enabled' : 'disabled'),
        h('td', {},
          h('button', { class: 'btn small', type: 'button', onclick: () => showLog(ep) }, 'Deliveries'), ' ',
          h('button', {
            class: 'btn small', type: 'button',
            onclick: () => act(() => call('PATCH', `/v1/admin/webhooks/${encodeURIComponent(ep.endpointId)}`, { enabled: !ep.enabled }),
              ep.enabled ? 'Endpoint disabled.' : 'Endpoint enabled.'),
          }, ep.enabled ? 'Disable' : 'Enable'), ' ',
          h('button', {
            class: 'btn small danger', type: 'button',
            onclick: () => {
              if (!window.confirm(`Delete ${ep.url} and its delivery log?`)) return;
              if (selected && selected.endpointId === ep.endpointId) {
                selected = null;
                $('#webhook-log').replaceChildren(h('p', { class: 'hint' }, 'Choose an endpoint to see its deliveries.'));
              }
              act(() => call('DELETE', `/v1/admin/webhooks/${encodeURIComponent(ep.endpointId)}`), 'Endpoint deleted.');
            },
          }, 'Delete')))))));
  }

  async function act(run, done) {
    try {
      await run();
      say(done);
    } catch (err) {
      say(err.message, 'error');
    }
    loadEndpoints();
  }

  async function showLog(endpoint, before) {
    selected = endpoint;
    $('#webhook-log-title').textContent = `Delivery log — ${endpoint.url}`;
    const box = $('#webhook-log');
    const query = `?limit=${PAGE}${before ? `&before=${before}` : ''}`;
    let page;
    try {
      page = await call('GET', `/v1/admin/webhooks/${encodeURIComponent(endpoint.endpointId)}/deliveries${query}`);
    } catch (err) {
      box.replaceChildren(h('p', { class: 'notice error' }, err.message));
      return;
    }
    box.replaceChildren(
      page.deliveries.length ? h('table', { class: 'data' },
        h('thead', {}, h('tr', {}, ['Event id', 'Type', 'Status', 'Attempts', 'Last answer', 'Delivered', ''].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, page.deliveries.map((d) => h('tr', { 'data-testid': 'webhook-delivery' },
          h('td', {}, d.eventId),
          h('td', {}, d.eventType),
          h('td', {}, d.status),
          h('td', {}, String(d.attempts)),
          h('td', { title: d.lastError || '' }, d.lastStatusCode ? String(d.lastStatusCode) : (d.lastError ? 'no answer' : '—')),
          h('td', {}, when(d.deliveredAt)),
          h('td', {}, h('button', {
            class: 'btn small', type: 'button', 'data-testid': 'webhook-replay',
            onclick: async () => {
              try {
                await call('POST', `/v1/admin/webhooks/${encodeURIComponent(endpoint.endpointId)}/deliveries/${d.deliveryId}/replay`);
                say(`Event ${d.eventId} queued again.`);
              } catch (err) {
                say(err.message, 'error');
              }
              showLog(endpoint, before);
            },
          }, 'Replay')))))) : h('p', { class: 'hint' }, 'No delivery yet.'),
      h('div', { class: 'actions' },
        h('button', { class: 'btn small', type: 'button', onclick: () => showLog(endpoint, before) }, 'Refresh'),
        before ? h('button', { class: 'btn small', type: 'button', onclick: () => showLog(endpoint) }, 'Newest') : null,
        page.nextBefore ? h('button', { class: 'btn small', type: 'button', onclick: () => showLog(endpoint, page.nextBefore) }, 'Older') : null));
  }

  const types = $('#webhook-types');
  for (const [value, label] of EVENT_TYPES) {
    types.append(h('label', { class: 'check' },
      h('input', { type: 'checkbox', name: 'webhook-type', value, checked: value === 'order.confirmed' }), ` ${label}`));
  }

  $('#webhook-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const error = $('#webhook-error');
    const secret = $('#webhook-secret');
    error.textContent = '';
    secret.replaceChildren();
    const url = $('#webhook-url').value.trim();
    const eventTypes = [...document.querySelectorAll('input[name="webhook-type"]:checked')].map((i) => i.value);
    if (!url) { error.textContent = 'Give the endpoint URL.'; return; }
    if (!eventTypes.length) { error.textContent = 'Choose at least one event.'; return; }
    const key = crypto.randomUUID ? crypto.randomUUID() : String(Date.now());
    try {
      const ep = await call('POST', '/v1/admin/webhooks', { url, eventTypes }, key);
      secret.replaceChildren('Signing secret (shown only now; keep it to verify Boxoffice-Signature): ',
        h('code', { 'data-testid': 'webhook-secret-value' }, ep.secret));
      $('#webhook-url').value = '';
      loadEndpoints();
    } catch (err) {
      error.textContent = err.message;
    }
  });

  // Refund an order (issue 37, item 3): chosen tickets (their seats back on sale) or money
  // alone, with a reason; the answer is the refund as recorded.
  $('#refund-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const error = $('#refund-error');
    const result = $('#refund-result');
    error.textContent = '';
    result.replaceChildren();
    const orderId = $('#refund-order').value.trim();
    const tickets = $('#refund-tickets').value.split(/[\s,]+/).filter(Boolean);
    const amount = $('#refund-amount').value.trim();
    const reason = $('#refund-reason').value.trim();
    if (!orderId) { error.textContent = 'Give the order id.'; return; }
    if (!tickets.length && !amount) { error.textContent = 'Give the tickets to refund, an amount, or both.'; return; }
    if (!reason) { error.textContent = 'Say why (the fan sees it).'; return; }
    const body = { reason };
    if (tickets.length) {
      body.ticketIds = tickets;
      body.releaseSeats = $('#refund-release').checked;
    }
    if (amount) {
      const minor = Number(amount);
      if (!/^[0-9]+$/.test(amount) || !Number.isSafeInteger(minor) || minor < 1) {
        error.textContent = 'The amount is a whole number of minor units (cents), at least 1.';
        return;
      }
      body.amountMinor = minor;
    }
    const key = crypto.randomUUID ? crypto.randomUUID() : String(Date.now());
    try {
      const refund = await call('POST', `/v1/admin/orders/${encodeURIComponent(orderId)}/refunds`, body, key);
      result.replaceChildren(h('p', { class: 'notice ok', 'data-testid': 'refund-recorded' },
        `Refund ${refund.refundId} of ${refund.amountMinor} (minor units, ${refund.currency}) recorded (${refund.status}); `
        + `${refund.ticketIds.length} ticket(s) voided${tickets.length && !body.releaseSeats ? ', their seats kept off sale' : ''}. `
        + 'The money goes back as the payment provider answers.'));
      say('Refund recorded.');
    } catch (err) {
      error.textContent = err.message;
    }
  });

  // Cancel an event (issue 37, item 4), then follow its refunds: the answer and
  // GET .../cancellation, polled every two seconds until the cancellation is CANCELLED.
  let following = null;
  const showCancellation = (c) => {
    $('#cancel-result').replaceChildren(h('p', {
      class: c.status === 'CANCELLED' ? 'notice ok' : 'notice',
      'data-testid': 'cancel-progress',
      'data-status': c.status,
    }, `${c.status}: ${c.refunded} of ${c.orders} paid orders refunded`
      + (c.failed ? `, ${c.failed} refused by the provider (money still owed)` : '')
      + `; ${c.amountRefundedMinor} minor units given back.`));
  };
  const follow = (eventId) => {
    clearTimeout(following);
    const tick = async () => {
      try {
        const c = await call('GET', `/v1/admin/events/${encodeURIComponent(eventId)}/cancellation`);
        showCancellation(c);
        if (c.status !== 'CANCELLED') following = setTimeout(tick, 2000);
      } catch (err) {
        $('#cancel-error').textContent = err.message;
      }
    };
    tick();
  };
  $('#cancel-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const error = $('#cancel-error');
    error.textContent = '';
    const eventId = $('#cancel-event').value.trim();
    const reason = $('#cancel-reason').value.trim();
    if (!eventId) { error.textContent = 'Give the event id.'; return; }
    if (!reason) { error.textContent = 'Say why (buyers see it).'; return; }
    if (!$('#cancel-confirm').checked) { error.textContent = 'Tick the box: a cancellation cannot be undone.'; return; }
    const key = crypto.randomUUID ? crypto.randomUUID() : String(Date.now());
    try {
      const c = await call('POST', `/v1/admin/events/${encodeURIComponent(eventId)}/cancel`, { reason }, key);
      showCancellation(c);
      say('Event cancelled; refunds under way.');
      follow(eventId);
    } catch (err) {
      error.textContent = err.message;
    }
  });
  $('#cancel-follow').addEventListener('click', () => {
    $('#cancel-error').textContent = '';
    const eventId = $('#cancel-event').value.trim();
    if (!eventId) { $('#cancel-error').textContent = 'Give the event id.'; return; }
    follow(eventId);
  });

  // Shown and loaded with the console (the block above shows it once an operator signs in).
  const panel = $('#webhooks');
  const refunds = $('#refunds');
  const cancellation = $('#cancellation');
  const sync = () => {
    const shown = !$('#console').hidden;
    if (shown && panel.hidden) loadEndpoints();
    panel.hidden = !shown;
    refunds.hidden = !shown;
    cancellation.hidden = !shown;
  };
  new MutationObserver(sync).observe($('#console'), { attributes: true, attributeFilter: ['hidden'] });
  sync();
})();

// -- Mail panel (issue 39) -------------------------------------------------------------------
// The mails sent to fans, newest first, by status; a resend of a FAILED, UNCERTAIN or
// NO_ADDRESS one; the mail itself when the server writes mail to a folder (the demo).
// Self-contained like the Webhooks panel: the operator's token from the session, shown with
// the console.
(() => {
  const $ = (selector) => document.querySelector(selector);
  const PAGE = 50;
  const RESENDABLE = ['FAILED', 'UNCERTAIN', 'NO_ADDRESS'];

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
      else if (name === 'class') el.className = value;
      else if (value === true) el.setAttribute(name, '');
      else el.setAttribute(name, String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  function token() {
    try { return (JSON.parse(sessionStorage.getItem('bo.admin')) || {}).token; } catch { return undefined; }
  }

  async function call(method, path, accept = 'application/json') {
    let res;
    try {
      res = await fetch(path, { method, headers: { Accept: accept, Authorization: `Bearer ${token()}` }, cache: 'no-store' });
    } catch {
      throw new Error('The server cannot be reached.');
    }
    const text = await res.text();
    if (accept !== 'application/json') {
      if (!res.ok) throw new Error(res.status === 404 ? 'Mail goes through SMTP: no file is kept.' : `HTTP ${res.status}`);
      return text;
    }
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { data = null; }
    if (!res.ok) throw new Error((data && (data.detail || data.title)) || `HTTP ${res.status}`);
    return data;
  }

  const when = (at) => (at ? new Date(at).toLocaleString() : '—');

  function say(text, kind = 'info') {
    const el = $('#toast');
    el.replaceChildren(h('div', { class: kind }, text));
    setTimeout(() => el.replaceChildren(), 6000);
  }

  async function view(mail) {
    const pre = $('#mail-view');
    try {
      pre.textContent = await call('GET', `/v1/admin/mail/${mail.mailId}.eml`, 'text/plain');
      pre.hidden = false;
    } catch (err) {
      say(err.message, 'error');
    }
  }

  async function load(before) {
    const box = $('#mail-list');
    const status = $('#mail-status').value;
    const query = `?limit=${PAGE}${status ? `&status=${status}` : ''}${before ? `&before=${before}` : ''}`;
    let page;
    try {
      page = await call('GET', `/v1/admin/mail${query}`);
    } catch (err) {
      box.replaceChildren(h('p', { class: 'notice error' }, err.message));
      return;
    }
    box.replaceChildren(
      page.mails.length ? h('table', { class: 'data' },
        h('thead', {}, h('tr', {}, ['Mail', 'Account', 'Kind', 'To', 'Subject', 'Status', 'Attempts', 'Created', 'Sent', ''].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, page.mails.map((m) => h('tr', { 'data-testid': 'mail-row' },
          h('td', {}, String(m.mailId)),
          h('td', {}, m.accountId),
          h('td', {}, m.kind),
          h('td', {}, m.to || '—'),
          h('td', {}, m.subject || '—'),
          h('td', { title: m.lastError || '' }, m.status),
          h('td', {}, String(m.attempts)),
          h('td', {}, when(m.createdAt)),
          h('td', {}, when(m.sentAt)),
          h('td', {},
            m.status === 'SENT' ? h('button', { class: 'btn small', type: 'button', 'data-testid': 'mail-view-button', onclick: () => view(m) }, 'View') : null,
            RESENDABLE.includes(m.status) ? h('button', {
              class: 'btn small', type: 'button', 'data-testid': 'mail-resend',
              onclick: async () => {
                try {
                  await call('POST', `/v1/admin/mail/${m.mailId}/resend`);
                  say(`Mail ${m.mailId} queued again.`);
                } catch (err) {
                  say(err.message, 'error');
                }
                load(before);
              },
            }, 'Resend') : null))))) : h('p', { class: 'hint' }, 'No mail yet.'),
      h('div', { class: 'actions' },
        h('button', { class: 'btn small', type: 'button', onclick: () => load(before) }, 'Refresh'),
        before ? h('button', { class: 'btn small', type: 'button', onclick: () => load() }, 'Newest') : null,
        page.nextBefore ? h('button', { class: 'btn small', type: 'button', onclick: () => load(page.nextBefore) }, 'Older') : null));
  }

  $('#mail-status').addEventListener('change', () => load());
  const panel = $('#mail');
  const sync = () => {
    const shown = !$('#console').hidden;
    if (shown && panel.hidden) load();
    panel.hidden = !shown;
  };
  new MutationObserver(sync).observe($('#console'), { attributes: true, attributeFilter: ['hidden'] });
  sync();
})();

// -- Sale phases panel (issue 40) ------------------------------------------------------------
// The phases of the event watched under Live sales (window, access, sections, limit); for a
// code phase: generate codes (answered as a CSV download), import a CSV of `code,uses`, and
// download the codes with their uses left. Self-contained like the panels above.
(() => {
  const $ = (selector) => document.querySelector(selector);

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
      else if (name === 'class') el.className = value;
      else if (value === true) el.setAttribute(name, '');
      else el.setAttribute(name, String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  function token() {
    try { return (JSON.parse(sessionStorage.getItem('bo.admin')) || {}).token; } catch { return undefined; }
  }

  function uuid() {
    if (crypto.randomUUID) return crypto.randomUUID();
    return `${Date.now().toString(16)}-${Math.random().toString(16).slice(2)}`;
  }

  const when = (at) => (at ? new Date(at).toLocaleString() : '—');

  /** A request whose answer is a file (or a problem): saved as `name` when it is a file. */
  async function fetchFile(method, path, { body, contentType, key, name }) {
    const headers = { Accept: 'text/csv', Authorization: `Bearer ${token()}` };
    if (contentType) headers['Content-Type'] = contentType;
    if (key) headers['Idempotency-Key'] = key;
    const res = await fetch(path, { method, headers, body, cache: 'no-store' });
    if (!res.ok) {
      let detail = `HTTP ${res.status}`;
      try { const p = await res.json(); detail = p.detail || p.title || detail; } catch { /* not JSON */ }
      throw new Error(detail);
    }
    const text = await res.text();
    const named = /filename="([^"]+)"/.exec(res.headers.get('content-disposition') || '');
    const url = URL.createObjectURL(new Blob([text], { type: 'text/csv' }));
    const a = h('a', { href: url, download: named ? named[1] : name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
    return text;
  }

  function codeTools(eventId, phase) {
    const base = `/v1/admin/events/${encodeURIComponent(eventId)}/phases/${encodeURIComponent(phase.phaseId)}/codes`;
    const status = h('p', { class: 'notice', role: 'status', 'data-testid': `codes-status-${phase.phaseId}` });
    const say = (text, kind) => { status.className = `notice ${kind}`; status.textContent = text; };
    const count = h('input', { type: 'number', min: '1', max: '100000', value: '100', id: `codes-count-${phase.phaseId}`, 'data-testid': `codes-count-${phase.phaseId}` });
    const uses = h('input', { type: 'number', min: '1', max: '100000', value: '1', id: `codes-uses-${phase.phaseId}` });
    // One key per filled-in form: a retry after a lost answer gets the same codes back.
    let generateKey = uuid();
    count.addEventListener('input', () => { generateKey = uuid(); });
    uses.addEventListener('input', () => { generateKey = uuid(); });
    const generate = h('form', { class: 'field-row', 'data-testid': `codes-generate-${phase.phaseId}` },
      h('label', { for: count.id }, 'Codes'), count,
      h('label', { for: uses.id }, 'Uses each'), uses,
      h('button', { class: 'btn primary', type: 'submit', 'data-testid': `codes-generate-submit-${phase.phaseId}` }, 'Generate and download (CSV)'));
    generate.addEventListener('submit', async (e) => {
      e.preventDefault();
      try {
        const body = JSON.stringify({ count: Number(count.value), uses: Number(uses.value) });
        const text = await fetchFile('POST', base, { body, contentType: 'application/json', key: generateKey, name: `codes-${phase.phaseId}.csv` });
        say(`${text.trim().split('\n').length - 1} codes made and downloaded.`, 'ok');
        generateKey = uuid();
      } catch (err) {
        say(err.message, 'error');
      }
    });
    const file = h('input', { type: 'file', accept: '.csv,text/csv', id: `codes-file-${phase.phaseId}`, 'data-testid': `codes-import-file-${phase.phaseId}` });
    const importForm = h('form', { class: 'field-row', 'data-testid': `codes-import-${phase.phaseId}` },
      h('label', { for: file.id }, 'Import a CSV (code,uses)'), file,
      h('button', { class: 'btn', type: 'submit', 'data-testid': `codes-import-submit-${phase.phaseId}` }, 'Import'));
    importForm.addEventListener('submit', async (e) => {
      e.preventDefault();
      const chosen = file.files && file.files[0];
      if (!chosen) { say('Choose a CSV file first.', 'error'); return; }
      try {
        const res = await fetch(base + '/import', {
          method: 'POST',
          headers: { Accept: 'application/json', Authorization: `Bearer ${token()}`, 'Content-Type': 'text/csv', 'Idempotency-Key': uuid() },
          body: await chosen.text(),
          cache: 'no-store',
        });
        const data = await res.json().catch(() => null);
        if (!res.ok) throw new Error((data && data.detail) || `HTTP ${res.status}`);
        say(`${data.codes.length} codes imported.`, 'ok');
      } catch (err) {
        say(err.message, 'error');
      }
    });
    const download = h('button', {
      class: 'btn small', type: 'button', 'data-testid': `codes-download-${phase.phaseId}`,
      onclick: async () => {
        try {
          const text = await fetchFile('GET', base, { name: `codes-${phase.phaseId}.csv` });
          say(`${text.trim().split('\n').length - 1} codes downloaded with their uses left.`, 'ok');
        } catch (err) {
          say(err.message, 'error');
        }
      },
    }, 'Download codes with uses left (CSV)');
    return h('div', { class: 'code-tools' }, generate, importForm, h('p', { class: 'actions' }, download), status);
  }

  let shownFor = null;

  async function render(eventId) {
    shownFor = eventId;
    const box = $('#phases-list');
    if (!eventId) { box.replaceChildren(h('p', { class: 'muted' }, 'No event watched.')); return; }
    let event;
    try {
      const res = await fetch(`/v1/events/${encodeURIComponent(eventId)}`, { cache: 'no-store' });
      event = await res.json();
    } catch (err) {
      box.replaceChildren(h('p', { class: 'notice error' }, 'The event could not be read.'));
      return;
    }
    if (shownFor !== eventId) return;
    const phases = event.phases || [];
    if (!phases.length) {
      box.replaceChildren(h('p', { class: 'muted', 'data-testid': 'phases-none' }, `One general sale from ${when(event.onSaleAt)}: this event has no phases.`));
      return;
    }
    box.replaceChildren(...phases.map((p) => h('article', { class: 'phase-admin', 'data-testid': `phase-admin-${p.phaseId}` },
      h('h3', {}, p.name, ' ', h('span', { class: 'badge' }, p.access === 'code' ? 'Access code' : 'Open to all')),
      h('p', { class: 'hint' },
        `${when(p.startsAt)} – ${p.endsAt ? when(p.endsAt) : 'no end'} · `,
        p.sections.length || p.tiers.length ? `sells ${[...p.sections.map((s) => `section ${s}`), ...p.tiers.map((t) => `tier ${t}`)].join(', ')}` : 'sells everything',
        p.maxTicketsPerAccount ? ` · ${p.maxTicketsPerAccount} per account` : ''),
      p.access === 'code' ? codeTools(event.eventId, p) : null)));
  }

  const panel = $('#phases');
  const watch = $('#watch');
  watch.addEventListener('change', () => render(watch.value));
  // The list of events loads after sign-in; follow its first choice.
  setInterval(() => { if (!panel.hidden && watch.value !== shownFor) render(watch.value); }, 1000);
  const sync = () => {
    const shown = !$('#console').hidden;
    if (shown && panel.hidden) render(watch.value);
    panel.hidden = !shown;
  };
  new MutationObserver(sync).observe($('#console'), { attributes: true, attributeFilter: ['hidden'] });
  sync();
})();
