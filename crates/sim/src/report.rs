//! What a run returns: the figures the issue asks for (sold-out time, peak queue,
//! admitted/s, controller rate and reasons, hold and checkout latency in simulated time, door
//! requests/s, fans by ending), every violation found, and the trace hash; rendered as plain
//! text by [`summary`] and as a self-contained HTML page with inline SVG plots by
//! [`Report::html`].

use std::fmt::Write as _;
use std::path::Path;

use boxoffice_waitroom::room::RoomStats;
use serde::Serialize;

use crate::config::{FaultPlan, SimConfig};
use crate::world::Totals;

/// How a fan's story ended: exactly one per fan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// Paid and confirmed.
    Tickets,
    /// The card was declined.
    Declined,
    /// The payment provider failed (an error, not a decline).
    PaymentFailed,
    /// The hold ended before the sale completed (review or payment took too long); money
    /// taken late is given back.
    Lapsed,
    /// Got a hold and left (released it or let it lapse).
    Abandoned,
    /// Left without a hold while the sale was not sold out: the purchase limit, a full
    /// waiting list, or an answer it could not act on.
    GaveUp,
    /// Told SOLD_OUT (at the door, in the queue, or shopping).
    SoldOut,
    /// Released but did not claim within the claim window.
    ClaimExpired,
    /// The admission ran out while shopping.
    AdmissionLapsed,
    /// Too many errors in a row.
    StoreErrors,
    /// On the waiting list when the sale ended unsold: seats were left that no entry could
    /// take, and nothing held could come back.
    StillWaiting,
}

impl Ending {
    pub const ALL: [Ending; 11] = [
        Self::Tickets,
        Self::Declined,
        Self::PaymentFailed,
        Self::Lapsed,
        Self::Abandoned,
        Self::GaveUp,
        Self::SoldOut,
        Self::ClaimExpired,
        Self::AdmissionLapsed,
        Self::StoreErrors,
        Self::StillWaiting,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tickets => "tickets",
            Self::Declined => "declined",
            Self::PaymentFailed => "payment_failed",
            Self::Lapsed => "lapsed",
            Self::Abandoned => "abandoned",
            Self::GaveUp => "gave_up",
            Self::SoldOut => "sold_out",
            Self::ClaimExpired => "claim_expired",
            Self::AdmissionLapsed => "admission_lapsed",
            Self::StoreErrors => "store_errors",
            Self::StillWaiting => "still_waiting",
        }
    }
}

/// What a violation broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    /// The ledger saw a seat granted (or sold) while another hold still had it.
    DoubleGrant,
    /// A committed write whose condition the real store checks did not hold.
    StoreCondition,
    /// At the end: a seat sold twice, or sold seats and confirmed holds disagree.
    SoldTwice,
    /// `EventEngine::invariants` found something.
    EngineInvariant,
    /// `Room::invariants` failed.
    RoomInvariant,
    /// A fan ended twice, never, or got an answer it did not wait for.
    FanStory,
    /// Something the simulation never expects (a malformed refusal, an unknown effect).
    Unexpected,
    /// The run did not finish, or a hold was still live at the end.
    Unfinished,
}

impl ViolationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DoubleGrant => "double_grant",
            Self::StoreCondition => "store_condition",
            Self::SoldTwice => "sold_twice",
            Self::EngineInvariant => "engine_invariant",
            Self::RoomInvariant => "room_invariant",
            Self::FanStory => "fan_story",
            Self::Unexpected => "unexpected",
            Self::Unfinished => "unfinished",
        }
    }
}

/// One violation, at a simulated second.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Violation {
    pub at_s: f64,
    pub kind: ViolationKind,
    pub detail: String,
}

/// A latency distribution in simulated time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Latency {
    pub count: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    fn of(samples: &mut [u64]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_unstable();
        let at = |p: usize| samples[(samples.len() * p).div_ceil(100).saturating_sub(1)];
        Self {
            count: samples.len() as u64,
            p50_ms: at(50) as f64 / 1_000.0,
            p99_ms: at(99) as f64 / 1_000.0,
            max_ms: samples[samples.len() - 1] as f64 / 1_000.0,
        }
    }
}

/// One simulated second, measured at its end.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SecondSample {
    /// The second's end, from the run's start.
    pub t_s: u32,
    pub waiting: u64,
    pub active: u64,
    /// Admissions started during the second.
    pub admitted: u64,
    /// Joins and status polls during the second.
    pub door_requests: u64,
    /// Hold answers of the second and holds still unanswered, p99.
    pub hold_p99_ms: f64,
    pub writer_group_p99_ms: f64,
    pub queue_depth: u64,
    /// The controller's rate after its decision at the second's end.
    pub rate_per_s: u64,
    pub release_count: u64,
    /// The controller's decision kind (`closed` before on-sale).
    pub decision: String,
    pub reason: String,
    pub seats_sold: u64,
    pub seats_held: u64,
    pub store_down: bool,
}

