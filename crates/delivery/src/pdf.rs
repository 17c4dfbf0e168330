//! The PDF of an order: one A4 page per ticket, with the event, its date in the order's
//! language, the seat (or tier), the holder, the ticket and order ids, and the ticket's static
//! signed code as a QR code drawn from vector squares (sharp at any zoom or printer). A voided
//! ticket's page says VOID in large red letters and carries no code.
//!
//! Start at [`order_pdf`]. Text is set in the vendored fonts of `fonts/` (see its README):
//! DejaVu Sans for Latin, Greek and Cyrillic, and a GB2312 subset of Droid Sans Fallback for
//! Chinese; each character takes the first font that has it ([`Fonts::runs`]). krilla embeds
//! only the glyphs a document uses, so a ticket PDF stays small (~30 KB).

use krilla::Document;
use krilla::color::rgb;
use krilla::geom::{PathBuilder, Point, Rect};
use krilla::metadata::Metadata;
use krilla::num::NormalizedF32;
use krilla::page::PageSettings;
use krilla::paint::{Fill, Stroke};
use krilla::surface::Surface;
use krilla::text::{Font, TextDirection};
use qrcode::{Color, EcLevel, QrCode};
use skrifa::MetadataProvider;
use skrifa::instance::{LocationRef, Size};

use crate::{DeliveryError, OrderSheet, TicketSheet, labels};

/// A4 portrait, in PDF points (1/72 inch).
const PAGE_WIDTH_PT: f32 = 595.28;
const PAGE_HEIGHT_PT: f32 = 841.89;
const MARGIN_PT: f32 = 56.7; // 2 cm
/// The QR symbol's side, quiet zone included: 8 cm. A 400-byte code (version 15, 85 modules
/// with the quiet zone) gets ~0.94 mm modules, well above what phones and door scanners need
/// and enough for `pdftoppm -r 150` (5.5 pixels a module).
const QR_SIDE_PT: f32 = 226.77;
/// Modules of white around the symbol, as the QR standard asks.
const QR_QUIET_ZONE_MODULES: usize = 4;
/// Tickets in one PDF at most (an order holds at most `SEATS_PER_HOLD_MAX` = 100).
pub const TICKETS_PER_PDF_MAX: usize = 200;
/// Lines the event name may take before it is cut with an ellipsis.
const EVENT_NAME_LINES_MAX: usize = 3;
/// Characters of a holder's name, seat or tier printed at most (longer is cut).
const FIELD_CHARS_MAX: usize = 120;

static DEJAVU_SANS: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");
static DROID_SANS_FALLBACK_GB2312: &[u8] = include_bytes!("../fonts/DroidSansFallback-GB2312.ttf");

/// Renders `order` as a PDF, one page per ticket, labelled in `order.locale`.
pub fn order_pdf(order: &OrderSheet) -> Result<Vec<u8>, DeliveryError> {
    if order.tickets.is_empty() {
        return Err(DeliveryError::Render("the order has no tickets".into()));
    }
    if order.tickets.len() > TICKETS_PER_PDF_MAX {
        return Err(DeliveryError::Render(format!(
            "{} tickets, more than the {TICKETS_PER_PDF_MAX} one PDF holds",
            order.tickets.len()
        )));
    }
    let fonts = Fonts::load()?;
    let locale = order.locale.as_str();
    let mut document = Document::new();
    document.set_metadata(
        Metadata::new()
            .title(labels::message(
                locale,
                "tickets-document-title",
                &[("event", &order.event_name)],
            ))
            .language(locale.to_owned()),
    );
    let count = order.tickets.len().to_string();
    for (index, ticket) in order.tickets.iter().enumerate() {
        let settings = PageSettings::from_wh(PAGE_WIDTH_PT, PAGE_HEIGHT_PT)
            .ok_or_else(|| DeliveryError::Render("page size".into()))?;
        let mut page = document.start_page_with(settings);
        let mut surface = page.surface();
        let number = (index + 1).to_string();
        draw_ticket(&mut surface, &fonts, order, ticket, &number, &count)?;
        surface.finish();
        page.finish();
    }
    document
        .finish()
        .map_err(|error| DeliveryError::Render(format!("{error:?}")))
}

