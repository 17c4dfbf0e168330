//! The shard directory on PostgreSQL (`boxoffice_store::shard`), in the home database.

use async_trait::async_trait;
use boxoffice_store::shard::{DirectoryStore, HOME_SHARD, PlacementRule, ShardRecord};
use boxoffice_store::{StoreError, StoreResult};
use sqlx::Row;

use crate::{PgStore, classify};

#[async_trait]
impl DirectoryStore for PgStore {
    async fn shards(&self) -> StoreResult<Vec<ShardRecord>> {
        let rows = sqlx::query("SELECT name, url FROM shard ORDER BY name")
            .fetch_all(&self.pool)
            .await
            .map_err(classify)?;
        rows.iter()
            .map(|row| {
                Ok(ShardRecord {
                    name: row.try_get("name").map_err(classify)?,
                    url: row.try_get("url").map_err(classify)?,
                })
            })
            .collect()
    }

    async fn add_shard(&self, shard: &ShardRecord) -> StoreResult<()> {
        boxoffice_store::shard::check_shard_name(&shard.name).map_err(StoreError::Internal)?;
        if shard.name == HOME_SHARD {
            return Err(StoreError::Internal(format!(
                "{HOME_SHARD:?} is the home shard's name"
            )));
        }
        let existing: Option<String> = sqlx::query_scalar(
            "INSERT INTO shard (name, url) VALUES ($1, $2)
             ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
             RETURNING url",
        )
        .bind(&shard.name)
        .bind(&shard.url)
        .fetch_optional(&self.pool)
        .await
        .map_err(classify)?;
        match existing {
            Some(url) if url != shard.url => Err(StoreError::Internal(format!(
                "shard {:?} is already at another URL",
                shard.name
            ))),
            _ => Ok(()),
        }
    }

    async fn placement_rule(&self) -> StoreResult<PlacementRule> {
        let rule: String = sqlx::query_scalar("SELECT rule FROM shard_placement")
            .fetch_one(&self.pool)
            .await
            .map_err(classify)?;
        PlacementRule::parse(&rule).map_err(StoreError::Internal)
    }

    async fn set_placement_rule(&self, rule: &PlacementRule) -> StoreResult<()> {
        if let PlacementRule::Pinned(name) = rule
            && name != HOME_SHARD
        {
            let known: bool =
                sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM shard WHERE name = $1)")
                    .bind(name)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(classify)?;
            if !known {
                return Err(StoreError::Internal(format!(
                    "no shard {name:?}: add it first"
                )));
            }
        }
        sqlx::query("UPDATE shard_placement SET rule = $1")
            .bind(rule.to_string())
            .execute(&self.pool)
            .await
            .map_err(classify)?;
        Ok(())
    }

    async fn event_shard(&self, event_id: &str) -> StoreResult<Option<String>> {
        sqlx::query_scalar("SELECT shard FROM event_shard WHERE event_id = $1")
            .bind(event_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(classify)
    }

    async fn place_event(
        &self,
        event_id: &str,
        placed_by: &str,
        candidates: &[String],
    ) -> StoreResult<String> {
        let mut tx = self.pool.begin().await.map_err(classify)?;
        let rule: String = sqlx::query_scalar("SELECT rule FROM shard_placement FOR UPDATE")
            .fetch_one(&mut *tx)
            .await
            .map_err(classify)?;
        let before: Option<String> =
            sqlx::query_scalar("SELECT shard FROM event_shard WHERE placed_by = $1")
                .bind(placed_by)
                .fetch_optional(&mut *tx)
                .await
                .map_err(classify)?;
        if let Some(shard) = before {
            tx.commit().await.map_err(classify)?;
            return Ok(shard);
        }
        let shard = match PlacementRule::parse(&rule).map_err(StoreError::Internal)? {
            PlacementRule::Pinned(name) => name,
            PlacementRule::LeastEvents => sqlx::query_scalar(
                "SELECT c.name FROM unnest($1::text[]) AS c(name)
                   LEFT JOIN event_shard e ON e.shard = c.name
                  GROUP BY c.name ORDER BY count(e.event_id), c.name LIMIT 1",
            )
            .bind(candidates)
            .fetch_one(&mut *tx)
            .await
            .map_err(classify)?,
        };
        if !candidates.contains(&shard) {
            return Err(StoreError::Unavailable(format!(
                "new events are pinned to shard {shard:?}, which this node does not know: restart it to connect to every shard"
            )));
        }
        sqlx::query("INSERT INTO event_shard (event_id, shard, placed_by) VALUES ($1, $2, $3)")
            .bind(event_id)
            .bind(&shard)
            .bind(placed_by)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        tx.commit().await.map_err(classify)?;
        Ok(shard)
    }

    async fn move_event(&self, event_id: &str, shard: &str) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO event_shard (event_id, shard) VALUES ($1, $2)
             ON CONFLICT (event_id) DO UPDATE SET shard = $2, placed_at = boxoffice_now()",
        )
        .bind(event_id)
        .bind(shard)
        .execute(&self.pool)
        .await
        .map_err(classify)?;
        Ok(())
    }

    async fn placed_counts(&self) -> StoreResult<Vec<(String, u64)>> {
        let rows = sqlx::query(
            "SELECT shard, count(*) AS n FROM event_shard GROUP BY shard ORDER BY shard",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(classify)?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get("shard").map_err(classify)?,
                    u64::try_from(row.try_get::<i64, _>("n").map_err(classify)?).unwrap_or(0),
                ))
            })
            .collect()
    }
}
