//! Venue charts as stored (issue 41): an operator's charts, each written once and never
//! changed (an edit is a new chart), so that the seat ids an event will take from a chart
//! (`boxoffice_domain::venue`) stay what they were. Charts belong to no account and no
//! event: they live in the home shard, like webhook endpoints.
//!
//! A chart's creation is idempotent the way a webhook endpoint's is: the row itself keeps
//! the creator, the key and the request's digest (unique per creator and key), so a replay
//! answers from the row whenever it comes, and a key reused for another request is refused.

use async_trait::async_trait;
use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::venue::VenueChart;

use crate::StoreResult;

/// A chart to store: validated, with what its list shows counted beforehand.
#[derive(Debug, Clone, PartialEq)]
pub struct NewChart {
    pub chart_id: String,
    pub chart: VenueChart,
    /// The account that asked, and its idempotency key and request digest.
    pub created_by: String,
    pub idempotency_key: String,
    pub request_digest: String,
}

/// What a list of charts shows of each (the chart itself is read by its id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartSummary {
    pub chart_id: String,
    pub name: String,
    pub seat_count: u64,
    pub standing_capacity: u64,
    pub section_count: u32,
    pub created_at: OffsetDateTime,
}

/// What storing a chart did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChartCreated {
    Created(ChartSummary),
    /// The same creator sent the same request with this key before: the chart it made.
    Replayed(ChartSummary),
    /// The creator used this key before for another request: nothing was stored.
    KeyReused,
}

#[async_trait]
pub trait VenueStore: Send + Sync {
    /// Stores a chart, or answers the chart its creator's key made before.
    async fn create_venue_chart(&self, new: &NewChart) -> StoreResult<ChartCreated>;

    /// A chart with its summary.
    async fn venue_chart(&self, chart_id: &str) -> StoreResult<Option<(ChartSummary, VenueChart)>>;

    /// Charts by id (oldest first: ids are UUIDv7), after `after_chart_id`, at most `limit`.
    async fn list_venue_charts(
        &self,
        after_chart_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<ChartSummary>>;
}
