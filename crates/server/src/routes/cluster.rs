//! Who owns an event: its lease (admin).

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use boxoffice_domain::OffsetDateTime;
use serde::Serialize;
use utoipa::ToSchema;

use crate::AppState;
use crate::api::Problem;
use crate::auth::Admin;
use crate::error::ApiResult;

/// An event's lease: the node that writes it, since when, until when unless renewed.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OwnerResponse {
    pub event_id: String,
    /// The owner node; null when no node has written the event yet.
    pub node_id: Option<String>,
    /// Goes up by one each time the lease changes hands; 0 before the first owner.
    pub epoch: u64,
    /// When the lease last changed hands.
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub since: Option<OffsetDateTime>,
    /// When it lapses unless the owner renews it.
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<OffsetDateTime>,
    /// Whether the owner still holds it (by the store's clock).
    pub live: bool,
    /// The owner's internal address, as it registered it.
    pub owner_url: Option<String>,
    /// The node that answered this request.
    pub answered_by: Option<String>,
}

/// The event's owner node, its lease epoch and since when (admin).
#[utoipa::path(
    get, path = "/v1/admin/events/{eventId}/owner", tag = "events",
    params(("eventId" = String, Path)),
    responses(
        (status = 200, description = "The event's lease", body = OwnerResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 404, description = "No such event", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn get_owner(
    State(state): State<AppState>,
    _admin: Admin,
    Path(event_id): Path<String>,
) -> ApiResult<Response> {
    let event = state.event(&event_id).await?;
    let lease = state.store.lease(&event.event_id).await?;
    let answered_by = state.cluster.as_ref().map(|c| c.node_id().to_owned());
    let body = match lease {
        Some(lease) => OwnerResponse {
            event_id: event.event_id.clone(),
            live: lease.live(),
            node_id: Some(lease.node_id),
            epoch: lease.epoch,
            since: Some(lease.since),
            expires_at: Some(lease.expires_at),
            owner_url: lease.owner_url,
            answered_by,
        },
        None => OwnerResponse {
            event_id: event.event_id.clone(),
            node_id: None,
            epoch: 0,
            since: None,
            expires_at: None,
            live: false,
            owner_url: None,
            answered_by,
        },
    };
    Ok(axum::Json(body).into_response())
}
