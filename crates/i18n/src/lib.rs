//! The message catalogues and the choice of a language.
//!
//! Every text a fan reads — the storefront, the door app, the mails, the PDF tickets and the
//! wallet passes — is a message of a Project Fluent catalogue under
//! `locales/<locale>/<file>.ftl` (compiled into the binary by `build.rs`), never a string in
//! code. English (`en`) is the reference: every other language has every message it has
//! (a test fails otherwise). [`negotiate`] picks a language from `Accept-Language`;
//! [`message`] formats one message in a language, falling back to English.
//!
//! The pages get a whole file as JSON ([`catalogue_json`]): message id → pattern text, with
//! `{ $name }` placeables they fill in themselves.

use std::collections::HashMap;
use std::sync::LazyLock;

use fluent_bundle::concurrent::FluentBundle;
use fluent_bundle::{FluentArgs, FluentResource};
use unic_langid::LanguageIdentifier;

include!(concat!(env!("OUT_DIR"), "/catalogues.rs"));

/// The languages boxoffice speaks, the default first.
pub const LOCALES: [&str; 5] = ["en", "de", "fr", "es", "zh"];
/// The language used when nothing the client asks for is spoken.
pub const DEFAULT_LOCALE: &str = "en";
/// Longest `Accept-Language` value read, in bytes; the rest is ignored.
pub const ACCEPT_LANGUAGE_LEN_MAX: usize = 512;
/// Language ranges of one `Accept-Language` read at most.
const RANGES_MAX: usize = 16;

struct Locale {
    bundle: FluentBundle<FluentResource>,
}

static BUNDLES: LazyLock<HashMap<&'static str, Locale>> = LazyLock::new(|| {
    LOCALES
        .iter()
        .map(|&locale| {
            let id: LanguageIdentifier = locale.parse().expect("a valid language tag");
            let mut bundle = FluentBundle::new_concurrent(vec![id]);
            // No Unicode isolation marks around placeables: mail headers, PDFs and tests
            // read the text as it is.
            bundle.set_use_isolating(false);
            for (_, _, text) in CATALOGUES.iter().filter(|(l, _, _)| *l == locale) {
                let resource = FluentResource::try_new((*text).to_owned())
                    .unwrap_or_else(|(resource, _)| resource);
                // A message defined twice keeps its first definition (the test reports it).
                let _ = bundle.add_resource(resource);
            }
            (locale, Locale { bundle })
        })
        .collect()
});

/// The spoken language that best matches `accept_language` (`de-CH,de;q=0.9,en;q=0.5`): the
/// highest-weighted range whose primary language is spoken; [`DEFAULT_LOCALE`] when none is,
/// or when the header is absent or unreadable. `zh-Hans`, `zh-CN` and `zh-TW` all read `zh`.
pub fn negotiate(accept_language: Option<&str>) -> &'static str {
    let Some(header) = accept_language else {
        return DEFAULT_LOCALE;
    };
    let header = &header[..floor_char_boundary(header, ACCEPT_LANGUAGE_LEN_MAX)];
    let mut best: Option<(f32, usize, &'static str)> = None;
    for (position, range) in header.split(',').take(RANGES_MAX).enumerate() {
        let mut parts = range.split(';');
        let tag = parts.next().unwrap_or_default().trim();
        let weight = parts
            .find_map(|p| p.trim().strip_prefix("q="))
            .and_then(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        if !(weight > 0.0 && weight <= 1.0) {
            continue;
        }
        let primary = tag.split(['-', '_']).next().unwrap_or_default();
        let Some(locale) = spoken(primary) else {
            continue;
        };
        // Higher weight wins; among equal weights, the earlier range.
        if best.is_none_or(|(w, p, _)| weight > w || (weight == w && position < p)) {
            best = Some((weight, position, locale));
        }
    }
    best.map_or(DEFAULT_LOCALE, |(_, _, locale)| locale)
}

/// The spoken locale named `tag` (`de`, `DE`, `de-AT`), if any.
pub fn spoken(tag: &str) -> Option<&'static str> {
    let primary = tag.split(['-', '_']).next().unwrap_or_default();
    LOCALES
        .iter()
        .copied()
        .find(|locale| locale.eq_ignore_ascii_case(primary))
}

/// Message `id` in `locale` with `args` filled in; in English when the locale lacks it (or is
/// not spoken), and the id itself when no catalogue has it.
pub fn message(locale: &str, id: &str, args: &[(&str, &str)]) -> String {
    let locale = spoken(locale).unwrap_or(DEFAULT_LOCALE);
    format_in(locale, id, args)
        .or_else(|| format_in(DEFAULT_LOCALE, id, args))
        .unwrap_or_else(|| id.to_owned())
}

fn format_in(locale: &str, id: &str, args: &[(&str, &str)]) -> Option<String> {
    let bundle = &BUNDLES.get(locale)?.bundle;
    let pattern = bundle.get_message(id)?.value()?;
    let mut fluent_args = FluentArgs::new();
    for (name, value) in args {
        fluent_args.set(*name, *value);
    }
    let mut errors = Vec::new();
    Some(
        bundle
            .format_pattern(pattern, Some(&fluent_args), &mut errors)
            .into_owned(),
    )
}

