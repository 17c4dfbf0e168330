//! The simulated fans: each arrives, joins the room, polls its status paced by `Retry-After`,
//! claims its admission when released, asks for 1-4 seats best-available (or, refused, waits
//! on the event's waiting list for an offer), checks out, pays through the simulated
//! provider, and ends in exactly one [`Ending`].
//!
//! A fan is a 20-byte record in a `Vec` indexed by fan number; its account id (`fan-<n>`),
//! hold keys, hold ids and order ids are formatted when a request needs them. Every fan has at
//! most one request out at a time, so its stage says which answer it waits for, and an error
//! answer retries that same request (same idempotency key) after a backoff.
//!
//! A fan far back in the queue polls every 20 s whatever happens; those polls are counted in
//! aggregate rather than simulated one by one ([`Sim::next_poll`] says exactly when).
//!
//! The client and payment model (stated in the report):
//! - browse before the hold: lognormal, median 8 s; review before checkout: median 20 s;
//! - 10 % of fans who get a hold abandon it: half release it, half let it lapse;
//! - an admitted fan who gives up without a hold (sold out, errors) tells the room it leaves
//!   90 % of the time; the others keep the slot until its hold window passes;
//! - the room moves the fan's slot as the server does: holding after a granted hold, paying
//!   after a checkout starts, given back after a refused hold (the next try takes a slot
//!   again if one is free, else the fan waits at the head of the queue and tries again once
//!   it has one);
//! - a hold that finds no seats while the house is not sold out: when the answer's
//!   `largest_block` says fewer seats together than the party are free, half the fans
//!   ([`SETTLE_SHARE`]) settle for those and ask again (a new key) after 3-8 s; the others,
//!   and every fan when nothing is free (seats held by others may come back), join the
//!   event's waiting list (`Command::WaitlistJoin` through the writer, like any command)
//!   after a moment (lognormal, median 3 s), for the party as it stands, any seats
//!   (`together: false`: the list has no `prefer`, and a fan whose hold may split the party
//!   takes seats apart rather than none). It does not leave the queue: the server moves no
//!   slot at a join, so the idle slot goes back 10 s after the refusal (the offer's checkout
//!   needs no admission: `server/src/routes/checkout.rs`). It waits without polling until the group that offers it seats commits (the
//!   server's `waitlist.offered` message); the offer is a hold of its account, and the fan
//!   goes on as after a granted hold (review, checkout, payment; a fan who meant to walk
//!   away does), except that no slot moves at the offer (the server moves none; the
//!   checkout takes one if one is free). A fan still on the list is told SOLD_OUT at
//!   sell-out, or ends [`Ending::StillWaiting`] when the sale ends unsold (everybody else's
//!   story over, nothing held that could come back);
//! - an error is retried after 0.5-16 s, at most [`ERROR_RETRIES_MAX`] times in a row;
//! - the provider answers after a lognormal time, median 800 ms: 85 % approve, 8 % decline,
//!   5 % ask for 3-D Secure (5-40 s more, then 85 % approve), 2 % lose the answer, which the
//!   reconciler settles as approved 30-300 s later.

use boxoffice_domain::decide::{HoldOutcome, HoldRequest, HoldShape};
use boxoffice_domain::engine::{
    CheckoutDecision, CheckoutRequest, Command, Decision, PaymentDecision, PaymentOutcome,
    PaymentRequest, WaitlistDecision, WaitlistJoin,
};
use boxoffice_domain::hold::HoldStatus;
use boxoffice_waitroom::admission::Shop;
use boxoffice_waitroom::queue::Status;
use boxoffice_waitroom::room::{ClaimOutcome, Op, OpResult};

use crate::report::{Ending, ViolationKind};
use crate::store::Recorded;
use crate::world::{Event, POLL_INTERVAL_MAX_S, Sim};
use crate::writer::Job;

/// Share of fans refused seats while fewer seats together than their party are free who
/// settle for those (asked again 3-8 s later) rather than wait on the list for the whole
/// party.
pub const SETTLE_SHARE: f64 = 0.5;
/// Median time a fan refused seats takes to join the waiting list, seconds (lognormal,
/// shape [`WAITLIST_JOIN_SIGMA`]).
pub const WAITLIST_JOIN_MEDIAN_S: f64 = 3.0;
/// Shape of the time to join the waiting list.
pub const WAITLIST_JOIN_SIGMA: f64 = 0.5;
/// Errors in a row a fan retries before giving up.
pub const ERROR_RETRIES_MAX: u8 = 12;
/// The spacing of the polls a sleep counts: the 20 s `Retry-After` ceiling plus the mean of
/// the browser timer's jitter.
pub const SLEEP_POLL_INTERVAL_US: u64 = 20_125_000;
/// Share of fans with a hold who abandon it.
pub const ABANDON_SHARE: f64 = 0.10;
/// Share of admitted fans who, giving up without a hold to end, tell the room they leave
/// (`DELETE /v1/events/{eventId}/queue`); the others close the page and keep the slot until
/// the admission expires.
pub const LEAVE_SHARE: f64 = 0.9;

