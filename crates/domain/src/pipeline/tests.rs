//! The pipeline driven by hand: every load, commit and refusal is an input of the test, so
//! each case is a short script of what the store did, without IO.

use time::Duration;
use time::macros::datetime;

use super::*;
use crate::decide::{HoldOutcome, HoldRequest, HoldShape, SeatRow};
use crate::engine::{CheckoutRequest, EngineSnapshot};
use crate::event::SaleRules;
use crate::hold::SeatStatus;

const NOW: OffsetDateTime = datetime!(2026-12-01 10:00 UTC);
const HOLD_TTL_S: u32 = 300;

type TestPipeline = Pipeline<u32, String>;

fn engine(seats: usize) -> EventEngine {
    let rules = SaleRules {
        section_order: vec!["A".into()],
        on_sale_at: NOW - Duration::hours(1),
        hold_ttl_s: HOLD_TTL_S,
        max_seats_per_hold: 4,
        max_tickets_per_account: 4,
        currency: "EUR".into(),
        prices: Default::default(),
        accessibility: Default::default(),
    };
    let snapshot = EngineSnapshot {
        seats: (1..=seats)
            .map(|n| SeatRow {
                seat_id: format!("A-1-{n}"),
                status: SeatStatus::Available,
                hold_id: None,
                hold_expires_at: None,
                price_minor: 1000,
            })
            .collect(),
        ..EngineSnapshot::default()
    };
    EventEngine::load(rules, snapshot, NOW)
}

/// A hold of one named seat by account `a{ticket}`.
fn hold(ticket: u32, seat: usize) -> Command {
    Command::Hold(HoldRequest {
        account_id: format!("a{ticket}"),
        idempotency_key: format!("k{ticket}"),
        request_digest: format!("seat {seat}"),
        new_hold_id: format!("h{ticket}"),
        shape: HoldShape::Seats {
            seat_ids: vec![format!("A-1-{seat}")],
        },
        phase_id: None,
        ticket_types: Default::default(),
        accessible: false,
    })
}

fn release(ticket: u32) -> Command {
    Command::Release {
        account_id: format!("a{ticket}"),
        hold_id: format!("h{ticket}"),
    }
}

fn clock() -> Clock {
    Clock::exact(NOW)
}

fn drain(pipeline: &mut TestPipeline, clock: Clock) -> Vec<Action<u32, String>> {
    std::iter::from_fn(|| pipeline.poll(clock)).collect()
}

/// The groups the actions send, in order.
fn commits(actions: Vec<Action<u32, String>>) -> Vec<Group<u32>> {
    actions
        .into_iter()
        .filter_map(|action| match action {
            Action::Commit(group) => Some(group),
            _ => None,
        })
        .collect()
}

fn tickets(group: &Group<u32>) -> Vec<u32> {
    group.jobs.iter().map(|job| job.context).collect()
}

/// Submits `commands` (ticket numbers from 1) and loads the engine: the pipeline's first
/// groups, sent.
fn loaded_with(pipeline: &mut TestPipeline, commands: Vec<Command>) -> Vec<Group<u32>> {
    for (ticket, command) in (1..).zip(commands) {
        pipeline.submit(command, ticket);
    }
    let actions = drain(pipeline, clock());
    assert!(matches!(actions.as_slice(), [Action::Load]), "{actions:?}");
    pipeline.loaded(Ok(engine(8)));
    commits(drain(pipeline, clock()))
}

#[test]
fn no_load_without_a_command() {
    let mut pipeline = TestPipeline::new();
    assert!(drain(&mut pipeline, clock()).is_empty());
    pipeline.submit(hold(1, 1), 1);
    let actions = drain(&mut pipeline, clock());
    assert!(matches!(actions.as_slice(), [Action::Load]), "{actions:?}");
    // One load at a time.
    pipeline.submit(hold(2, 2), 2);
    assert!(drain(&mut pipeline, clock()).is_empty());
}

