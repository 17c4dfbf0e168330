//! The Redis backend: several API nodes share one waiting room per event.
//!
//! # Key layout
//!
//! Every key starts with the deployment's key prefix `{p}` (for example `bo:wr:`). The event
//! id sits inside a hash tag `{e}`, so all keys of one event hash to one Redis Cluster slot
//! and a script may touch them together:
//!
//! | key | type | holds |
//! | --- | --- | --- |
//! | `{p}rooms` | hash | event id → [`RoomConfig`] JSON (the registry [`RoomStore::rooms`] reads) |
//! | `{p}{e}:meta` | hash | `config` (the JSON, opaque to Lua), `on_sale`, `joined`, `serving`, `admitted_total`, `opened_at` and `pre_len` once opened, `controls` (JSON) once set |
//! | `{p}{e}:idx` | hash | account id → join index |
//! | `{p}{e}:rel` | sorted set | one member `serving_after:released_at_ms` per release, scored by `serving_after` |
//! | `{p}{e}:adm` | hash | account id → `session_id\|admitted_at_ms\|expires_at_ms` |
//! | `{p}{e}:exp` | sorted set | account id scored by `expires_at_ms` (expiry without a scan) |
//! | `{p}{e}:slot` | hash | account id → `state\|taken_at_ms\|idle_until_ms` of the slot it takes (`HLEN` is what the cap counts; `meta` keeps `slots_idle`, `slots_holding`, `slots_paying`) |
//! | `{p}{e}:idle` | sorted set | account id of an idle slot scored by `idle_until_ms` |
//! | `{p}{e}:lead` | string | the node id running the release controller, with a `PX` lease |
//!
//! The key prefix should not contain `{`: Redis Cluster hashes the first `{…}` of a key, which
//! would then put every event on the prefix's slot (still correct, just not spread).
//!
//! # Why Lua
//!
//! The pure model ([`Room::apply`]) decides every op from the room's whole state, and several
//! nodes send ops at once. Each mutating op is therefore one Lua script ([`Script`]: `EVALSHA`,
//! loaded again by the client if the server lost it), which Redis runs atomically: no other op
//! on the room interleaves, so the answers are those of the model applied in some order. Reads
//! are one atomic pipeline (`MULTI`/`EXEC`), one round trip each.
//!
//! Positions are computed here in Rust, never in Lua: the seeded permutation lives in
//! `boxoffice_waitroom::permutation`. A claim first reads the account's join index and the
//! opened info, and passes the position to the claim script; that is safe because the order
//! is fixed once, at open, and a position never changes after it. The script then checks the
//! serving counter, the claim window (from the `rel` set), the account's admission and the
//! cap, atomically.
//!
//! # Number precision
//!
//! Redis Lua numbers are doubles: integers are exact up to 2^53. Millisecond timestamps (unix
//! time, far below 2^53), counters (at most [`QUEUE_ACCOUNTS_MAX`]) and TTLs fit; the scripts
//! store the strings they were given rather than numbers they computed wherever they can. The
//! queue seed is a full `u64`, so it never goes through Lua arithmetic: it lives only inside
//! the config JSON, which Lua stores and returns as an opaque string, and `Opened`'s
//! `permutation_seed` is rebuilt in Rust from the config.
//!
//! [`Room::apply`]: boxoffice_waitroom::room::Room::apply

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use boxoffice_waitroom::admission::{
    ACTIVE_SHOPPERS_MAX, Admission, REFUSED_GRACE_MS, Shop, Slot, SlotCounts, SlotState,
};
use boxoffice_waitroom::queue::{
    ACCOUNT_ID_LEN_MAX_BYTES, JoinError, Opened, Place, QUEUE_ACCOUNTS_MAX, QueuePolicy, QueueView,
    Release,
};
use boxoffice_waitroom::room::{ClaimOutcome, Controls, RoomConfig, RoomStats};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ErrorKind, FromRedisValue, RedisError, Script, ScriptInvocation};

use crate::{RoomStore, StateError, StateResult};

/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long one command (or pipeline, or script) may take before it fails as unavailable.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
/// Connection attempts retried (with exponential backoff) before a connect or reconnect fails.
const CONNECT_RETRIES: usize = 3;
/// Longest lease [`RoomStore::lead`] asks Redis for (about 35 years): keeps `PX` valid.
const LEASE_MAX_MS: u64 = 1 << 40;

/// Opens the queue if on-sale has come (`EventQueue::open_if_due`): records when, and how
/// many accounts were in the pre-queue. The seed is not stored; it is in the config.
const LUA_OPEN_IF_DUE: &str = r"
local function open_if_due(meta, now)
  local m = redis.call('HMGET', meta, 'opened_at', 'on_sale', 'joined')
  if not m[1] and tonumber(now) >= tonumber(m[2]) then
    redis.call('HSET', meta, 'opened_at', now, 'pre_len', m[3])
  end