/// What a run returns. See the module docs.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub seed: u64,
    pub scale: f64,
    pub fans: u64,
    pub seats: u64,
    pub max_active_shoppers: u64,
    pub faults: Vec<String>,
    /// Each fault's name and simulated seconds (from, to), for the plots.
    pub fault_windows: Vec<(String, f64, f64)>,
    pub plant_double_grant: bool,
    /// What the planted bug told the engine, and when (`None`: not planted).
    pub planted: Option<String>,
    /// SHA-256 (hex) over one canonical line per event processed.
    pub trace_hash: String,
    pub trace_lines: u64,
    pub events: u64,
    pub end_s: f64,
    pub on_sale_at_s: f64,
    /// When the last seat was sold, seconds after on-sale.
    pub sold_out_after_on_sale_s: Option<f64>,
    /// Fans waiting in the queue when the last seat sold: each must be told SOLD_OUT.
    pub waiting_at_sold_out: u64,
    /// Admissions that started after the last seat sold (release stops: 0).
    pub admitted_after_sold_out: u64,
    pub seats_sold: u64,
    /// Most fans waiting in the queue at once.
    pub peak_queue: u64,
    /// Accounts the room holds at the end (its memory is the caller's to measure).
    pub room_accounts: u64,
    pub admitted_total: u64,
    /// Admissions per second from on-sale to sold out (or to the end).
    pub mean_admitted_per_s: f64,
    pub peak_door_requests_per_s: u64,
    pub door_requests: u64,
    pub polls: u64,
    /// Polls of fans far back, counted without an event each (see the model).
    pub polls_aggregated: u64,
    pub hold_latency: Latency,
    pub checkout_latency: Latency,
    pub payment_latency: Latency,
    pub group_commit_latency: Latency,
    pub holds_granted: u64,
    pub commands: u64,
    pub groups_committed: u64,
    pub groups_failed: u64,
    pub expiry_groups: u64,
    pub engine_loads: u64,
    pub engine_load_failures: u64,
    pub store_errors: u64,
    pub answers_lost: u64,
    /// Shopper slots taken again by admitted fans whose slot had gone back.
    pub slots_retaken: u64,
    pub payment_attempts: u64,
    pub payment_errors: u64,
    pub fans_by_ending: Vec<(Ending, u64)>,
    pub engine_checks: u64,
    pub room_checks: u64,
    pub ledger_checks: u64,
    /// The last 1 % of seats sold: how many had come back from a hold that ended without a
    /// sale, and how long they took from coming back to being sold.
    pub last_seats: LastSeats,
    /// The event's waiting list: fans refused seats join it and are offered seats that come
    /// back.
    pub waitlist: WaitlistFigures,
    pub engine_checks_every_groups: u64,
    pub engine_checks_min_interval_ms: u64,
    pub room_checks_every_ticks: u64,
    pub violations: Vec<Violation>,
    pub violations_total: u64,
    pub series: Vec<SecondSample>,
    /// The IO latency and client model, in words.
    pub model: Vec<String>,
}

/// Everything a finished run hands to the report.
/// The last 1 % of seats sold (at least one): issue 35's "sold within 60 s of the last hold
/// that returns them".
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct LastSeats {
    pub seats: u64,
    /// Of them, seats that had come back (a hold released, cancelled or past its deadline).
    pub returned: u64,
    /// From coming back to being sold, over the returned ones, seconds.
    pub return_to_sale_p50_s: f64,
    pub return_to_sale_max_s: f64,
}

impl LastSeats {
    /// From the sales in commit order: (sold at, came back at) in simulated seconds.
    pub(crate) fn of(sales: &[(f64, Option<f64>)]) -> Self {
        let n = sales.len().div_ceil(100);
        let last = &sales[sales.len() - n..];
        let mut waits: Vec<f64> = last
            .iter()
            .filter_map(|(sold, returned)| returned.map(|at| (sold - at).max(0.0)))
            .collect();
        waits.sort_by(f64::total_cmp);
        Self {
            seats: n as u64,
            returned: waits.len() as u64,
            return_to_sale_p50_s: waits.get(waits.len() / 2).copied().unwrap_or(0.0),
            return_to_sale_max_s: waits.last().copied().unwrap_or(0.0),
        }
    }
}

