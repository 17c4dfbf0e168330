//! One event's whole waiting room as one deterministic state machine: the queue, the active
//! shoppers and the operator's controls.
//!
//! Every change is an [`Op`] applied by [`Room::apply`]. Ops carry everything they depend on
//! (the time, the new session id), so replaying the same ops gives the same room: the
//! in-process backend persists a room as its journal of ops, and the Redis backend must
//! answer every op exactly as this model does (the shared backend tests check both).

use serde::{Deserialize, Serialize};

use crate::admission::{
    ActiveShoppers, Admission, AdmitOutcome, HOLD_WINDOW_DEFAULT_MS, Shop, SlotCounts,
};
use crate::controller::ControllerConfig;
use crate::queue::{EventQueue, JoinError, Place, QueueConfig, QueueView, Status};

/// The fixed settings of one event's waiting room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoomConfig {
    pub queue: QueueConfig,
    pub max_active_shoppers: u64,
    pub admission_ttl_ms: i64,
    /// How long an admitted fan's slot stays idle (no hold yet, or after a refusal) before it
    /// is given back (rooms created before it existed get the default, a minute).
    #[serde(default = "hold_window_default_ms")]
    pub hold_window_ms: i64,
    /// The release controller's settings (rooms created before they existed get the
    /// defaults).
    #[serde(default)]
    pub release: ControllerConfig,
}

fn hold_window_default_ms() -> i64 {
    HOLD_WINDOW_DEFAULT_MS
}

/// The operator's controls (`PUT /v1/admin/events/{eventId}/queue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Controls {
    pub paused: bool,
    /// `None`: the controller's own ceiling.
    pub max_release_per_s: Option<u64>,
}

/// One change to a room.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum Op {
    #[serde(rename_all = "camelCase")]
    Join {
        account_id: String,
        now_ms: i64,
    },
    /// A released account asks for its admission; `session_id` is used if a new one starts.
    #[serde(rename_all = "camelCase")]
    Claim {
        account_id: String,
        session_id: String,
        now_ms: i64,
    },
    /// The account's trip ended at `at_ms` (order confirmed, the fan left): the admission
    /// ends with its slot. (A hold that ended without a sale is `Shop::Ended`: the slot only.)
    #[serde(rename_all = "camelCase")]
    End {
        account_id: String,
        at_ms: i64,
    },
    /// What the account's shopping did to its slot at `at_ms` (hold granted, checkout
    /// started, hold refused): see [`Shop`].
    #[serde(rename_all = "camelCase")]
    Shop {
        account_id: String,
        shop: Shop,
        at_ms: i64,
    },
    /// Once per controller step: open if due, expire admissions, release up to `release`.
    #[serde(rename_all = "camelCase")]
    Tick {
        now_ms: i64,
        release: u64,
    },
    Control(Controls),
}

/// What a claim (`Op::Claim`) answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum ClaimOutcome {
    /// A slot is held for this admission (new or the live one, which is returned unchanged).
    Admitted(Admission),
    /// Released, but every slot is taken: wait at the head of the queue.
    Full,
    /// Not released yet (or the account never joined).
    NotReleased,
    /// Released, but the claim window passed.
    Expired,
}

/// What one op returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    Joined(Result<Place, JoinError>),
    Claimed(ClaimOutcome),
    Ended(bool),
    /// Whether the slot changed.
    Shopped(bool),
    Ticked {
        released: u64,
    },
    Controlled(Controls),
}

/// Counters for the admin endpoint and `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoomStats {
    pub joined: u64,
    pub waiting: u64,
    pub serving: u64,
    /// Shopper slots taken (idle, holding and paying; expired ones not yet swept included
    /// until the next tick).
    pub active: u64,
    /// The slots by what their fans are doing.
    #[serde(default)]
    pub slots: SlotCounts,
    pub max_active_shoppers: u64,
    /// Admissions ever started.
    pub admitted_total: u64,
    pub controls: Controls,
}