end
";

/// The shopper slots (`ActiveShoppers`' `Slot`): a value `state|taken_at|idle_until`, the
/// counts by state in `meta`, idle slots indexed by `idle_until`. Times are kept as the
/// strings they were given.
const LUA_SLOTS: &str = r"
local function slot_state(value) return string.match(value, '^(%a+)|') end
local function slot_taken(value) return string.match(value, '^%a+|(%-?%d+)|') end
local function slot_until(value) return string.match(value, '|(%-?%d+)$') end
local function slot_live(value, now)
  return slot_state(value) ~= 'idle' or tonumber(now) < tonumber(slot_until(value))
end
local function slot_drop(meta, slot, idle, account)
  local value = redis.call('HGET', slot, account)
  if value then
    redis.call('HDEL', slot, account)
    redis.call('ZREM', idle, account)
    redis.call('HINCRBY', meta, 'slots_' .. slot_state(value), -1)
  end
end
local function slot_put(meta, slot, idle, account, state, taken, until_ms)
  slot_drop(meta, slot, idle, account)
  redis.call('HSET', slot, account, state .. '|' .. taken .. '|' .. until_ms)
  if state == 'idle' then redis.call('ZADD', idle, until_ms, account) end
  redis.call('HINCRBY', meta, 'slots_' .. state, 1)
end
";

/// Forgets every admission whose TTL passed at `now` with its slot, and gives back every idle
/// slot whose hold window passed (`ActiveShoppers::expire`).
const LUA_EXPIRE: &str = r"
local function expire(meta, adm, exp, slot, idle, now)
  local gone = redis.call('ZRANGEBYSCORE', exp, '-inf', now)
  for i = 1, #gone do slot_drop(meta, slot, idle, gone[i]) end
  for i = 1, #gone, 1000 do
    redis.call('HDEL', adm, unpack(gone, i, math.min(i + 999, #gone)))
  end
  redis.call('ZREMRANGEBYSCORE', exp, '-inf', now)
  local lapsed = redis.call('ZRANGEBYSCORE', idle, '-inf', now)
  for i = 1, #lapsed do slot_drop(meta, slot, idle, lapsed[i]) end
end
";

/// Reads the fields of an admission value `session|admitted_at|expires_at` from the right
/// (a session id may contain `|`).
const LUA_ADMISSION: &str = r"
local function expires_of(value)
  return tonumber(string.match(value, '|(%-?%d+)$'))
end
local function admitted_of(value)
  return tonumber(string.match(value, '|(%-?%d+)|%-?%d+$'))
end
";

/// KEYS: meta. ARGV: config JSON, on_sale_at_ms. Returns the config JSON in force.
const LUA_ENSURE: &str = r"
if redis.call('HSETNX', KEYS[1], 'config', ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], 'on_sale', ARGV[2], 'joined', '0', 'serving', '0',
    'admitted_total', '0')
  return ARGV[1]
end
return redis.call('HGET', KEYS[1], 'config')
";

/// KEYS: meta, idx. ARGV: account, now, longest account id, most accounts.
/// Returns nil (no room), `{'invalid'}`, `{'full'}` or
/// `{'place', index, joined_before, config, opened_at or '', pre_len or ''}`.
const LUA_JOIN: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local account = ARGV[1]
if #account == 0 or #account > tonumber(ARGV[3]) then return {'invalid'} end
open_if_due(KEYS[1], ARGV[2])
local index = redis.call('HGET', KEYS[2], account)
local before = '1'
if not index then
  local joined = redis.call('HGET', KEYS[1], 'joined')
  if tonumber(joined) >= tonumber(ARGV[4]) then return {'full'} end
  index = joined
  before = '0'
  redis.call('HSET', KEYS[2], account, index)
  redis.call('HINCRBY', KEYS[1], 'joined', 1)
end
local m = redis.call('HMGET', KEYS[1], 'config', 'opened_at', 'pre_len')
return {'place', index, before, m[1], m[2] or '', m[3] or ''}
";

/// KEYS: meta, rel, adm, exp, slot, idle. ARGV: account, session, now, position, expires_at,
/// claim window, cap, idle_until. The queue is open and `position` is the account's.
/// Returns nil (no room), `{'not_released'}`, `{'expired'}`, `{'full'}` or
/// `{'admitted', value, slot value}`.
const LUA_CLAIM: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local account, now, position = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4])
if position > tonumber(redis.call('HGET', KEYS[1], 'serving')) then
  return {'not_released'}
