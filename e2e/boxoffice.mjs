// Allocations, comps and the box office on the admin page (issue 40), in headless Chromium
// (Debian's chromium + playwright-core).
//
//   BASE_URL=http://127.0.0.1:8080 SCREENSHOT_DIR=../docs/screenshots node boxoffice.mjs
//
// The server must run with --dev-auth. The story:
//  1. an event is created with the artist's two seats kept back; the operator signs in to
//     the admin page and lists the event's allocations: the artist's seats are kept, and a
//     fan's hold of one is refused (SEATS_UNAVAILABLE);
//  2. the operator keeps a sponsor's seats back in the page, then releases the artist's: the
//     list says what each still keeps, and the fan now holds the released seat;
//  3. the operator issues a comp of a sponsor seat to an account: its order is the account's,
//     at 0, with a ticket;
//  4. the operator sells two seats at the box office in cash: the page shows both tickets'
//     QR codes (screenshot boxoffice.png) and the order's PDF opens.
// Exits non-zero with a message on any failure.

import path from 'node:path';
import { chromium } from 'playwright-core';
import { BASE, CHROMIUM, SHOTS, call, check, devToken, story } from './story.mjs';

const { T, log, pageErrors, watch, expectText, run } = story('boxoffice', {
  timeoutMs: 60_000, watchdogMs: 5 * 60_000, expectBy: 'selector',
});

const row = (id) => `[data-testid="bo-allocation-table"] tr[data-allocation="${id}"]`;

async function main() {
  const ops = await devToken('ops-boxoffice', true);
  const fan = await devToken('fan-boxoffice');
  const created = await call(ops, 'POST', '/v1/admin/events', {
    name: 'Box office night', startsAt: '2030-06-01T20:00:00Z', currency: 'EUR',
    sections: [{ name: 'A', rows: 3, seatsPerRow: 8, priceMinor: 4500 }],
    allocations: [{ allocationId: 'artist', name: 'Artist guests', seatIds: ['A-1-1', 'A-1-2'] }],
  });
  check(created.status === 201, `event: ${created.status} ${JSON.stringify(created.data)}`);
  const eventId = created.data.eventId;
  const refused = await call(fan, 'POST', `/v1/events/${eventId}/holds`, { seatIds: ['A-1-1'] });
  check(refused.status === 409 && refused.data.code === 'SEATS_UNAVAILABLE', `a kept seat was held: ${JSON.stringify(refused)}`);

  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
  try {
    const context = await browser.newContext({ locale: 'en-US', viewport: { width: 1280, height: 1400 } });
    const page = watch(await context.newPage(), 'admin');
    await page.goto(`${BASE}/admin`);
    await page.getByTestId('admin-account').fill('ops');
    await page.getByTestId('admin-signin-submit').click();
    await page.getByTestId('boxoffice-panel').waitFor();

    // 1. What the event keeps.
    await page.getByTestId('bo-event').fill(eventId);
    await page.getByTestId('bo-load').click();
    await expectText(page, `${row('artist')} [data-testid="bo-kept"]`, /A-1-1, A-1-2/);
    log('the artist\'s seats are listed as kept');

    // 2. A sponsor's seats kept in the page, the artist's released.
    await page.getByTestId('bo-add-id').fill('sponsor');
    await page.getByTestId('bo-add-name').fill('Sponsor');
    await page.getByTestId('bo-add-seats').fill('A-2-1, A-2-2');
    await page.getByTestId('bo-add-submit').click();
    await expectText(page, `${row('sponsor')} [data-testid="bo-kept"]`, /A-2-1, A-2-2/);
    await page.locator(`${row('artist')} [data-testid="bo-release-all"]`).click();
    await expectText(page, `${row('artist')} [data-testid="bo-kept"]`, /nothing/);
    const held = await call(fan, 'POST', `/v1/events/${eventId}/holds`, { seatIds: ['A-1-1'] });
    check(held.status === 201, `the released seat: ${JSON.stringify(held)}`);
    log('kept in the page, released in the page, then held by a fan');

    // 3. A comp.
    await page.getByTestId('bo-comp-allocation').fill('sponsor');
    await page.getByTestId('bo-comp-account').fill('guest-boxoffice');
    await page.getByTestId('bo-comp-seats').fill('A-2-1');
    await page.getByTestId('bo-comp-submit').click();
    await expectText(page, '[data-testid="bo-sold"]', /Comps issued to guest-boxoffice/);
    await expectText(page, `${row('sponsor')} [data-testid="bo-kept"]`, /^A-2-2$/);
    const guest = await devToken('guest-boxoffice');
    const orders = await call(guest, 'GET', '/v1/orders');
    const comp = (orders.data.orders || orders.data.items || []).find((o) => o.eventId === eventId);
    check(comp && comp.totalMinor === 0, `the comp's order: ${JSON.stringify(orders.data)}`);
    log('a comp issued to guest-boxoffice');

    // 4. A sale in cash at the box office.
    await page.getByTestId('bo-sale-seats').fill('A-3-4, A-3-5');
    await page.getByTestId('bo-sale-payment').selectOption('cash');
    await page.getByTestId('bo-sale-name').fill('Walk-in buyer');
    await page.getByTestId('bo-sale-submit').click();
    await expectText(page, '[data-testid="bo-sold"]', /Sold \(cash, €90\.00\)/);
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="bo-tickets"] svg').length === 2, null, { timeout: T });
    const sold = await call(fan, 'POST', `/v1/events/${eventId}/holds`, { seatIds: ['A-3-4'] });
    check(sold.status === 409, `a seat sold at the box office was held: ${JSON.stringify(sold)}`);
    const [popup] = await Promise.all([
      context.waitForEvent('page', { timeout: T }),
      page.getByTestId('bo-pdf').click(),
    ]);
    check(popup.url().startsWith('blob:'), `the PDF opened at ${popup.url()}`);
    await page.getByTestId('boxoffice-panel').screenshot({ path: path.join(SHOTS, 'boxoffice.png') });
    log('sold in cash: two QR codes shown, the PDF opened; boxoffice.png written');

    check(pageErrors.length === 0, `page errors: ${pageErrors.join('; ')}`);
  } finally {
    await browser.close();
  }
}

run(main);