/// One event's waiting room. See the module docs.
#[derive(Debug)]
pub struct Room {
    config: RoomConfig,
    queue: EventQueue,
    shoppers: ActiveShoppers,
    admitted_total: u64,
    controls: Controls,
}

impl Room {
    pub fn new(config: RoomConfig) -> Self {
        Self {
            config,
            queue: EventQueue::new(config.queue),
            shoppers: ActiveShoppers::new(config.max_active_shoppers),
            admitted_total: 0,
            controls: Controls {
                paused: false,
                max_release_per_s: None,
            },
        }
    }

    pub fn config(&self) -> RoomConfig {
        self.config
    }

    pub fn view(&self) -> &QueueView {
        self.queue.view()
    }

    pub fn queue(&self) -> &EventQueue {
        &self.queue
    }

    pub fn controls(&self) -> Controls {
        self.controls
    }

    /// The live admission of `account_id` at `now_ms`.
    pub fn admission(&self, account_id: &str, now_ms: i64) -> Option<Admission> {
        self.shoppers.get(account_id, now_ms)
    }

    pub fn stats(&self) -> RoomStats {
        RoomStats {
            joined: self.queue.len(),
            waiting: self.queue.waiting(),
            serving: self.queue.serving(),
            active: self.shoppers.active(),
            slots: self.shoppers.slots(),
            max_active_shoppers: self.shoppers.max_active_shoppers(),
            admitted_total: self.admitted_total,
            controls: self.controls,
        }
    }

    pub fn apply(&mut self, op: &Op) -> OpResult {
        match op {
            Op::Join { account_id, now_ms } => {
                OpResult::Joined(self.queue.join(account_id, *now_ms))
            }
            Op::Claim {
                account_id,
                session_id,
                now_ms,
            } => OpResult::Claimed(self.claim(account_id, session_id, *now_ms)),
            Op::End { account_id, at_ms } => {
                OpResult::Ended(self.shoppers.release_admitted_by(account_id, *at_ms))
            }
            Op::Shop {
                account_id,
                shop,
                at_ms,
            } => OpResult::Shopped(self.shoppers.shop(account_id, *shop, *at_ms)),
            Op::Tick { now_ms, release } => {
                self.queue.open_if_due(*now_ms);
                self.shoppers.expire(*now_ms);
                OpResult::Ticked {
                    released: self.queue.advance(*release, *now_ms),
                }
            }
            Op::Control(controls) => {
                self.controls = *controls;
                OpResult::Controlled(self.controls)
            }
        }
    }

    fn claim(&mut self, account_id: &str, session_id: &str, now_ms: i64) -> ClaimOutcome {
        let status = self.queue.status(account_id, now_ms);
        match status {
            None | Some(Status::Waiting { .. }) => return ClaimOutcome::NotReleased,
            // An admission taken inside the window stays good until its own TTL (and takes a
            // slot again if it gave its slot back); the window itself admits no one new.
            Some(Status::Expired { .. }) if self.shoppers.get(account_id, now_ms).is_none() => {
                return ClaimOutcome::Expired;
            }
            Some(Status::Expired { .. } | Status::Released { .. }) => {}
        }
        match self.shoppers.admit(
            account_id,
            session_id,
            now_ms,
            self.config.admission_ttl_ms,
            self.config.hold_window_ms,
        ) {
            AdmitOutcome::Admitted(admission) => {
                self.admitted_total += 1;
                ClaimOutcome::Admitted(admission)
            }
            AdmitOutcome::AlreadyAdmitted(admission) => ClaimOutcome::Admitted(admission),
            AdmitOutcome::Full { .. } => ClaimOutcome::Full,
        }
    }