/// Where a fan's story is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Stage {
    #[default]
    Coming,
    Waiting,
    Browsing,
    HoldSent,
    Holding,
    CheckoutSent,
    Paying,
    VerdictSent,
    ReleaseSent,
    /// Its waiting-list join is at the writer.
    JoinSent,
    /// On the waiting list: nothing is scheduled until an offer (or the sale's end) wakes it.
    Listed,
    /// Waiting far back: its polls are counted, not simulated one by one, until it wakes
    /// (see [`Sim::next_poll`]).
    Sleeping,
    Done,
}

/// What a fan means to do with a hold, drawn at admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Plan {
    #[default]
    Buy,
    AbandonRelease,
    AbandonLapse,
}

/// What the provider said about the fan's payment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Verdict {
    #[default]
    Approved,
    Declined,
    /// The provider failed (an error, not a decline).
    ProviderError,
}

/// One fan. See the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Fan {
    pub(crate) stage: Stage,
    pub(crate) ending: Option<Ending>,
    plan: Plan,
    verdict: Verdict,
    seats_wanted: u8,
    /// The number of the current hold request: its key is `k<n>`, its hold `h-<fan>-<n>`.
    hold_key: u8,
    /// Errors in a row on the current request.
    errors: u8,
    /// Polls counted in aggregate by the current sleep (the wake-up poll not included).
    sleep_polls: u8,
    queue_index: u32,
    /// When the current sleep began, simulated milliseconds.
    sleep_from_ms: u32,
    /// Admitted before: a fan back from the head of the queue goes on with its plan.
    returning: bool,
    /// Offered seats while its join's answer was still out: the answer takes it to the offer.
    offered: bool,
    /// Its hold is a waiting-list offer.
    from_waitlist: bool,
}

/// What happens next to a fan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FanStep {
    Arrive,
    Poll,
    SendHold,
    SendCheckout,
    ProviderAnswered,
    SendPayment,
    Leave,
    SendRelease,
    /// Joins the waiting list (or sends the join again after an error).
    JoinWaitlist,
    /// The writer was not there: the request failed.
    Refused,
    /// The poll that ends a sleep (ignored when the sale sold out meanwhile and woke the fan
    /// earlier).
    Wake,
}

impl FanStep {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Arrive => "arrive",
            Self::Poll => "poll",
            Self::SendHold => "hold",
            Self::SendCheckout => "checkout",
            Self::ProviderAnswered => "provider",
            Self::SendPayment => "payment",
            Self::Leave => "leave",
            Self::SendRelease => "release",
            Self::JoinWaitlist => "waitlist",
            Self::Refused => "refused",
            Self::Wake => "wake",
        }
    }
}

fn account_id(fan: u32) -> String {
    format!("fan-{fan}")
}

fn hold_id(fan: u32, key: u8) -> String {
    format!("h-{fan}-{key}")
}

fn waitlist_id(fan: u32) -> String {
    format!("w-{fan}")
}

/// The fan of an account id (`fan-<n>`).
pub(crate) fn fan_of(account_id: &str) -> Option<u32> {
    account_id.strip_prefix("fan-")?.parse().ok()
}

impl Sim {
    /// Runs one step of a fan's story (a `Wake` only reaches here for a sleeping fan).
    pub(crate) fn fan_step(&mut self, fan: u32, step: FanStep) {
        if self.fans[fan as usize].stage == Stage::Done {
            self.violation(
                ViolationKind::FanStory,
                format!("fan {fan} acts ({}) after its story ended", step.as_str()),
            );
            return;
        }
        match step {
            FanStep::Arrive => self.arrive(fan),
            FanStep::Poll => self.poll(fan),
            FanStep::SendHold => self.send_hold(fan),
            FanStep::SendCheckout => self.send_checkout(fan),
            FanStep::ProviderAnswered => self.provider_answered(fan),
            FanStep::SendPayment => self.send_payment(fan),
            FanStep::Leave => self.leave(fan),
            FanStep::SendRelease => self.send_release(fan),
            FanStep::JoinWaitlist => self.join_waitlist(fan),
            FanStep::Refused => self.request_failed(fan, None),
            FanStep::Wake => self.poll(fan),
        }
    }

    fn door_request(&mut self) {
        self.door_request_at(self.now_us);
    }

