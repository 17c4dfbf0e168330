// What the Chromium stories in this directory (storefront.mjs, door.mjs, delivery.mjs,
// languages.mjs, boxoffice.mjs, phases.mjs, pricing.mjs) share: where the server, the
// screenshots and the browser are (BASE_URL, SCREENSHOT_DIR, CHROMIUM_PATH), failures, the
// API with --dev-auth tokens (POST /v1/dev/token), the storefront's sign-in, and per story
// (`story(name, options)`) its log, its timeout (E2E_TIMEOUT_MS), the pages' errors, waiting
// for a text, and its ending: exit code 0 when all is good, 1 with "<NAME> E2E FAILED: ..."
// on a failure, 2 when the watchdog finds it still running.

import crypto from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const BASE = (process.env.BASE_URL || 'http://127.0.0.1:8080').replace(/\/$/, '');
export const SHOTS = path.resolve(process.env.SCREENSHOT_DIR || path.join(here, '..', 'docs', 'screenshots'));
export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

/** What a story found wrong: reported by its message alone (any other error with its stack). */
export class Failure extends Error {}
export function check(condition, message) {
  if (!condition) throw new Failure(message);
}

/** The API as `token`'s account, with a fresh idempotency key and any further `headers`. */
export async function call(token, method, pathname, body, headers = {}) {
  const res = await fetch(`${BASE}${pathname}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': crypto.randomUUID(), ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, data: await res.json().catch(() => null) };
}

/** A token for `accountId` from the server's --dev-auth. */
export async function devToken(accountId, admin = false) {
  const res = await fetch(`${BASE}/v1/dev/token`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ accountId, admin }),
  });
  check(res.status === 201, `dev token for ${accountId}: ${res.status}`);
  return (await res.json()).token;
}

export const byTestId = (id) => `[data-testid="${id}"]`;

/** The trimmed text of the first element with `testId`. */
export const text = async (page, testId) => ((await page.getByTestId(testId).first().textContent()) || '').trim();

/** Signs `account` in on the storefront. */
export async function signIn(page, account) {
  await page.getByTestId('open-signin').click();
  await page.getByTestId('signin-account').fill(account);
  await page.getByTestId('signin-submit').click();
  await page.getByTestId('signed-in-as').waitFor();
}

/**
 * One story's log, timeout, pages' errors, text waits and ending.
 *
 * `name` tags the log lines (`[name   12.3s] ...`). Options:
 * - `failed`: what failure messages start with (`DOOR E2E FAILED` for `door`);
 * - `timeoutMs`: the timeout of each wait (`T`) when E2E_TIMEOUT_MS is not set;
 * - `watchdogMs`, `watchdogAfter`: the story exits with code 2 if still running after that
 *   long, saying "still running after <watchdogAfter>" (by default "10 minutes");
 * - `expectBy`: whether `expectText` takes a test id (`'testId'`: the element must be there,
 *   the pattern's flags count) or a CSS selector (`'selector'`: its first match's text);
 * - `csp`: whether `watch` also counts what the pages' Content Security Policy refuses as
 *   a page error;
 * - `echo`: whether `watch` also prints each page error (with its stack) and console error
 *   to stderr.
 */
export function story(name, {
  failed = `${name.toUpperCase()} E2E FAILED`,
  timeoutMs = 120_000,
  watchdogMs = 10 * 60_000,
  watchdogAfter = watchdogMs % 60_000 === 0
    ? `${watchdogMs / 60_000} minute${watchdogMs === 60_000 ? '' : 's'}` : `${watchdogMs / 1000}s`,
  expectBy = 'testId',
  csp = true,
  echo = false,
} = {}) {
  if (expectBy !== 'testId' && expectBy !== 'selector') throw new Error(`expectBy is 'testId' or 'selector', not ${expectBy}`);
  const T = Number(process.env.E2E_TIMEOUT_MS || timeoutMs);
  const started = Date.now();
  const log = (message) => console.log(`[${name} ${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s] ${message}`);

  /** Uncaught errors in the pages `watch` watches (and what their CSP refused, with `csp`). */
  const pageErrors = [];
  function watch(page, pageName) {
    page.on('pageerror', (error) => {
      pageErrors.push(`${pageName}: ${error.message}`);
      if (echo) console.error(`[${pageName}] page error: ${error.stack || error.message}`);
    });
    if (csp || echo) {
      page.on('console', (msg) => {
        if (msg.type() !== 'error') return;
        if (echo) console.error(`[${pageName}] console: ${msg.text()}`);
        // Whatever the pages' Content Security Policy refuses is a fault of the pages.
        if (csp && /Content Security Policy/i.test(msg.text())) pageErrors.push(`${pageName}: ${msg.text()}`);
      });
    }
    page.setDefaultTimeout(T);
    page.setDefaultNavigationTimeout(T);
    return page;
  }

  /** Waits until the element with `testId` is there with a text matching `pattern`; fails
   *  naming what it saw. */
  async function expectTestId(page, testId, pattern) {
    try {
      await page.waitForFunction(([id, source, flags]) => {
        const el = document.querySelector(`[data-testid="${id}"]`);
        return el && new RegExp(source, flags).test(el.textContent);
      }, [testId, pattern.source, pattern.flags], { timeout: T, polling: 200 });
    } catch {
      throw new Failure(`${testId} never read ${pattern}: it reads ${JSON.stringify(await text(page, testId).catch(() => null))}`);
    }
  }

  /** Waits until the first element `selector` matches has a text matching `pattern`. */
  async function expectSelector(page, selector, pattern) {
    try {
      await page.waitForFunction(([css, source]) => new RegExp(source).test(document.querySelector(css)?.textContent || ''),
        [selector, pattern.source], { timeout: T, polling: 200 });
    } catch {
      throw new Failure(`${selector} never read ${pattern}: it reads ${JSON.stringify(await page.locator(selector).first().textContent().catch(() => null))}`);
    }
  }

  /** Runs the story's `main` under the watchdog and sets the exit code. */
  function run(main) {
    const watchdog = setTimeout(() => {
      console.error(`${failed}: still running after ${watchdogAfter}`);
      process.exit(2);
    }, watchdogMs);
    watchdog.unref();

    main().then(() => {
      log('all good');
      process.exitCode = 0;
    }, (error) => {
      console.error(`${failed}: ${error instanceof Failure ? error.message : error.stack || error}`);
      process.exitCode = 1;
    });
  }

  const expectText = expectBy === 'selector' ? expectSelector : expectTestId;
  return { T, log, pageErrors, watch, expectText, run };
}