/// The waiting list's figures: entries and offers from the committed effects, the rest from
/// the fans.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct WaitlistFigures {
    /// Entries joined (fans refused seats while the house was not sold out).
    pub joined: u64,
    /// Offers made: holds of the entries' accounts.
    pub offered: u64,
    /// Offers sold.
    pub purchased: u64,
    /// Offers that ended unsold: released, past their deadline, or the card declined.
    pub lapsed: u64,
    /// Fans still on the list when the house sold out (told SOLD_OUT).
    pub waiting_at_sold_out: u64,
    /// Fans still on the list when the sale ended unsold ([`Ending::StillWaiting`]).
    pub waiting_at_end: u64,
}

#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) config: SimConfig,
    pub(crate) faults: FaultPlan,
    pub(crate) trace_hash: String,
    pub(crate) trace_lines: u64,
    pub(crate) events: u64,
    pub(crate) end_us: u64,
    pub(crate) sold_out_at_us: Option<u64>,
    pub(crate) waiting_at_sold_out: u64,
    pub(crate) admitted_after_sold_out: u64,
    pub(crate) seats_sold: u64,
    pub(crate) peak_queue: u64,
    pub(crate) room: RoomStats,
    pub(crate) totals: Totals,
    pub(crate) series: Vec<SecondSample>,
    pub(crate) violations: Vec<Violation>,
    pub(crate) violations_total: u64,
    pub(crate) planted: Option<String>,
    pub(crate) ledger_checks: u64,
    pub(crate) last_seats: LastSeats,
}

pub(crate) fn build(finished: Finished) -> Report {
    let Finished {
        config,
        faults,
        trace_hash,
        trace_lines,
        events,
        end_us,
        sold_out_at_us,
        waiting_at_sold_out,
        admitted_after_sold_out,
        seats_sold,
        peak_queue,
        room,
        mut totals,
        series,
        violations,
        violations_total,
        planted,
        ledger_checks,
        last_seats,
    } = finished;
    let on_sale_s = f64::from(config.on_sale_at_s);
    let selling_until_s = sold_out_at_us.map_or(end_us as f64 / 1e6, |us| us as f64 / 1e6);
    let admitted_while_selling: u64 = series
        .iter()
        .filter(|s| f64::from(s.t_s) > on_sale_s && f64::from(s.t_s) <= selling_until_s.ceil())
        .map(|s| s.admitted)
        .sum();
    let selling_s = (selling_until_s - on_sale_s).max(1.0);
    let door_requests = totals.joins + totals.polls;
    Report {
        seed: config.seed,
        scale: config.scale,
        fans: u64::from(config.fans),
        seats: config.layout.seats(),
        max_active_shoppers: config.max_active_shoppers,
        faults: faults.describe(),
        fault_windows: faults
            .windows()
            .into_iter()
            .map(|(name, w)| {
                (
                    name.to_owned(),
                    w.from_ms as f64 / 1e3,
                    w.to_ms as f64 / 1e3,
                )
            })
            .collect(),
        plant_double_grant: config.plant_double_grant,
        planted,
        trace_hash,
        trace_lines,
        events,
        end_s: end_us as f64 / 1e6,
        on_sale_at_s: on_sale_s,
        sold_out_after_on_sale_s: sold_out_at_us.map(|us| us as f64 / 1e6 - on_sale_s),
        waiting_at_sold_out,
        admitted_after_sold_out,
        seats_sold,
        peak_queue,
        room_accounts: room.joined,
        admitted_total: room.admitted_total,
        mean_admitted_per_s: admitted_while_selling as f64 / selling_s,
        peak_door_requests_per_s: series.iter().map(|s| s.door_requests).max().unwrap_or(0),
        door_requests,
        polls: totals.polls,
        polls_aggregated: totals.polls_aggregated,
        hold_latency: Latency::of(&mut totals.hold_latencies_us),
        checkout_latency: Latency::of(&mut totals.checkout_latencies_us),
        payment_latency: Latency::of(&mut totals.payment_latencies_us),
        group_commit_latency: Latency::of(&mut totals.group_latencies_us),
        holds_granted: totals.holds_granted,
        commands: totals.commands,
        groups_committed: totals.groups_committed,
        groups_failed: totals.groups_failed,
        expiry_groups: totals.expiry_groups,
        engine_loads: totals.loads,
        engine_load_failures: totals.load_failures,
        store_errors: totals.store_errors,
        answers_lost: totals.answers_lost,
        slots_retaken: totals.slots_retaken,
        payment_attempts: totals.payment_attempts,
        payment_errors: totals.payment_errors,
        fans_by_ending: Ending::ALL
            .iter()
            .map(|ending| (*ending, totals.endings[*ending as usize]))
            .collect(),
        engine_checks: totals.engine_checks,
        room_checks: totals.room_checks,
        ledger_checks,
        last_seats,
        waitlist: totals.waitlist,
        engine_checks_every_groups: config.engine_checks_every_groups,
        engine_checks_min_interval_ms: config.engine_checks_min_interval_ms,
        room_checks_every_ticks: config.room_checks_every_ticks,
        violations,
        violations_total,
        series,
        model: model(&config),
    }
}

