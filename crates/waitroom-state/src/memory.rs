//! The in-process backend: every room is the pure [`Room`] model behind one mutex, and every
//! change is journaled before it is answered.
//!
//! The journal is one append-only file of JSON lines (`{"event", "create"}` or
//! `{"event", "op"}`), written by one thread that batches whatever accumulated while the
//! previous write was being fsynced (group commit): a burst of joins costs one `fdatasync`,
//! not one each. An op is applied in memory and queued under the same lock, so the journal
//! holds ops in the order they were applied, and [`Room::apply`] being deterministic makes
//! replay at start rebuild the same rooms. A torn last line (a crash mid-write, never
//! acknowledged) is dropped; anything else unreadable stops the start.
//!
//! Without a journal path the rooms live in memory only (tests, benchmarks).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use async_trait::async_trait;
use boxoffice_waitroom::admission::{Admission, Shop, SlotCounts};
use boxoffice_waitroom::queue::{JoinError, Place, QueueView};
use boxoffice_waitroom::room::{ClaimOutcome, Controls, Op, OpResult, Room, RoomConfig, RoomStats};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::{RoomStore, StateError, StateResult};

/// Name of the journal file inside the state directory.
pub const JOURNAL_FILE: &str = "waitroom.journal";

/// One journal line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    create: Option<RoomConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    op: Option<Op>,
}

/// In-process rooms, optionally journaled. See the module docs.
#[derive(Debug, Clone)]
pub struct MemoryRooms {
    rooms: Arc<Mutex<HashMap<String, Room>>>,
    journal: Option<Journal>,
}

impl MemoryRooms {
    /// Rooms that live in memory only.
    pub fn ephemeral() -> Self {
        Self {
            rooms: Arc::default(),
            journal: None,
        }
    }

