//! How long the event engine spends matching its waiting list against seats that come back:
//! a benchmark that prints numbers, never a test (issue 35, item 5).
//!
//! A sold-out house of 50,000 seats (20 sections of 50 rows of 50 seats, each row held by a
//! hold of its own), a waiting list of `ENTRIES` entries of which every one but the last asks
//! for what no returned seat gives (6 seats, together or anywhere, in one of the first 19
//! sections), and then, timed, one group at a time on a copy of the engine:
//!
//! - `release`: a row's hold is released (50 seats back in the last section), so the match
//!   runs with seats freed; the last entry (2 anywhere) is the one that can be satisfied.
//! - `join`: one more entry joins and nothing is freed.
//!
//! Run: `cargo run --release -p boxoffice-domain --example waitlist_match`.

use std::time::{Duration, Instant};

use boxoffice_domain::decide::{HoldRequest, HoldShape, SeatRow};
use boxoffice_domain::engine::{Command, EngineSnapshot, EventEngine, WaitlistJoin};
use boxoffice_domain::event::SaleRules;
use boxoffice_domain::hold::SeatStatus;
use time::OffsetDateTime;

const SECTIONS: u32 = 20;
const ROWS: u32 = 50;
const SEATS_PER_ROW: u32 = 50;
const ENTRIES: usize = 10_000;
const RUNS: usize = 30;

fn section(rank: u32) -> String {
    format!("S{rank:02}")
}

fn join(n: usize, quantity: u32, section: Option<String>, together: bool) -> Command {
    Command::WaitlistJoin(WaitlistJoin {
        waitlist_id: format!("w-{n}"),
        account_id: format!("fan-{n}"),
        quantity,
        section,
        max_price_minor: None,
        together,
        offer_hold_id: format!("h-w-{n}"),
        idempotency_key: format!("k-{n}"),
        request_digest: String::new(),
    })
}

fn main() {
    let now = OffsetDateTime::now_utc();
    let rules = SaleRules {
        on_sale_at: now - time::Duration::hours(1),
        section_order: (0..SECTIONS).map(section).collect(),
        hold_ttl_s: 3_600,
        max_seats_per_hold: 100,
        max_tickets_per_account: 100,
        currency: "EUR".into(),
        prices: Default::default(),
        accessibility: Default::default(),
    };
    let mut seats = Vec::new();
    let mut holds = Vec::new();
    for rank in 0..SECTIONS {
        for row in 1..=ROWS {
            let seat_ids: Vec<String> = (1..=SEATS_PER_ROW)
                .map(|n| format!("{}-{row}-{n}", section(rank)))
                .collect();
            for seat_id in &seat_ids {
                seats.push(SeatRow {
                    seat_id: seat_id.clone(),
                    status: SeatStatus::Available,
                    hold_id: None,
                    hold_expires_at: None,
                    price_minor: 1_000 * i64::from(SECTIONS - rank),
                });
            }
            let account = format!("x-{}-{row}", section(rank));
            holds.push(Command::Hold(HoldRequest {
                account_id: account.clone(),
                idempotency_key: "1".into(),
                request_digest: String::new(),
                new_hold_id: format!("h-{account}"),
                shape: HoldShape::Seats { seat_ids },
                phase_id: None,
                ticket_types: Default::default(),
                accessible: false,
            }));
        }
    }
    let snapshot = EngineSnapshot {
        seats,
        ..EngineSnapshot::default()
    };
    let mut engine = EventEngine::load(rules, snapshot, now);
    for group in holds.chunks(256) {
        engine.decide(now, group);
    }
    // Every entry but the last asks for what the returned row cannot give.
    let mut joins: Vec<Command> = (0..ENTRIES - 1)
        .map(|n| match n % 2 {
            0 => join(n, 6, Some(section(n as u32 % (SECTIONS - 1))), true),
            _ => join(n, 6, Some(section(n as u32 % (SECTIONS - 1))), false),
        })
        .collect();
    joins.push(join(ENTRIES - 1, 2, None, false));
    for group in joins.chunks(256) {
        engine.decide(now, group);
    }
    // A row of the last section comes back: no entry but the last asks for that section.
    let last = section(SECTIONS - 1);
    let release = Command::Release {
        account_id: format!("x-{last}-1"),
        hold_id: format!("h-x-{last}-1"),
    };
    let mut release_times = Vec::new();
    let mut offers = 0;
    for _ in 0..RUNS {
        let mut copy = engine.clone();
        let started = Instant::now();
        let (_, effects) = copy.decide(now, std::slice::from_ref(&release));
        release_times.push(started.elapsed());
        offers = effects.waitlist_offers().count();
    }
    let late = join(ENTRIES, 6, None, true);
    let mut join_times = Vec::new();
    for _ in 0..RUNS {
        let mut copy = engine.clone();
        let started = Instant::now();
        copy.decide(now, std::slice::from_ref(&late));
        join_times.push(started.elapsed());
    }
    println!(
        "{} seats, {ENTRIES} waiting entries, {RUNS} runs each",
        SECTIONS * ROWS * SEATS_PER_ROW
    );
    report("release (50 seats back)", &mut release_times);
    println!("  offers made: {offers} (the last entry is the one that can be satisfied)");
    report("join (nothing freed)", &mut join_times);
}

fn report(what: &str, times: &mut [Duration]) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{what}: median {:.3} ms, min {:.3} ms, max {:.3} ms",
        ms(times[times.len() / 2]),
        ms(times[0]),
        ms(times[times.len() - 1]),
    );
}
