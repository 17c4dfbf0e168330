// Ticket types, all-in prices and promo codes in the storefront (issue 40), in headless
// Chromium (Debian's chromium + playwright-core).
//
//   BASE_URL=http://127.0.0.1:8080 SCREENSHOT_DIR=../docs/screenshots node pricing.mjs
//
// The server must run with --dev-auth. The story: an event sells adult and child tickets
// with a service fee per ticket, a booking fee per order and VAT included, and a promo code
// of 50 % off child tickets. A fan picks two seats, asks one adult and one child in the type
// picker, and holds them: the hold shows each seat's type and all-in price, the total
// (5173 + 2713 + 300 = 81.86) and its breakdown (screenshot pricing.png). The fan types the
// promo code and pays: the order costs 69.04 (the child's face 1250, fees 181), shown with
// its breakdown on the order page and given by the API to the cent.
// Exits non-zero with a message on any failure.

import path from 'node:path';
import { chromium } from 'playwright-core';
import { BASE, CHROMIUM, SHOTS, byTestId, call, check, devToken, signIn, story } from './story.mjs';

// Its pages' errors are uncaught errors only (what their Content Security Policy refuses
// is not counted).
const { T, log, pageErrors, watch, expectText, run } = story('pricing', { expectBy: 'selector' });

async function main() {
  const ops = await devToken('ops-pricing', true);
  const created = await call(ops, 'POST', '/v1/admin/events', {
    name: 'Family matinee', startsAt: '2030-06-01T14:00:00Z', currency: 'EUR',
    sections: [{ name: 'A', rows: 2, seatsPerRow: 10, priceMinor: 4900 }],
    ticketTypes: [
      { typeId: 'adult', name: 'Adult', prices: { A: 4900 } },
      { typeId: 'child', name: 'Child', prices: { A: 2500 }, maxPerOrder: 4 },
    ],
    fees: [
      { name: 'Service', per: 'ticket', fixedMinor: 150, shareBp: 250 },
      { name: 'Booking', per: 'order', fixedMinor: 300 },
    ],
    tax: { name: 'VAT', rateBp: 2000, included: true },
  });
  check(created.status === 201, `event: ${created.status} ${JSON.stringify(created.data)}`);
  const eventId = created.data.eventId;
  const code = await call(ops, 'POST', `/v1/admin/events/${eventId}/promo-codes`,
    { code: 'KIDS', percentOffBp: 5000, ticketTypes: ['child'], maxUses: 10 });
  check(code.status === 201, `promo code: ${code.status} ${JSON.stringify(code.data)}`);
  const fanToken = await devToken('pricing-fan');

  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
  try {
    const context = await browser.newContext({ locale: 'en-US', viewport: { width: 1280, height: 1100 } });
    const page = watch(await context.newPage(), 'fan');
    await page.goto(`${BASE}/`);
    await signIn(page, 'pricing-fan');
    await page.goto(`${BASE}/#/events/${encodeURIComponent(eventId)}`);
    await page.waitForFunction(() => window.boxoffice && window.boxoffice.ready(), null, { timeout: T });
    for (const seat of ['A-1-4', 'A-1-5']) check(await page.evaluate((id) => window.boxoffice.selectSeat(id), seat), `select ${seat}`);
    await page.getByTestId('type-picker').waitFor();
    await page.getByTestId('type-count-adult').fill('1');
    await page.getByTestId('type-count-child').fill('1');
    await page.getByTestId('hold-button').click();
    await page.getByTestId('hold-breakdown').waitFor();
    await expectText(page, byTestId('hold-total'), /81\.86/);
    await expectText(page, '[data-ticket-type="adult"]', /51\.73/);
    await expectText(page, '[data-ticket-type="child"]', /Child[\s\S]*27\.13/);
    await expectText(page, `${byTestId('hold-breakdown')} [data-part="order-fees"]`, /3\.00/);
    await expectText(page, `${byTestId('hold-breakdown')} [data-part="tax"]`, /Tax included[\s\S]*13\.64/);
    await page.screenshot({ path: path.join(SHOTS, 'pricing.png'), fullPage: true });
    log('held an adult and a child at their all-in prices, with the breakdown; screenshot pricing.png');

    await page.getByTestId('promo-code').fill('kids');
    await page.getByTestId('pay-button').click();
    await page.waitForURL(/#\/orders\//, { timeout: T });
    const orderId = decodeURIComponent(page.url().split('#/orders/')[1]);
    await page.getByTestId('order-breakdown').waitFor();
    const order = (await call(fanToken, 'GET', `/v1/orders/${encodeURIComponent(orderId)}`)).data;
    check(order.totalMinor === 6904, `the order costs ${order.totalMinor}, not 6904`);
    check(order.breakdown.discountMinor === 1250, `discount ${JSON.stringify(order.breakdown)}`);
    await expectText(page, `${byTestId('order-breakdown')} [data-part="discount"]`, /12\.50/);
    log('paid with the promo code: 69.04, the discount shown on the order page');
    check(pageErrors.length === 0, `page errors: ${pageErrors.join('; ')}`);
  } finally {
    await browser.close();
  }
}

run(main);
