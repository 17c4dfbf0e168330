//! The PDF read back as a fan's printer and the door's scanner would: its text with
//! `pdftotext`, its QR codes with `pdftoppm` + `zbarimg`.

use boxoffice_delivery::readback::{pdf_qr_codes, pdf_text};
use boxoffice_delivery::{OrderSheet, TicketSheet, order_pdf};

fn two_tickets(locale: &str) -> OrderSheet {
    OrderSheet {
        order_id: "019a0000-0000-7000-8000-00000000a001".into(),
        event_id: "019a0000-0000-7000-8000-00000000e001".into(),
        event_name: "Rust Symphony: Live at the Tonhalle".into(),
        starts_at: time::macros::datetime!(2027-03-14 20:00 +01:00),
        currency: "EUR".into(),
        total_minor: 12_000,
        locale: locale.into(),
        tickets: vec![
            TicketSheet {
                ticket_id: "019a0000-0000-7000-8000-0000000000b1".into(),
                seat_id: Some("A-12-7".into()),
                tier_id: None,
                holder_name: Some("Zoë Müller".into()),
                // As long as a real signed code (claims and an Ed25519 signature, ~180 bytes).
                code: format!("BO1.{}.{}", "eyJ0IjoiYjEifQ".repeat(8), "c2ln".repeat(20)),
                status: "VALID".into(),
            },
            TicketSheet {
                ticket_id: "019a0000-0000-7000-8000-0000000000b2".into(),
                seat_id: None,
                tier_id: Some("standing".into()),
                holder_name: Some("张伟".into()),
                code: format!("BO1.{}.{}", "eyJ0IjoiYjIifQ".repeat(8), "c2ln".repeat(20)),
                status: "VALID".into(),
            },
        ],
    }
}

#[test]
fn each_page_has_its_seat_holder_and_a_code_that_scans_back() {
    let order = two_tickets("en");
    let pdf = order_pdf(&order).unwrap();
    assert!(pdf.starts_with(b"%PDF-"));

    let text = pdf_text(&pdf);
    let pages: Vec<&str> = text
        .split('\u{c}')
        .filter(|p| !p.trim().is_empty())
        .collect();
    assert_eq!(pages.len(), 2, "{text}");
    assert!(pages[0].contains("Rust Symphony"), "{}", pages[0]);
    assert!(
        pages[0].contains("March 14, 2027, 20:00 (UTC+01:00)"),
        "{}",
        pages[0]
    );
    assert!(pages[0].contains("Seat A-12-7"), "{}", pages[0]);
    assert!(pages[0].contains("Holder: Zoë Müller"), "{}", pages[0]);
    assert!(
        pages[0].contains("019a0000-0000-7000-8000-0000000000b1"),
        "{}",
        pages[0]
    );
    assert!(
        pages[0].contains("019a0000-0000-7000-8000-00000000a001"),
        "{}",
        pages[0]
    );
    assert!(
        pages[1].contains("General admission: standing"),
        "{}",
        pages[1]
    );
    assert!(pages[1].contains("张伟"), "{}", pages[1]);
    assert!(!text.contains("VOID"), "{text}");

    let codes = pdf_qr_codes(&pdf);
    assert_eq!(
        codes,
        vec![
            vec![order.tickets[0].code.clone()],
            vec![order.tickets[1].code.clone()]
        ]
    );
}

#[test]
fn labels_follow_the_order_language() {
    let pdf = order_pdf(&two_tickets("zh")).unwrap();
    let text = pdf_text(&pdf);
    assert!(text.contains("座位 A-12-7"), "{text}");
    assert!(text.contains("2027年3月14日"), "{text}");
    assert!(text.contains("自由入座"), "{text}");

    let text = pdf_text(&order_pdf(&two_tickets("de")).unwrap());
    assert!(text.contains("Platz A-12-7"), "{text}");
    assert!(text.contains("14. März 2027"), "{text}");
}

#[test]
fn a_voided_ticket_says_void_and_carries_no_code() {
    let mut order = two_tickets("en");
    order.tickets[1].status = "VOIDED".into();
    let pdf = order_pdf(&order).unwrap();
    let text = pdf_text(&pdf);
    let pages: Vec<&str> = text
        .split('\u{c}')
        .filter(|p| !p.trim().is_empty())
        .collect();
    assert!(!pages[0].contains("VOID"), "{}", pages[0]);
    assert!(pages[1].contains("VOID"), "{}", pages[1]);
    assert!(pages[1].contains("voided"), "{}", pages[1]);
    assert_eq!(
        pdf_qr_codes(&pdf),
        vec![vec![order.tickets[0].code.clone()], vec![]]
    );
}

#[test]
fn a_400_byte_code_still_scans() {
    let mut order = two_tickets("fr");
    order.tickets.truncate(1);
    order.tickets[0].code = format!("BO1.{}", "x".repeat(396));
    let pdf = order_pdf(&order).unwrap();
    assert_eq!(
        pdf_qr_codes(&pdf),
        vec![vec![order.tickets[0].code.clone()]]
    );
}
