// The storefront in other languages (issue 39), in headless Chromium (Debian's chromium +
// playwright-core).
//
//   BASE_URL=http://127.0.0.1:8080 SCREENSHOT_DIR=../docs/screenshots node languages.mjs
//
// The server must run with --dev-auth. The story:
//  1. without a browser: the pages come with <html lang> from Accept-Language, and the
//     catalogues are served per language (English for one not spoken, 404 for no catalogue);
//  2. a browser whose languages are German: the event list, the sign-in, the seat map, a
//     hold (the ticket holders asked before payment) and the paid order all speak German,
//     and money and dates are written the German way; screenshot storefront-de.png;
//  3. an English browser switches to Chinese in the page: the page renders again in Chinese
//     without a reload, the choice is remembered over a reload, the account signed in there
//     gets Chinese as its language (its mail's), a hold and its payment button speak
//     Chinese; screenshot storefront-zh.png; switching back to English re-renders the held
//     seats in English and makes the account's language English;
//  4. a browser whose languages are Chinese gets the Chinese page at once (the server's
//     <html lang> and the page agree).
// Exits non-zero with a message on any failure.

import path from 'node:path';
import { chromium } from 'playwright-core';
import { BASE, CHROMIUM, Failure, SHOTS, call, check, devToken, signIn, story } from './story.mjs';

const { T, log, pageErrors, watch, expectText, run } = story('languages');

/** Waits until the account's language (`GET /v1/me`, what its mail is written in) is
 *  `locale`: the page saves it without being waited for. */
