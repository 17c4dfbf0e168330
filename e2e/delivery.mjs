// Ticket holders and delivery in the storefront and the door app (issue 39), in headless
// Chromium (Debian's chromium + playwright-core).
//
//   BASE_URL=http://127.0.0.1:8080 SCREENSHOT_DIR=../docs/screenshots node delivery.mjs
//
// The server must run with --dev-auth. The story:
//  1. an event asks each ticket's holder name and date of birth; a fan holds two seats, and
//     the checkout asks both tickets' holders; with one left out (the page's own check taken
//     away) the server refuses the checkout (HOLDERS_REQUIRED) and the page says so; with both
//     given the order is paid and its tickets name their holders;
//  2. the fan changes a ticket's holder on the order page (the API confirms it); screenshot
//     holders.png;
//  3. on a standing event whose holder changes have closed, two tickets held by quantity
//     (units), one holder named: the order shows it, and a change is refused
//     (HOLDER_CHANGE_CLOSED) with the page saying why;
//  4. the page switched to German, the order's PDF tickets download as a PDF in German that
//     names the holders (read back with poppler's pdftotext), and each wallet button either
//     gives a pass or, that wallet not configured on this server, is disabled with a message;
//  5. a door device (German) downloads the first event's list and scans both tickets: each
//     result names its holder.
// Exits non-zero with a message on any failure.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { BASE, CHROMIUM, Failure, SHOTS, byTestId, call, check, devToken, signIn, story } from './story.mjs';

const { T, log, pageErrors, watch, expectText, run } = story('delivery', { expectBy: 'selector' });

/** The order page once every ticket is issued; the order as the API gives it. */
async function orderPage(page, token, expected) {
  await page.waitForURL(/#\/orders\//, { timeout: T });
  const orderId = decodeURIComponent(page.url().split('#/orders/')[1]);
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid="ticket"]').length === n, expected, { timeout: T });
  const order = (await call(token, 'GET', `/v1/orders/${encodeURIComponent(orderId)}`)).data;
  check(order.orderStatus === 'CONFIRMED' && order.tickets.length === expected, `order ${JSON.stringify(order)}`);
  return order;
}