end
local existing = redis.call('HGET', KEYS[3], account)
local live = existing and now < expires_of(existing)
local release = redis.call('ZRANGEBYSCORE', KEYS[2], position, '+inf', 'LIMIT', 0, 1)[1]
if release and not live then
  local released_at = tonumber(string.match(release, ':(%-?%d+)$'))
  if now > released_at + tonumber(ARGV[6]) then return {'expired'} end
end
local cap = tonumber(ARGV[7])
if live then
  local value = redis.call('HGET', KEYS[5], account)
  if value and slot_live(value, now) then return {'admitted', existing, value} end
  slot_drop(KEYS[1], KEYS[5], KEYS[6], account)
  if redis.call('HLEN', KEYS[5]) >= cap then
    expire(KEYS[1], KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[3])
  end
  if redis.call('HLEN', KEYS[5]) >= cap then return {'full'} end
  slot_put(KEYS[1], KEYS[5], KEYS[6], account, 'idle', ARGV[3], ARGV[8])
  return {'admitted', existing, redis.call('HGET', KEYS[5], account)}
end
if existing then
  slot_drop(KEYS[1], KEYS[5], KEYS[6], account)
  redis.call('HDEL', KEYS[3], account)
  redis.call('ZREM', KEYS[4], account)
end
if redis.call('HLEN', KEYS[5]) >= cap then
  expire(KEYS[1], KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[3])
end
if redis.call('HLEN', KEYS[5]) >= cap then return {'full'} end
local value = ARGV[2] .. '|' .. ARGV[3] .. '|' .. ARGV[5]
redis.call('HSET', KEYS[3], account, value)
redis.call('ZADD', KEYS[4], ARGV[5], account)
redis.call('HINCRBY', KEYS[1], 'admitted_total', 1)
slot_put(KEYS[1], KEYS[5], KEYS[6], account, 'idle', ARGV[3], ARGV[8])
return {'admitted', value, redis.call('HGET', KEYS[5], account)}
";

/// KEYS: meta, adm, exp, slot, idle. ARGV: account, at_ms. Returns nil (no room), 1 (the
/// admission ended with its slot) or 0.
const LUA_END: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local value = redis.call('HGET', KEYS[2], ARGV[1])
if value and admitted_of(value) <= tonumber(ARGV[2]) then
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[3], ARGV[1])
  slot_drop(KEYS[1], KEYS[4], KEYS[5], ARGV[1])
  return 1
end
return 0
";

/// KEYS: meta, adm, exp, slot, idle. ARGV: account, shop (`held`, `paying`, `refused`,
/// `ended`), at_ms, the largest cap, the refused grace ms. Returns nil (no room), 1 (the slot
/// changed) or 0 (`ActiveShoppers::shop`). The cap is the room's, read from its config here
/// (`cjson`), so a hold's shopping step costs one round trip.
const LUA_SHOP: &str = r"
local config = redis.call('HGET', KEYS[1], 'config')
if not config then return false end
local account, shop, at = ARGV[1], ARGV[2], tonumber(ARGV[3])
local cap = math.min(tonumber(cjson.decode(config).maxActiveShoppers), tonumber(ARGV[4]))
local admission = redis.call('HGET', KEYS[2], account)
if not admission or at >= expires_of(admission) then return 0 end
local value = redis.call('HGET', KEYS[4], account)
if shop == 'ended' then
  if value and tonumber(slot_taken(value)) <= at then
    slot_drop(KEYS[1], KEYS[4], KEYS[5], account)
    return 1
  end
  return 0
end
if value and not slot_live(value, at) then value = nil end
if shop == 'refused' then
  local until_ms = at + tonumber(ARGV[5])
  if value and slot_state(value) == 'idle' and tonumber(slot_taken(value)) <= at
    and until_ms < tonumber(slot_until(value)) then
    slot_put(KEYS[1], KEYS[4], KEYS[5], account, 'idle', slot_taken(value),
      string.format('%d', until_ms))
    return 1
  end
  return 0
end
local state = 'paying'
if shop == 'held' then state = 'holding' end
if value then
  local current = slot_state(value)
  if tonumber(slot_taken(value)) > at or current == state or current == 'paying' then
    return 0
  end
  slot_put(KEYS[1], KEYS[4], KEYS[5], account, state, slot_taken(value), slot_until(value))
  return 1
end
slot_drop(KEYS[1], KEYS[4], KEYS[5], account)
if redis.call('HLEN', KEYS[4]) >= cap then
  expire(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[3])
end
if redis.call('HLEN', KEYS[4]) >= cap then return 0 end
slot_put(KEYS[1], KEYS[4], KEYS[5], account, state, ARGV[3], ARGV[3])
return 1
";

