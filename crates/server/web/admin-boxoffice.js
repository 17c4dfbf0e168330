// boxoffice admin page, allocations and box office panel (issue 40): an event's allocations
// (what each keeps, release all or some), keeping seats back, issuing comps, and selling in
// person (seats, best available or tier units; cash or card at the counter) with the tickets'
// QR codes and their PDF. Self-contained like the other panels: the operator's token from the
// session, shown with the console. Served at /assets/admin-boxoffice.js.
'use strict';

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

  const newKey = () => (crypto.randomUUID ? crypto.randomUUID() : `${Date.now()}-${Math.random()}`);

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
    if (!res.ok) {
      const detail = (data && (data.detail || data.title)) || `HTTP ${res.status}`;
      const code = data && data.code ? `${data.code}: ` : '';
      const seats = data && data.unavailableSeatIds ? ` (${data.unavailableSeatIds.join(', ')})` : '';
      throw new Error(`${code}${detail}${seats}`);
    }
    return data;
  }

  function money(minor, currency) {
    try {
      const fmt = new Intl.NumberFormat(undefined, { style: 'currency', currency });
      return fmt.format(minor / 10 ** fmt.resolvedOptions().maximumFractionDigits);
    } catch { return `${minor} ${currency} (minor units)`; }
  }

  const list = (value) => value.split(/[\s,]+/).map((s) => s.trim()).filter(Boolean);
  const eventId = () => $('#bo-event').value.trim();
  const base = () => `/v1/admin/events/${encodeURIComponent(eventId())}/allocations`;
  const error = (text) => { $('#bo-error').textContent = text || ''; };

  function units(value) {
    const out = {};
    for (const part of list(value)) {
      const [tier, n] = part.split(':');
      if (!tier || !/^[0-9]+$/.test(n || '')) throw new Error(`Tier units are written TIER:N ("${part}")`);
      out[tier] = Number(n);
    }
    return out;
  }

  function describeKept(kept) {
    const parts = [];
    if (kept.seatIds.length) parts.push(kept.seatIds.join(', '));
    for (const [tier, n] of Object.entries(kept.tierUnits || {})) parts.push(`${n} × ${tier}`);
    return parts.length ? parts.join('; ') : 'nothing';
  }

  async function load() {
    error();
    if (!eventId()) { error('Give the event id.'); return; }
    const box = $('#bo-allocations');
    try {
      const data = await call('GET', base());
      if (!data.allocations.length) {
        box.replaceChildren(h('p', { class: 'hint' }, 'This event keeps nothing back.'));
        return;
      }
      box.replaceChildren(h('table', { class: 'data', 'data-testid': 'bo-allocation-table' },
        h('thead', {}, h('tr', {},
          ['Allocation', 'Name', 'Still kept', 'Released at', 'Comps', ''].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, data.allocations.map((a) => h('tr', { 'data-allocation': a.allocationId },
          h('td', {}, h('code', {}, a.allocationId)),
          h('td', {}, a.name),
          h('td', { 'data-testid': 'bo-kept' }, describeKept(a.kept)),
          h('td', {}, a.releaseAt ? new Date(a.releaseAt).toLocaleString() : 'by hand'),
          h('td', { class: 'num' }, a.comps),
          h('td', {}, h('button', {
            class: 'btn small', type: 'button', 'data-testid': 'bo-release-all',
            onclick: () => release(a.allocationId),
          }, 'Release all')))))));
    } catch (err) {
      error(err.message);
    }
  }

  async function release(allocationId) {
    error();
    try {
      await call('POST', `${base()}/${encodeURIComponent(allocationId)}/release`, {}, newKey());
      await load();
    } catch (err) {
      error(err.message);
    }
  }

  $('#bo-load').addEventListener('click', load);

  $('#bo-add-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    error();
    try {
      const body = {
        allocationId: $('#bo-add-id').value.trim(),
        name: $('#bo-add-name').value.trim(),
        seatIds: list($('#bo-add-seats').value),
        tierUnits: units($('#bo-add-units').value),
      };
      const at = $('#bo-add-release').value;
      if (at) body.releaseAt = new Date(at).toISOString();
      await call('POST', base(), body, newKey());
      $('#bo-add-form').reset();
      await load();
    } catch (err) {
      error(err.message);
    }
  });

  function showTickets(title, orderId, tickets) {
    const result = $('#bo-result');
    const parser = new DOMParser();
    result.replaceChildren(
      h('p', { class: 'notice ok', 'data-testid': 'bo-sold' }, `${title}: order `, h('code', {}, orderId)),
      h('p', { class: 'actions' }, h('button', {
        class: 'btn small', type: 'button', 'data-testid': 'bo-pdf',
        onclick: () => openPdf(orderId),
      }, 'Print tickets (PDF)')),
      h('div', { class: 'bo-tickets', 'data-testid': 'bo-tickets' }, tickets.map((t) => {
        const figure = h('figure', { class: 'bo-ticket' });
        if (t.qrSvg) {
          const svg = parser.parseFromString(t.qrSvg, 'image/svg+xml').documentElement;
          if (svg && svg.nodeName.toLowerCase() === 'svg') {
            svg.setAttribute('width', '160');
            svg.setAttribute('height', '160');
            svg.setAttribute('role', 'img');
            svg.setAttribute('aria-label', `QR code of ticket ${t.ticketId}`);
            figure.append(document.importNode(svg, true));
          }
        }
        figure.append(h('figcaption', {}, t.seatId || 'standing', ' · ', h('code', {}, t.ticketId)));
        return figure;
      })));
  }

  async function openPdf(orderId) {
    error();
    try {
      const res = await fetch(`/v1/admin/orders/${encodeURIComponent(orderId)}/tickets.pdf`, {
        headers: { Accept: 'application/pdf', Authorization: `Bearer ${token()}` }, cache: 'no-store',
      });
      if (!res.ok) throw new Error(`The PDF could not be made (HTTP ${res.status}).`);
      const url = URL.createObjectURL(await res.blob());
      window.open(url, '_blank', 'noopener');
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    } catch (err) {
      error(err.message);
    }
  }

  $('#bo-comp-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    error();
    const allocationId = $('#bo-comp-allocation').value.trim();
    const body = { accountId: $('#bo-comp-account').value.trim() };
    const seats = list($('#bo-comp-seats').value);
    const quantity = $('#bo-comp-quantity').value;
    if (seats.length) body.seatIds = seats;
    else if (quantity) {
      body.quantity = Number(quantity);
      const tier = $('#bo-comp-tier').value.trim();
      if (tier) body.tierId = tier;
    } else { error('Give kept seat ids or a number of units.'); return; }
    try {
      const comp = await call('POST', `${base()}/${encodeURIComponent(allocationId)}/comps`, body, newKey());
      // The account sees its tickets and codes itself; the operator can print them.
      showTickets(`Comps issued to ${comp.accountId}`, comp.orderId, comp.ticketIds.map((ticketId) => ({ ticketId })));
      await load();
    } catch (err) {
      error(err.message);
    }
  });

  $('#bo-sale-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    error();
    const body = { payment: $('#bo-sale-payment').value };
    const seats = list($('#bo-sale-seats').value);
    const howMany = Number($('#bo-sale-best').value || 0);
    const tier = $('#bo-sale-tier').value.trim();
    if (seats.length) body.seatIds = seats;
    else if (tier && howMany) { body.tierId = tier; body.quantity = howMany; } else if (howMany) body.bestAvailable = { quantity: howMany };
    else { error('Give seat ids, or how many (best available, or of a tier).'); return; }
    const buyer = {};
    if ($('#bo-sale-name').value.trim()) buyer.name = $('#bo-sale-name').value.trim();
    if ($('#bo-sale-email').value.trim()) buyer.email = $('#bo-sale-email').value.trim();
    if (Object.keys(buyer).length) body.buyer = buyer;
    try {
      const sale = await call('POST', `/v1/admin/events/${encodeURIComponent(eventId())}/box-office/sales`, body, newKey());
      showTickets(`Sold (${sale.payment === 'cash' ? 'cash' : 'card'}, ${money(sale.totalMinor, sale.currency)})`, sale.orderId, sale.tickets);
    } catch (err) {
      error(err.message);
    }
  });

  const panel = $('#boxoffice');
  const sync = () => { panel.hidden = $('#console').hidden; };
  new MutationObserver(sync).observe($('#console'), { attributes: true, attributeFilter: ['hidden'] });
  sync();
})();
