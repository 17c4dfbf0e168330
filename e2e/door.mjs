// End-to-end test of the door app in headless Chromium (Debian's chromium + playwright-core).
//
//   BASE_URL=http://127.0.0.1:8080 SCREENSHOT_DIR=../docs/screenshots node door.mjs
//
// The server must run with --dev-auth. The story:
//  1. through the API, an operator creates an event, a fan buys three seats, gives the third
//     to a friend (accepted: its old code is revoked);
//  2. door device 1 is set up online (/door/: staff sign-in, the event's door list) and its
//     service worker installed; then the network goes away and the page is reloaded: it still
//     opens, on its saved list;
//  3. offline, QR images (generated here, fed to the page as pictures) are scanned: the fan's
//     live (rotating) code is admitted, the same ticket again is a duplicate, the given-away
//     ticket's old code is refused as revoked, a forged code and a 45-second-old code are
//     refused, a static code is refused as not live;
//  4. door device 2, also offline, admits the same live code (it cannot know); both come back
//     online and sync: device 1's scan checked the ticket in, device 2's is reported as a
//     duplicate by the box office.
// The devices' browsers speak German (issue 39): the app is in German from set-up to scan
// results, offline too (its catalogue is kept); device 2, back online, switches to French in
// the page and its last result and report are said again in French.
// Screenshot: door.png in SCREENSHOT_DIR. Exits non-zero with a message on any failure.

import crypto from 'node:crypto';
import path from 'node:path';
import { createRequire } from 'node:module';
import { chromium } from 'playwright-core';
import { BASE, CHROMIUM, Failure, SHOTS, call, check, devToken, story } from './story.mjs';

const require = createRequire(import.meta.url);
const qrcode = require('qrcode-generator');

const { T, log, expectText, run } = story('door');

/** The live code of a ticket at `unixS`, from its secret (as the owner's phone makes it). */
function rotatingCode(secretB64, staticCode, unixS) {
  const step = Math.floor(unixS / 15);
  const mac = crypto.createHmac('sha256', Buffer.from(secretB64, 'base64url')).update(`BR1.${step}`).digest();
  return `BR1.${step}.${mac.subarray(0, 12).toString('base64url')}.${staticCode}`;
}

/** A QR code picture of `text`, as a data URL. */
function qrPicture(text) {
  const qr = qrcode(0, 'L');
  qr.addData(text);
  qr.make();
  return qr.createDataURL(4, 8);
}

const scan = (page, text) => page.evaluate((url) => window.door.scanImage(url), qrPicture(text));

/** The app has its catalogue and its handlers (it starts once its language is loaded). */
const started_ = (page) => page.waitForFunction(() => window.door !== undefined, null, { timeout: T });

const refused = [];