/// KEYS: meta, rel, adm, exp, slot, idle. ARGV: now, release. Returns nil (no room) or how
/// many positions were released.
const LUA_TICK: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local now = ARGV[1]
open_if_due(KEYS[1], now)
expire(KEYS[1], KEYS[3], KEYS[4], KEYS[5], KEYS[6], now)
local m = redis.call('HMGET', KEYS[1], 'opened_at', 'joined', 'serving')
if not m[1] then return 0 end
local released = math.min(tonumber(ARGV[2]), tonumber(m[2]) - tonumber(m[3]))
if released <= 0 then return 0 end
local serving = redis.call('HINCRBY', KEYS[1], 'serving', string.format('%d', released))
-- A clock behind the last release's never dates a release before it (as the model does).
local released_at = now
local last = redis.call('ZRANGE', KEYS[2], -1, -1)
if last[1] then
  local last_at = string.match(last[1], ':(%-?%d+)$')
  if tonumber(last_at) > tonumber(now) then released_at = last_at end
end
redis.call('ZADD', KEYS[2], serving, string.format('%d', serving) .. ':' .. released_at)
return released
";

/// KEYS: meta. ARGV: controls JSON. Returns nil (no room) or 1.
const LUA_CONTROLS: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('HSET', KEYS[1], 'controls', ARGV[1])
return 1
";

/// KEYS: meta, lead. ARGV: node id, lease ms. Takes the lease if free, extends it if ours.
/// Returns nil (no room), 1 (this node leads) or 0.
const LUA_LEAD: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local holder = redis.call('GET', KEYS[2])
if not holder then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
  return 1
end
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return 1
end
return 0
";

/// The scripts, hashed once.
struct Scripts {
    ensure: Script,
    join: Script,
    claim: Script,
    end: Script,
    shop: Script,
    tick: Script,
    controls: Script,
    lead: Script,
}

impl Scripts {
    fn new() -> Self {
        Self {
            ensure: Script::new(LUA_ENSURE),
            join: Script::new(&[LUA_OPEN_IF_DUE, LUA_JOIN].concat()),
            claim: Script::new(&[LUA_SLOTS, LUA_EXPIRE, LUA_ADMISSION, LUA_CLAIM].concat()),
            end: Script::new(&[LUA_SLOTS, LUA_ADMISSION, LUA_END].concat()),
            shop: Script::new(&[LUA_SLOTS, LUA_EXPIRE, LUA_ADMISSION, LUA_SHOP].concat()),
            tick: Script::new(&[LUA_OPEN_IF_DUE, LUA_SLOTS, LUA_EXPIRE, LUA_TICK].concat()),
            controls: Script::new(LUA_CONTROLS),
            lead: Script::new(LUA_LEAD),
        }
    }
}

/// The keys of one event (see the module docs).
struct Keys {
    meta: String,
    idx: String,
    rel: String,
    adm: String,
    exp: String,
    slot: String,
    idle: String,
    lead: String,
}

/// Waiting rooms in Redis, shared by every node that connects with the same key prefix. See
/// the module docs. Cloning is cheap and shares the connection.
#[derive(Clone)]
pub struct RedisRooms {
    con: ConnectionManager,
    prefix: Arc<str>,
    scripts: Arc<Scripts>,
}