    /// Single-condition assertions; tests call this after every step.
    pub fn invariants(&self) {
        self.queue.invariants();
        self.shoppers.invariants();
        assert!(self.shoppers.active() <= self.shoppers.max_active_shoppers());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::QueuePolicy;

    fn room(max_active: u64) -> Room {
        Room::new(RoomConfig {
            queue: QueueConfig::new(QueuePolicy::Fifo, 1_000, 1),
            max_active_shoppers: max_active,
            admission_ttl_ms: 500,
            hold_window_ms: 10_000,
            release: ControllerConfig::default(),
        })
    }

    fn join(r: &mut Room, account: &str, now_ms: i64) {
        let OpResult::Joined(Ok(_)) = r.apply(&Op::Join {
            account_id: account.into(),
            now_ms,
        }) else {
            panic!("join refused");
        };
    }

    fn claim(r: &mut Room, account: &str, session: &str, now_ms: i64) -> ClaimOutcome {
        match r.apply(&Op::Claim {
            account_id: account.into(),
            session_id: session.into(),
            now_ms,
        }) {
            OpResult::Claimed(outcome) => outcome,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn claims_follow_release_cap_and_end() {
        let mut r = room(1);
        join(&mut r, "a", 900);
        join(&mut r, "b", 900);
        assert_eq!(claim(&mut r, "a", "s1", 900), ClaimOutcome::NotReleased);
        r.apply(&Op::Tick {
            now_ms: 1_000,
            release: 2,
        });
        let ClaimOutcome::Admitted(first) = claim(&mut r, "a", "s1", 1_001) else {
            panic!("a not admitted");
        };
        assert_eq!(first.session_id, "s1");
        assert_eq!(
            claim(&mut r, "a", "s9", 1_002),
            ClaimOutcome::Admitted(first.clone())
        );
        assert_eq!(claim(&mut r, "b", "s2", 1_002), ClaimOutcome::Full);
        // A message about something that ended before the admission began changes nothing.
        assert_eq!(
            r.apply(&Op::End {
                account_id: "a".into(),
                at_ms: 1_000
            }),
            OpResult::Ended(false)
        );
        assert_eq!(
            r.apply(&Op::End {
                account_id: "a".into(),
                at_ms: 1_003
            }),
            OpResult::Ended(true)
        );
        assert!(matches!(
            claim(&mut r, "b", "s2", 1_004),
            ClaimOutcome::Admitted(_)
        ));
        // The admission TTL frees the slot at the next tick.
        r.apply(&Op::Tick {
            now_ms: 1_600,
            release: 0,
        });
        assert_eq!(r.stats().active, 0);
        assert_eq!(r.stats().admitted_total, 2);
        r.invariants();
    }

    #[test]
    fn replaying_the_ops_rebuilds_the_same_room() {
        let mut r = room(3);
        let mut ops = Vec::new();
        for i in 0..20 {
            ops.push(Op::Join {
                account_id: format!("acct-{i}"),
                now_ms: 990 + i,
            });
        }
        ops.push(Op::Tick {
            now_ms: 1_000,
            release: 5,
        });
        for i in 0..6 {
            ops.push(Op::Claim {
                account_id: format!("acct-{i}"),
                session_id: format!("s{i}"),
                now_ms: 1_010,
            });
        }
        ops.push(Op::End {
            account_id: "acct-0".into(),
            at_ms: 1_020,
        });
        ops.push(Op::Shop {
            account_id: "acct-1".into(),
            shop: Shop::Held,
            at_ms: 1_021,
        });
        ops.push(Op::Shop {
            account_id: "acct-2".into(),
            shop: Shop::Refused,
            at_ms: 1_022,
        });
        ops.push(Op::Control(Controls {
            paused: true,
            max_release_per_s: Some(7),
        }));
        let results: Vec<OpResult> = ops.iter().map(|op| r.apply(op)).collect();
        let lines: Vec<String> = ops
            .iter()
            .map(|op| serde_json::to_string(op).unwrap())
            .collect();
        let mut replayed = room(3);
        let replay_results: Vec<OpResult> = lines
            .iter()
            .map(|line| replayed.apply(&serde_json::from_str(line).unwrap()))
            .collect();
        assert_eq!(results, replay_results);
        assert_eq!(
            r.stats().slots,
            SlotCounts {
                idle: 1,
                holding: 1,
                paying: 0
            }
        );
        assert_eq!(r.stats(), replayed.stats());
        assert_eq!(r.view(), replayed.view());
    }
}
