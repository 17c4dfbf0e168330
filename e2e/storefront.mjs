// End-to-end test of the storefront in headless Chromium (Debian's chromium + playwright-core).
//
//   BASE_URL=http://127.0.0.1:8080 SCREENSHOT_DIR=../docs/screenshots node storefront.mjs
//
// The server must run with --dev-auth (POST /v1/dev/token). The story:
//  1. an operator creates a 50,000-seat stadium with a waiting room on the admin page and
//     pauses the release;
//  2. fans A and B join the queue and see their place; the operator resumes; both are admitted
//     and see the seat map;
//  3. A clicks two adjacent seats on the canvas (and tries the keyboard), holds them (a visible
//     countdown) and pays with pm_card_visa; the order page shows a ticket with a QR code per
//     seat;
//  4. B, who never reloads, sees those seats turn HELD, then SOLD, from the live stream;
//  5. B takes four seats with "best available" and sees the most seats still together per
//     section, ten more fans buy or hold seats through the API, and a phone-sized fan C sees
//     the map;
//  6. A comes back through the door, holds one more seat and pays with the 3-D Secure card,
//     confirming in the bank dialog; the order is confirmed with its ticket;
//  7. A gives that ticket to B from the order page; B accepts it on the Transfers page and
//     gets a new order with a new code; A's ticket shows void;
//  8. on a small sold-out event, B joins the group waiting list for two seats together; when
//     the fan holding them lets go, B's page shows the offer, and B pays it;
//  9. the operator's report of the first event shows what was sold, its chart and its CSV.
// Screenshots: seatmap.png, seatmap-phone.png, ticket.png, transfer.png, waitlist.png,
// reports.png in SCREENSHOT_DIR.
// Exits non-zero with a message on any failure.

import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { BASE, CHROMIUM, Failure, SHOTS, call, check, devToken, signIn, story } from './story.mjs';

// The machine is slow and shared: be generous (each wait T: E2E_TIMEOUT_MS, 120 s by default).
const WATCHDOG_MS = Number(process.env.E2E_WATCHDOG_MS || 15 * 60_000);
const { T, log, pageErrors, watch, run } = story('e2e', {
  failed: 'E2E FAILED', watchdogMs: WATCHDOG_MS, watchdogAfter: `${WATCHDOG_MS / 1000}s`, echo: true,
});

async function waitFor(page, what, fn, arg) {
  try {
    await page.waitForFunction(fn, arg, { timeout: T, polling: 250 });
  } catch (error) {
    throw new Failure(`timed out waiting for ${what}: ${error.message.split('\n')[0]}`);
  }
}

async function shot(page, name, options = {}) {
  const file = path.join(SHOTS, name);
  await page.screenshot({ path: file, ...options });
  log(`screenshot ${file}`);
}

/** Clicks a seat on the canvas at its real position (zooming so it is big enough). */
async function clickSeat(page, seatId) {
  const c = await page.evaluate((id) => window.boxoffice.seatCenter(id), seatId);
  check(c && c.visible, `seat ${seatId} is not visible on the map: ${JSON.stringify(c)}`);
  await page.mouse.click(c.x, c.y);
}

async function statuses(page, ids) {
  return page.evaluate((seatIds) => seatIds.map((id) => window.boxoffice.seatStatus(id)), ids);
}

/** Another fan through the API: queue, admission, a hold of `quantity` adjacent seats in
 *  `section` somewhere in rows 3-15 near the centre (another run when taken), maybe paid.
 *  Never row 8: the phone taps A-8-50 and must find it free. */