impl fmt::Debug for RedisRooms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisRooms")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisRooms {
    /// Connects to the Redis at `url` (`redis://…`); every key starts with `key_prefix`
    /// (for example `bo:wr:`). Reconnects by itself after a lost connection; until it is
    /// back, calls fail with [`StateError::Unavailable`].
    pub async fn connect(url: &str, key_prefix: &str) -> StateResult<Self> {
        // The URL may carry a password: errors never repeat it.
        let client = redis::Client::open(url)
            .map_err(|e| StateError::Unavailable(format!("invalid Redis URL: {e}")))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(CONNECT_RETRIES);
        let con = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(|e| StateError::Unavailable(format!("cannot connect to Redis: {e}")))?;
        Ok(Self {
            con,
            prefix: key_prefix.into(),
            scripts: Arc::new(Scripts::new()),
        })
    }

    /// The key prefix every key of these rooms starts with.
    pub fn key_prefix(&self) -> &str {
        &self.prefix
    }

    fn rooms_key(&self) -> String {
        format!("{}rooms", self.prefix)
    }

    fn keys(&self, event_id: &str) -> Keys {
        let key = |suffix: &str| format!("{}{{{event_id}}}:{suffix}", self.prefix);
        Keys {
            meta: key("meta"),
            idx: key("idx"),
            rel: key("rel"),
            adm: key("adm"),
            exp: key("exp"),
            slot: key("slot"),
            idle: key("idle"),
            lead: key("lead"),
        }
    }

    /// Runs one script invocation (`EVALSHA`, loading the script if Redis lost it).
    async fn run<T: FromRedisValue>(&self, invocation: &ScriptInvocation<'_>) -> StateResult<T> {
        let mut con = self.con.clone();
        invocation.invoke_async(&mut con).await.map_err(redis_error)
    }

    /// Runs a pipeline (made atomic by the caller where it matters).
    async fn query<T: FromRedisValue>(&self, pipe: &redis::Pipeline) -> StateResult<T> {
        let mut con = self.con.clone();
        pipe.query_async(&mut con).await.map_err(redis_error)
    }

    /// The claim script's answer for `account_id` at `position` (the queue is open).
    async fn claim_at(
        &self,
        event_id: &str,
        config: &RoomConfig,
        position: u64,
        (account_id, session_id): (&str, &str),
        now_ms: i64,
    ) -> StateResult<ClaimOutcome> {
        let keys = self.keys(event_id);
        let mut invocation = self.scripts.claim.prepare_invoke();
        invocation
            .key(&keys.meta)
            .key(&keys.rel)
            .key(&keys.adm)
            .key(&keys.exp)
            .key(&keys.slot)
            .key(&keys.idle)
            .arg(account_id)
            .arg(session_id)
            .arg(now_ms)
            .arg(position)
            .arg(now_ms.saturating_add(config.admission_ttl_ms))
            .arg(config.queue.claim_window_ms)
            .arg(cap(config))
            .arg(now_ms.saturating_add(config.hold_window_ms));
        let reply: Option<Vec<String>> = self.run(&invocation).await?;
        match reply.ok_or_else(|| no_room(event_id))?.as_slice() {
            [tag] if tag == "not_released" => Ok(ClaimOutcome::NotReleased),
            [tag] if tag == "expired" => Ok(ClaimOutcome::Expired),
            [tag] if tag == "full" => Ok(ClaimOutcome::Full),
            [tag, value, slot_value] if tag == "admitted" => {
                let mut admission = admission(value)?;
                admission.slot = Some(slot(slot_value)?);
                Ok(ClaimOutcome::Admitted(admission))
            }
            other => Err(unexpected("claim", other)),
        }
    }
}