    /// Rooms journaled in `dir` (created if missing), replaying what is there.
    pub fn open(dir: &Path) -> StateResult<Self> {
        std::fs::create_dir_all(dir)
            .map_err(|e| StateError::Unavailable(format!("{}: {e}", dir.display())))?;
        let path = dir.join(JOURNAL_FILE);
        let rooms = replay(&path)?;
        let journal = Journal::start(&path)?;
        Ok(Self {
            rooms: Arc::new(Mutex::new(rooms)),
            journal: Some(journal),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Room>> {
        // A panic while holding the lock would be a bug in the model; the rooms it guards
        // are still consistent per op, so keep serving rather than poisoning every request.
        self.rooms.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies `op` to the room of `event_id` and journals it; waits until it is durable.
    async fn apply(&self, event_id: &str, op: Op) -> StateResult<OpResult> {
        let (result, seq) = {
            let mut rooms = self.lock();
            let room = rooms
                .get_mut(event_id)
                .ok_or_else(|| StateError::NoRoom(event_id.to_owned()))?;
            let before = (
                room.stats().admitted_total,
                room.view().opened.is_some(),
                room.stats().slots,
            );
            let result = room.apply(&op);
            let seq = match &self.journal {
                Some(_) if !changes_more_than_time(&op, &result, before, room) => None,
                Some(journal) => Some(journal.append(&Record {
                    event: event_id.to_owned(),
                    create: None,
                    op: Some(op),
                })?),
                None => None,
            };
            (result, seq)
        };
        if let (Some(journal), Some(seq)) = (&self.journal, seq) {
            journal.wait_durable(seq).await?;
        }
        Ok(result)
    }

    fn read<T>(&self, event_id: &str, f: impl FnOnce(&Room) -> T) -> StateResult<T> {
        let rooms = self.lock();
        rooms
            .get(event_id)
            .map(f)
            .ok_or_else(|| StateError::NoRoom(event_id.to_owned()))
    }
}

/// Whether an applied op must be journaled. A claim that admitted nobody new nor took a slot
/// again, a shopping step that changed no slot, and a tick that neither opened the queue nor
/// released anyone changed nothing but what time alone decides (admissions past their TTL,
/// idle slots past their hold window, which every later op treats as gone and the next
/// journaled tick sweeps), so replay does not need them: a poll storm at the head of a full
/// room costs no disk writes.
fn changes_more_than_time(
    op: &Op,
    result: &OpResult,
    before: (u64, bool, SlotCounts),
    room: &Room,
) -> bool {
    let (admitted_before, opened_before, slots_before) = before;
    match (op, result) {
        (Op::Claim { .. }, _) => {
            room.stats().admitted_total != admitted_before || room.stats().slots != slots_before
        }
        (Op::Shop { .. }, OpResult::Shopped(changed)) => *changed,
        (Op::Tick { .. }, OpResult::Ticked { released }) => {
            *released > 0 || room.view().opened.is_some() != opened_before
        }
        _ => true,
    }
}

fn unexpected(result: OpResult) -> StateError {
    StateError::Corrupt(format!("unexpected op result {result:?}"))
}

#[async_trait]
impl RoomStore for MemoryRooms {
    fn backend(&self) -> &'static str {
        "memory"
    }

    async fn ensure_room(&self, event_id: &str, config: RoomConfig) -> StateResult<RoomConfig> {
        let seq = {
            let mut rooms = self.lock();
            if let Some(room) = rooms.get(event_id) {
                return Ok(room.config());
            }
            rooms.insert(event_id.to_owned(), Room::new(config));
            match &self.journal {
                Some(journal) => Some(journal.append(&Record {
                    event: event_id.to_owned(),
                    create: Some(config),
                    op: None,
                })?),
                None => None,
            }
        };
        if let (Some(journal), Some(seq)) = (&self.journal, seq) {
            journal.wait_durable(seq).await?;
        }
        Ok(config)
    }

    async fn rooms(&self) -> StateResult<Vec<(String, RoomConfig)>> {
        let rooms = self.lock();
        Ok(rooms
            .iter()
            .map(|(event_id, room)| (event_id.clone(), room.config()))
            .collect())
    }

    async fn join(
        &self,
        event_id: &str,
        account_id: &str,
        now_ms: i64,
    ) -> StateResult<Result<Place, JoinError>> {
        // A repeated join changes nothing (unless it is the one that opens the queue): answer
        // it without a journal write.
        let known = self.read(event_id, |room| {
            let opens = room.view().opened.is_none() && now_ms >= room.config().queue.on_sale_at_ms;
            if opens {
                return None;
            }
            room.queue().index_of(account_id).map(|index| {
                let (position, provisional) = room.view().position(index);
                Place {
                    index,
                    position,
                    provisional,
                    joined_before: true,
                }
            })
        })?;
        if let Some(place) = known {
            return Ok(Ok(place));
        }
        let op = Op::Join {
            account_id: account_id.to_owned(),
            now_ms,
        };
        match self.apply(event_id, op).await? {
            OpResult::Joined(result) => Ok(result),
            other => Err(unexpected(other)),
        }
    }

    async fn index_of(&self, event_id: &str, account_id: &str) -> StateResult<Option<u64>> {
        self.read(event_id, |room| room.queue().index_of(account_id))
    }

    async fn view(&self, event_id: &str) -> StateResult<QueueView> {
        self.read(event_id, |room| room.view().clone())
    }

    async fn claim(
        &self,
        event_id: &str,
        account_id: &str,
        session_id: &str,
        now_ms: i64,
    ) -> StateResult<ClaimOutcome> {
        // A live admission with its slot is answered without a journal write (the common
        // repeated poll).
        if let Some(admission) = self.admission(event_id, account_id, now_ms).await?
            && admission.slot.is_some()
        {
            return Ok(ClaimOutcome::Admitted(admission));
        }
        let op = Op::Claim {
            account_id: account_id.to_owned(),
            session_id: session_id.to_owned(),
            now_ms,
        };
        match self.apply(event_id, op).await? {
            OpResult::Claimed(outcome) => Ok(outcome),
            other => Err(unexpected(other)),
        }
    }

    async fn admission(
        &self,
        event_id: &str,
        account_id: &str,
        now_ms: i64,
    ) -> StateResult<Option<Admission>> {
        self.read(event_id, |room| room.admission(account_id, now_ms))
    }

    async fn end(&self, event_id: &str, account_id: &str, at_ms: i64) -> StateResult<bool> {
        let live = self.read(event_id, |room| {
            room.admission(account_id, i64::MIN)
                .is_some_and(|admission| admission.admitted_at_ms <= at_ms)
        })?;
        if !live {
            return Ok(false);
        }
        let op = Op::End {
            account_id: account_id.to_owned(),
            at_ms,
        };
        match self.apply(event_id, op).await? {
            OpResult::Ended(ended) => Ok(ended),
            other => Err(unexpected(other)),
        }
    }

    async fn shop(
        &self,
        event_id: &str,
        account_id: &str,
        shop: Shop,
        at_ms: i64,
    ) -> StateResult<bool> {
        let op = Op::Shop {
            account_id: account_id.to_owned(),
            shop,
            at_ms,
        };
        match self.apply(event_id, op).await? {
            OpResult::Shopped(changed) => Ok(changed),
            other => Err(unexpected(other)),
        }
    }

    async fn tick(&self, event_id: &str, now_ms: i64, release: u64) -> StateResult<u64> {
        match self.apply(event_id, Op::Tick { now_ms, release }).await? {
            OpResult::Ticked { released } => Ok(released),
            other => Err(unexpected(other)),
        }
    }

    async fn set_controls(&self, event_id: &str, controls: Controls) -> StateResult<Controls> {
        match self.apply(event_id, Op::Control(controls)).await? {
            OpResult::Controlled(controls) => Ok(controls),
            other => Err(unexpected(other)),
        }
    }

    async fn stats(&self, event_id: &str) -> StateResult<RoomStats> {
        self.read(event_id, Room::stats)
    }

    async fn lead(&self, event_id: &str, _node_id: &str, _lease_ms: u64) -> StateResult<bool> {
        self.read(event_id, |_| true)
    }
}

/// Rebuilds the rooms from the journal at `path` (none if it does not exist).
fn replay(path: &Path) -> StateResult<HashMap<String, Room>> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(e) => return Err(StateError::Unavailable(format!("{}: {e}", path.display()))),
    };
    replay_journal(BufReader::new(file), path)
}

/// Rebuilds the rooms from the journal lines in `journal`, read from `path` (named in
/// errors). Public for the fuzz target (`fuzz/`); the server reaches it through
/// [`MemoryRooms::open`].
#[doc(hidden)]
pub fn replay_journal(journal: impl BufRead, path: &Path) -> StateResult<HashMap<String, Room>> {
    let mut rooms: HashMap<String, Room> = HashMap::new();
    let corrupt = |line_no: usize, why: String| {
        StateError::Corrupt(format!("{} line {line_no}: {why}", path.display()))
    };
    let mut lines = journal.lines().enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let line = line.map_err(|e| corrupt(i + 1, e.to_string()))?;
        let record: Record = match serde_json::from_str(&line) {
            Ok(record) => record,
            // A torn last line was never acknowledged: drop it.
            Err(_) if lines.peek().is_none() => {
                tracing::warn!(line = i + 1, "dropping a torn last journal line");
                break;
            }
            Err(e) => return Err(corrupt(i + 1, e.to_string())),
        };
        match (record.create, record.op) {
            (Some(config), None) => {
                rooms
                    .entry(record.event)
                    .or_insert_with(|| Room::new(config));
            }
            (None, Some(op)) => {
                let room = rooms
                    .get_mut(&record.event)
                    .ok_or_else(|| corrupt(i + 1, format!("op before room {}", record.event)))?;
                room.apply(&op);
            }
            _ => return Err(corrupt(i + 1, "neither create nor op".to_owned())),
        }
    }
    Ok(rooms)
}

