//! The in-process backend passes the shared backend tests, and its journal survives a
//! restart and a torn last line.

use std::sync::Arc;

use boxoffice_waitroom_state::memory::{JOURNAL_FILE, MemoryRooms};
use boxoffice_waitroom_state::{RoomStore, conformance};

fn journaled() -> (tempdir::Dir, Arc<dyn RoomStore>) {
    let dir = tempdir::Dir::new();
    let store = Arc::new(MemoryRooms::open(dir.path()).unwrap());
    (dir, store)
}

#[tokio::test]
async fn fifo_keeps_join_order() {
    conformance::fifo_keeps_join_order(journaled().1.as_ref()).await;
}

#[tokio::test]
async fn one_place_per_account() {
    conformance::one_place_per_account(journaled().1.as_ref()).await;
}

#[tokio::test]
async fn random_shuffle_is_a_seeded_permutation() {
    conformance::random_shuffle_is_a_seeded_permutation(journaled().1.as_ref()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cap_holds_under_concurrent_claims() {
    let (_dir, store) = journaled();
    conformance::cap_holds_under_concurrent_claims(store).await;
}

#[tokio::test]
async fn release_and_expiry() {
    conformance::release_and_expiry(journaled().1.as_ref()).await;
}

#[tokio::test]
async fn a_clock_behind_never_dates_a_release_earlier() {
    conformance::a_clock_behind_never_dates_a_release_earlier(journaled().1.as_ref()).await;
}

#[tokio::test]
async fn controls_are_kept() {
    conformance::controls_are_kept(journaled().1.as_ref()).await;
}

#[tokio::test]
async fn matches_the_model() {
    let (_dir, store) = journaled();
    for seed in 0..6 {
        conformance::matches_the_model(store.as_ref(), seed).await;
    }
}

#[tokio::test]
async fn restart_keeps_places() {
    let (dir, store) = journaled();
    let path = dir.path().to_owned();
    conformance::restart_keeps_places(store, move || {
        Arc::new(MemoryRooms::open(&path).unwrap()) as Arc<dyn RoomStore>
    })
    .await;
}

#[tokio::test]
async fn a_torn_last_line_is_dropped_and_a_corrupt_middle_refused() {
    let (dir, store) = journaled();
    let config = conformance::config(boxoffice_waitroom::queue::QueuePolicy::Fifo, 1, 5);
    store.ensure_room("evt-torn", config).await.unwrap();
    store.join("evt-torn", "a", 0).await.unwrap().unwrap();
    drop(store);
    let path = dir.path().join(JOURNAL_FILE);
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("{\"event\":\"evt-torn\",\"op\":{\"op\":\"jo");
    std::fs::write(&path, &text).unwrap();
    let reopened = MemoryRooms::open(dir.path()).unwrap();
    assert_eq!(reopened.stats("evt-torn").await.unwrap().joined, 1);
    drop(reopened);
    let lines: Vec<&str> = text.lines().collect();
    let corrupt = format!("{}\ngarbage\n{}\n", lines[0], lines[1]);
    std::fs::write(&path, corrupt).unwrap();
    assert!(MemoryRooms::open(dir.path()).is_err());
}

/// A private temporary directory, removed on drop.
mod tempdir {
    use std::path::{Path, PathBuf};

    pub struct Dir(PathBuf);

    impl Dir {
        pub fn new() -> Self {
            let path = std::env::temp_dir().join(format!(
                "boxoffice-waitroom-{}",
                uuid::Uuid::now_v7().simple()
            ));
            std::fs::create_dir_all(&path).unwrap();
            Self(path)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The input of the `waitroom_journal` fuzz target's finding: the second tick's clock is
/// behind the first's (its claim line carries an unknown field, its last line is torn). The
/// replayed room broke `Room::invariants` (release times out of order) until a release
/// time never goes back.
#[test]
fn a_journal_with_a_clock_going_back_replays_to_a_valid_room() {
    let journal = r#"{"event":"evt-1","create":{"queue":{"policy":"random","onSaleAtMs":1000,"seed":42,"claimWindowMs":600000},"maxActiveShoppers":2,"admissionTtlMs":500}}
{"event":"evt-1","op":{"op":"join","accountId":"a","nowMs":900}}
{"event":"evt-1","op":{"op":"join","accountId":"b","nowMs":950}}
{"event":"evt-1","op":{"op":"tick","nowMs":8399,"release":1}}
{"event":"evt-1","op":{"op":"claim","accountId":"a","sessionId":"s1","nowMuntId":"b","nowMs":950}}
{"event":"evt-1","op":{"op":"tick","nowMs":1000,"release":1}}
{"event":"evt-1","op":{"op":used":true,"maxReleasePerS":5}}
"#;
    let rooms = boxoffice_waitroom_state::memory::replay_journal(
        std::io::Cursor::new(journal),
        std::path::Path::new("waitroom.journal"),
    )
    .unwrap();
    let room = &rooms["evt-1"];
    room.invariants();
    assert_eq!(room.view().serving, 2);
    let released_at: Vec<i64> = room
        .view()
        .releases
        .iter()
        .map(|r| r.released_at_ms)
        .collect();
    assert_eq!(released_at, [8_399, 8_399]);
}

#[tokio::test]
async fn slots_follow_shoppers() {
    conformance::slots_follow_shoppers(journaled().1.as_ref()).await;
}