#[async_trait]
impl RoomStore for RedisRooms {
    fn backend(&self) -> &'static str {
        "redis"
    }

    async fn ensure_room(&self, event_id: &str, config: RoomConfig) -> StateResult<RoomConfig> {
        let json =
            serde_json::to_string(&config).map_err(|e| StateError::Corrupt(e.to_string()))?;
        let keys = self.keys(event_id);
        let mut invocation = self.scripts.ensure.prepare_invoke();
        invocation
            .key(&keys.meta)
            .arg(&json)
            .arg(config.queue.on_sale_at_ms);
        let in_force: String = self.run(&invocation).await?;
        // The registry is a second step so that every script touches one event's slot only;
        // it is idempotent and always records the config in force.
        let mut register = redis::pipe();
        register
            .cmd("HSETNX")
            .arg(self.rooms_key())
            .arg(event_id)
            .arg(&in_force)
            .ignore();
        self.query::<()>(&register).await?;
        room_config(&in_force)
    }

    async fn rooms(&self) -> StateResult<Vec<(String, RoomConfig)>> {
        let mut pipe = redis::pipe();
        pipe.cmd("HGETALL").arg(self.rooms_key());
        let (all,): (HashMap<String, String>,) = self.query(&pipe).await?;
        let mut rooms = all
            .into_iter()
            .map(|(event_id, json)| Ok((event_id, room_config(&json)?)))
            .collect::<StateResult<Vec<_>>>()?;
        rooms.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(rooms)
    }

    async fn join(
        &self,
        event_id: &str,
        account_id: &str,
        now_ms: i64,
    ) -> StateResult<Result<Place, JoinError>> {
        let keys = self.keys(event_id);
        let mut invocation = self.scripts.join.prepare_invoke();
        invocation
            .key(&keys.meta)
            .key(&keys.idx)
            .arg(account_id)
            .arg(now_ms)
            .arg(ACCOUNT_ID_LEN_MAX_BYTES)
            .arg(QUEUE_ACCOUNTS_MAX);
        let reply: Option<Vec<String>> = self.run(&invocation).await?;
        match reply.ok_or_else(|| no_room(event_id))?.as_slice() {
            [tag] if tag == "invalid" => Ok(Err(JoinError::InvalidAccountId)),
            [tag] if tag == "full" => Ok(Err(JoinError::QueueFull)),
            [tag, index, before, config, opened_at, pre_len] if tag == "place" => {
                let config = room_config(config)?;
                let opened = opened(&config, non_empty(opened_at), non_empty(pre_len))?;
                let index = number("join index", index)?;
                let (position, provisional) = order_view(&config, opened).position(index);
                Ok(Ok(Place {
                    index,
                    position,
                    provisional,
                    joined_before: before == "1",
                }))
            }
            other => Err(unexpected("join", other)),
        }
    }

    async fn index_of(&self, event_id: &str, account_id: &str) -> StateResult<Option<u64>> {
        let keys = self.keys(event_id);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("EXISTS")
            .arg(&keys.meta)
            .cmd("HGET")
            .arg(&keys.idx)
            .arg(account_id);
        let (exists, index): (bool, Option<u64>) = self.query(&pipe).await?;
        if !exists {
            return Err(no_room(event_id));
        }
        Ok(index)
    }

    async fn view(&self, event_id: &str) -> StateResult<QueueView> {
        let keys = self.keys(event_id);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("HMGET")
            .arg(&keys.meta)
            .arg("config")
            .arg("joined")
            .arg("serving")
            .arg("opened_at")
            .arg("pre_len")
            .cmd("ZRANGE")
            .arg(&keys.rel)
            .arg(0)
            .arg(-1);
        let (meta, releases): (Vec<Option<String>>, Vec<String>) = self.query(&pipe).await?;
        let [config, joined, serving, opened_at, pre_len] = fields(meta)?;
        let config = room_config(&config.ok_or_else(|| no_room(event_id))?)?;
        Ok(QueueView {
            config: config.queue,
            joined: counter("joined", joined)?,
            opened: opened(&config, opened_at.as_deref(), pre_len.as_deref())?,
            serving: counter("serving", serving)?,
            releases: releases
                .iter()
                .map(|member| release(member))
                .collect::<StateResult<_>>()?,
        })
    }

    async fn claim(
        &self,
        event_id: &str,
        account_id: &str,
        session_id: &str,
        now_ms: i64,
    ) -> StateResult<ClaimOutcome> {
        let keys = self.keys(event_id);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("HMGET")
            .arg(&keys.meta)
            .arg("config")
            .arg("opened_at")
            .arg("pre_len")
            .cmd("HGET")
            .arg(&keys.idx)
            .arg(account_id);
        let (meta, index): (Vec<Option<String>>, Option<u64>) = self.query(&pipe).await?;
        let [config, opened_at, pre_len] = fields(meta)?;
        let config = room_config(&config.ok_or_else(|| no_room(event_id))?)?;
        let opened = opened(&config, opened_at.as_deref(), pre_len.as_deref())?;
        // Never joined, or not open yet (then nothing is released: serving is 0). A claim
        // does not open the queue, as in the model.
        let (Some(index), Some(opened)) = (index, opened) else {
            return Ok(ClaimOutcome::NotReleased);
        };
        // Fixed at open: the script may rely on it.
        let (position, _) = order_view(&config, Some(opened)).position(index);
        self.claim_at(
            event_id,
            &config,
            position,
            (account_id, session_id),
            now_ms,
        )
        .await
    }

    async fn admission(
        &self,
        event_id: &str,
        account_id: &str,
        now_ms: i64,
    ) -> StateResult<Option<Admission>> {
        let keys = self.keys(event_id);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("EXISTS")
            .arg(&keys.meta)
            .cmd("HGET")
            .arg(&keys.adm)
            .arg(account_id)
            .cmd("HGET")
            .arg(&keys.slot)
            .arg(account_id);
        let (exists, value, slot_value): (bool, Option<String>, Option<String>) =
            self.query(&pipe).await?;
        if !exists {
            return Err(no_room(event_id));
        }
        let Some(mut admission) = value.as_deref().map(admission).transpose()? else {
            return Ok(None);
        };
        if now_ms >= admission.expires_at_ms {
            return Ok(None);
        }
        // An idle slot past its hold window counts as given back, swept or not.
        admission.slot = slot_value
            .as_deref()
            .map(slot)
            .transpose()?
            .filter(|slot| slot.state != SlotState::Idle || now_ms < slot.idle_until_ms);
        Ok(Some(admission))
    }

    async fn end(&self, event_id: &str, account_id: &str, at_ms: i64) -> StateResult<bool> {
        let keys = self.keys(event_id);
        let mut invocation = self.scripts.end.prepare_invoke();
        invocation
            .key(&keys.meta)
            .key(&keys.adm)
            .key(&keys.exp)
            .key(&keys.slot)
            .key(&keys.idle)
            .arg(account_id)
            .arg(at_ms);
        let ended: Option<i64> = self.run(&invocation).await?;
        Ok(ended.ok_or_else(|| no_room(event_id))? == 1)
    }

    async fn shop(
        &self,
        event_id: &str,
        account_id: &str,
        shop: Shop,
        at_ms: i64,
    ) -> StateResult<bool> {
        let keys = self.keys(event_id);
        let mut invocation = self.scripts.shop.prepare_invoke();
        invocation
            .key(&keys.meta)
            .key(&keys.adm)
            .key(&keys.exp)
            .key(&keys.slot)
            .key(&keys.idle)
            .arg(account_id)
            .arg(shop.as_str())
            .arg(at_ms)
            .arg(ACTIVE_SHOPPERS_MAX)
            .arg(REFUSED_GRACE_MS);
        let changed: Option<i64> = self.run(&invocation).await?;
        Ok(changed.ok_or_else(|| no_room(event_id))? == 1)
    }

    async fn tick(&self, event_id: &str, now_ms: i64, release: u64) -> StateResult<u64> {
        let keys = self.keys(event_id);
        let mut invocation = self.scripts.tick.prepare_invoke();
        invocation
            .key(&keys.meta)
            .key(&keys.rel)
            .key(&keys.adm)
            .key(&keys.exp)
            .key(&keys.slot)
            .key(&keys.idle)
            .arg(now_ms)
            // No queue holds more: the same answer, and exact as a Lua number.
            .arg(release.min(QUEUE_ACCOUNTS_MAX));
        let released: Option<u64> = self.run(&invocation).await?;
        released.ok_or_else(|| no_room(event_id))
    }

    async fn set_controls(&self, event_id: &str, controls: Controls) -> StateResult<Controls> {
        let json =
            serde_json::to_string(&controls).map_err(|e| StateError::Corrupt(e.to_string()))?;
        let keys = self.keys(event_id);
        let mut invocation = self.scripts.controls.prepare_invoke();
        invocation.key(&keys.meta).arg(&json);
        let stored: Option<i64> = self.run(&invocation).await?;
        stored.ok_or_else(|| no_room(event_id))?;
        Ok(controls)
    }

    async fn stats(&self, event_id: &str) -> StateResult<RoomStats> {
        let keys = self.keys(event_id);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("HMGET")
            .arg(&keys.meta)
            .arg("config")
            .arg("joined")
            .arg("serving")
            .arg("admitted_total")
            .arg("controls")
            .arg("slots_idle")
            .arg("slots_holding")
            .arg("slots_paying")
            .cmd("HLEN")
            .arg(&keys.slot);
        let (meta, active): (Vec<Option<String>>, u64) = self.query(&pipe).await?;
        let [
            config,
            joined,
            serving,
            admitted_total,
            controls,
            idle,
            holding,
            paying,
        ] = fields(meta)?;
        let config = room_config(&config.ok_or_else(|| no_room(event_id))?)?;
        let joined = counter("joined", joined)?;
        let serving = counter("serving", serving)?;
        Ok(RoomStats {
            joined,
            waiting: joined.saturating_sub(serving),
            serving,
            active,
            slots: SlotCounts {
                idle: optional_counter("slots_idle", idle)?,
                holding: optional_counter("slots_holding", holding)?,
                paying: optional_counter("slots_paying", paying)?,
            },
            max_active_shoppers: cap(&config),
            admitted_total: counter("admitted_total", admitted_total)?,
            controls: controls
                .as_deref()
                .map(stored_controls)
                .transpose()?
                .unwrap_or(DEFAULT_CONTROLS),
        })
    }

    async fn lead(&self, event_id: &str, node_id: &str, lease_ms: u64) -> StateResult<bool> {
        let keys = self.keys(event_id);
        let mut invocation = self.scripts.lead.prepare_invoke();
        invocation
            .key(&keys.meta)
            .key(&keys.lead)
            .arg(node_id)
            .arg(lease_ms.clamp(1, LEASE_MAX_MS));
        let leads: Option<i64> = self.run(&invocation).await?;
        Ok(leads.ok_or_else(|| no_room(event_id))? == 1)
    }
}