async function setUp(browser, name, eventId) {
  const context = await browser.newContext({ locale: 'de-DE', viewport: { width: 480, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(T);
  page.on('pageerror', (error) => { throw new Failure(`${name}: ${error.message}`); });
  // Whatever the pages' Content Security Policy refuses is a fault of the pages.
  page.on('console', (msg) => {
    if (msg.type() === 'error' && /Content Security Policy/i.test(msg.text())) refused.push(`${name}: ${msg.text()}`);
  });
  await page.goto(`${BASE}/door/`);
  await started_(page);
  await expectText(page, 'door-setup', /Dieses Gerät einrichten/);
  check(await page.getByTestId('door-language').inputValue() === 'de', `${name}: the language switch does not show Deutsch`);
  await page.getByTestId('door-account').fill(`staff-${name}`);
  await page.getByTestId('door-event').fill(eventId);
  await page.getByTestId('door-load').click();
  await page.getByTestId('door-scan').waitFor();
  // The service worker takes over the page (installed, activated, controlling).
  await page.evaluate(() => navigator.serviceWorker.ready);
  await page.reload();
  await page.waitForFunction(() => navigator.serviceWorker.controller !== null, null, { timeout: T });
  await started_(page);
  log(`${name}: set up, service worker controlling the page`);
  return { context, page };
}

async function main() {
  // 1. The sale, through the API.
  const ops = await devToken('ops-door', true);
  const event = await call(ops, 'POST', '/v1/admin/events', {
    name: 'Door night', startsAt: '2030-01-01T20:00:00Z', currency: 'EUR',
    sections: [{ name: 'A', rows: 2, seatsPerRow: 10, priceMinor: 3000 }],
  });
  check(event.status === 201, `event: ${event.status}`);
  const eventId = event.data.eventId;
  const fan = await devToken('door-fan');
  const hold = await call(fan, 'POST', `/v1/events/${eventId}/holds`, { seatIds: ['A-1-1', 'A-1-2', 'A-1-3'] });
  check(hold.status === 201, `hold: ${hold.status}`);
  const paid = await call(fan, 'POST', `/v1/holds/${hold.data.holdId}/checkout`, { paymentMethodToken: 'pm_card_visa' });
  check(paid.data?.orderStatus === 'CONFIRMED', `checkout: ${JSON.stringify(paid.data)}`);
  let order = null;
  for (let i = 0; i < 200; i++) {
    order = (await call(fan, 'GET', `/v1/orders/${paid.data.orderId}`)).data;
    if (order.paymentStatus === 'CAPTURED' && order.tickets.length === 3) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  check(order.tickets.length === 3, 'the tickets were never issued');
  const [t1, t2, t3] = order.tickets;
  let offer = null;
  for (let i = 0; i < 50 && !(offer && offer.status === 201); i++) {
    offer = await call(fan, 'POST', `/v1/orders/${order.orderId}/transfers`, { ticketIds: [t3.ticketId], toAccountId: 'door-friend' });
    if (offer.status !== 201) await new Promise((r) => setTimeout(r, 200));
  }
  check(offer.status === 201, `offer: ${offer.status} ${JSON.stringify(offer.data)}`);
  const friend = await devToken('door-friend');
  const accepted = await call(friend, 'POST', `/v1/transfers/${offer.data.transferId}/accept`);
  check(accepted.status === 200, `accept: ${accepted.status}`);
  const live1 = (await call(fan, 'GET', `/v1/tickets/${t1.ticketId}/rotating`)).data;
  check(live1 && live1.secret, 'the owner gets the rotating secret');
  log(`event ${eventId}: 3 tickets sold, the third given away`);

  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  try {
    // 2. Device 1 set up online, then offline and reloaded.
    const one = await setUp(browser, 'gate-1', eventId);
    const two = await setUp(browser, 'gate-2', eventId);
    await one.context.setOffline(true);
    await two.context.setOffline(true);
    await one.page.reload();
    await started_(one.page);
    check(await one.page.evaluate(() => window.door.ready()), 'device 1 did not reopen on its saved list offline');
    check(await one.page.getByTestId('door-online').textContent() === 'Offline', 'device 1 does not say it is offline');
    await expectText(one.page, 'door-bundle-info', /^Einlassliste vom .*: 1 gesperrt, 0 eingelassen\.$/);
    await expectText(one.page, 'door-result', /^Bereit zum Scannen$/);
    log('gate-1 reloaded offline: the page and its door list are there');

    // 3. Offline scans.
    const now = Date.now() / 1000;
    const code1 = rotatingCode(live1.secret, live1.staticCode, now);
    check(await scan(one.page, code1) === 'VALID', 'the live code was not admitted');
    check((await one.page.getByTestId('door-result').getAttribute('data-result')) === 'VALID', 'no green light');
    await expectText(one.page, 'door-result', /^Willkommen! — Platz A-1-\d+$/);
    await one.page.screenshot({ path: path.join(SHOTS, 'door.png') });
    log(`screenshot ${path.join(SHOTS, 'door.png')}`);
    check(await scan(one.page, rotatingCode(live1.secret, live1.staticCode, now + 1)) === 'DUPLICATE', 'a second scan was not a duplicate');
    await expectText(one.page, 'door-result', /^Schon drin — bereits eingelassen$/);
    check(await scan(one.page, t3.code) === 'REVOKED', 'the given-away ticket was not refused as revoked');
    await expectText(one.page, 'door-result', /^Ungültig — dieses Ticket wurde weitergegeben/);
    const parts = code1.split('.');
    const forged = `BR1.${parts[1]}.${Buffer.alloc(12).toString('base64url')}.${live1.staticCode}`;
    check(await scan(one.page, forged) === 'INVALID', 'a forged code was not refused');
    const live2 = (await call(fan, 'GET', `/v1/tickets/${t2.ticketId}/rotating`)).data;
    check(await scan(one.page, rotatingCode(live2.secret, live2.staticCode, now - 45)) === 'INVALID', 'a 45 s old code was not refused');
    check(await scan(one.page, t2.code) === 'STATIC', 'a static code was not refused as not live');
    await expectText(one.page, 'door-result', /^Live-Code nötig — /);
    await expectText(one.page, 'door-counts', /^1 hier gescannt, 1 noch abzugleichen\.$/);
    check(await one.page.evaluate(() => window.door.pending()) === 1, 'device 1 should have one scan to sync');
    log('gate-1 offline: live code admitted, duplicate, revoked, forged, old and static refused');

    // 4. Device 2 admits the same ticket offline; both sync once online.
    check(await scan(two.page, rotatingCode(live1.secret, live1.staticCode, Date.now() / 1000)) === 'VALID', 'device 2 did not admit the live code offline');

    await one.context.setOffline(false);
    await one.page.evaluate(() => window.door.sync());
    const report1 = await one.page.evaluate(() => window.door.report());
    check(report1.length === 1 && report1[0].result === 'CHECKED_IN', `device 1's sync: ${JSON.stringify(report1)}`);
    await two.context.setOffline(false);
    await two.page.evaluate(() => window.door.sync());
    const report2 = await two.page.evaluate(() => window.door.report());
    check(report2.length === 1 && report2[0].result === 'DUPLICATE', `device 2's sync: ${JSON.stringify(report2)}`);
    await two.page.getByTestId('door-sync-report').getByText('DUPLICATE').waitFor();
    await expectText(two.page, 'door-sync-report', /^Von der Kasse gemeldet: DUPLICATE /);
    await two.page.getByTestId('door-language').selectOption('fr');
    await expectText(two.page, 'door-result', /^Bienvenue ! — place A-1-\d+$/);
    await expectText(two.page, 'door-online', /^En ligne$/);
    await expectText(two.page, 'door-sync-report', /^Signalé par la billetterie : DUPLICATE /);
    check(await two.page.evaluate(() => localStorage.getItem('bo.locale')) === 'fr', 'device 2 did not remember French');
    log('gate-2 switched to French: its last result and the report are said again in French');
    const ticket = await call(fan, 'GET', `/v1/tickets/${t1.ticketId}`);
    check(ticket.data.status === 'CHECKED_IN', `the ticket is ${ticket.data.status}`);
    log('synced: first scan checked in, the other device\'s reported as a duplicate');
    check(refused.length === 0, `refused by the Content Security Policy: ${refused.join('; ')}`);
  } finally {
    await browser.close();
  }
}

run(main);
