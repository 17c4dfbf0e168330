//! The seat map's catch-up: `since` (query of `/seatmap/changes` and `/seatmap/stream`) and
//! `Last-Event-ID` (header of a reconnecting stream) as the server reads them, the stored
//! change rows (`EventChanges::decode`), and `SeatMap::changes_since` on a map built from
//! the input. Checks: `since` is a version 0 to 2^63-1 or a 422; a decoded row encodes and
//! decodes to itself; the changes since `v` are exactly the kept batches after `v`, in
//! order and without a gap, up to the map's version, or a refusal that says why.
//!
//! Input: `since NUL Last-Event-ID NUL change-row NUL <map, batches and a version>`.

#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use boxoffice_domain::seatmap::{
    ChangeBatch, MapStatus, SeatChange, SeatMap, SinceError, TierChange,
};
use boxoffice_fuzz::split_nul;
use boxoffice_server::fuzzing::stream_start;
use boxoffice_store::seatmap::EventChanges;
use libfuzzer_sys::fuzz_target;

/// Versions are PostgreSQL bigints.
const VERSION_MAX: u64 = i64::MAX as u64;

fuzz_target!(|data: &[u8]| {
    let (since, rest) = split_nul(data);
    let (last_event_id, rest) = split_nul(rest);
    let (row, rest) = split_nul(rest);

    let since = since.and_then(|raw| std::str::from_utf8(raw).ok());
    let asked = match stream_start(since, last_event_id) {
        Ok((since, last_event_id)) => {
            assert!(since.is_none_or(|v| v <= VERSION_MAX));
            last_event_id.flatten().or(since)
        }
        Err(error) => {
            assert_eq!(error.status.as_u16(), 422, "{error:?}");
            None
        }
    };

    if let Some(row) = row.and_then(|raw| std::str::from_utf8(raw).ok())
        && let Ok(changes) = EventChanges::decode(row)
    {
        let again = EventChanges::decode(&changes.encode()).expect("an encoded row decodes");
        assert_eq!(again, changes);
    }

    let mut input = Unstructured::new(rest);
    let _ = catch_up(&mut input, asked);
});

fn catch_up(input: &mut Unstructured<'_>, asked: Option<u64>) -> arbitrary::Result<()> {
    let seats = input.int_in_range(0..=64usize)?;
    let tiers = input.int_in_range(0..=4usize)?;
    let start = input.int_in_range(0..=VERSION_MAX)?;
    let log_changes_max = input.int_in_range(0..=32usize)?;
    let mut map = SeatMap::new(
        vec![MapStatus::Available; seats],
        vec![0; tiers],
        start,
        log_changes_max,
    );
    let mut applied = Vec::new();
    for _ in 0..input.int_in_range(0..=16u8)? {
        let next = map.version().saturating_add(1);
        let version = if bool::arbitrary(input)? {
            next
        } else {
            input.int_in_range(0..=VERSION_MAX)?
        };
        let batch = ChangeBatch {
            version,
            changes: (0..input.int_in_range(0..=4u8)?)
                .map(|_| {
                    Ok(SeatChange {
                        seat: u32::arbitrary(input)? % (seats as u32 + 1),
                        status: status(input)?,
                    })
                })
                .collect::<arbitrary::Result<_>>()?,
            tiers: (0..input.int_in_range(0..=2u8)?)
                .map(|_| {
                    Ok(TierChange {
                        tier: u32::arbitrary(input)? % (tiers as u32 + 1),
                        available: i64::arbitrary(input)?,
                    })
                })
                .collect::<arbitrary::Result<_>>()?,
        };
        if version == VERSION_MAX.saturating_add(1) {
            break; // no version after the last bigint
        }
        let before = map.version();
        match map.apply(batch.clone()) {
            Ok(()) => {
                assert_eq!(map.version(), version);
                applied.push(batch);
            }
            Err(_) => assert_eq!(map.version(), before, "a refused batch changed the map"),
        }
    }
    let since = match asked {
        Some(since) => since,
        None => input.int_in_range(0..=VERSION_MAX)?,
    };
    match map.changes_since(since) {
        Ok(batches) => {
            assert!(since <= map.version());
            if let (Some(first), Some(last)) = (batches.first(), batches.last()) {
                assert_eq!(first.version, since + 1, "a gap after {since}");
                assert_eq!(last.version, map.version());
            } else {
                assert_eq!(since, map.version(), "no changes, but the map moved on");
            }
            for pair in batches.windows(2) {
                assert_eq!(pair[1].version, pair[0].version + 1);
            }
            for batch in &batches {
                assert!(applied.contains(batch), "a batch that was never applied");
            }
        }
        Err(SinceError::Ahead { asked, at }) => {
            assert_eq!(asked, since);
            assert!(since > at);
        }
        Err(SinceError::TooOld { oldest_kept, .. }) => assert!(since + 1 < oldest_kept),
    }
    Ok(())
}

fn status(input: &mut Unstructured<'_>) -> arbitrary::Result<MapStatus> {
    Ok(match input.int_in_range(0..=2u8)? {
        0 => MapStatus::Available,
        1 => MapStatus::Held {
            until_ms: i64::arbitrary(input)?,
        },
        _ => MapStatus::Sold,
    })
}