/// The journal file and its writer thread (group commit).
#[derive(Debug, Clone)]
struct Journal {
    shared: Arc<JournalShared>,
    durable: watch::Receiver<Durable>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Durable {
    /// Every record with a sequence number up to this one is on disk.
    seq: u64,
    failed: bool,
}

#[derive(Debug)]
struct JournalShared {
    pending: Mutex<Pending>,
    wake: Condvar,
    path: PathBuf,
}

#[derive(Debug, Default)]
struct Pending {
    buf: Vec<u8>,
    /// Sequence number of the last record in `buf` (or written before it).
    seq: u64,
}

impl Journal {
    fn start(path: &Path) -> StateResult<Self> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| StateError::Unavailable(format!("{}: {e}", path.display())))?;
        let shared = Arc::new(JournalShared {
            pending: Mutex::default(),
            wake: Condvar::new(),
            path: path.to_owned(),
        });
        let (tx, rx) = watch::channel(Durable {
            seq: 0,
            failed: false,
        });
        let writer = shared.clone();
        std::thread::Builder::new()
            .name("waitroom-journal".into())
            .spawn(move || write_loop(&writer, file, &tx))
            .map_err(|e| StateError::Unavailable(format!("journal thread: {e}")))?;
        Ok(Self {
            shared,
            durable: rx,
        })
    }

    /// Queues one record; returns its sequence number.
    fn append(&self, record: &Record) -> StateResult<u64> {
        let mut line =
            serde_json::to_vec(record).map_err(|e| StateError::Corrupt(e.to_string()))?;
        line.push(b'\n');
        let mut pending = self
            .shared
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        pending.buf.extend_from_slice(&line);
        pending.seq += 1;
        let seq = pending.seq;
        drop(pending);
        self.shared.wake.notify_one();
        Ok(seq)
    }

    async fn wait_durable(&self, seq: u64) -> StateResult<()> {
        let mut rx = self.durable.clone();
        let durable = rx
            .wait_for(|durable| durable.failed || durable.seq >= seq)
            .await
            .map_err(|_| StateError::Unavailable("journal writer stopped".to_owned()))?;
        if durable.failed {
            return Err(StateError::Unavailable(format!(
                "journal {} cannot be written",
                self.shared.path.display()
            )));
        }
        Ok(())
    }
}

fn write_loop(shared: &JournalShared, mut file: File, durable: &watch::Sender<Durable>) {
    loop {
        let (buf, seq) = {
            let mut pending = shared.pending.lock().unwrap_or_else(|e| e.into_inner());
            while pending.buf.is_empty() {
                if durable.is_closed() {
                    return;
                }
                let (next, _) = shared
                    .wake
                    .wait_timeout(pending, std::time::Duration::from_millis(200))
                    .unwrap_or_else(|e| e.into_inner());
                pending = next;
            }
            (std::mem::take(&mut pending.buf), pending.seq)
        };
        if let Err(e) = file.write_all(&buf).and_then(|()| file.sync_data()) {
            tracing::error!(path = %shared.path.display(), error = %e, "waiting-room journal write failed");
            durable.send_modify(|d| d.failed = true);
            return;
        }
        durable.send_modify(|d| d.seq = seq);
    }
}
