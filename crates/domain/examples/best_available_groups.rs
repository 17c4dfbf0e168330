//! How long the event engine takes to decide one full group (256) of best-available holds
//! on a 50,000-seat event (10 sections × 50 rows × 100 seats), mid-sale and in the end game
//! (every third seat sold: only pairs left), for a block that fits, a party that must sit
//! together, and one that may be split. A benchmark, not a test: it prints, it asserts
//! nothing.
//!
//!     cargo run --release -p boxoffice-domain --example best_available_groups
use std::time::Instant;

use boxoffice_domain::best::Together;
use boxoffice_domain::decide::{HoldRequest, HoldShape, SeatRow};
use boxoffice_domain::engine::{Command, EngineSnapshot, EventEngine};
use boxoffice_domain::event::SaleRules;
use boxoffice_domain::hold::SeatStatus;
use time::macros::datetime;

fn main() {
    let now = datetime!(2026-12-01 10:00 UTC);
    let sections: Vec<String> = "ABCDEFGHIJ".chars().map(|c| c.to_string()).collect();
    let rules = SaleRules {
        on_sale_at: now,
        section_order: sections.clone(),
        hold_ttl_s: 600,
        max_seats_per_hold: 6,
        max_tickets_per_account: 6,
        currency: "EUR".into(),
        prices: Default::default(),
        accessibility: Default::default(),
    };
    for (label, sold_every) in [
        ("mid-sale: every 7th seat sold", 7u32),
        ("end game: every 3rd seat sold (pairs left)", 3),
    ] {
        let mut seats = Vec::new();
        for s in &sections {
            for row in 1..=50u32 {
                for n in 1..=100u32 {
                    seats.push(SeatRow {
                        seat_id: format!("{s}-{row}-{n}"),
                        status: if n % sold_every == 0 {
                            SeatStatus::Sold
                        } else {
                            SeatStatus::Available
                        },
                        hold_id: None,
                        hold_expires_at: None,
                        price_minor: 100,
                    });
                }
            }
        }
        for (ask, quantity, together) in [
            ("2 prefer", 2, Together::Prefer),
            ("4 required", 4, Together::Required),
            ("4 prefer", 4, Together::Prefer),
        ] {
            let mut engine = EventEngine::load(
                rules.clone(),
                EngineSnapshot {
                    seats: seats.clone(),
                    ..EngineSnapshot::default()
                },
                now,
            );
            let commands: Vec<Command> = (0..256)
                .map(|i| {
                    Command::Hold(HoldRequest {
                        account_id: format!("a{i}"),
                        idempotency_key: "k".into(),
                        request_digest: "d".into(),
                        new_hold_id: format!("h{i}"),
                        shape: HoldShape::BestAvailable {
                            quantity,
                            section: None,
                            max_price_minor: None,
                            together,
                        },
                        phase_id: None,
                        ticket_types: Default::default(),
                        accessible: false,
                    })
                })
                .collect();
            let started = Instant::now();
            let (decisions, _) = engine.decide(now, &commands);
            let elapsed = started.elapsed();
            let held = decisions
                .iter()
                .filter(|d| {
                    matches!(
                        d,
                        boxoffice_domain::engine::Decision::Hold(
                            boxoffice_domain::decide::HoldOutcome::Held(_)
                        )
                    )
                })
                .count();
            println!(
                "{label}, 256 × {ask}: {:.2} ms per group ({held} held)",
                elapsed.as_secs_f64() * 1e3
            );
        }
    }
}