    /// Schedules the fan's next poll `ahead_of_you` positions from its turn: after
    /// `Retry-After`, or, far enough back that `Retry-After` is sure to stay at its 20 s
    /// ceiling for several polls, a sleep whose polls are counted here and not simulated one
    /// by one.
    ///
    /// `Retry-After` is 20 s while `ahead / rate >= 80`; the rate never exceeds the
    /// controller's ceiling `r`, and release moves the head at most `2r` a second (a tick
    /// releases at most twice its slice). So a fan `a >= 80r` back stays at 20 s for at
    /// least `(a - 80r) / 2r` seconds, polling every 20 s plus its timer's jitter (taken at
    /// its mean, 125 ms, in a sleep). Never before the queue opens: the shuffle at on-sale
    /// may move a provisional place to the front.
    fn next_poll(&mut self, fan: u32, ahead_of_you: u64) {
        let retry_s = self.retry_after_s(ahead_of_you);
        let ceiling = self.config.controller.max_release_per_s.max(1);
        let far = ahead_of_you.saturating_sub(80 * ceiling);
        let sure_us = far / (2 * ceiling) * 1_000_000;
        let polls = (sure_us / SLEEP_POLL_INTERVAL_US).min(u64::from(u8::MAX));
        if retry_s < POLL_INTERVAL_MAX_S || polls < 2 || self.room.view().opened.is_none() {
            self.poll_in(fan, retry_s);
            return;
        }
        // Polls 1..polls-1 are counted now; poll number `polls` wakes the fan.
        for i in 1..polls {
            self.door_request_at(self.now_us + i * SLEEP_POLL_INTERVAL_US);
        }
        self.totals.polls += polls - 1;
        self.totals.polls_aggregated += polls - 1;
        let record = &mut self.fans[fan as usize];
        record.stage = Stage::Sleeping;
        record.sleep_polls = (polls - 1) as u8;
        record.sleep_from_ms = u32::try_from(self.now_us / 1_000).unwrap_or(u32::MAX);
        self.schedule_in(
            polls * SLEEP_POLL_INTERVAL_US,
            Event::Fan {
                fan,
                step: FanStep::Wake,
            },
        );
    }

    /// The sale sold out: every sleeping fan polls at its next 20 s poll (and is told); the
    /// polls its sleep counted after that one are taken back.
    pub(crate) fn wake_sleepers(&mut self) {
        let now_us = self.now_us;
        for fan in 0..self.fans.len() {
            let record = self.fans[fan];
            if record.stage != Stage::Sleeping {
                continue;
            }
            let from_us = u64::from(record.sleep_from_ms) * 1_000;
            let next = (now_us - from_us) / SLEEP_POLL_INTERVAL_US + 1;
            for i in next..=u64::from(record.sleep_polls) {
                self.door_request_uncounted(from_us + i * SLEEP_POLL_INTERVAL_US);
                self.totals.polls -= 1;
                self.totals.polls_aggregated -= 1;
            }
            self.fans[fan].stage = Stage::Waiting;
            self.schedule_at(
                from_us + next * SLEEP_POLL_INTERVAL_US,
                Event::Fan {
                    fan: fan as u32,
                    step: FanStep::Poll,
                },
            );
        }
    }

    fn poll_in(&mut self, fan: u32, delay_s: u64) {
        // Browsers fire their timers a little late, unevenly.
        let jitter_us = self.rng.below(250_000);
        self.schedule_in(
            delay_s * 1_000_000 + jitter_us,
            Event::Fan {
                fan,
                step: FanStep::Poll,
            },
        );
    }

    fn think(&mut self, fan: u32, median_s: f64, sigma: f64, step: FanStep) {
        let delay_us = (self.rng.lognormal(median_s, sigma) * 1e6) as u64;
        self.schedule_in(delay_us, Event::Fan { fan, step });
    }

    fn arrive(&mut self, fan: u32) {
        self.door_request();
        self.totals.joins += 1;
        if fan + 1 < self.config.fans {
            let next = self.arrival_us(fan + 1);
            self.schedule_at(
                next,
                Event::Fan {
                    fan: fan + 1,
                    step: FanStep::Arrive,
                },
            );
        }
        let seats_wanted = match self.rng.below(20) {
            0..=2 => 1,
            3..=11 => 2,
            12..=14 => 3,
            _ => 4,
        };
        self.fans[fan as usize].seats_wanted = seats_wanted;
        let joined = self.room.apply(&Op::Join {
            account_id: account_id(fan),
            now_ms: self.now_ms(),
        });
        let place = match joined {
            OpResult::Joined(Ok(place)) => place,
            other => {
                self.violation(
                    ViolationKind::Unexpected,
                    format!("fan {fan}'s join was answered {other:?}"),
                );
                self.end_fan(fan, Ending::GaveUp);
                return;
            }
        };
        self.fans[fan as usize].queue_index = u32::try_from(place.index).unwrap_or(u32::MAX);
        if self.store.sold_out() {
            self.end_fan(fan, Ending::SoldOut);
            return;
        }
        self.fans[fan as usize].stage = Stage::Waiting;
        let serving = self.room.view().serving;
        let ahead = place.position.saturating_sub(serving + 1);
        self.next_poll(fan, ahead);
    }