/// The model of IO and clients the run used, in words (the report states it).
fn model(config: &SimConfig) -> Vec<String> {
    use crate::writer::{
        COMMIT_MEDIAN_MS, COMMIT_SIGMA, COMMIT_US_PER_COMMAND, LOAD_MEDIAN_MS, LOAD_SIGMA,
        LOAD_US_PER_SEAT, RECORD_STEP_US, STORE_TIMEOUT_US,
    };
    use boxoffice_domain::pipeline::{GROUP_COMMANDS_MAX, GROUPS_IN_FLIGHT_MAX};
    vec![
        format!(
            "Scale {}: {} fans arriving over {} s ({}), on-sale at {} s (earlier arrivals wait in the pre-queue, shuffled at on-sale), {} seats ({} sections of {} rows of {}) sold best-available, 1-4 seats a fan, at most {} shoppers at once.",
            config.scale,
            config.fans,
            config.arrival_window_s,
            match config.arrival {
                crate::config::ArrivalShape::Uniform => "evenly",
                crate::config::ArrivalShape::FrontLoaded =>
                    "front-loaded: half in the first tenth of the window, half over the rest",
            },
            config.on_sale_at_s,
            config.layout.seats(),
            config.layout.sections,
            config.layout.rows_per_section,
            config.layout.seats_per_row,
            config.max_active_shoppers,
        ),
        format!(
            "Store commit of a group: lognormal, median {COMMIT_MEDIAN_MS} ms, sigma {COMMIT_SIGMA}, plus {COMMIT_US_PER_COMMAND} us per command (calibrated on the writer's group commits measured during the one-tenth sale through the room on the development machine, `ONLY=door bash bench/speed.sh`: p50 3.3 ms, p99 27.9 ms, groups of one command at the median); groups of at most {GROUP_COMMANDS_MAX} commands, {GROUPS_IN_FLIGHT_MAX} in flight (the next is decided while one commits), each finishing at least {RECORD_STEP_US} us after the one before. Deciding takes no simulated time. An engine load: lognormal, median {LOAD_MEDIAN_MS} ms, sigma {LOAD_SIGMA}, plus {LOAD_US_PER_SEAT} us per seat. While the store is down, commits and loads fail after {} ms.",
            STORE_TIMEOUT_US / 1_000
        ),
        "Requests reach the writer the instant they are sent and are answered the instant their group commits (no network time is added); a request that fails is sent again after 0.5-16 s of backoff (12 errors in a row end the fan's story).".to_owned(),
        "Payment provider: lognormal, median 800 ms, sigma 0.5; 85% approve, 8% decline, 5% 3-D Secure (5-40 s more, 85% then approve), 2% lost answers settled as approved by the reconciler 30-300 s later. A slow provider adds the fault's extra delay; a failing one errors that share of payments.".to_owned(),
        format!(
            "Fans: status polls paced by Retry-After exactly as the server computes it (1-20 s, plus up to 250 ms of timer jitter), each poll one event, except that a fan at least 80 times the controller's ceiling rate from its turn, after the queue opened, polls every 20.125 s (20 s plus the mean jitter) in a sleep whose polls are counted, not simulated, for as long as it is sure to stay that far back (the head moves at most twice the ceiling a second); a sell-out wakes every sleeper at its next poll; browse before the hold lognormal median 8 s, review before checkout median 20 s; 10% of holders abandon (half release, half let the {} s hold lapse); a fan whose hold finds no seats while the house is not sold out settles, half the time, for the fewer seats the answer says are free together (asked again 3-8 s later), else joins the event's waiting list (lognormal median {} s later; its party, any seats) through the writer, stays in the room (its idle slot goes back 10 s after the refusal, its admission stays: the offer's checkout needs it), and waits without polling until a committed group offers it seats: a hold of {} s (the event's offer TTL), reviewed, paid or walked away from as a granted hold; fans still on the list are told SOLD_OUT at sell-out. Slots return when a hold ends or sells (at the commit; the server's outbox relay adds its delivery delay); a fan who gives up without a hold sends the queue's leave request 90% of the time, otherwise keeps the slot until the {} s admission expires.",
            config.hold_ttl_s,
            crate::fans::WAITLIST_JOIN_MEDIAN_S,
            config.waitlist_offer_ttl_s,
            config.admission_ttl_s
        ),
        format!(
            "Checks: the ledger checks every committed group; the engine's invariants run after every {} group commit(s) (at most every {} ms) and every load, the room's after every {} tick(s) of 100 ms, both at the end. The controller decides once a simulated second from on-sale on; each tick releases a tenth of its rate, never more than the free slots less released fans who have not claimed, nothing while sold out.",
            config.engine_checks_every_groups,
            config.engine_checks_min_interval_ms,
            config.room_checks_every_ticks
        ),
    ]
}

