//! The waiting room journal's replay (`replay_journal`, run by `MemoryRooms::open` at every
//! start on `waitroom.journal`): JSON lines of room creations and ops, a torn last line
//! dropped, anything else unreadable refused. Checks: replay never panics; replaying the
//! same bytes twice rebuilds the same rooms (ops are deterministic); every rebuilt room
//! keeps its invariants (`Room::invariants`).

#![no_main]

use std::io::Cursor;
use std::path::Path;

use boxoffice_waitroom_state::memory::replay_journal;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("waitroom.journal");
    let Ok(rooms) = replay_journal(Cursor::new(data), path) else {
        return;
    };
    let again = replay_journal(Cursor::new(data), path).expect("replayed once, replays again");
    assert_eq!(rooms.len(), again.len());
    for (event_id, room) in &rooms {
        room.invariants();
        let other = &again[event_id];
        assert_eq!(room.config(), other.config());
        assert_eq!(room.stats(), other.stats());
        assert_eq!(room.view(), other.view());
    }
});