fn draw_ticket(
    surface: &mut Surface<'_>,
    fonts: &Fonts,
    order: &OrderSheet,
    ticket: &TicketSheet,
    number: &str,
    count: &str,
) -> Result<(), DeliveryError> {
    let locale = order.locale.as_str();
    let voided = ticket.status == "VOIDED";
    let text_width = PAGE_WIDTH_PT - 2.0 * MARGIN_PT;
    let mut y = MARGIN_PT;

    set_fill(surface, GREY);
    let page_label = labels::message(
        locale,
        "tickets-page",
        &[("number", number), ("count", count)],
    );
    y += 10.0;
    fonts.draw(surface, MARGIN_PT, y, 10.0, &page_label);

    set_fill(surface, BLACK);
    y += 14.0;
    for line in fonts.wrap(&order.event_name, 24.0, text_width, EVENT_NAME_LINES_MAX) {
        y += 30.0;
        fonts.draw(surface, MARGIN_PT, y, 24.0, &line);
    }
    y += 24.0;
    fonts.draw(
        surface,
        MARGIN_PT,
        y,
        14.0,
        &labels::date(locale, order.starts_at),
    );

    y += 36.0;
    let place = match (&ticket.seat_id, &ticket.tier_id) {
        (Some(seat), _) => labels::message(locale, "tickets-seat", &[("seat", &cut(seat))]),
        (None, Some(tier)) => labels::message(locale, "tickets-tier", &[("tier", &cut(tier))]),
        (None, None) => String::new(),
    };
    fonts.draw(surface, MARGIN_PT, y, 20.0, &place);
    if let Some(name) = &ticket.holder_name {
        y += 26.0;
        let holder = labels::message(locale, "tickets-holder", &[("name", &cut(name))]);
        fonts.draw(surface, MARGIN_PT, y, 14.0, &holder);
    }

    y += 24.0;
    let qr_top = y;
    if voided {
        draw_void(surface, fonts, locale, qr_top);
    } else {
        let left = (PAGE_WIDTH_PT - QR_SIDE_PT) / 2.0;
        draw_qr(surface, &ticket.code, left, qr_top)?;
        set_fill(surface, GREY);
        fonts.draw(
            surface,
            MARGIN_PT,
            qr_top + QR_SIDE_PT + 18.0,
            10.0,
            &labels::message(locale, "tickets-scan", &[]),
        );
    }

    set_fill(surface, BLACK);
    let mut y = qr_top + QR_SIDE_PT + 48.0;
    for line in [
        labels::message(locale, "tickets-ticket-id", &[("id", &ticket.ticket_id)]),
        labels::message(locale, "tickets-order-id", &[("id", &order.order_id)]),
    ] {
        fonts.draw(surface, MARGIN_PT, y, 10.0, &line);
        y += 14.0;
    }
    Ok(())
}

/// A voided ticket: a red frame where the code would be, the word VOID across it and why.
fn draw_void(surface: &mut Surface<'_>, fonts: &Fonts, locale: &str, top: f32) {
    let left = MARGIN_PT;
    let width = PAGE_WIDTH_PT - 2.0 * MARGIN_PT;
    surface.set_fill(None);
    surface.set_stroke(Some(Stroke {
        paint: rgb(RED).into(),
        width: 4.0,
        ..Default::default()
    }));
    if let Some(frame) = rect_path(left, top, width, QR_SIDE_PT) {
        surface.draw_path(&frame);
    }
    surface.set_stroke(None);
    set_fill(surface, RED);
    let void = labels::message(locale, "tickets-void", &[]);
    let size = 72.0;
    let x = left + (width - fonts.width(&void, size)).max(0.0) / 2.0;
    fonts.draw(surface, x, top + QR_SIDE_PT / 2.0 + 10.0, size, &void);
    let note = labels::message(locale, "tickets-void-note", &[]);
    let x = left + (width - fonts.width(&note, 12.0)).max(0.0) / 2.0;
    fonts.draw(surface, x, top + QR_SIDE_PT - 24.0, 12.0, &note);
}

/// Draws `code` as a QR symbol whose top-left corner (quiet zone included) is at
/// (`left`, `top`): one path of dark squares on a white square.
fn draw_qr(
    surface: &mut Surface<'_>,
    code: &str,
    left: f32,
    top: f32,
) -> Result<(), DeliveryError> {
    let qr = QrCode::with_error_correction_level(code.as_bytes(), EcLevel::M)
        .map_err(|error| DeliveryError::Render(format!("QR code: {error}")))?;
    let modules = qr.width();
    let side_modules = modules + 2 * QR_QUIET_ZONE_MODULES;
    let module_pt = QR_SIDE_PT / side_modules as f32;
    set_fill(surface, WHITE);
    if let Some(background) = rect_path(left, top, QR_SIDE_PT, QR_SIDE_PT) {
        surface.draw_path(&background);
    }
    let mut dark = PathBuilder::new();
    for (index, color) in qr.to_colors().iter().enumerate() {
        if *color != Color::Dark {
            continue;
        }
        let column = index % modules + QR_QUIET_ZONE_MODULES;
        let row = index / modules + QR_QUIET_ZONE_MODULES;
        // A hair wider than a module so that neighbours overlap: no white seams between
        // squares when a viewer anti-aliases their edges.
        if let Some(square) = Rect::from_xywh(
            left + column as f32 * module_pt,
            top + row as f32 * module_pt,
            module_pt + 0.05,
            module_pt + 0.05,
        ) {
            dark.push_rect(square);
        }
    }
    set_fill(surface, BLACK);
    if let Some(path) = dark.finish() {
        surface.draw_path(&path);
    }
    Ok(())
}