    fn poll(&mut self, fan: u32) {
        self.door_request();
        self.totals.polls += 1;
        let now_ms = self.now_ms();
        let index = u64::from(self.fans[fan as usize].queue_index);
        let sold_out = self.store.sold_out();
        self.fans[fan as usize].stage = Stage::Waiting;
        match self.room.view().status(index, now_ms) {
            Status::Waiting { ahead_of_you, .. } => {
                if sold_out {
                    self.end_fan(fan, Ending::SoldOut);
                } else {
                    self.next_poll(fan, ahead_of_you);
                }
            }
            Status::Released { .. }
                if sold_out && self.room.admission(&account_id(fan), now_ms).is_none() =>
            {
                self.end_fan(fan, Ending::SoldOut);
            }
            Status::Released { .. } | Status::Expired { .. } => {
                let claimed = self.room.apply(&Op::Claim {
                    session_id: format!("s-{fan}"),
                    account_id: account_id(fan),
                    now_ms,
                });
                match claimed {
                    OpResult::Claimed(ClaimOutcome::Admitted(_)) => self.admitted(fan),
                    OpResult::Claimed(ClaimOutcome::Full | ClaimOutcome::NotReleased) => {
                        self.poll_in(fan, 1);
                    }
                    OpResult::Claimed(ClaimOutcome::Expired) => {
                        self.end_fan(fan, Ending::ClaimExpired);
                    }
                    other => {
                        self.violation(
                            ViolationKind::Unexpected,
                            format!("fan {fan}'s claim was answered {other:?}"),
                        );
                        self.end_fan(fan, Ending::GaveUp);
                    }
                }
            }
        }
    }

    fn admitted(&mut self, fan: u32) {
        if self.fans[fan as usize].returning {
            // Back with a slot after waiting at the head: tries again at once.
            self.fans[fan as usize].stage = Stage::Browsing;
            self.think(fan, 1.0, 0.3, FanStep::SendHold);
            return;
        }
        self.fans[fan as usize].returning = true;
        let plan = if self.rng.chance(ABANDON_SHARE) {
            if self.rng.chance(0.5) {
                Plan::AbandonRelease
            } else {
                Plan::AbandonLapse
            }
        } else {
            Plan::Buy
        };
        let record = &mut self.fans[fan as usize];
        record.plan = plan;
        record.stage = Stage::Browsing;
        self.think(fan, 8.0, 0.6, FanStep::SendHold);
    }

    /// An admitted fan gives up with no hold to end: most tell the room, freeing the slot at
    /// once; the story ends either way.
    fn give_up_shopping(&mut self, fan: u32, ending: Ending) {
        if self.rng.chance(LEAVE_SHARE) {
            let ended = self.room.apply(&Op::End {
                account_id: account_id(fan),
                at_ms: self.now_ms(),
            });
            if ended == OpResult::Ended(true) {
                self.meter.completed += 1;
            }
        }
        self.end_fan(fan, ending);
    }

    /// Whether the fan's admission is still live (the server checks it on every hold and
    /// checkout); ends the fan's story when it is not.
    fn still_admitted(&mut self, fan: u32) -> bool {
        let live = self
            .room
            .admission(&account_id(fan), self.now_ms())
            .is_some();
        if !live {
            self.end_fan(fan, Ending::AdmissionLapsed);
        }
        live
    }

    /// A hold needs a shopper slot (the server's admission check): a fan whose slot went
    /// back takes one again if one is free; else it waits at the head of the queue (its
    /// polls claim the next free slot, then it tries again).
    fn has_slot(&mut self, fan: u32) -> bool {
        let now_ms = self.now_ms();
        let account = account_id(fan);
        if self
            .room
            .admission(&account, now_ms)
            .is_some_and(|admission| admission.slot.is_some())
        {
            return true;
        }
        let claimed = self.room.apply(&Op::Claim {
            session_id: format!("s-{fan}"),
            account_id: account,
            now_ms,
        });
        if matches!(claimed, OpResult::Claimed(ClaimOutcome::Admitted(_))) {
            self.totals.slots_retaken += 1;
            return true;
        }
        self.fans[fan as usize].stage = Stage::Waiting;
        self.poll_in(fan, 1);
        false
    }

    /// Moves the fan's slot as the server does after an answer (`Op::Shop`).
    fn shopped(&mut self, fan: u32, shop: Shop) {
        self.room.apply(&Op::Shop {
            account_id: account_id(fan),
            shop,
            at_ms: self.now_ms(),
        });
    }