/// A new room's controls (as `Room::new`).
const DEFAULT_CONTROLS: Controls = Controls {
    paused: false,
    max_release_per_s: None,
};

/// The cap on active shoppers, clamped as `ActiveShoppers::new` does.
fn cap(config: &RoomConfig) -> u64 {
    config.max_active_shoppers.min(ACTIVE_SHOPPERS_MAX)
}

/// A view with just what [`QueueView::position`] depends on: the config and the opened info.
fn order_view(config: &RoomConfig, opened: Option<Opened>) -> QueueView {
    let mut view = QueueView::new(config.queue);
    view.opened = opened;
    view
}

/// The opened info from the stored fields; the seed comes from the config.
fn opened(
    config: &RoomConfig,
    opened_at: Option<&str>,
    pre_len: Option<&str>,
) -> StateResult<Option<Opened>> {
    let Some(opened_at) = opened_at else {
        return Ok(None);
    };
    let pre_len = pre_len.ok_or_else(|| StateError::Corrupt("opened without pre_len".into()))?;
    Ok(Some(Opened {
        opened_at_ms: number("opened_at", opened_at)?,
        permutation_seed: (config.queue.policy == QueuePolicy::Random).then_some(config.queue.seed),
        pre_queue_len: number("pre_len", pre_len)?,
    }))
}