#[test]
fn sale_lane_goes_first_and_answers_wait_for_the_commit() {
    let mut pipeline = TestPipeline::new();
    let groups = loaded_with(&mut pipeline, vec![hold(1, 1), hold(2, 2), release(9)]);
    assert_eq!(groups.len(), 1);
    assert_eq!(
        tickets(&groups[0]),
        [3, 1, 2],
        "the release first, then holds in order"
    );
    assert_eq!(groups[0].kind, GroupKind::Commands);
    assert_eq!(groups[0].decisions.len(), 3);
    let group = groups.into_iter().next().unwrap();
    pipeline.committed(group, true);
    let actions = drain(&mut pipeline, clock());
    let answered: Vec<u32> = actions
        .iter()
        .filter_map(|action| match action {
            Action::Answer(group) => Some(tickets(group)),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(answered, [3, 1, 2]);
}

#[test]
fn a_group_holds_at_most_group_commands_max() {
    let mut pipeline = TestPipeline::new();
    let commands: Vec<Command> = (0..GROUP_COMMANDS_MAX + 3)
        .map(|n| hold(0, n % 8))
        .collect();
    let groups = loaded_with(&mut pipeline, commands);
    let sizes: Vec<usize> = groups.iter().map(|group| group.jobs.len()).collect();
    assert_eq!(sizes, [GROUP_COMMANDS_MAX, 3]);
}

#[test]
fn two_groups_in_flight_and_the_third_waits_for_a_commit() {
    let mut pipeline = TestPipeline::new();
    let groups = loaded_with(&mut pipeline, vec![hold(1, 1)]);
    let mut sent: VecDeque<Group<u32>> = groups.into();
    pipeline.submit(hold(2, 2), 2);
    sent.extend(commits(drain(&mut pipeline, clock())));
    pipeline.submit(hold(3, 3), 3);
    assert!(commits(drain(&mut pipeline, clock())).is_empty());
    assert_eq!(pipeline.in_flight_len(), GROUPS_IN_FLIGHT_MAX);
    assert_eq!(pipeline.queued_len(), 1);
    // The second group was decided on top of the first: it saw seat 1 taken.
    pipeline.committed(sent.pop_front().unwrap(), true);
    let actions = drain(&mut pipeline, clock());
    assert!(matches!(actions[0], Action::Answer(_)), "{actions:?}");
    let third = commits(actions);
    assert_eq!(third.len(), 1);
    assert_eq!(tickets(&third[0]), [3]);
    assert_eq!(third[0].id, 2);
}

#[test]
fn a_refused_group_and_its_successors_are_decided_again_before_newer_commands() {
    let mut pipeline = TestPipeline::new();
    let mut sent: VecDeque<Group<u32>> = loaded_with(&mut pipeline, vec![hold(1, 1)]).into();
    pipeline.submit(hold(2, 2), 2);
    sent.extend(commits(drain(&mut pipeline, clock())));
    assert_eq!(sent.len(), 2);
    pipeline.refused(sent.pop_front().unwrap(), Refusal::Own, "conflict".into());
    // No load while the second group is in flight, nor a group on a thrown-away engine.
    pipeline.submit(hold(3, 3), 3);
    assert!(drain(&mut pipeline, clock()).is_empty());
    assert!(pipeline.engine().is_none());
    pipeline.refused(
        sent.pop_front().unwrap(),
        Refusal::Predecessor,
        "after".into(),
    );
    let actions = drain(&mut pipeline, clock());
    assert!(matches!(actions.as_slice(), [Action::Load]), "{actions:?}");
    pipeline.loaded(Ok(engine(8)));
    let again = commits(drain(&mut pipeline, clock()));
    assert_eq!(again.len(), 2, "the redo first, then the lanes");
    assert_eq!(tickets(&again[0]), [1, 2]);
    let attempts: Vec<u32> = again[0].jobs.iter().map(Job::attempts).collect();
    assert_eq!(attempts, [1, 0], "the predecessor's failure does not count");
    assert_eq!(tickets(&again[1]), [3]);
}

#[test]
fn a_refusal_with_nothing_left_to_redo_still_reloads() {
    let mut pipeline = TestPipeline::new();
    let group = loaded_with(&mut pipeline, vec![hold(1, 1)]).remove(0);
    pipeline.refused(group, Refusal::Final, "bad".into());
    let actions = drain(&mut pipeline, clock());
    assert!(
        matches!(actions.as_slice(), [Action::Fail(job, error), Action::Load] if job.context == 1 && error == "bad"),
        "{actions:?}"
    );
}

#[test]
fn from_attempt_group_attempts_alone_each_command_is_decided_alone() {
    let mut pipeline = TestPipeline::new();
    let mut groups = loaded_with(&mut pipeline, vec![hold(1, 1), hold(2, 2), hold(3, 3)]);
    for attempt in 1..GROUP_ATTEMPTS_ALONE {
        assert_eq!(groups.len(), 1, "attempt {attempt}: still together");
        pipeline.refused(groups.remove(0), Refusal::Own, "conflict".into());
        let actions = drain(&mut pipeline, clock());
        assert!(matches!(actions.as_slice(), [Action::Load]), "{actions:?}");
        pipeline.loaded(Ok(engine(8)));
        groups = commits(drain(&mut pipeline, clock()));
    }
    assert_eq!(groups.len(), 1);
    pipeline.refused(groups.remove(0), Refusal::Own, "conflict".into());
    drain(&mut pipeline, clock());
    pipeline.loaded(Ok(engine(8)));
    let alone = commits(drain(&mut pipeline, clock()));
    let sizes: Vec<usize> = alone.iter().map(|group| group.jobs.len()).collect();
    assert_eq!(sizes, [1, 1], "one at a time, two in flight");
    assert_eq!(tickets(&alone[0]), [1]);
    assert_eq!(tickets(&alone[1]), [2]);
}

#[test]
fn a_command_refused_group_attempts_max_times_gets_the_error() {
    let mut pipeline = TestPipeline::new();
    let mut group = loaded_with(&mut pipeline, vec![hold(1, 1)]).remove(0);
    for attempt in 1..GROUP_ATTEMPTS_MAX {
        pipeline.refused(group, Refusal::Own, format!("refusal {attempt}"));
        let actions = drain(&mut pipeline, clock());
        assert!(matches!(actions.as_slice(), [Action::Load]), "{actions:?}");
        pipeline.loaded(Ok(engine(8)));
        group = commits(drain(&mut pipeline, clock())).remove(0);
        assert_eq!(group.jobs[0].attempts(), attempt);
    }
    pipeline.refused(group, Refusal::Own, "last".into());
    let actions = drain(&mut pipeline, clock());
    assert!(
        matches!(actions.as_slice(), [Action::Fail(job, error), Action::Load] if job.context == 1 && error == "last"),
        "{actions:?}"
    );
}

#[test]
fn sequence_moves_count_apart_up_to_their_own_bound() {
    let mut pipeline = TestPipeline::new();
    let mut group = loaded_with(&mut pipeline, vec![hold(1, 1)]).remove(0);
    for moved in 1..SEQUENCE_MOVES_MAX {
        pipeline.refused(group, Refusal::Moved, "moved".into());
        drain(&mut pipeline, clock());
        pipeline.loaded(Ok(engine(8)));
        group = commits(drain(&mut pipeline, clock())).remove(0);
        assert_eq!(
            (group.jobs[0].attempts(), group.jobs[0].moved()),
            (0, moved)
        );
    }
    pipeline.refused(group, Refusal::Moved, "moved".into());
    let actions = drain(&mut pipeline, clock());
    assert!(matches!(actions[0], Action::Fail(..)), "{actions:?}");
}

#[test]
fn a_failed_load_answers_every_waiting_command_and_the_next_command_loads_again() {
    let mut pipeline = TestPipeline::new();
    pipeline.submit(hold(1, 1), 1);
    pipeline.submit(release(2), 2);
    drain(&mut pipeline, clock());
    pipeline.loaded(Err("store down".into()));
    let failed: Vec<(u32, String)> = drain(&mut pipeline, clock())
        .into_iter()
        .map(|action| match action {
            Action::Fail(job, error) => (job.context, error),
            other => panic!("only failures: {other:?}"),
        })
        .collect();
    assert_eq!(
        failed,
        [(2, "store down".to_owned()), (1, "store down".to_owned())]
    );
    pipeline.submit(hold(3, 3), 3);
    let actions = drain(&mut pipeline, clock());
    assert!(matches!(actions.as_slice(), [Action::Load]), "{actions:?}");
}

#[test]
fn a_lapsed_hold_arms_the_timer_and_an_expiry_group_ends_it() {
    let mut pipeline = TestPipeline::new();
    pipeline.submit(hold(1, 1), 1);
    drain(&mut pipeline, clock());
    pipeline.loaded(Ok(engine(8)));
    let actions = drain(&mut pipeline, clock());
    let deadline = NOW + Duration::seconds(i64::from(HOLD_TTL_S));
    // The deadline is armed as soon as the hold is decided (a group decided on top of it
    // sees it too).
    assert!(
        matches!(actions.as_slice(), [Action::Commit(_), Action::ArmTimer(at)] if *at == deadline),
        "{actions:?}"
    );
    let group = commits(actions).remove(0);
    assert!(matches!(
        group.decisions[0],
        Decision::Hold(HoldOutcome::Held(_))
    ));
    pipeline.committed(group, true);
    let actions = drain(&mut pipeline, clock());
    assert!(
        matches!(actions.as_slice(), [Action::Answer(_)]),
        "{actions:?}"
    );
    // Armed once: nothing more before the deadline.
    assert!(drain(&mut pipeline, Clock::exact(deadline - Duration::SECOND)).is_empty());
    pipeline.tick(deadline);
    // What changed elsewhere first: a checkout may have extended the hold.
    let actions = drain(&mut pipeline, Clock::exact(deadline));
    assert!(
        matches!(actions.as_slice(), [Action::CatchUp]),
        "{actions:?}"
    );
    pipeline.caught_up(true);
    let expiry = commits(drain(&mut pipeline, Clock::exact(deadline)));
    assert_eq!(expiry.len(), 1);
    assert_eq!(expiry[0].kind, GroupKind::Expiry);
    assert!(expiry[0].jobs.is_empty());
    assert_eq!(expiry[0].effects.holds_expired().count(), 1);
}

#[test]
fn a_decision_about_a_hold_the_engine_does_not_keep_asks_for_a_catch_up_first() {
    let mut pipeline = TestPipeline::new();
    let checkout = Command::Checkout(CheckoutRequest {
        account_id: "a1".into(),
        hold_id: "made-elsewhere".into(),
        order_id: "o1".into(),
        grace_s: 0,
    });
    let group = loaded_with(&mut pipeline, vec![checkout]).remove(0);
    assert!(matches!(
        group.decisions[0],
        Decision::Checkout(CheckoutDecision::NotKept)
    ));
    pipeline.submit(hold(2, 2), 2);
    assert!(
        drain(&mut pipeline, clock()).is_empty(),
        "no group while stale"
    );
    pipeline.committed(group, true);
    let actions = drain(&mut pipeline, clock());
    assert!(
        matches!(actions.as_slice(), [Action::Answer(_), Action::CatchUp]),
        "{actions:?}"
    );
    pipeline.caught_up(true);
    let next = commits(drain(&mut pipeline, clock()));
    assert_eq!(tickets(&next[0]), [2]);
}

#[test]
fn a_commit_that_shows_the_engine_wrong_reloads_before_the_next_group() {
    let mut pipeline = TestPipeline::new();
    let group = loaded_with(&mut pipeline, vec![hold(1, 1)]).remove(0);
    pipeline.submit(hold(2, 1), 2);
    let second = commits(drain(&mut pipeline, clock())).remove(0);
    assert!(matches!(
        second.decisions[0],
        Decision::Hold(HoldOutcome::SeatsUnavailable { .. })
    ));
    pipeline.committed(group, false);
    pipeline.refused(second, Refusal::Predecessor, "after".into());
    let actions = drain(&mut pipeline, clock());
    assert!(
        matches!(actions.as_slice(), [Action::Answer(_), Action::Load]),
        "{actions:?}"
    );
}

#[test]
fn stop_answers_the_queue_and_forgets_the_engine() {
    let mut pipeline = TestPipeline::new();
    let _sent = loaded_with(&mut pipeline, vec![hold(1, 1)]);
    pipeline.submit(hold(2, 2), 2);
    assert_eq!(commits(drain(&mut pipeline, clock())).len(), 1);
    pipeline.submit(hold(3, 3), 3);
    pipeline.submit(hold(4, 4), 4);
    assert!(drain(&mut pipeline, clock()).is_empty());
    pipeline.stop(&"crashed".to_owned());
    assert!(pipeline.engine().is_none());
    assert_eq!(pipeline.in_flight_len(), 0);
    let failed: Vec<u32> = drain(&mut pipeline, clock())
        .into_iter()
        .filter_map(|action| match action {
            Action::Fail(job, _) => Some(job.context),
            _ => None,
        })
        .collect();
    assert_eq!(failed, [3, 4]);
}

#[test]
fn a_group_after_a_pause_reads_the_change_feed_first_but_not_after_a_load() {
    let mut pipeline = TestPipeline::new();
    let group = loaded_with(&mut pipeline, vec![hold(1, 1)]).remove(0);
    assert_eq!(tickets(&group), [1], "a fresh engine decides at once");
    pipeline.committed(group, true);
    drain(&mut pipeline, clock());
    pipeline.submit(hold(2, 2), 2);
    let actions = drain(&mut pipeline, clock());
    assert!(
        matches!(actions.as_slice(), [Action::CatchUp]),
        "{actions:?}"
    );
    pipeline.submit(hold(3, 3), 3);
    assert!(drain(&mut pipeline, clock()).is_empty(), "one catch-up");
    pipeline.caught_up(true);
    let groups = commits(drain(&mut pipeline, clock()));
    assert_eq!(groups.len(), 1);
    assert_eq!(tickets(&groups[0]), [2, 3]);
}

#[test]
fn a_failed_catch_up_loads_the_engine_again() {
    let mut pipeline = TestPipeline::new();
    let group = loaded_with(&mut pipeline, vec![hold(1, 1)]).remove(0);
    pipeline.committed(group, true);
    drain(&mut pipeline, clock());
    pipeline.mark_stale();
    pipeline.submit(hold(2, 2), 2);
    let actions = drain(&mut pipeline, clock());
    assert!(
        matches!(actions.as_slice(), [Action::CatchUp]),
        "{actions:?}"
    );
    pipeline.caught_up(false);
    let actions = drain(&mut pipeline, clock());
    assert!(matches!(actions.as_slice(), [Action::Load]), "{actions:?}");
    pipeline.loaded(Ok(engine(8)));
    let groups = commits(drain(&mut pipeline, clock()));
    assert_eq!(tickets(&groups[0]), [2]);
}

#[test]
fn a_reload_keeps_what_the_engine_measured_of_the_sale() {
    let mut pipeline = TestPipeline::new();
    let group = loaded_with(&mut pipeline, vec![hold(1, 1)]).remove(0);
    let mut measured = crate::hold_ttl::HoldToPay::default();
    for ms in [1_000, 2_000, 3_000] {
        measured.record(ms);
    }
    pipeline.engine_mut().unwrap().keep_measured(measured);
    pipeline.refused(group, Refusal::Own, "conflict".into());
    let actions = drain(&mut pipeline, clock());
    assert!(matches!(actions.as_slice(), [Action::Load]), "{actions:?}");
    // The store's fresh snapshot knows nothing of the times from grant to checkout start.
    pipeline.loaded(Ok(engine(8)));
    assert_eq!(pipeline.engine().unwrap().hold_to_pay().len(), 3);
}