    fn send_hold(&mut self, fan: u32) {
        if self.store.sold_out() {
            self.give_up_shopping(fan, Ending::SoldOut);
            return;
        }
        if !self.still_admitted(fan) || !self.has_slot(fan) {
            return;
        }
        let record = &mut self.fans[fan as usize];
        record.stage = Stage::HoldSent;
        let (key, quantity) = (record.hold_key, u32::from(record.seats_wanted));
        let command = Command::Hold(HoldRequest {
            account_id: account_id(fan),
            idempotency_key: format!("k{key}"),
            request_digest: format!("best-available:{quantity}"),
            new_hold_id: hold_id(fan, key),
            shape: HoldShape::BestAvailable {
                quantity,
                section: None,
                max_price_minor: None,
                // As the API's default: a party is split when no block is left.
                together: boxoffice_domain::best::Together::Prefer,
            },
            phase_id: None,
            ticket_types: Default::default(),
            accessible: false,
        });
        self.submit(fan, command);
    }

    fn send_checkout(&mut self, fan: u32) {
        // A waiting-list offer is paid without an admission (`server/src/routes/checkout.rs`:
        // the list is a line of its own); any other hold's checkout needs a live one.
        if !self.fans[fan as usize].from_waitlist && !self.still_admitted(fan) {
            return;
        }
        let record = &mut self.fans[fan as usize];
        record.stage = Stage::CheckoutSent;
        let key = record.hold_key;
        let command = Command::Checkout(CheckoutRequest {
            account_id: account_id(fan),
            hold_id: hold_id(fan, key),
            order_id: format!("o-{fan}-{key}"),
            grace_s: self.config.payment_grace_s,
        });
        self.submit(fan, command);
    }

    /// The checkout started: the provider is asked, and answers later.
    fn pay(&mut self, fan: u32) {
        let now_ms = u64::try_from(self.now_ms()).unwrap_or(0);
        let mut latency_us = (self.rng.lognormal(0.8, 0.5) * 1e6) as u64;
        if let Some((window, (low_ms, high_ms))) = self.faults.provider_slow
            && window.contains(now_ms)
        {
            latency_us += (self.rng.between(low_ms as f64, high_ms as f64) * 1_000.0) as u64;
        }
        let failing = self
            .faults
            .provider_failing
            .is_some_and(|(window, share)| window.contains(now_ms) && self.rng.chance(share));
        let card = self.rng.unit();
        let verdict = if failing {
            Verdict::ProviderError
        } else if card < 0.85 {
            Verdict::Approved
        } else if card < 0.93 {
            Verdict::Declined
        } else if card < 0.98 {
            // 3-D Secure: the fan confirms in the bank's page first.
            latency_us += (self.rng.between(5.0, 40.0) * 1e6) as u64;
            if self.rng.chance(0.85) {
                Verdict::Approved
            } else {
                Verdict::Declined
            }
        } else {
            // The provider's answer is lost; the reconciler settles the payment later.
            latency_us = (self.rng.between(30.0, 300.0) * 1e6) as u64;
            Verdict::Approved
        };
        let record = &mut self.fans[fan as usize];
        record.stage = Stage::Paying;
        record.verdict = verdict;
        self.schedule_in(
            latency_us,
            Event::Fan {
                fan,
                step: FanStep::ProviderAnswered,
            },
        );
    }

    fn provider_answered(&mut self, fan: u32) {
        let failed = self.fans[fan as usize].verdict == Verdict::ProviderError;
        self.meter.payment_attempts += 1;
        self.totals.payment_attempts += 1;
        if failed {
            self.meter.payment_errors += 1;
            self.totals.payment_errors += 1;
        }
        self.send_payment(fan);
    }

    fn send_payment(&mut self, fan: u32) {
        let record = &mut self.fans[fan as usize];
        record.stage = Stage::VerdictSent;
        let outcome = match record.verdict {
            Verdict::Approved => PaymentOutcome::Paid,
            Verdict::Declined | Verdict::ProviderError => PaymentOutcome::Failed,
        };
        let command = Command::Payment(PaymentRequest {
            account_id: account_id(fan),
            hold_id: hold_id(fan, record.hold_key),
            outcome,
        });
        self.submit(fan, command);
    }

    fn leave(&mut self, fan: u32) {
        match self.fans[fan as usize].plan {
            Plan::AbandonRelease => self.send_release(fan),
            Plan::AbandonLapse | Plan::Buy => self.end_fan(fan, Ending::Abandoned),
        }
    }

    /// Joins the event's waiting list for the fan's party, any seats, its offer to be hold
    /// number `hold_key` (the join is sent again after an error with the same key, as the
    /// server's client would).
    fn join_waitlist(&mut self, fan: u32) {
        if self.store.sold_out() {
            self.give_up_shopping(fan, Ending::SoldOut);
            return;
        }
        let record = &mut self.fans[fan as usize];
        record.stage = Stage::JoinSent;
        let (key, quantity) = (record.hold_key, u32::from(record.seats_wanted));
        let command = Command::WaitlistJoin(WaitlistJoin {
            waitlist_id: waitlist_id(fan),
            account_id: account_id(fan),
            quantity,
            section: None,
            max_price_minor: None,
            together: false,
            offer_hold_id: hold_id(fan, key),
            idempotency_key: "w".to_owned(),
            request_digest: format!("waitlist:{quantity}:any"),
        });
        self.submit(fan, command);
    }