async function apiFan(eventId, accountId, section, quantity, pay) {
  const token = await devToken(accountId);
  const joined = await call(token, 'POST', `/v1/events/${eventId}/queue`, {});
  check(joined.status === 201, `${accountId} joins: ${joined.status} ${JSON.stringify(joined.data)}`);
  let admission = null;
  for (let i = 0; i < 600 && !admission; i++) {
    const s = await call(token, 'GET', `/v1/events/${eventId}/queue/status`, undefined, { 'queue-ticket': joined.data.queueTicket });
    if (s.data && s.data.status === 'ADMITTED') admission = s.data.admissionToken;
    else await new Promise((r) => setTimeout(r, 500));
  }
  check(admission, `${accountId} was never admitted`);
  let hold = null;
  for (let attempt = 0; attempt < 20 && !(hold && hold.status === 201); attempt++) {
    const rows = [3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15];
    const row = rows[Math.floor(Math.random() * rows.length)];
    const first = 25 + Math.floor(Math.random() * 50);
    const seatIds = Array.from({ length: quantity }, (_, k) => `${section}-${row}-${first + k}`);
    hold = await call(token, 'POST', `/v1/events/${eventId}/holds`, { seatIds }, { 'admission-token': admission });
    check(hold.status === 201 || hold.data?.code === 'SEATS_UNAVAILABLE', `${accountId} holds: ${hold.status} ${JSON.stringify(hold.data)}`);
  }
  check(hold.status === 201, `${accountId} found no free seats`);
  if (pay) {
    const order = await call(token, 'POST', `/v1/holds/${hold.data.holdId}/checkout`, { paymentMethodToken: 'pm_card_visa' }, { 'admission-token': admission });
    check(order.status === 201 && order.data.orderStatus === 'CONFIRMED', `${accountId} pays: ${order.status} ${JSON.stringify(order.data)}`);
  }
  return hold.data.seats.map((seat) => seat.seatId);
}

