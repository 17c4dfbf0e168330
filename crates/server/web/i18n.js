// The pages' languages (issue 39): the storefront and the door app show no text of their own;
// every text is a message of a Project Fluent catalogue, fetched as JSON from
// /i18n/{locale}/{file}.json (crates/i18n/locales/<locale>/<file>.ftl on the server). Served
// at /assets/i18n.js; the pages use window.i18n.
//
// The language: the one chosen in the page's switch (kept in localStorage), else the first of
// the browser's languages that boxoffice speaks, else the one the server put in <html lang>
// (from Accept-Language), else English. Switching loads the other catalogue and tells the
// page, which renders again; no reload.
//
// Messages are Fluent patterns as written: `{ $name }` placeables are filled here (numbers
// formatted for the language), and a message that is one select expression on a number
// (`{ $count -> [one] … *[other] … }`) picks its variant with Intl.PluralRules. Nothing else
// of Fluent's syntax is used by the catalogues of the pages.
'use strict';

(() => {
  /** The languages, each in its own name, in the switch's order. */
  const LANGUAGES = [
    ['en', 'English'],
    ['de', 'Deutsch'],
    ['fr', 'Français'],
    ['es', 'Español'],
    ['zh', '中文'],
  ];
  const DEFAULT = 'en';
  const CHOICE_KEY = 'bo.locale';

  const spoken = (tag) => {
    const primary = String(tag || '').split(/[-_]/)[0].toLowerCase();
    return LANGUAGES.some(([code]) => code === primary) ? primary : null;
  };

  const saved = {
    get(key) {
      try { return localStorage.getItem(key); } catch { return null; }
    },
    set(key, value) {
      try { localStorage.setItem(key, value); } catch { /* private mode: not remembered */ }
    },
  };

  function preferred() {
    const chosen = spoken(saved.get(CHOICE_KEY));
    if (chosen) return chosen;
    for (const tag of navigator.languages || [navigator.language]) {
      const found = spoken(tag);
      if (found) return found;
    }
    return spoken(document.documentElement.lang) || DEFAULT;
  }

  let file = null;
  let locale = DEFAULT;
  let messages = {};
  const listeners = [];

  /** The catalogue of `wanted`: from the server, else (offline) the copy kept last time. */
  async function fetchCatalogue(wanted) {
    const copyKey = `bo.i18n.${file}.${wanted}`;
    try {
      const response = await fetch(`/i18n/${encodeURIComponent(wanted)}/${encodeURIComponent(file)}.json`);
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const text = await response.text();
      const parsed = JSON.parse(text);
      saved.set(copyKey, text);
      return parsed;
    } catch (error) {
      const copy = saved.get(copyKey);
      if (copy) return JSON.parse(copy);
      throw error;
    }
  }

  async function use(wanted) {
    const next = spoken(wanted) || DEFAULT;
    messages = await fetchCatalogue(next);
    locale = next;
    formats.clear();
    document.documentElement.lang = locale;
    apply(document);
  }

  // -- Formatting ----------------------------------------------------------------------

  const formats = new Map();
  function format(kind, options, make) {
    const key = `${kind}|${JSON.stringify(options)}`;
    let fmt = formats.get(key);
    if (!fmt) {
      fmt = make(locale, options);
      formats.set(key, fmt);
    }
    return fmt;
  }
  const numberFormat = (options = {}) => format('n', options, (l, o) => new Intl.NumberFormat(l, o));
  const dateFormat = (options) => format('d', options, (l, o) => new Intl.DateTimeFormat(l, o));

  /** A whole number or decimal in the language's digits and separators. */
  const number = (n) => numberFormat().format(n);

  /** Minor units → "129,00 €" in the event's currency, as the language writes money. */
  function money(minor, currency) {
    let fmt;
    try {
      fmt = numberFormat({ style: 'currency', currency });
    } catch {
      fmt = numberFormat({ minimumFractionDigits: 2, maximumFractionDigits: 2 });
    }
    const digits = fmt.resolvedOptions().maximumFractionDigits;
    return fmt.format(minor / 10 ** digits);
  }

  const asDate = (value) => (value instanceof Date ? value : new Date(value));

  /** A date and time ("Sat, 1 Jan 2030, 20:00"); the text itself when it is no date. */
  function dateTime(value) {
    const d = asDate(value);
    if (Number.isNaN(d.getTime())) return String(value);
    return dateFormat({ weekday: 'short', year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' }).format(d);
  }

  /** A date and time, short ("01/01/2030, 20:00"). */
  function shortDateTime(value) {
    const d = asDate(value);
    if (Number.isNaN(d.getTime())) return String(value);
    return dateFormat({ dateStyle: 'short', timeStyle: 'short' }).format(d);
  }

  /** A time of day ("20:00:15"). */
  function time(value) {
    const d = asDate(value);
    if (Number.isNaN(d.getTime())) return String(value);
    return dateFormat({ timeStyle: 'medium' }).format(d);
  }

  // -- Messages ------------------------------------------------------------------------

  const PLACEABLE = /\{\s*\$([A-Za-z][A-Za-z0-9_-]*)\s*\}/g;
  const SELECT = /^\{\s*\$([A-Za-z][A-Za-z0-9_-]*)\s*->\s*\n([\s\S]*)\n\s*\}$/;

  function fill(pattern, args) {
    return pattern.replace(PLACEABLE, (_, name) => {
      const value = args ? args[name] : undefined;
      if (value === undefined || value === null) return '';
      return typeof value === 'number' ? number(value) : String(value);
    });
  }

  /** The variant of a select message for `value`: an exact `[3]`, the plural category
   *  (`[one]`, `[few]`, …), else the default `*[other]`. */
  function variant(body, value) {
    let fallback = '';
    const variants = new Map();
    for (const line of body.split('\n')) {
      const m = /^\s*(\*?)\[([^\]]+)\]\s?(.*)$/.exec(line);
      if (!m) continue;
      variants.set(m[2].trim(), m[3]);
      if (m[1]) fallback = m[3];
    }
    const n = Number(value);
    if (variants.has(String(value))) return variants.get(String(value));
    if (Number.isFinite(n)) {
      const category = format('p', {}, (l) => new Intl.PluralRules(l)).select(n);
      if (variants.has(category)) return variants.get(category);
    }
    return fallback;
  }

  /** Message `id` with `args` filled in; the id itself when the catalogue lacks it. */
  function t(id, args) {
    const pattern = messages[id];
    if (typeof pattern !== 'string') return id;
    const select = SELECT.exec(pattern);
    if (select) return fill(variant(select[2], args ? args[select[1]] : undefined), args);
    return fill(pattern, args);
  }

  /** Fills the page's own elements: `data-i18n="id"` sets the text, `data-i18n-attr=
   *  "aria-label:id title:id"` attributes. */
  function apply(root) {
    for (const el of root.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
    for (const el of root.querySelectorAll('[data-i18n-attr]')) {
      for (const pair of el.dataset.i18nAttr.split(/\s+/).filter(Boolean)) {
        const [name, id] = pair.split(':');
        el.setAttribute(name, t(id));
      }
    }
  }

  /** The language switch: a select of the languages in their own names; a choice is
   *  remembered and the page renders again in it. */
  function switcher(attrs = {}) {
    const select = document.createElement('select');
    for (const [name, value] of Object.entries(attrs)) select.setAttribute(name, value);
    for (const [code, name] of LANGUAGES) {
      const option = document.createElement('option');
      option.value = code;
      option.lang = code;
      option.textContent = name;
      select.append(option);
    }
    select.value = locale;
    // A catalogue that cannot be had (offline, never fetched) leaves the language as it was.
    select.addEventListener('change', () => setLocale(select.value).catch(() => { select.value = locale; }));
    listeners.push(() => { select.value = locale; });
    return select;
  }

  async function setLocale(wanted) {
    const next = spoken(wanted) || DEFAULT;
    saved.set(CHOICE_KEY, next);
    if (next === locale) return;
    await use(next);
    for (const fn of listeners) fn(locale);
  }

  /** Loads catalogue `name` (`storefront`, `door`) in the preferred language; English when
   *  that cannot be had. */
  async function init(name) {
    file = name;
    try {
      await use(preferred());
    } catch {
      await use(DEFAULT).catch(() => { messages = {}; });
    }
  }

  window.i18n = {
    LANGUAGES,
    init,
    t,
    apply,
    switcher,
    setLocale,
    onChange: (fn) => listeners.push(fn),
    locale: () => locale,
    number,
    money,
    dateTime,
    shortDateTime,
    time,
  };
})();