    /// The join was answered: the fan is on the list (or was offered seats meanwhile).
    fn listed(&mut self, fan: u32) {
        if std::mem::take(&mut self.fans[fan as usize].offered) {
            self.offered(fan);
            return;
        }
        if self.store.sold_out() {
            self.end_fan(fan, Ending::SoldOut);
            return;
        }
        self.fans[fan as usize].stage = Stage::Listed;
        self.fans_listed += 1;
    }

    /// A committed group offered the fan seats (`Effects::waitlist_offers`).
    pub(crate) fn offer_made(&mut self, fan: u32) {
        let stage = self.fans[fan as usize].stage;
        match stage {
            Stage::Listed => {
                self.fans_listed -= 1;
                self.offered(fan);
            }
            // Its join committed but the answer is still out (lost, or being retried).
            Stage::JoinSent => self.fans[fan as usize].offered = true,
            // Its story ended (errors) after its join committed: the offer lapses.
            Stage::Done => self.trace(format_args!("fan {fan} offered after its story ended")),
            _ => self.violation(
                ViolationKind::FanStory,
                format!("fan {fan} was offered seats while not on the list ({stage:?})"),
            ),
        }
    }

    /// The fan holds the offer: a hold of its account, paid through the ordinary checkout.
    /// The server moves no slot at an offer (the checkout takes one if one is free).
    fn offered(&mut self, fan: u32) {
        self.trace(format_args!("fan {fan} takes its offer"));
        let record = &mut self.fans[fan as usize];
        record.from_waitlist = true;
        record.stage = Stage::Holding;
        self.after_hold(fan);
    }

    /// Ends every fan still on the waiting list; returns how many.
    pub(crate) fn end_listed(&mut self, ending: Ending) -> u64 {
        if self.fans_listed == 0 {
            return 0;
        }
        let mut ended = 0;
        for fan in 0..self.fans.len() {
            if self.fans[fan].stage == Stage::Listed {
                self.end_fan(fan as u32, ending);
                ended += 1;
            }
        }
        self.fans_listed = 0;
        ended
    }

    fn send_release(&mut self, fan: u32) {
        let record = &mut self.fans[fan as usize];
        record.stage = Stage::ReleaseSent;
        let command = Command::Release {
            account_id: account_id(fan),
            hold_id: hold_id(fan, record.hold_key),
        };
        self.submit(fan, command);
    }

    /// The writer answered a fan's request after its group committed.
    pub(crate) fn answer(&mut self, job: Job, decision: Decision) {
        let fan = job.fan;
        let latency_us = self.now_us - job.submitted_us;
        self.fans[fan as usize].errors = 0;
        let stage = self.fans[fan as usize].stage;
        let expected = match &decision {
            Decision::Hold(_) => Stage::HoldSent,
            Decision::Checkout(_) => Stage::CheckoutSent,
            Decision::Payment(_) => Stage::VerdictSent,
            Decision::Release(_) => Stage::ReleaseSent,
            Decision::Waitlist(_) => Stage::JoinSent,
            Decision::Compensate(_)
            | Decision::Exchange(_)
            | Decision::Transfer(_)
            | Decision::Refund(_)
            | Decision::Cancel(_)
            | Decision::Access(_) => Stage::Done,
        };
        if stage != expected {
            self.violation(
                ViolationKind::FanStory,
                format!("fan {fan} got an answer ({decision:?}) it did not wait for ({stage:?})"),
            );
            return;
        }
        match decision {
            Decision::Hold(outcome) => {
                self.meter.hold_latencies_us.push(latency_us);
                self.totals.hold_latencies_us.push(latency_us);
                self.trace(format_args!(
                    "fan {fan} hold answered {}",
                    hold_word(&outcome)
                ));
                self.hold_answered(fan, &outcome);
            }
            Decision::Checkout(decision) => {
                self.meter.checkouts += 1;
                self.totals.checkout_latencies_us.push(latency_us);
                self.trace(format_args!("fan {fan} checkout answered {decision:?}"));
                match decision {
                    CheckoutDecision::Started { .. } | CheckoutDecision::InCheckout => {
                        self.shopped(fan, Shop::Paying);
                        self.pay(fan);
                    }
                    CheckoutDecision::Expired
                    | CheckoutDecision::NotFound
                    | CheckoutDecision::NotKept => self.end_fan(fan, Ending::Lapsed),
                }
            }
            Decision::Payment(decision) => {
                self.totals.payment_latencies_us.push(latency_us);
                self.trace(format_args!("fan {fan} payment answered {decision:?}"));
                let sold = match decision {
                    PaymentDecision::Confirmed => true,
                    PaymentDecision::Cancelled { .. } => false,
                    // Settled already (a retry after a lost answer): the store says how.
                    PaymentDecision::NotKept => {
                        let key = self.fans[fan as usize].hold_key;
                        self.store
                            .holds
                            .get(&hold_id(fan, key))
                            .is_some_and(|hold| hold.status == HoldStatus::Confirmed)
                    }
                };
                let ending = match (sold, self.fans[fan as usize].verdict) {
                    (true, _) => Ending::Tickets,
                    (false, Verdict::Approved) => Ending::Lapsed,
                    (false, Verdict::Declined) => Ending::Declined,
                    (false, Verdict::ProviderError) => Ending::PaymentFailed,
                };
                self.end_fan(fan, ending);
            }
            Decision::Release(decision) => {
                self.trace(format_args!("fan {fan} release answered {decision:?}"));
                self.end_fan(fan, Ending::Abandoned);
            }
            Decision::Waitlist(decision) => {
                self.trace(format_args!("fan {fan} waitlist answered {decision:?}"));
                match decision {
                    WaitlistDecision::Joined { .. } => self.listed(fan),
                    // A retry of a join that committed: its own entry.
                    WaitlistDecision::AlreadyListed { waitlist_id: id }
                        if id == waitlist_id(fan) =>
                    {
                        self.listed(fan);
                    }
                    WaitlistDecision::Full => self.give_up_shopping(fan, Ending::GaveUp),
                    other => {
                        self.violation(
                            ViolationKind::Unexpected,
                            format!("fan {fan}'s waiting-list join was answered {other:?}"),
                        );
                        self.end_fan(fan, Ending::GaveUp);
                    }
                }
            }
            Decision::Compensate(_)
            | Decision::Exchange(_)
            | Decision::Transfer(_)
            | Decision::Refund(_)
            | Decision::Cancel(_)
            | Decision::Access(_) => {}
        }
    }