async function main() {
  fs.mkdirSync(SHOTS, { recursive: true });
  const health = await fetch(`${BASE}/healthz`).catch((e) => ({ ok: false, statusText: e.message }));
  check(health.ok, `the server at ${BASE} is not healthy: ${health.statusText}`);
  const dev = await fetch(`${BASE}/v1/dev/token`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ accountId: 'probe' }),
  });
  check(dev.status === 201, `POST /v1/dev/token answered ${dev.status}: run the server with --dev-auth`);

  log(`launching ${CHROMIUM}`);
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
  const run = Math.random().toString(36).slice(2, 7);
  try {
    // 1. The operator creates the stadium and pauses the door.
    const adminCtx = await browser.newContext({ locale: 'en-US', viewport: { width: 1280, height: 900 } });
    const admin = watch(await adminCtx.newPage(), 'admin');
    await admin.goto(`${BASE}/admin`);
    await admin.getByTestId('admin-account').fill('ops');
    await admin.getByTestId('admin-signin-submit').click();
    const eventName = `E2E Stadium ${run}`;
    await admin.getByTestId('ev-name').fill(eventName);
    await admin.getByTestId('stadium-preset').click();
    await admin.getByTestId('wr-enabled').check();
    await admin.getByTestId('create-submit').click();
    const eventId = (await admin.getByTestId('created-event-id').textContent()).trim();
    check(eventId, 'no event id after creating the event');
    log(`event ${eventId} created from the admin page`);
    await admin.getByTestId('queue-pause').click();
    await admin.getByTestId('queue-resume').waitFor();
    log('release paused');

    // 2. Fans A and B wait in line.
    const ctxA = await browser.newContext({ locale: 'en-US', viewport: { width: 1280, height: 800 } });
    const a = watch(await ctxA.newPage(), 'A');
    await a.goto(`${BASE}/`);
    await signIn(a, `fan-a-${run}`);
    await a.locator(`[data-testid="event-card"][data-event-id="${eventId}"] [data-testid="choose-seats"]`).click();
    await a.getByTestId('waiting-room').waitFor();
    await waitFor(a, 'A to see a place in line',
      () => /#\d/.test(document.querySelector('[data-testid="queue-position"]')?.textContent || ''));
    log(`A waits at ${await a.getByTestId('queue-position').textContent()}`);

    const ctxB = await browser.newContext({ locale: 'en-US', viewport: { width: 1280, height: 800 } });
    const b = watch(await ctxB.newPage(), 'B');
    await b.goto(`${BASE}/#/events/${eventId}`);
    await b.getByTestId('need-signin').waitFor();
    await signIn(b, `fan-b-${run}`);
    await b.getByTestId('waiting-room').waitFor();
    await waitFor(b, 'B to see one person ahead',
      () => document.querySelector('[data-testid="queue-ahead"]')?.textContent === '1');
    log(`B waits at ${await b.getByTestId('queue-position').textContent()} with 1 ahead`);
    await waitFor(admin, 'the admin page to show 2 waiting',
      () => document.querySelector('[data-testid="queue-waiting"]')?.textContent === '2');

    await admin.getByTestId('queue-resume').click();
    log('release resumed');
    await waitFor(a, 'A to be admitted and see the seat map', () => window.boxoffice?.ready() && window.boxoffice.streaming());
    await waitFor(b, 'B to be admitted and see the seat map', () => window.boxoffice?.ready() && window.boxoffice.streaming());
    log('A and B see the live seat map');
    await b.evaluate(() => { window.__e2eNoReload = 'still the same page'; });

    // 3. A picks two adjacent seats on the canvas.
    const pair = ['A-1-50', 'A-1-51'];
    check((await statuses(a, pair)).every((s) => s === 'AVAILABLE'), 'the seats start AVAILABLE');
    await a.evaluate(() => window.boxoffice.showSeat('A-1-50', 24));
    for (const id of pair) await clickSeat(a, id);
    let selected = await a.evaluate(() => window.boxoffice.selected());
    check(JSON.stringify(selected) === JSON.stringify(pair), `A selected ${JSON.stringify(selected)}`);
    // The keyboard: the canvas has focus after the click; → moves to the next seat, Enter toggles.
    await a.keyboard.press('ArrowRight');
    await a.keyboard.press('Enter');
    selected = await a.evaluate(() => window.boxoffice.selected());
    check(selected.includes('A-1-52') && selected.length === 3, `keyboard selection gave ${JSON.stringify(selected)}`);
    await waitFor(a, 'the selected seat to be announced to screen readers',
      () => /Row 1 · Seat 52/.test(document.querySelector('[data-testid="announce"]').textContent));
    await a.keyboard.press('Space');
    selected = await a.evaluate(() => window.boxoffice.selected());
    check(JSON.stringify(selected) === JSON.stringify(pair), `Space deselected: ${JSON.stringify(selected)}`);
    await a.getByTestId('selection').waitFor();
    log('A selected A-1-50 and A-1-51 (mouse), tried A-1-52 (keyboard)');

    await a.getByTestId('hold-button').click();
    await a.getByTestId('hold-countdown').waitFor();
    await waitFor(a, 'a running countdown', () => {
      const t = document.querySelector('[data-testid="hold-countdown"]')?.textContent || '';
      return /^\d+:\d\d$/.test(t) && t !== '0:00';
    });
    log(`A holds the seats, countdown ${await a.getByTestId('hold-countdown').textContent()}`);
    await waitFor(b, 'B to see the seats HELD without reloading',
      (ids) => ids.every((id) => window.boxoffice.seatStatus(id) === 'HELD'), pair);
    log('B sees them HELD');

    await a.getByTestId('card-pm_card_visa').check();
    await a.getByTestId('pay-button').click();
    await a.waitForURL(/#\/orders\//, { timeout: T });
    await waitFor(a, 'the order to be confirmed with two QR codes', () =>
      document.querySelector('[data-testid="order-status"]')?.textContent === 'confirmed'
      && document.querySelectorAll('[data-testid="ticket"] [data-testid="ticket-qr"] svg').length === 2);
    const tickets = await a.locator('[data-testid="ticket"] .seat').allTextContents();
    check(JSON.stringify(tickets.sort()) === JSON.stringify(pair), `tickets for ${JSON.stringify(tickets)}`);
    log('A paid with pm_card_visa: order confirmed, 2 tickets with QR codes');
    await shot(a, 'ticket.png', { fullPage: true });

    // 4. B saw them sold, live.
    await waitFor(b, 'B to see the seats SOLD without reloading',
      (ids) => ids.every((id) => window.boxoffice.seatStatus(id) === 'SOLD'), pair);
    check(await b.evaluate(() => window.__e2eNoReload) === 'still the same page', 'B reloaded');
    log('B sees them SOLD (no reload)');

    // 5. B takes four seats with best available; C looks on a phone.
    await b.getByTestId('best-qty').selectOption('4');
    await b.getByTestId('best-section').selectOption('A');
    await b.getByTestId('best-submit').click();
    await b.getByTestId('hold-countdown').waitFor();
    const bHold = await b.evaluate(() => window.boxoffice.hold().seats.map((s) => s.seatId));
    check(bHold.length === 4 && bHold.every((id) => id.startsWith('A-')), `B best available: ${JSON.stringify(bHold)}`);
    log(`B holds best available ${bHold.join(', ')}`);
    // The best-available card says what is left together per section, as the map counts it.
    await waitFor(b, 'B to see what is left together per section', () => {
      const items = [...document.querySelectorAll('[data-testid="best-left"] li')];
      const blocks = window.boxoffice.largestBlocks() || [];
      return items.length > 0 && items.length === blocks.length
        && items.every((li, i) => li.dataset.section === blocks[i].name
          && Number(li.dataset.largest) === blocks[i].largest);
    });
    const left = await b.evaluate(() => window.boxoffice.largestBlocks());
    check(left.some((s) => s.name === 'A' && s.largest > 0), `what is left together: ${JSON.stringify(left)}`);

    // A few more fans buy and hold through the API, so the map shows a sale in progress.
    const crowd = await Promise.all([
      ['A', 6, true], ['A', 5, false], ['A', 6, true], ['A', 4, false], ['A', 6, true], ['A', 3, false],
      ['A', 2, true], ['A', 6, false], ['A', 4, true], ['B', 6, true], ['B', 3, false], ['C', 4, true],
    ].map(([section, quantity, pay], i) => apiFan(eventId, `crowd-${i}-${run}`, section, quantity, pay)));
    log(`${crowd.length} more fans bought or held ${crowd.flat().length} seats through the API`);

    const ctxC = await browser.newContext({
      locale: 'en-US', viewport: { width: 375, height: 667 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true,
    });
    const c = watch(await ctxC.newPage(), 'C');
    await c.goto(`${BASE}/#/events/${eventId}`);
    await signIn(c, `fan-c-${run}`);
    await waitFor(c, 'C (phone) to see the seat map', () => window.boxoffice?.ready());
    await waitFor(c, 'C to see A\'s seats sold and B\'s held',
      ([sold, held]) => sold.every((id) => window.boxoffice.seatStatus(id) === 'SOLD')
        && held.every((id) => window.boxoffice.seatStatus(id) === 'HELD'), [pair, bHold]);
    const overflow = await c.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check(overflow <= 1, `the phone page scrolls sideways by ${overflow}px`);
    await c.evaluate(() => window.boxoffice.showSeat('A-6-50', 12));
    const tapAt = await c.evaluate(() => window.boxoffice.seatCenter('A-8-50'));
    check(tapAt && tapAt.visible, `A-8-50 is not visible on the phone: ${JSON.stringify(tapAt)}`);
    await c.touchscreen.tap(tapAt.x, tapAt.y);
    const tapped = await c.evaluate(() => window.boxoffice.selected());
    check(JSON.stringify(tapped) === '["A-8-50"]', `a tap on the phone selected ${JSON.stringify(tapped)}`);
    log('C (phone) tapped A-8-50');
    await c.waitForTimeout(300);
    await shot(c, 'seatmap-phone.png', { fullPage: true });

    // 6. A comes back (a confirmed order ended the shopping trip) and pays with 3-D Secure.
    await a.getByTestId('back-to-event').click();
    await waitFor(a, 'A to be admitted again', () => window.boxoffice?.ready());
    await a.evaluate(() => window.boxoffice.showSeat('A-1-50', 15));
    await clickSeat(a, 'A-2-50');
    await a.getByTestId('hold-button').click();
    await a.getByTestId('hold-countdown').waitFor();
    await waitFor(a, 'A\'s map to show sold and held seats',
      ([sold, held]) => sold.every((id) => window.boxoffice.seatStatus(id) === 'SOLD')
        && held.every((id) => window.boxoffice.seatStatus(id) === 'HELD'), [pair, bHold]);
    await a.evaluate(() => window.boxoffice.showSeat('A-8-52', 10));
    await a.waitForTimeout(300);
    await shot(a, 'seatmap.png');

    await a.getByTestId('card-pm_card_threeDSecure2Required').check();
    await a.getByTestId('pay-button').click();
    await a.getByTestId('threeds-dialog').waitFor({ state: 'visible' });
    log('the bank asks A to confirm');
    await a.getByTestId('threeds-confirm').click();
    await a.waitForURL(/#\/orders\//, { timeout: T });
    await waitFor(a, 'the 3-D Secure order to be confirmed with its QR code', () =>
      document.querySelector('[data-testid="order-status"]')?.textContent === 'confirmed'
      && document.querySelectorAll('[data-testid="ticket"] [data-testid="ticket-qr"] svg').length === 1);
    log('A paid with pm_card_threeDSecure2Required after confirming: order confirmed');
    await waitFor(b, 'B to see A-2-50 SOLD', () => window.boxoffice.seatStatus('A-2-50') === 'SOLD');

    // 7. A gives the new ticket to B (the offer waits for the payment's capture: retried).
    const giftOrder = a.url();
    await a.getByTestId('give-open').click();
    await a.getByTestId('give-account').fill(`fan-b-${run}`);
    let offered = false;
    for (let attempt = 0; attempt < 40 && !offered; attempt++) {
      await a.getByTestId('give-submit').click();
      await waitFor(a, 'the offer to be answered', () =>
        !/Offering/.test(document.querySelector('[data-testid="give-form"] [role="status"]')?.textContent || 'Offering'));
      offered = /Offered to/.test(await a.locator('[data-testid="give-form"] [role="status"]').textContent());
      if (!offered) await a.waitForTimeout(500);
    }
    check(offered, 'A could not offer the ticket to B');
    log('A offered A-2-50 to B');
    await b.goto(`${BASE}/#/transfers`);
    await b.getByTestId('transfer-accept').waitFor();
    await shot(b, 'transfer.png');
    await b.getByTestId('transfer-accept').click();
    await b.waitForURL(/#\/orders\//, { timeout: T });
    await waitFor(b, 'B\'s new order with the ticket', () =>
      document.querySelector('[data-testid="order-status"]')?.textContent === 'confirmed'
      && document.querySelectorAll('[data-testid="ticket"] [data-testid="ticket-qr"] svg').length === 1);
    log('B accepted: a new order with its own QR code');
    await a.goto(giftOrder);
    await a.reload();
    await a.getByTestId('ticket-void').waitFor();
    log('A\'s ticket shows void');

    // 8. The group waiting list on a small sold-out event (no waiting room).
    const opsToken = await devToken('ops-e2e', true);
    const small = await call(opsToken, 'POST', '/v1/admin/events', {
      name: `Club night ${run}`, startsAt: '2030-01-01T20:00:00Z', currency: 'EUR', waitlistOfferTtlSeconds: 300,
      refundPolicy: { fanRefundCutoffSeconds: 3600, keepFeeMinor: 100 },
      sections: [{ name: 'A', rows: 1, seatsPerRow: 2, priceMinor: 2500 }],
    });
    check(small.status === 201, `small event: ${small.status} ${JSON.stringify(small.data)}`);
    const holder = await devToken(`holder-${run}`);
    const taken = await call(holder, 'POST', `/v1/events/${small.data.eventId}/holds`, { seatIds: ['A-1-1', 'A-1-2'] });
    check(taken.status === 201, `the holder holds the house: ${taken.status}`);
    await b.goto(`${BASE}/#/events/${small.data.eventId}/waitlist`);
    await b.getByTestId('waitlist-quantity').fill('2');
    await b.getByTestId('waitlist-join').click();
    await waitFor(b, 'B to be first on the waiting list', () =>
      document.querySelector('[data-testid="waitlist-state"]')?.dataset.status === 'WAITING');
    await shot(b, 'waitlist.png');
    const released = await call(holder, 'DELETE', `/v1/holds/${taken.data.holdId}`);
    check(released.status === 200, `the holder lets go: ${released.status}`);
    await waitFor(b, 'B to be offered the two seats', () =>
      document.querySelector('[data-testid="waitlist-state"]')?.dataset.status === 'OFFERED');
    await b.getByTestId('waitlist-pay').click();
    await b.waitForURL(/#\/orders\//, { timeout: T });
    await waitFor(b, 'B\'s waiting-list order to be confirmed', () =>
      document.querySelector('[data-testid="order-status"]')?.textContent === 'confirmed');
    log('B was offered two seats together from the waiting list and paid');

    // 8b. B refunds one of the two tickets within the event's refund policy.
    await b.getByTestId('refund-open').first().waitFor({ timeout: T });
    await b.getByTestId('refund-open').first().click();
    await b.getByTestId('refund-submit').first().click();
    await waitFor(b, 'the refund to be answered', () =>
      /Refund of|could not|not/.test(document.querySelector('[data-testid="refund-submit"]')?.parentElement
        ?.querySelector('[role="status"]')?.textContent || ''));
    const refundSaid = await b.getByTestId('refund-submit').first().locator('xpath=..').locator('[role="status"]').textContent();
    check(/Refund of €24\.00 requested/.test(refundSaid), `B's refund: ${refundSaid}`);
    await b.reload();
    await waitFor(b, 'the refunded ticket to show void and the order its refund', () =>
      [...document.querySelectorAll('[data-testid="ticket-void"]')].some((p) => /Refunded/.test(p.textContent))
      && /€24\.00/.test(document.querySelector('[data-testid="order-refunds"]')?.textContent || ''));
    log('B refunded one ticket: it shows void, the order shows the refund');

    // 8c. The operator refunds B's other ticket from the admin page, with a reason.
    const bOrderId = decodeURIComponent(b.url().split('#/orders/')[1]);
    const bOrder = await call(await devToken(`fan-b-${run}`), 'GET', `/v1/orders/${bOrderId}`);
    const kept = bOrder.data.tickets.find((t) => t.status === 'VALID');
    check(kept, `B keeps one valid ticket: ${JSON.stringify(bOrder.data)}`);
    await admin.getByTestId('refund-order').fill(bOrderId);
    await admin.getByTestId('refund-tickets').fill(kept.ticketId);
    await admin.getByTestId('refund-reason').fill('the club closed early');
    await admin.getByTestId('refund-submit').click();
    await admin.getByTestId('refund-recorded').waitFor({ timeout: T });
    await b.reload();
    await waitFor(b, 'B\'s order to show both refunds', () =>
      document.querySelectorAll('[data-testid="ticket-void"]').length === 2);
    log('the operator refunded B\'s other ticket from the admin page');

    // 8d. The operator cancels the small event from the admin page: the sale stops, and B gets
    // back what the refunds left (the kept fee), the progress shown until CANCELLED.
    await admin.getByTestId('cancel-event').fill(small.data.eventId);
    await admin.getByTestId('cancel-reason').fill('the club lost its licence');
    await admin.getByTestId('cancel-submit').click();
    await waitFor(admin, 'the admin page to ask for the confirmation', () =>
      /cannot be undone/.test(document.querySelector('[data-testid="cancel-error"]')?.textContent || ''));
    await admin.getByTestId('cancel-confirm').check();
    await admin.getByTestId('cancel-submit').click();
    await waitFor(admin, 'the cancellation to finish with B refunded', () => {
      const p = document.querySelector('[data-testid="cancel-progress"]');
      return p?.dataset.status === 'CANCELLED' && /1 of 1 paid orders refunded/.test(p.textContent);
    });
    const cancelledEvent = await (await fetch(`${BASE}/v1/events/${small.data.eventId}`)).json();
    check(cancelledEvent.status === 'CANCELLED', `the event reads CANCELLED: ${JSON.stringify(cancelledEvent.status)}`);
    const afterCancel = await call(holder, 'POST', `/v1/events/${small.data.eventId}/holds`, { seatIds: ['A-1-1'] });
    check(afterCancel.status === 409 && afterCancel.data.code === 'EVENT_CANCELLED',
      `a hold after the cancellation: ${afterCancel.status} ${JSON.stringify(afterCancel.data)}`);
    const refundedB = await call(await devToken(`fan-b-${run}`), 'GET', `/v1/orders/${bOrderId}`);
    check(refundedB.data.refunds.some((r) => r.reason === 'EVENT_CANCELLED' && r.amountMinor === 100),
      `B got the kept fee back: ${JSON.stringify(refundedB.data.refunds)}`);
    log('the operator cancelled the small event from the admin page; B got the rest back');

    // 9. The operator's report of the first event: what was sold, its chart, its CSV.
    const sale = await (await fetch(`${BASE}/v1/events/${eventId}`)).json();
    const soldNow = [...sale.sections, ...sale.tiers].reduce((n, area) => n + (area.sold || 0), 0);
    check(soldNow > 0, 'seats were sold');
    await admin.getByTestId('report-refresh').click();
    await waitFor(admin, `the report's total to show ${soldNow} sold`, (sold) => {
      const cells = document.querySelectorAll('[data-testid="report-total"] td');
      return cells.length === 7 && Number(cells[2].textContent.replace(/\D/g, '')) === sold;
    }, soldNow);
    await waitFor(admin, 'the sales chart to draw the sales',
      () => document.querySelectorAll('[data-testid="sales-chart"] rect.bar').length > 0);
    const [csv] = await Promise.all([admin.waitForEvent('download'), admin.getByTestId('report-csv').click()]);
    const rows = fs.readFileSync(await csv.path(), 'utf8').split('\r\n');
    check(rows[0].startsWith('kind,id,name,capacity,heldNow,sold,'), `the CSV's header: ${rows[0]}`);
    const total = rows.find((row) => row.startsWith('total,'));
    check(total && Number(total.split(',')[5]) === soldNow, `the CSV's total row: ${total}`);
    log(`the operator's report shows ${soldNow} sold, the chart and the CSV`);
    const reportsShot = path.join(SHOTS, 'reports.png');
    await admin.getByTestId('reports').screenshot({ path: reportsShot });
    log(`screenshot ${reportsShot}`);

    check(pageErrors.length === 0, `uncaught errors or refused by the Content Security Policy:\n${pageErrors.join('\n')}`);
  } finally {
    await browser.close();
  }
}

run(main);