async function main() {
  const ops = await devToken('ops-delivery', true);
  const club = await call(ops, 'POST', '/v1/admin/events', {
    name: 'Club night', startsAt: '2030-05-01T21:00:00Z', currency: 'EUR',
    sections: [{ name: 'A', rows: 2, seatsPerRow: 10, priceMinor: 3000 }],
    holderPolicy: {
      nameRequired: true,
      questions: [{ questionId: 'dob', label: 'Date of birth', kind: 'DATE', required: true }],
      changeCutoffSeconds: 3600,
    },
  });
  check(club.status === 201, `event: ${club.status} ${JSON.stringify(club.data)}`);
  // Starts within a year, changes close a year before the start: closed already.
  const startsSoon = new Date(Date.now() + 30 * 86_400_000).toISOString().replace(/\.\d+Z$/, 'Z');
  const floor = await call(ops, 'POST', '/v1/admin/events', {
    name: 'Open air', startsAt: startsSoon, currency: 'EUR',
    sections: [], tiers: [{ tierId: 'FLOOR', name: 'Floor', capacity: 50, priceMinor: 2500 }],
    holderPolicy: { nameRequired: false, questions: [], changeCutoffSeconds: 31_536_000 },
  });
  check(floor.status === 201, `standing event: ${floor.status} ${JSON.stringify(floor.data)}`);
  const fanToken = await devToken('holder-fan');

  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
  try {
    // 1. Holders asked before payment.
    const context = await browser.newContext({ locale: 'en-US', viewport: { width: 1280, height: 1000 }, acceptDownloads: true });
    const page = watch(await context.newPage(), 'fan');
    await page.goto(`${BASE}/`);
    await signIn(page, 'holder-fan');
    await page.goto(`${BASE}/#/events/${encodeURIComponent(club.data.eventId)}`);
    await page.waitForFunction(() => window.boxoffice && window.boxoffice.ready(), null, { timeout: T });
    for (const seat of ['A-1-4', 'A-1-5']) check(await page.evaluate((id) => window.boxoffice.selectSeat(id), seat), `select ${seat}`);
    await page.getByTestId('hold-button').click();
    await page.getByTestId('holders').waitFor();
    check(await page.getByTestId('holder-ticket').count() === 2, 'one holder per ticket');
    check(await page.getByTestId('holder-answer').count() === 2, 'the date of birth asked per ticket');
    check(await page.getByTestId('holder-name').first().evaluate((input) => input.required), 'the name is not required');
    check(await page.getByTestId('holder-answer').first().getAttribute('type') === 'date', 'a DATE question is not a date input');
    await expectText(page, byTestId('holders'), /Section A · Row 1 · Seat 4[\s\S]*Date of birth/);
    await page.getByTestId('holder-name').nth(0).fill('Ada Lovelace');
    await page.getByTestId('holder-answer').nth(0).fill('1990-12-10');
    // The server judges too: without the page's own check, the second ticket goes unnamed.
    await page.evaluate(() => document.querySelectorAll('[data-testid="holders"] input').forEach((input) => { input.required = false; }));
    await page.getByTestId('pay-button').click();
    await expectText(page, byTestId('shop-message'), /^Please give the name of each ticket holder before paying\.$/);
    check(await page.evaluate(() => document.activeElement === document.querySelectorAll('[data-testid="holder-name"]')[1]),
      'the unnamed ticket\'s name is not focused');
    log('checkout refused without the second holder (HOLDERS_REQUIRED), and the page says so');
    await page.getByTestId('holder-name').nth(1).fill('Charles Babbage');
    await page.getByTestId('holder-answer').nth(1).fill('1991-12-26');
    await page.getByTestId('pay-button').click();
    const order = await orderPage(page, fanToken, 2);
    const holderOf = Object.fromEntries(order.tickets.map((t) => [t.seatId, t.holder]));
    check(holderOf['A-1-4']?.name === 'Ada Lovelace' && holderOf['A-1-4']?.answers?.dob === '1990-12-10', `A-1-4: ${JSON.stringify(holderOf['A-1-4'])}`);
    check(holderOf['A-1-5']?.name === 'Charles Babbage', `A-1-5: ${JSON.stringify(holderOf['A-1-5'])}`);
    const shown = await page.locator(`${byTestId('ticket')} ${byTestId('ticket-holder')}`).allTextContents();
    check(shown.includes('Holder: Ada Lovelace') && shown.includes('Holder: Charles Babbage'), `holders shown: ${JSON.stringify(shown)}`);
    log('paid: both tickets carry their holders, on the page and in the API');

    // 2. Changing a holder.
    const ada = order.tickets.find((t) => t.seatId === 'A-1-4');
    const adaCard = page.locator(`[data-ticket-id="${ada.ticketId}"]`);
    await adaCard.getByTestId('holder-change-open').click();
    check(await adaCard.getByTestId('holder-change-name').inputValue() === 'Ada Lovelace', 'the change form does not start from the holder');
    await adaCard.getByTestId('holder-change-name').fill('Grace Hopper');
    await adaCard.getByTestId('holder-change-submit').click();
    await expectText(page, `[data-ticket-id="${ada.ticketId}"] ${byTestId('ticket-holder')}`, /^Holder: Grace Hopper$/);
    await expectText(page, `[data-ticket-id="${ada.ticketId}"] ${byTestId('holder-change-form')} [role="status"]`, /^Grace Hopper will use this ticket now; it stays in your account\.$/);
    const changed = (await call(fanToken, 'GET', `/v1/tickets/${ada.ticketId}`)).data;
    check(changed.holder?.name === 'Grace Hopper' && changed.holder?.answers?.dob === '1990-12-10', `changed: ${JSON.stringify(changed.holder)}`);
    await page.screenshot({ path: path.join(SHOTS, 'holders.png'), fullPage: true });
    log(`holder changed; screenshot ${path.join(SHOTS, 'holders.png')}`);

    // 3. Units of a standing area; changes closed.
    await page.goto(`${BASE}/#/events/${encodeURIComponent(floor.data.eventId)}`);
    await page.locator('#tier-qty').selectOption('2');
    await page.locator('form:has(#tier-id) button[type="submit"]').click();
    await page.getByTestId('holders').waitFor();
    await expectText(page, byTestId('holders'), /Ticket 1 · Floor[\s\S]*Holder name \(optional\)[\s\S]*Ticket 2 · Floor/);
    check(await page.getByTestId('holder-answer').count() === 0, 'questions asked that the event does not ask');
    await page.getByTestId('holder-name').nth(0).fill('Dana Scully');
    await page.getByTestId('pay-button').click();
    const standing = await orderPage(page, fanToken, 2);
    const named = standing.tickets.filter((t) => t.holder);
    check(named.length === 1 && named[0].holder.name === 'Dana Scully', `standing holders: ${JSON.stringify(standing.tickets.map((t) => t.holder))}`);
    const texts = await page.locator(byTestId('ticket-holder')).allTextContents();
    check(texts.includes('Holder: Dana Scully') && texts.includes('No holder named yet.'), `standing holders shown: ${JSON.stringify(texts)}`);
    const dana = page.locator(`[data-ticket-id="${named[0].ticketId}"]`);
    await dana.getByTestId('holder-change-open').click();
    await dana.getByTestId('holder-change-name').fill('Fox Mulder');
    await dana.getByTestId('holder-change-submit').click();
    await expectText(page, `[data-ticket-id="${named[0].ticketId}"] ${byTestId('holder-change-form')} [role="status"]`, /can no longer be changed/);
    check(await dana.getByTestId('holder-change-submit').isDisabled(), 'a closed change can still be submitted');
    check((await call(fanToken, 'GET', `/v1/tickets/${named[0].ticketId}`)).data.holder.name === 'Dana Scully', 'a closed change went through');
    log('standing tickets named by unit; a change after the cutoff refused (HOLDER_CHANGE_CLOSED) and said');

    // 4. PDF tickets (in the page's language) and wallet passes.
    await page.goto(`${BASE}/#/orders/${encodeURIComponent(order.orderId)}`);
    await page.getByTestId('language-select').selectOption('de');
    await page.getByTestId('pdf-tickets').waitFor();
    await expectText(page, byTestId('pdf-tickets'), /^PDF-Tickets$/);
    const [download] = await Promise.all([page.waitForEvent('download', { timeout: T }), page.getByTestId('pdf-tickets').click()]);
    const pdfPath = await download.path();
    check(fs.readFileSync(pdfPath).subarray(0, 5).toString() === '%PDF-', 'the PDF tickets are not a PDF');
    check(download.suggestedFilename() === `tickets-${order.orderId}.pdf`, `PDF named ${download.suggestedFilename()}`);
    const pdfText = execFileSync('pdftotext', ['-layout', pdfPath, '-'], { encoding: 'utf8' });
    check(/Club night/.test(pdfText) && /Inhaber: Grace Hopper/.test(pdfText) && /Inhaber: Charles Babbage/.test(pdfText),
      `the PDF is not in German with its holders:\n${pdfText}`);
    log('PDF tickets downloaded, in German, naming their holders');
    for (const kind of ['apple', 'google']) {
      const answer = await call(fanToken, 'GET', `/v1/tickets/${ada.ticketId}/wallet/${kind}`);
      const button = page.getByTestId(`${kind}-wallet`).first();
      if (answer.status === 409) {
        check(answer.data?.code === 'WALLET_NOT_CONFIGURED', `${kind}: ${JSON.stringify(answer.data)}`);
        await button.click();
        try {
          await page.waitForFunction((id) => [...document.querySelectorAll(`[data-testid="${id}"]`)].every((b) => b.disabled),
            `${kind}-wallet`, { timeout: T, polling: 200 });
        } catch {
          throw new Failure(`${kind}'s buttons stay enabled`);
        }
        await expectText(page, byTestId('wallet-note'), kind === 'apple'
          ? /^(Apple-Wallet-Pässe|Wallet-Pässe) gibt es für diese Veranstaltung nicht\.$/
          : /^(Google-Wallet-Pässe|Wallet-Pässe) gibt es für diese Veranstaltung nicht\.$/);
        log(`${kind} wallet not configured here: its buttons disabled, the page says so`);
      } else if (kind === 'apple') {
        check(answer.status === 200, `apple wallet: ${answer.status}`);
        const [pass] = await Promise.all([page.waitForEvent('download', { timeout: T }), button.click()]);
        check(fs.readFileSync(await pass.path()).subarray(0, 2).toString() === 'PK', 'the pass is not a zip');
        log('apple wallet pass downloaded');
      } else {
        check(answer.status === 200 && answer.data.saveUrl.startsWith('https://'), `google wallet: ${JSON.stringify(answer.data)}`);
        const [popup] = await Promise.all([page.waitForEvent('popup', { timeout: T }), button.click()]);
        check(popup.url().startsWith('https://') || popup.url().startsWith('chrome-error:'), `Google Wallet opened ${popup.url()}`);
        check((await page.getByTestId('google-wallet-link').first().getAttribute('href')).startsWith('https://pay.google.com/'), 'the save link is not shown');
        log('google wallet save link opened');
      }
    }

    // 5. The door names the holder (its scans check the tickets in: last).
    const doorContext = await browser.newContext({ locale: 'de-DE', viewport: { width: 480, height: 900 } });
    const door = watch(await doorContext.newPage(), 'door');
    await door.goto(`${BASE}/door/`);
    await door.waitForFunction(() => window.door !== undefined, null, { timeout: T });
    await door.getByTestId('door-account').fill('staff-delivery');
    await door.getByTestId('door-event').fill(club.data.eventId);
    await door.getByTestId('door-static').check();
    await door.getByTestId('door-load').click();
    await door.getByTestId('door-scan').waitFor();
    const charles = order.tickets.find((t) => t.seatId === 'A-1-5');
    check(await door.evaluate((code) => window.door.scanText(code), charles.code) === 'VALID', 'the door refused a valid ticket');
    await expectText(door, byTestId('door-holder'), /^Inhaber: Charles Babbage$/);
    check(await door.evaluate((code) => window.door.scanText(code), ada.code) === 'VALID', 'the door refused the changed ticket');
    await expectText(door, byTestId('door-holder'), /^Inhaber: Grace Hopper$/);
    log('the door app names each ticket\'s holder (the changed one too)');

    check(pageErrors.length === 0, `page errors: ${pageErrors.join('; ')}`);
  } finally {
    await browser.close();
  }
}

run(main);