    fn hold_answered(&mut self, fan: u32, outcome: &HoldOutcome) {
        match outcome {
            HoldOutcome::Held(_) => self.got_hold(fan),
            HoldOutcome::Replayed | HoldOutcome::ReplayOfEarlierInBatch { .. } => {
                // The stored answer of the key's first decision.
                let key = format!("k{}", self.fans[fan as usize].hold_key);
                match self.store.record(&account_id(fan), &key).cloned() {
                    Some(Recorded::Held { .. }) => self.got_hold(fan),
                    Some(Recorded::Unavailable) => self.no_seats(fan, None),
                    Some(Recorded::PurchaseLimit) => self.give_up_shopping(fan, Ending::GaveUp),
                    None => {
                        self.violation(
                            ViolationKind::Unexpected,
                            format!("fan {fan}'s hold {key} replayed without a stored answer"),
                        );
                        self.end_fan(fan, Ending::GaveUp);
                    }
                }
            }
            HoldOutcome::SeatsUnavailable { largest_block, .. } => {
                self.no_seats(fan, *largest_block);
            }
            HoldOutcome::SoldOut { .. } => self.no_seats(fan, None),
            HoldOutcome::PurchaseLimit { .. } => self.give_up_shopping(fan, Ending::GaveUp),
            HoldOutcome::SaleNotOpen { .. } => {
                self.fans[fan as usize].stage = Stage::Browsing;
                self.schedule_in(
                    1_000_000,
                    Event::Fan {
                        fan,
                        step: FanStep::SendHold,
                    },
                );
            }
            // (The simulated sale is never cancelled and has no phases or chart.)
            HoldOutcome::KeyReusedWithOtherRequest
            | HoldOutcome::Invalid { .. }
            | HoldOutcome::PhaseEnded { .. }
            | HoldOutcome::OutsidePhase { .. }
            | HoldOutcome::AccessCodeRequired { .. }
            | HoldOutcome::CompanionSeatAlone { .. }
            | HoldOutcome::SeatKeptAccessible { .. }
            | HoldOutcome::EventCancelled => {
                self.violation(
                    ViolationKind::Unexpected,
                    format!("fan {fan}'s hold was refused as malformed: {outcome:?}"),
                );
                self.end_fan(fan, Ending::GaveUp);
            }
        }
    }

    fn got_hold(&mut self, fan: u32) {
        self.shopped(fan, Shop::Held);
        self.fans[fan as usize].stage = Stage::Holding;
        self.after_hold(fan);
    }

    /// With a hold (granted, or a waiting-list offer): reviews and checks out, or walks away.
    fn after_hold(&mut self, fan: u32) {
        match self.fans[fan as usize].plan {
            Plan::Buy => self.think(fan, 20.0, 0.6, FanStep::SendCheckout),
            Plan::AbandonRelease | Plan::AbandonLapse => {
                self.think(fan, 30.0, 0.6, FanStep::Leave);
            }
        }
    }