/// A `rel` member `serving_after:released_at_ms`.
fn release(member: &str) -> StateResult<Release> {
    let (serving_after, released_at_ms) = member
        .split_once(':')
        .ok_or_else(|| StateError::Corrupt(format!("release {member:?}")))?;
    Ok(Release {
        serving_after: number("release serving_after", serving_after)?,
        released_at_ms: number("release released_at_ms", released_at_ms)?,
    })
}

/// An `adm` value `session_id|admitted_at_ms|expires_at_ms` (the session id may hold `|`).
fn admission(value: &str) -> StateResult<Admission> {
    let mut fields = value.rsplitn(3, '|');
    let (Some(expires_at), Some(admitted_at), Some(session_id)) =
        (fields.next(), fields.next(), fields.next())
    else {
        return Err(StateError::Corrupt(format!("admission {value:?}")));
    };
    Ok(Admission {
        session_id: session_id.to_owned(),
        admitted_at_ms: number("admitted_at_ms", admitted_at)?,
        expires_at_ms: number("expires_at_ms", expires_at)?,
        slot: None,
    })
}

/// A slot value `state|taken_at|idle_until`.
fn slot(value: &str) -> StateResult<Slot> {
    let corrupt = || StateError::Corrupt(format!("slot {value:?}"));
    let mut fields = value.splitn(3, '|');
    let (Some(state), Some(taken_at), Some(idle_until)) =
        (fields.next(), fields.next(), fields.next())
    else {
        return Err(corrupt());
    };
    Ok(Slot {
        state: SlotState::parse(state).ok_or_else(corrupt)?,
        taken_at_ms: number("taken_at_ms", taken_at)?,
        idle_until_ms: number("idle_until_ms", idle_until)?,
    })
}

fn room_config(json: &str) -> StateResult<RoomConfig> {
    serde_json::from_str(json).map_err(|e| StateError::Corrupt(format!("room config: {e}")))
}

fn stored_controls(json: &str) -> StateResult<Controls> {
    serde_json::from_str(json).map_err(|e| StateError::Corrupt(format!("controls: {e}")))
}

fn number<T: FromStr>(what: &str, text: &str) -> StateResult<T>
where
    T::Err: fmt::Display,
{
    text.parse()
        .map_err(|e| StateError::Corrupt(format!("{what} {text:?}: {e}")))
}

/// A counter of the meta hash; present from the room's creation on.
/// A counter that rooms created before it existed lack (read as 0).
fn optional_counter(what: &str, text: Option<String>) -> StateResult<u64> {
    text.map_or(Ok(0), |text| number(what, &text))
}

fn counter(what: &str, text: Option<String>) -> StateResult<u64> {
    let text = text.ok_or_else(|| StateError::Corrupt(format!("{what} missing")))?;
    number(what, &text)
}

/// The `N` fields an `HMGET` asked for.
fn fields<const N: usize>(values: Vec<Option<String>>) -> StateResult<[Option<String>; N]> {
    values.try_into().map_err(|values: Vec<_>| {
        StateError::Corrupt(format!("HMGET gave {} fields", values.len()))
    })
}

fn non_empty(text: &str) -> Option<&str> {
    (!text.is_empty()).then_some(text)
}

fn no_room(event_id: &str) -> StateError {
    StateError::NoRoom(event_id.to_owned())
}

fn unexpected(script: &str, reply: &[String]) -> StateError {
    StateError::Corrupt(format!("unexpected {script} reply {reply:?}"))
}

/// A reply that does not parse is corruption; anything else (connection refused or lost,
/// timeout, Redis loading or read-only, …) means the state is unavailable for now.
fn redis_error(e: RedisError) -> StateError {
    match e.kind() {
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => {
            StateError::Corrupt(format!("Redis reply: {e}"))
        }
        _ => StateError::Unavailable(format!("Redis: {e}")),
    }
}