/// The messages of catalogue `file` (`storefront`, `door`) in `locale` as a JSON object, id
/// → the message's text as written (placeables such as `{ $count }` left for the page to
/// fill), English for any message the locale lacks; `None` for a file no locale has.
pub fn catalogue_json(locale: &str, file: &str) -> Option<String> {
    let locale = spoken(locale).unwrap_or(DEFAULT_LOCALE);
    let mut messages: std::collections::BTreeMap<String, String> = Default::default();
    let mut found = false;
    for wanted in [DEFAULT_LOCALE, locale] {
        for (_, _, text) in CATALOGUES
            .iter()
            .filter(|(l, f, _)| *l == wanted && *f == file)
        {
            found = true;
            for (id, value) in entries(text) {
                messages.insert(id, value);
            }
        }
    }
    found.then(|| json_object(&messages))
}

/// Every (locale, file) catalogue compiled in.
pub fn catalogues() -> impl Iterator<Item = (&'static str, &'static str)> {
    CATALOGUES.iter().map(|(locale, file, _)| (*locale, *file))
}

/// The message ids of one catalogue, in order.
pub fn message_ids(locale: &str, file: &str) -> Vec<String> {
    CATALOGUES
        .iter()
        .filter(|(l, f, _)| *l == locale && *f == file)
        .flat_map(|(_, _, text)| entries(text).into_iter().map(|(id, _)| id))
        .collect()
}

/// (id, text) of each message of a catalogue's text: a message starts at a line
/// `id = value`, continues on indented lines (joined with a newline); comments skipped.
fn entries(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            if let Some((_, value)) = out.last_mut() {
                if !value.is_empty() {
                    value.push('\n');
                }
                value.push_str(line.trim());
            }
            continue;
        }
        if let Some((id, value)) = line.split_once('=') {
            out.push((id.trim().to_owned(), value.trim().to_owned()));
        }
    }
    out
}

fn json_object(messages: &std::collections::BTreeMap<String, String>) -> String {
    let mut out = String::from("{");
    for (i, (id, value)) in messages.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&json_string(id));
        out.push(':');
        out.push_str(&json_string(value));
    }
    out.push('}');
    out
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn floor_char_boundary(s: &str, max: usize) -> usize {
    if s.len() <= max {
        return s.len();
    }
    (0..=max)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_best_spoken_range_wins() {
        assert_eq!(negotiate(None), "en");
        assert_eq!(negotiate(Some("de-CH,de;q=0.9,en;q=0.5")), "de");
        assert_eq!(negotiate(Some("ja, zh-Hans;q=0.8, fr;q=0.7")), "zh");
        assert_eq!(negotiate(Some("it, pt;q=0.5")), "en");
        assert_eq!(negotiate(Some("en;q=0.2, es;q=0.9")), "es");
        assert_eq!(negotiate(Some("fr;q=0, de")), "de");
        assert_eq!(negotiate(Some("\u{00e9}\u{00e9}\u{00e9}; q=x")), "en");
        assert_eq!(negotiate(Some(&"x".repeat(10_000))), "en");
    }

    /// English is the reference: a message missing in another language, or a catalogue file
    /// that one language lacks, fails here.
    #[test]
    fn every_language_has_every_english_message() {
        let mut missing = Vec::new();
        for (locale, file) in catalogues().filter(|(l, _)| *l == DEFAULT_LOCALE) {
            let _ = locale;
            let english = message_ids(DEFAULT_LOCALE, file);
            for other in LOCALES.iter().filter(|l| **l != DEFAULT_LOCALE) {
                let theirs = message_ids(other, file);
                for id in &english {
                    if !theirs.contains(id) {
                        missing.push(format!("{other}/{file}.ftl: {id}"));
                    }
                }
            }
        }
        assert!(missing.is_empty(), "messages missing: {missing:#?}");
    }

    /// Every catalogue parses as Fluent, defines each message once, and names no message
    /// English lacks (a typo in an id would otherwise go unnoticed).
    #[test]
    fn every_catalogue_parses_and_defines_each_message_once() {
        let mut problems = Vec::new();
        for (locale, file, text) in CATALOGUES {
            if let Err((_, errors)) = FluentResource::try_new((*text).to_owned()) {
                problems.push(format!("{locale}/{file}.ftl: {errors:?}"));
            }
            let ids = message_ids(locale, file);
            let mut seen = std::collections::HashSet::new();
            for id in &ids {
                if !seen.insert(id) {
                    problems.push(format!("{locale}/{file}.ftl: {id} defined twice"));
                }
            }
            let english = message_ids(DEFAULT_LOCALE, file);
            for id in &ids {
                if !english.contains(id) {
                    problems.push(format!("{locale}/{file}.ftl: {id} is not in English"));
                }
            }
        }
        assert!(problems.is_empty(), "{problems:#?}");
    }

    #[test]
    fn a_message_is_formatted_with_its_arguments_and_falls_back_to_english() {
        assert_eq!(
            message("de", "tickets-seat", &[("seat", "A-1-2")]),
            "Platz A-1-2"
        );
        assert_eq!(
            message("en", "tickets-seat", &[("seat", "A-1-2")]),
            "Seat A-1-2"
        );
        assert_eq!(
            message("xx", "tickets-seat", &[("seat", "A-1-2")]),
            "Seat A-1-2"
        );
        assert_eq!(message("de", "no-such-message", &[]), "no-such-message");
        let json = catalogue_json("zh", "tickets").unwrap();
        assert!(
            json.contains("\"tickets-seat\":\"座位 { $seat }\""),
            "{json}"
        );
        assert!(catalogue_json("de", "no-such-file").is_none());
    }
}