impl Report {
    /// Whether the run found no violation.
    pub fn is_clean(&self) -> bool {
        self.violations_total == 0
    }

    /// The violations of one kind that the report kept.
    pub fn violations_of(&self, kind: ViolationKind) -> impl Iterator<Item = &Violation> {
        self.violations.iter().filter(move |v| v.kind == kind)
    }

    /// Fans that ended so.
    pub fn fans_ended(&self, ending: Ending) -> u64 {
        self.fans_by_ending
            .iter()
            .find(|(e, _)| *e == ending)
            .map_or(0, |(_, n)| *n)
    }

    /// The report as JSON.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// Writes [`Report::html`] to `path`.
    pub fn write_html(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.html())
    }

    /// A self-contained HTML page: the figures, the plots (inline SVG), the violations, the
    /// controller's decisions, the faults and the model.
    pub fn html(&self) -> String {
        let mut html = String::new();
        let title = format!(
            "boxoffice simulate: seed {}, scale {}",
            self.seed, self.scale
        );
        let _ = write!(
            html,
            "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n<h1>{}</h1>\n<p class=\"sub\">trace {}</p>\n",
            escape(&title),
            escape(&title),
            escape(&self.trace_hash)
        );
        let verdict = if self.is_clean() {
            "<section class=\"check ok\"><h2>Invariants held</h2><p>No violation.</p></section>\n"
                .to_owned()
        } else {
            let mut rows = String::new();
            for v in &self.violations {
                let _ = write!(
                    rows,
                    "<tr><td class=\"num\">{:.3}</td><td>{}</td><td>{}</td></tr>",
                    v.at_s,
                    v.kind.as_str(),
                    escape(&v.detail)
                );
            }
            format!(
                "<section class=\"check fail\"><h2>{} violation(s)</h2><table><tr><th>at s</th><th>kind</th><th>detail</th></tr>{rows}</table></section>\n",
                self.violations_total
            )
        };
        html.push_str(&verdict);
        html.push_str("<h2>Figures</h2>\n<table>\n");
        for (name, value) in self.figures() {
            let _ = writeln!(
                html,
                "<tr><th>{}</th><td class=\"num\">{}</td></tr>",
                escape(&name),
                escape(&value)
            );
        }
        html.push_str("</table>\n<h2>Plots</h2>\n");
        let xs = |f: &dyn Fn(&SecondSample) -> f64| -> Vec<(f64, f64)> {
            self.series
                .iter()
                .map(|s| (f64::from(s.t_s), f(s)))
                .collect()
        };
        let mut marks = vec![(self.on_sale_at_s, "on-sale".to_owned())];
        if let Some(after) = self.sold_out_after_on_sale_s {
            marks.push((self.on_sale_at_s + after, "sold out".to_owned()));
        }
        let shades: Vec<(f64, f64, &str)> = self
            .fault_windows
            .iter()
            .map(|(name, from_s, to_s)| (*from_s, *to_s, name.as_str()))
            .collect();
        let chart = |title: &str, y_label: &str, series: &[(&str, Vec<(f64, f64)>)]| {
            line_chart(title, y_label, series, &marks, &shades)
        };
        html.push_str(&chart(
            "Queue",
            "fans waiting",
            &[("waiting", xs(&|s| s.waiting as f64))],
        ));
        html.push_str(&chart(
            "Active shoppers",
            "fans shopping",
            &[
                ("active", xs(&|s| s.active as f64)),
                ("cap", xs(&|_| self.max_active_shoppers as f64)),
            ],
        ));
        html.push_str(&chart(
            "Release rate and admissions",
            "per second",
            &[
                ("controller rate", xs(&|s| s.rate_per_s as f64)),
                ("admitted", xs(&|s| s.admitted as f64)),
            ],
        ));
        html.push_str(&chart(
            "Door requests (joins and polls)",
            "requests per second",
            &[("door requests", xs(&|s| s.door_requests as f64))],
        ));
        html.push_str(&chart(
            "Hold latency and group commits, p99 per second",
            "ms",
            &[
                ("hold p99", xs(&|s| s.hold_p99_ms)),
                ("group commit p99", xs(&|s| s.writer_group_p99_ms)),
            ],
        ));
        html.push_str(&chart(
            "Seats",
            "seats",
            &[
                ("sold", xs(&|s| s.seats_sold as f64)),
                ("held", xs(&|s| s.seats_held as f64)),
            ],
        ));
        html.push_str("<h2>Fans by ending</h2>\n<table>\n");
        for (ending, n) in &self.fans_by_ending {
            let _ = writeln!(
                html,
                "<tr><th>{}</th><td class=\"num\">{n}</td></tr>",
                ending.as_str()
            );
        }
        html.push_str("</table>\n<h2>Controller decisions (each change of kind)</h2>\n<table><tr><th>t s</th><th>decision</th><th>rate/s</th><th>reason</th></tr>\n");
        let mut last = "";
        for sample in &self.series {
            if sample.decision != last {
                let _ = writeln!(
                    html,
                    "<tr><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                    sample.t_s,
                    escape(&sample.decision),
                    sample.rate_per_s,
                    escape(&sample.reason)
                );
                last = &sample.decision;
            }
        }
        html.push_str("</table>\n<h2>Faults (shaded on the plots)</h2>\n");
        if self.faults.is_empty() {
            html.push_str("<p class=\"empty\">none</p>\n");
        } else {
            html.push_str("<ul>\n");
            for fault in &self.faults {
                let _ = writeln!(html, "<li>{}</li>", escape(fault));
            }
            html.push_str("</ul>\n");
        }
        if let Some(planted) = &self.planted {
            let _ = writeln!(html, "<h2>Planted bug</h2>\n<p>{}</p>", escape(planted));
        }
        html.push_str("<h2>Model of IO latency and clients</h2>\n");
        for paragraph in &self.model {
            let _ = writeln!(html, "<p>{}</p>", escape(paragraph));
        }
        html.push_str("</main>\n</body>\n</html>\n");
        html
    }

    /// The headline figures, in display order.
    fn figures(&self) -> Vec<(String, String)> {
        let latency = |l: &Latency| {
            format!(
                "p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} answers)",
                l.p50_ms, l.p99_ms, l.max_ms, l.count
            )
        };
        vec![
            ("fans".into(), self.fans.to_string()),
            ("seats".into(), self.seats.to_string()),
            ("seats sold".into(), self.seats_sold.to_string()),
            (
                "sold out".into(),
                self.sold_out_after_on_sale_s.map_or("no".to_owned(), |s| {
                    format!(
                        "{s:.1} s after on-sale, {} waiting then, {} admitted after",
                        self.waiting_at_sold_out, self.admitted_after_sold_out
                    )
                }),
            ),
            (
                "last 1 % of seats".into(),
                format!(
                    "{} seats, {} of them back from a hold that ended unsold; back to sold p50 {:.1} s, max {:.1} s",
                    self.last_seats.seats,
                    self.last_seats.returned,
                    self.last_seats.return_to_sale_p50_s,
                    self.last_seats.return_to_sale_max_s
                ),
            ),
            (
                "waiting list".into(),
                format!(
                    "{} joined, {} offered, {} bought, {} lapsed, {} still waiting at sell-out, {} at the end unsold",
                    self.waitlist.joined,
                    self.waitlist.offered,
                    self.waitlist.purchased,
                    self.waitlist.lapsed,
                    self.waitlist.waiting_at_sold_out,
                    self.waitlist.waiting_at_end
                ),
            ),
            ("peak queue".into(), self.peak_queue.to_string()),
            (
                "admitted".into(),
                format!(
                    "{} ({:.1}/s from on-sale to sold out)",
                    self.admitted_total, self.mean_admitted_per_s
                ),
            ),
            (
                "door requests".into(),
                format!(
                    "{} ({} polls, {} of them counted in aggregate), peak {}/s",
                    self.door_requests,
                    self.polls,
                    self.polls_aggregated,
                    self.peak_door_requests_per_s
                ),
            ),
            ("hold latency".into(), latency(&self.hold_latency)),
            ("checkout latency".into(), latency(&self.checkout_latency)),
            (
                "payment answer latency".into(),
                latency(&self.payment_latency),
            ),
            ("group commit".into(), latency(&self.group_commit_latency)),
            (
                "writer".into(),
                format!(
                    "{} commands, {} groups committed ({} to expire holds), {} failed, {} engine loads ({} failed), {} answers lost",
                    self.commands,
                    self.groups_committed,
                    self.expiry_groups,
                    self.groups_failed,
                    self.engine_loads,
                    self.engine_load_failures,
                    self.answers_lost
                ),
            ),
            (
                "payments".into(),
                format!(
                    "{} verdicts, {} provider errors",
                    self.payment_attempts, self.payment_errors
                ),
            ),
            ("room accounts".into(), self.room_accounts.to_string()),
            (
                "checks".into(),
                format!(
                    "ledger {}, engine {} (every {} groups, at most every {} ms), room {} (every {} ticks)",
                    self.ledger_checks,
                    self.engine_checks,
                    self.engine_checks_every_groups,
                    self.engine_checks_min_interval_ms,
                    self.room_checks,
                    self.room_checks_every_ticks
                ),
            ),
            (
                "simulated".into(),
                format!(
                    "{:.1} s, {} events, {} trace lines",
                    self.end_s, self.events, self.trace_lines
                ),
            ),
        ]
    }
}