fn rect_path(left: f32, top: f32, width: f32, height: f32) -> Option<krilla::geom::Path> {
    let mut builder = PathBuilder::new();
    builder.push_rect(Rect::from_xywh(left, top, width, height)?);
    builder.finish()
}

/// Colours as (red, green, blue).
type Rgb = (u8, u8, u8);
const BLACK: Rgb = (0, 0, 0);
const WHITE: Rgb = (255, 255, 255);
const GREY: Rgb = (90, 90, 90);
const RED: Rgb = (200, 0, 0);

fn rgb((red, green, blue): Rgb) -> rgb::Color {
    rgb::Color::new(red, green, blue)
}

fn set_fill(surface: &mut Surface<'_>, color: Rgb) {
    surface.set_fill(Some(Fill {
        paint: rgb(color).into(),
        opacity: NormalizedF32::ONE,
        rule: Default::default(),
    }));
}

/// At most [`FIELD_CHARS_MAX`] characters of `text`, an ellipsis marking a cut.
fn cut(text: &str) -> String {
    if text.chars().count() <= FIELD_CHARS_MAX {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(FIELD_CHARS_MAX - 1).collect();
    kept.push('…');
    kept
}

/// The index of the Chinese face in [`Fonts::faces`].
const CHINESE_FACE: usize = 1;

/// The vendored fonts, in the order a character looks for a glyph.
struct Fonts {
    faces: Vec<Face>,
}

struct Face {
    /// What krilla draws with (and subsets into the PDF).
    font: Font,
    /// The same bytes read by skrifa: its character map and advances.
    metrics: skrifa::FontRef<'static>,
}

impl Fonts {
    fn load() -> Result<Self, DeliveryError> {
        let faces = [DEJAVU_SANS, DROID_SANS_FALLBACK_GB2312]
            .into_iter()
            .map(|data| {
                let font = Font::new(data.into(), 0)
                    .ok_or_else(|| DeliveryError::Render("a vendored font does not load".into()))?;
                let metrics = skrifa::FontRef::new(data).map_err(|error| {
                    DeliveryError::Render(format!("a vendored font does not read: {error}"))
                })?;
                Ok(Face { font, metrics })
            })
            .collect::<Result<_, DeliveryError>>()?;
        Ok(Self { faces })
    }

    /// The face that draws `character`: the Chinese face for the full-width punctuation and
    /// forms of Chinese text (DejaVu has some of them, drawn half as wide), otherwise the
    /// first face that has it, else the first face (which draws its "missing glyph" box).
    fn face_of(&self, character: char) -> usize {
        let chinese_form = matches!(character, '\u{3000}'..='\u{303f}' | '\u{ff00}'..='\u{ffef}');
        if chinese_form && self.faces[CHINESE_FACE].has(character) {
            return CHINESE_FACE;
        }
        self.faces
            .iter()
            .position(|face| face.has(character))
            .unwrap_or(0)
    }

    /// `text` cut into runs of one face each: (face index, run).
    fn runs<'t>(&self, text: &'t str) -> Vec<(usize, &'t str)> {
        let mut runs: Vec<(usize, &'t str)> = Vec::new();
        let mut start = 0;
        let mut current: Option<usize> = None;
        for (offset, character) in text.char_indices() {
            // A space stays in the run it is in when that face has one.
            let face = match current {
                Some(face) if character == ' ' && self.faces[face].has(' ') => face,
                _ => self.face_of(character),
            };
            if current != Some(face) {
                if let Some(previous) = current
                    && offset > start
                {
                    runs.push((previous, &text[start..offset]));
                }
                start = offset;
                current = Some(face);
            }
        }
        if let Some(face) = current {
            runs.push((face, &text[start..]));
        }
        runs
    }

    /// Draws `text` on one line whose baseline starts at (`x`, `baseline`).
    fn draw(&self, surface: &mut Surface<'_>, x: f32, baseline: f32, size: f32, text: &str) {
        let mut x = x;
        for (face, run) in self.runs(text) {
            let face = &self.faces[face];
            surface.draw_text(
                Point::from_xy(x, baseline),
                face.font.clone(),
                size,
                run,
                false,
                TextDirection::Auto,
            );
            x += face.width(run, size);
        }
    }

    /// The width of `text` at `size`, in points (advances without kerning).
    fn width(&self, text: &str, size: f32) -> f32 {
        self.runs(text)
            .into_iter()
            .map(|(face, run)| self.faces[face].width(run, size))
            .sum()
    }

    /// `text` broken into at most `lines_max` lines no wider than `width` (at spaces, or
    /// anywhere in a word too long for a line and in scripts without spaces); the last line
    /// ends in an ellipsis when text is left over.
    fn wrap(&self, text: &str, size: f32, width: f32, lines_max: usize) -> Vec<String> {
        let mut lines: Vec<String> = Vec::new();
        let mut line = String::new();
        let mut last_space: Option<usize> = None;
        for character in text.chars() {
            let mut candidate = line.clone();
            candidate.push(character);
            if self.width(&candidate, size) <= width || line.is_empty() {
                if character == ' ' {
                    last_space = Some(line.len());
                }
                line = candidate;
                continue;
            }
            // The line is full: break at its last space when it has one.
            let rest = match last_space {
                Some(at) if at > 0 => {
                    let rest = line[at + 1..].to_owned();
                    line.truncate(at);
                    rest
                }
                _ => String::new(),
            };
            lines.push(std::mem::take(&mut line));
            line = rest;
            last_space = None;
            if character != ' ' || !line.is_empty() {
                line.push(character);
            }
            if lines.len() == lines_max {
                break;
            }
        }
        if lines.len() < lines_max {
            if !line.is_empty() {
                lines.push(line);
            }
        } else if let Some(last) = lines.last_mut() {
            // Text was left over: end the last line with an ellipsis that fits.
            while !last.is_empty() && self.width(&format!("{last}…"), size) > width {
                last.pop();
            }
            last.push('…');
        }
        lines
    }
}

impl Face {
    fn has(&self, character: char) -> bool {
        self.metrics.charmap().map(character).is_some()
    }

    fn width(&self, text: &str, size: f32) -> f32 {
        let charmap = self.metrics.charmap();
        let metrics = self
            .metrics
            .glyph_metrics(Size::new(size), LocationRef::default());
        text.chars()
            .filter_map(|character| charmap.map(character))
            .filter_map(|glyph| metrics.advance_width(glyph))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_per_font() {
        let fonts = Fonts::load().unwrap();
        assert_eq!(fonts.runs("Seat A-1"), vec![(0, "Seat A-1")]);
        assert_eq!(
            fonts.runs("座位 A-1 Zoë 张"),
            vec![(1, "座位"), (0, " A-1 Zoë "), (1, "张")]
        );
        assert!(fonts.runs("").is_empty());
    }

    #[test]
    fn every_chinese_label_has_glyphs() {
        let fonts = Fonts::load().unwrap();
        let mut ids: Vec<String> = [
            "tickets-document-title",
            "tickets-page",
            "tickets-date",
            "tickets-seat",
            "tickets-tier",
            "tickets-holder",
            "tickets-ticket-id",
            "tickets-order-id",
            "tickets-scan",
            "tickets-void",
            "tickets-void-note",
        ]
        .map(str::to_owned)
        .to_vec();
        ids.extend((1..=12).map(|month| format!("tickets-month-{month}")));
        for id in ids {
            let text = labels::message("zh", &id, &[]);
            for character in text.chars() {
                assert!(
                    fonts.faces.iter().any(|face| face.has(character)),
                    "{id}: no font has {character:?}"
                );
            }
        }
    }

    #[test]
    fn long_names_wrap_and_are_cut() {
        let fonts = Fonts::load().unwrap();
        let name = "The Very Long Name of a Festival ".repeat(10);
        let lines = fonts.wrap(&name, 24.0, 400.0, 3);
        assert_eq!(lines.len(), 3);
        for line in &lines {
            assert!(fonts.width(line, 24.0) <= 400.0, "{line}");
        }
        assert!(lines[2].ends_with('…'));
        assert_eq!(
            fonts.wrap("Short", 24.0, 400.0, 3),
            vec!["Short".to_owned()]
        );
        let chinese = "音乐节".repeat(30);
        let lines = fonts.wrap(&chinese, 24.0, 400.0, 3);
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("音乐节"));
    }

    #[test]
    fn refuses_an_empty_order_and_too_many_tickets() {
        let mut order = crate::tests::sample_order();
        order.tickets.clear();
        assert!(matches!(order_pdf(&order), Err(DeliveryError::Render(_))));
        let ticket = crate::tests::sample_order().tickets[0].clone();
        order.tickets = vec![ticket; TICKETS_PER_PDF_MAX + 1];
        assert!(matches!(order_pdf(&order), Err(DeliveryError::Render(_))));
    }
}
