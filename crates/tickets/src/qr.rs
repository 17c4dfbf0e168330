//! The QR code image of a ticket code, as SVG for the ticket page and emails.

use qrcode::render::svg;
use qrcode::{EcLevel, QrCode};

use crate::TicketError;

/// Smallest width and height of the rendered SVG, quiet zone included.
pub const QR_SIZE_MIN_PX: u32 = 256;

/// Renders `code` as a standalone SVG document (`<?xml …?><svg …>`), black on white, with the
/// standard quiet zone. Medium error correction (15% of the symbol can be damaged): a code of
/// up to 412 bytes fits a version 15 symbol (77 modules), which phones and gate scanners read
/// at ticket size.
pub fn qr_svg(code: &str) -> Result<String, TicketError> {
    let qr = QrCode::with_error_correction_level(code.as_bytes(), EcLevel::M)?;
    Ok(qr
        .render::<svg::Color<'_>>()
        .quiet_zone(true)
        .min_dimensions(QR_SIZE_MIN_PX, QR_SIZE_MIN_PX)
        .dark_color(svg::Color("#000"))
        .light_color(svg::Color("#fff"))
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_an_svg_document_of_at_least_the_minimum_size() {
        let svg = qr_svg("BO1.eyJ0aWNrZXRJZCI6InQxIn0.c2ln").unwrap();
        assert!(svg.starts_with("<?xml") || svg.starts_with("<svg"));
        assert!(svg.contains("<svg"));
        assert!(svg.ends_with("</svg>"));
        let width: u32 = svg
            .split(" width=\"")
            .nth(1) // the <svg> element's
            .and_then(|rest| rest.split('"').next())
            .and_then(|w| w.parse().ok())
            .unwrap();
        assert!(width >= QR_SIZE_MIN_PX, "width {width}");
    }

    #[test]
    fn a_400_byte_code_fits_version_15() {
        let code = format!("BO1.{}", "x".repeat(396));
        let qr = QrCode::with_error_correction_level(code.as_bytes(), EcLevel::M).unwrap();
        assert!(
            matches!(qr.version(), qrcode::Version::Normal(v) if v <= 15),
            "{:?}",
            qr.version()
        );
    }

    #[test]
    fn refuses_data_beyond_qr_capacity() {
        let huge = "A".repeat(10_000);
        assert!(matches!(qr_svg(&huge), Err(TicketError::Qr(_))));
    }
}
