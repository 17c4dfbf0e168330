// Sale phases and access codes (issue 40) in headless Chromium (Debian's chromium +
// playwright-core).
//
//   BASE_URL=http://127.0.0.1:8080 SCREENSHOT_DIR=../docs/screenshots node phases.mjs
//
// The server must run with --dev-auth. The story:
//  1. the operator creates an event with a fan-club presale (access code, section A, open
//     now) and a general sale an hour later, through the API;
//  2. on the admin page the phases panel shows both phases; the operator generates three
//     single-use codes, which download as a CSV, and downloads the codes with their uses left;
//     screenshot phases-admin.png;
//  3. a fan sees the phases with their windows and a code entry; a wrong code is refused with
//     the server's reason; the right one unlocks the presale; a hold of a seat of section A
//     is granted in the lane; screenshot phases.png;
//  4. a second fan who types the same (single-use) code is told it is used.
// Exits non-zero with a message on any failure.

import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { BASE, CHROMIUM, SHOTS, call, check, devToken, signIn, story } from './story.mjs';

const { T, log, pageErrors, watch, expectText, run } = story('phases');

const at = (offsetS) => new Date(Date.now() + offsetS * 1000).toISOString().replace(/\.\d+Z$/, 'Z');

async function main() {
  const ops = await devToken('ops-phases', true);
  const run = Math.random().toString(36).slice(2, 7);
  const created = await call(ops, 'POST', '/v1/admin/events', {
    name: `Fan Club Night ${run}`, startsAt: '2030-05-01T19:30:00Z', currency: 'EUR',
    sections: [
      { name: 'A', rows: 4, seatsPerRow: 12, priceMinor: 6500 },
      { name: 'B', rows: 6, seatsPerRow: 14, priceMinor: 3900 },
    ],
    phases: [
      { phaseId: 'fanclub', name: 'Fan club presale', access: 'code', startsAt: at(-60), endsAt: at(3600), sections: ['A'], maxTicketsPerAccount: 2 },
      { phaseId: 'general', name: 'General sale', access: 'open', startsAt: at(3600) },
    ],
  });
  check(created.status === 201, `event: ${created.status} ${JSON.stringify(created.data)}`);
  const eventId = created.data.eventId;
  log(`event ${eventId} with a presale and a general sale`);

  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
  try {
    // 2. The operator's panel: phases, codes generated (a CSV download), codes downloaded.
    const adminCtx = await browser.newContext({ locale: 'en-US', viewport: { width: 1280, height: 900 }, acceptDownloads: true });
    const admin = watch(await adminCtx.newPage(), 'admin');
    await admin.goto(`${BASE}/admin`);
    await admin.getByTestId('admin-account').fill('ops');
    await admin.getByTestId('admin-signin-submit').click();
    await admin.getByTestId('watch-event').selectOption(eventId);
    await admin.getByTestId('phase-admin-fanclub').waitFor();
    await expectText(admin, 'phase-admin-general', /General sale.*Open to all/);
    await expectText(admin, 'phase-admin-fanclub', /section A.*2 per account/);
    await admin.getByTestId('codes-count-fanclub').fill('3');
    const [generated] = await Promise.all([
      admin.waitForEvent('download'),
      admin.getByTestId('codes-generate-submit-fanclub').click(),
    ]);
    const rows = fs.readFileSync(await generated.path(), 'utf8').trim().split(/\r?\n/);
    check(rows[0] === 'code,uses,usesLeft', `the generated CSV's header: ${rows[0]}`);
    check(rows.length === 4, `the generated CSV has ${rows.length - 1} codes, not 3`);
    const codes = rows.slice(1).map((row) => row.split(',')[0]);
    check(codes.every((code) => /^[0-9A-Z]{12}$/.test(code)), `codes: ${codes}`);
    await expectText(admin, 'codes-status-fanclub', /3 codes made/);
    log(`three codes generated and downloaded: ${codes.join(' ')}`);
    const adminShot = path.join(SHOTS, 'phases-admin.png');
    await admin.getByTestId('phases-panel').screenshot({ path: adminShot });
    log(`screenshot ${adminShot}`);

    // 3. A fan unlocks the presale with a code and holds in it.
    const fanCtx = await browser.newContext({ locale: 'en-US', viewport: { width: 1280, height: 900 } });
    const fan = watch(await fanCtx.newPage(), 'fan');
    await fan.goto(`${BASE}/`);
    await signIn(fan, `fan-${run}`);
    await fan.goto(`${BASE}/#/events/${encodeURIComponent(eventId)}`);
    await fan.getByTestId('phases').waitFor();
    await expectText(fan, 'phase-fanclub', /Fan club presale.*Access code.*on now/);
    await expectText(fan, 'phase-general', /General sale.*not yet open/);
    await fan.getByTestId('phase-code-fanclub').fill('NOTACODE1');
    await fan.getByTestId('phase-code-submit-fanclub').click();
    await expectText(fan, 'phases', /not valid for this presale/);
    await fan.getByTestId('phase-code-fanclub').fill(codes[0].toLowerCase());
    await fan.getByTestId('phase-code-submit-fanclub').click();
    await expectText(fan, 'phase-unlocked-fanclub', /Unlocked/);
    log('a wrong code refused, the right one unlocks the presale');
    await fan.waitForFunction(() => window.boxoffice && window.boxoffice.ready(), null, { timeout: T });
    check(await fan.evaluate(() => window.boxoffice.selectSeat('A-1-5')), 'could not select A-1-5');
    await fan.getByTestId('hold-button').click();
    await expectText(fan, 'hold-seats', /Row 1/);
    log('the seat of section A is held in the presale');
    const fanShot = path.join(SHOTS, 'phases.png');
    await fan.screenshot({ path: fanShot, fullPage: false });
    log(`screenshot ${fanShot}`);

    // 4. The same single-use code, typed by another fan: used.
    const other = await devToken(`other-${run}`);
    const again = await call(other, 'POST', `/v1/events/${eventId}/phases/fanclub/access`, { code: codes[0] });
    check(again.status === 409 && again.data.code === 'ACCESS_CODE_USED_UP', `a used code: ${again.status} ${JSON.stringify(again.data)}`);
    const [listed] = await Promise.all([
      admin.waitForEvent('download'),
      admin.getByTestId('codes-download-fanclub').click(),
    ]);
    const left = fs.readFileSync(await listed.path(), 'utf8').trim().split(/\r?\n/);
    check(left.some((row) => row === `${codes[0]},1,0`), `the used code's row: ${left.join(' | ')}`);
    log('the used code shows no use left in the download');

    check(pageErrors.length === 0, `page errors: ${pageErrors.join('; ')}`);
  } finally {
    await browser.close();
  }
}

run(main);