/// A plain-text summary, one figure a line; the first line is `trace <hex>`.
pub fn summary(report: &Report) -> String {
    let mut text = format!("trace {}\n", report.trace_hash);
    let _ = writeln!(text, "seed {} scale {}", report.seed, report.scale);
    for (name, value) in report.figures() {
        let _ = writeln!(text, "{name}: {value}");
    }
    let endings: Vec<String> = report
        .fans_by_ending
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(ending, n)| format!("{} {n}", ending.as_str()))
        .collect();
    let _ = writeln!(text, "fans by ending: {}", endings.join(", "));
    for fault in &report.faults {
        let _ = writeln!(text, "fault: {fault}");
    }
    if let Some(planted) = &report.planted {
        let _ = writeln!(text, "planted: {planted}");
    }
    let _ = writeln!(text, "violations: {}", report.violations_total);
    for v in report.violations.iter().take(10) {
        let _ = writeln!(
            text,
            "  at {:.3} s {}: {}",
            v.at_s,
            v.kind.as_str(),
            v.detail
        );
    }
    text
}

/// Writes the report's HTML page to `path`.
pub fn write_report(report: &Report, path: &Path) -> std::io::Result<()> {
    report.write_html(path)
}

const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#222;background:#fafafa;line-height:1.4}
main{max-width:980px;margin:0 auto;padding:12px}
h1{font-size:1.6em;margin:.4em 0 .1em}
h2{font-size:1.25em;margin:1.4em 0 .4em;border-bottom:1px solid #ddd}
.sub{color:#666;margin:0 0 1em;word-break:break-all}
table{border-collapse:collapse;margin:.3em 0 .8em;background:#fff}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
td.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:0 0 1em;background:#fff;border:1px solid #ddd}
svg{display:block;width:100%;height:auto}
.check{border:2px solid;padding:6px 12px;margin:1em 0}
.check.ok{border-color:#2e7d32;background:#e8f5e9}
.check.fail{border-color:#c62828;background:#ffebee}
.check h2{border:0;margin:.2em 0}
.empty{color:#666;font-style:italic}
";

const PALETTE: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];
const CHART_WIDTH: f64 = 900.0;
const CHART_HEIGHT: f64 = 300.0;
const CHART_LEFT: f64 = 70.0;
const CHART_RIGHT: f64 = 20.0;
const CHART_TOP: f64 = 50.0;
const CHART_BOTTOM: f64 = 40.0;

/// An SVG line chart of `series` over simulated seconds, with dashed vertical `marks` and
/// shaded `shades` (from, to, name): the faults.
fn line_chart(
    title: &str,
    y_label: &str,
    series: &[(&str, Vec<(f64, f64)>)],
    marks: &[(f64, String)],
    shades: &[(f64, f64, &str)],
) -> String {
    let points = || {
        series
            .iter()
            .flat_map(|(_, p)| p.iter())
            .filter(|(x, y)| x.is_finite() && y.is_finite())
    };
    let mut svg = format!(
        "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {CHART_WIDTH} {CHART_HEIGHT}\" role=\"img\" aria-label=\"{t}\" font-family=\"system-ui,sans-serif\" font-size=\"12\"><text x=\"{:.1}\" y=\"18\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"600\">{t}</text>",
        CHART_WIDTH / 2.0,
        t = escape(title)
    );
    if points().next().is_none() {
        svg.push_str("<text x=\"450\" y=\"150\" text-anchor=\"middle\" fill=\"#666\">no data</text></svg></figure>\n");
        return svg;
    }
    let x_max = points()
        .map(|(x, _)| *x)
        .chain(marks.iter().map(|(x, _)| *x))
        .fold(1.0_f64, f64::max);
    let y_max = nice_ceiling(points().map(|(_, y)| *y).fold(0.0_f64, f64::max));
    let (left, right) = (CHART_LEFT, CHART_WIDTH - CHART_RIGHT);
    let (top, bottom) = (CHART_TOP, CHART_HEIGHT - CHART_BOTTOM);
    let px = |x: f64| left + x.clamp(0.0, x_max) / x_max * (right - left);
    let py = |y: f64| bottom - (y / y_max).clamp(0.0, 1.0) * (bottom - top);
    for (from, to, name) in shades {
        let _ = write!(
            svg,
            "<rect x=\"{:.1}\" y=\"{top}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#f5b041\" fill-opacity=\"0.25\"><title>{}</title></rect>",
            px(*from),
            (px(*to) - px(*from)).max(1.0),
            bottom - top,
            escape(name)
        );
    }
    for i in 0..=4 {
        let y = y_max * f64::from(i) / 4.0;
        let _ = write!(
            svg,
            "<line x1=\"{left}\" y1=\"{0:.1}\" x2=\"{right}\" y2=\"{0:.1}\" stroke=\"#e5e5e5\"/><text x=\"{1:.1}\" y=\"{2:.1}\" text-anchor=\"end\" font-size=\"11\">{3}</text>",
            py(y),
            left - 6.0,
            py(y) + 4.0,
            short_number(y)
        );
    }
    let x_step = nice_ceiling(x_max / 8.0).max(1.0);
    let mut x = 0.0;
    while x <= x_max + 1e-9 {
        let _ = write!(
            svg,
            "<line x1=\"{0:.1}\" y1=\"{bottom}\" x2=\"{0:.1}\" y2=\"{1:.1}\" stroke=\"#333\"/><text x=\"{0:.1}\" y=\"{2:.1}\" text-anchor=\"middle\" font-size=\"11\">{3}</text>",
            px(x),
            bottom + 5.0,
            bottom + 18.0,
            short_number(x)
        );
        x += x_step;
    }
    let _ = write!(
        svg,
        "<line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{bottom}\" stroke=\"#333\"/><line x1=\"{left}\" y1=\"{bottom}\" x2=\"{right}\" y2=\"{bottom}\" stroke=\"#333\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">simulated seconds</text><text transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        (left + right) / 2.0,
        CHART_HEIGHT - 4.0,
        (top + bottom) / 2.0,
        escape(y_label)
    );
    let mut legend_x = left;
    for (i, (name, data)) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let _ = write!(
            svg,
            "<rect x=\"{legend_x:.1}\" y=\"28\" width=\"10\" height=\"10\" fill=\"{color}\"/><text x=\"{:.1}\" y=\"37\">{}</text>",
            legend_x + 14.0,
            escape(name)
        );
        legend_x += 30.0 + 7.0 * name.len() as f64;
        let coordinates: Vec<String> = data
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
            .collect();
        let _ = write!(
            svg,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>",
            coordinates.join(" ")
        );
    }
    for (x, label) in marks {
        // A label near the right edge grows leftwards.
        let (label_x, anchor) = if px(*x) > right - 80.0 {
            (px(*x) - 4.0, "end")
        } else {
            (px(*x) + 4.0, "start")
        };
        let _ = write!(
            svg,
            "<line x1=\"{0:.1}\" y1=\"{top}\" x2=\"{0:.1}\" y2=\"{bottom}\" stroke=\"#444\" stroke-dasharray=\"5 4\"/><text x=\"{label_x:.1}\" y=\"{1:.1}\" text-anchor=\"{anchor}\" font-size=\"11\" fill=\"#333\">{2}</text>",
            px(*x),
            top + 12.0,
            escape(label)
        );
    }
    svg.push_str("</svg></figure>\n");
    svg
}

/// The smallest 1, 2 or 5 times a power of ten at or above `value` (at least 1).
fn nice_ceiling(value: f64) -> f64 {
    if !value.is_finite() || value <= 1.0 {
        return 1.0;
    }
    let base = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * base)
        .find(|v| *v >= value)
        .unwrap_or(10.0 * base)
}

fn short_number(value: f64) -> String {
    if value >= 1e6 {
        format!("{:.1}M", value / 1e6)
    } else if value >= 1e4 {
        format!("{:.0}k", value / 1e3)
    } else if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod last_seats_tests {
    use super::LastSeats;

    #[test]
    fn the_last_hundredth_of_the_sales_and_their_wait_since_coming_back() {
        // 200 sales: the last 2 count; one of them came back 30 s before it sold.
        let mut sales: Vec<(f64, Option<f64>)> = (0..198).map(|i| (f64::from(i), None)).collect();
        sales.push((500.0, Some(470.0)));
        sales.push((501.0, None));
        let last = LastSeats::of(&sales);
        assert_eq!(last.seats, 2);
        assert_eq!(last.returned, 1);
        assert_eq!(last.return_to_sale_max_s, 30.0);
        assert_eq!(last.return_to_sale_p50_s, 30.0);
        assert_eq!(LastSeats::of(&[]).seats, 0);
    }
}