async function accountLocale(token, locale, what) {
  let seen = null;
  for (let i = 0; i < 100; i++) {
    seen = (await call(token, 'GET', '/v1/me')).data;
    if (seen && seen.locale === locale) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Failure(`${what}: its language is ${JSON.stringify(seen)}, not ${locale}`);
}

/** Opens the event, picks `seats` on the map and holds them; after each pick the hold button
 *  must read the pattern of `buttons` at its place (the language's plural forms). */
async function hold(page, eventId, seats, buttons, { removed } = {}) {
  await page.goto(`${BASE}/#/events/${encodeURIComponent(eventId)}`);
  await page.waitForFunction(() => window.boxoffice && window.boxoffice.ready(), null, { timeout: T });
  if (removed) {
    // Picked and put back: what a screen reader hears names "no seat" (a `[0]` variant).
    await page.evaluate((id) => { window.boxoffice.selectSeat(id); window.boxoffice.selectSeat(id); }, seats[0]);
    await expectText(page, 'announce', removed);
  }
  for (const [i, seat] of seats.entries()) {
    check(await page.evaluate((id) => window.boxoffice.selectSeat(id), seat), `could not select ${seat}`);
    await expectText(page, 'hold-button', buttons[i]);
  }
  await page.getByTestId('hold-button').click();
  await page.getByTestId('hold-seats').waitFor();
}

async function main() {
  const ops = await devToken('ops-languages', true);
  const event = await call(ops, 'POST', '/v1/admin/events', {
    name: 'Sinfonie Nr. 9', startsAt: '2030-03-01T19:30:00Z', currency: 'EUR',
    sections: [
      { name: 'A', rows: 6, seatsPerRow: 16, priceMinor: 4500 },
      { name: 'B', rows: 5, seatsPerRow: 14, priceMinor: 2900 },
    ],
  });
  check(event.status === 201, `event: ${event.status} ${JSON.stringify(event.data)}`);
  const eventId = event.data.eventId;

  // 1. The server's side.
  for (const [header, lang] of [['de-DE,de;q=0.9,en;q=0.5', 'de'], ['zh-CN,zh;q=0.9', 'zh'], ['it-IT', 'en']]) {
    for (const page of ['/', '/door/']) {
      const res = await fetch(`${BASE}${page}`, { headers: { 'accept-language': header } });
      const html = await res.text();
      check(html.includes(`<html lang="${lang}">`), `${page} for ${header} is not served as ${lang}`);
      check(res.headers.get('content-language') === lang, `${page} for ${header}: Content-Language ${res.headers.get('content-language')}`);
    }
  }
  const german = await fetch(`${BASE}/i18n/de/storefront.json`);
  check(german.status === 200 && (await german.json())['storefront-sign-in'] === 'Anmelden', 'the German storefront catalogue');
  const unknown = await fetch(`${BASE}/i18n/xx/door.json`);
  check(unknown.status === 200 && (await unknown.json())['door-result-valid'] === 'Welcome!', 'an unknown language is not English');
  check((await fetch(`${BASE}/i18n/de/nothing.json`)).status === 404, 'an unknown catalogue is not 404');
  log('pages and catalogues are served per language');

  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
  try {
    // 2. German, from the browser's languages.
    const de = watch(await (await browser.newContext({ locale: 'de-DE', viewport: { width: 1280, height: 900 } })).newPage(), 'de');
    await de.goto(`${BASE}/`);
    await expectText(de, 'events-heading', /^Kommende Veranstaltungen$/);
    check(await de.evaluate(() => document.documentElement.lang) === 'de', 'the German page is not lang=de');
    check(await de.getByTestId('language-select').inputValue() === 'de', 'the switch does not show Deutsch');
    await expectText(de, 'nav-orders', /^Meine Bestellungen$/);
    const card = de.locator(`[data-event-id="${eventId}"]`);
    const cardText = await card.textContent();
    check(/Plätze wählen/.test(cardText), `the event card: ${cardText}`);
    check(/166 Plätze · ab 29,00\s€/.test(cardText), `German numbers and money: ${cardText}`);
    check(/1\. März 2030|01\.03\.2030|1\. Mär/.test(cardText), `a German date: ${cardText}`);
    await signIn(de, 'fan-de');
    await expectText(de, 'signed-in-as', /^Angemeldet als fan-de$/);
    await hold(de, eventId, ['A-1-8', 'A-1-9'], [/^Einen Platz reservieren$/, /^2 Plätze reservieren$/],
      { removed: /^Block A · Reihe 1 · Platz 8 entfernt\. Kein Platz gewählt\.$/ });
    await expectText(de, 'map-status', /Plätzen frei/);
    await expectText(de, 'hold-seats', /Block A · Reihe 1 · Platz 8/);
    await expectText(de, 'pay-button', /^90,00\s€ bezahlen$/);
    await expectText(de, 'holders', /Ticketinhaber/);
    check(await de.getByTestId('holder-name').count() === 2, 'one holder name per ticket');
    await de.screenshot({ path: path.join(SHOTS, 'storefront-de.png') });
    log(`German storefront, screenshot ${path.join(SHOTS, 'storefront-de.png')}`);
    await de.getByTestId('pay-button').click();
    await de.waitForURL(/#\/orders\//, { timeout: T });
    await expectText(de, 'order-status', /^bestätigt$/);
    await expectText(de, 'order-heading', /^Ihre Bestellung ist bestätigt$/);
    log('German: held, paid, the order confirmed in German');

    // 3. English, then Chinese through the switch.
    const en = watch(await (await browser.newContext({ locale: 'en-US', viewport: { width: 1280, height: 900 } })).newPage(), 'en→zh');
    await en.goto(`${BASE}/`);
    await expectText(en, 'events-heading', /^Upcoming events$/);
    await en.evaluate(() => { window.notReloaded = true; });
    await en.getByTestId('language-select').selectOption('zh');
    await expectText(en, 'events-heading', /^近期活动$/);
    check(await en.evaluate(() => window.notReloaded === true), 'switching the language reloaded the page');
    check(await en.evaluate(() => document.documentElement.lang) === 'zh', 'the page is not lang=zh after the switch');
    check(await en.evaluate(() => localStorage.getItem('bo.locale')) === 'zh', 'the choice was not remembered');
    await en.reload();
    await expectText(en, 'events-heading', /^近期活动$/);
    await expectText(en, 'nav-orders', /^我的订单$/);
    await signIn(en, 'fan-zh');
    await expectText(en, 'signed-in-as', /当前账号/);
    const fanZh = await devToken('fan-zh');
    await accountLocale(fanZh, 'zh', 'the account signed in on the Chinese page');
    await hold(en, eventId, ['B-2-6', 'B-2-7', 'B-2-8'], [/^保留 1 个座位$/, /^保留 2 个座位$/, /^保留 3 个座位$/]);
    await expectText(en, 'hold-seats', /B 区 · 2 排 · 6 号/);
    await expectText(en, 'pay-button', /^支付 €87\.00$/);
    await expectText(en, 'holders', /持票人/);
    await en.screenshot({ path: path.join(SHOTS, 'storefront-zh.png') });
    log(`Chinese storefront, screenshot ${path.join(SHOTS, 'storefront-zh.png')}`);
    await en.evaluate(() => { window.notReloaded = true; });
    await en.getByTestId('language-select').selectOption('en');
    await expectText(en, 'hold-seats', /Section B · Row 2 · Seat 6/);
    await expectText(en, 'pay-button', /^Pay €87\.00$/);
    await accountLocale(fanZh, 'en', 'the account after the switch to English');
    check(await en.evaluate(() => window.notReloaded === true), 'switching back reloaded the page');
    log('English → Chinese by the switch, remembered, and back to English with the hold kept');

    // 4. Chinese from the browser's languages (and Accept-Language).
    const zhContext = await browser.newContext({ locale: 'zh-CN', viewport: { width: 1280, height: 900 } });
    const zh = watch(await zhContext.newPage(), 'zh');
    const response = await zh.goto(`${BASE}/`);
    check((await response.text()).includes('<html lang="zh">'), 'the server did not serve the page as zh');
    await expectText(zh, 'events-heading', /^近期活动$/);
    check(await zh.getByTestId('language-select').inputValue() === 'zh', 'the switch does not show 中文');
    log('a Chinese browser gets the Chinese page at once');

    check(pageErrors.length === 0, `page errors: ${pageErrors.join('; ')}`);
  } finally {
    await browser.close();
  }
}

run(main);