    /// The hold found no seats. Sold out: the story ends. Else, told that `largest_block`
    /// seats together are free (fewer than its party), the fan settles for them and tries
    /// again, or joins the waiting list for its whole party in a moment (seats held by others
    /// may come back), its next request a new hold number.
    fn no_seats(&mut self, fan: u32, largest_block: Option<u32>) {
        self.shopped(fan, Shop::Refused);
        if self.store.sold_out() {
            self.give_up_shopping(fan, Ending::SoldOut);
            return;
        }
        let record = &mut self.fans[fan as usize];
        record.hold_key += 1;
        record.stage = Stage::Browsing;
        let fewer = largest_block
            .and_then(|block| u8::try_from(block).ok())
            .filter(|&block| block >= 1 && block < record.seats_wanted);
        if let Some(fewer) = fewer
            && self.rng.chance(SETTLE_SHARE)
        {
            self.fans[fan as usize].seats_wanted = fewer;
            let delay_us = (self.rng.between(3.0, 8.0) * 1e6) as u64;
            self.schedule_in(
                delay_us,
                Event::Fan {
                    fan,
                    step: FanStep::SendHold,
                },
            );
            return;
        }
        self.think(
            fan,
            WAITLIST_JOIN_MEDIAN_S,
            WAITLIST_JOIN_SIGMA,
            FanStep::JoinWaitlist,
        );
    }

    /// The fan's request failed (the store's error, or a broken connection); `submitted_us`
    /// when the writer had it. The same request is sent again after a backoff.
    pub(crate) fn request_failed(&mut self, fan: u32, submitted_us: Option<u64>) {
        let stage = self.fans[fan as usize].stage;
        let retry = match stage {
            Stage::HoldSent => {
                if let Some(submitted_us) = submitted_us {
                    let latency_us = self.now_us - submitted_us;
                    self.meter.hold_latencies_us.push(latency_us);
                    self.totals.hold_latencies_us.push(latency_us);
                }
                FanStep::SendHold
            }
            Stage::CheckoutSent => {
                self.meter.checkouts += 1;
                self.meter.checkout_errors += 1;
                FanStep::SendCheckout
            }
            Stage::VerdictSent => FanStep::SendPayment,
            Stage::ReleaseSent => FanStep::SendRelease,
            Stage::JoinSent => FanStep::JoinWaitlist,
            Stage::Coming
            | Stage::Waiting
            | Stage::Listed
            | Stage::Browsing
            | Stage::Holding
            | Stage::Paying
            | Stage::Sleeping
            | Stage::Done => {
                self.violation(
                    ViolationKind::FanStory,
                    format!("fan {fan} got an error for a request it did not send ({stage:?})"),
                );
                return;
            }
        };
        self.trace(format_args!("fan {fan} request failed"));
        let record = &mut self.fans[fan as usize];
        record.errors += 1;
        if record.errors > ERROR_RETRIES_MAX {
            self.give_up_shopping(fan, Ending::StoreErrors);
            return;
        }
        let backoff_s = f64::from(1u32 << record.errors.min(5)) / 2.0;
        let delay_us = (backoff_s * self.rng.between(0.5, 1.0) * 1e6) as u64;
        self.schedule_in(delay_us, Event::Fan { fan, step: retry });
    }
}

/// A short canonical word for a hold outcome in the trace.
fn hold_word(outcome: &HoldOutcome) -> String {
    match outcome {
        HoldOutcome::Held(hold) => {
            let seats: Vec<&str> = hold.seats.iter().map(|(id, _)| id.as_str()).collect();
            format!("held {} {}", hold.hold_id, seats.join(","))
        }
        HoldOutcome::Replayed => "replayed".to_owned(),
        HoldOutcome::ReplayOfEarlierInBatch { index } => format!("replay-of {index}"),
        HoldOutcome::KeyReusedWithOtherRequest => "key-reused".to_owned(),
        HoldOutcome::SeatsUnavailable { .. } => "unavailable".to_owned(),
        HoldOutcome::SoldOut { .. } => "sold-out".to_owned(),
        HoldOutcome::PurchaseLimit { .. } => "purchase-limit".to_owned(),
        HoldOutcome::SaleNotOpen { .. } => "not-open".to_owned(),
        HoldOutcome::EventCancelled => "cancelled".to_owned(),
        HoldOutcome::PhaseEnded { .. } => "phase-ended".to_owned(),
        HoldOutcome::OutsidePhase { .. } => "outside-phase".to_owned(),
        HoldOutcome::AccessCodeRequired { .. } => "code-required".to_owned(),
        HoldOutcome::CompanionSeatAlone { .. } => "companion-alone".to_owned(),
        HoldOutcome::SeatKeptAccessible { .. } => "kept-accessible".to_owned(),
        HoldOutcome::Invalid { .. } => "invalid".to_owned(),
    }
}
