//! Ticket holders (issue 39): who will use each ticket. A fan names them per ticket of a hold
//! before paying (`PUT /v1/holds/{holdId}/holders`; the event's `holderPolicy` may require a
//! name and answers, and the checkout is refused `HOLDERS_REQUIRED` until they are given);
//! the tickets issued for the order carry them; the owner changes a ticket's holder until the
//! event's start minus `changeCutoffSeconds` (`PUT /v1/tickets/{ticketId}/holder`). What is
//! valid is `boxoffice_domain::holder`'s rule; the store keeps it with conditional writes.

use std::collections::BTreeSet;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use boxoffice_domain::holder::HolderDetails;
use boxoffice_store::holder::{HoldHolder, HoldHoldersSet, HolderSlot, TicketHolderSet};
use boxoffice_store::{EventRecord, HoldView};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::api::{HolderView, Problem};
use crate::auth::Account;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};

/// Most holders one request names (a hold has at most 100 seats or units).
pub const HOLDERS_PER_REQUEST_MAX: usize = 100;

/// The holder of one ticket of a hold: a seat's (`seatId`) or a tier unit's (`unit`, 1, 2, …).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HoldHolderBody {
    /// The seat, for a hold of seats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "A-1-2")]
    pub seat_id: Option<String>,
    /// The unit (1 to the hold's quantity), for a hold of a tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 100)]
    pub unit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        max_length = 200,
        example = "Ada Lovelace",
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    pub name: Option<String>,
    /// Answers to the event's questions by question id.
    #[serde(default)]
    #[schema(example = json!({"dob": "1990-01-31"}))]
    pub answers: std::collections::BTreeMap<String, String>,
}

/// `PUT /v1/holds/{holdId}/holders`: every holder of the hold (the previous ones are
/// replaced).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HoldHoldersBody {
    #[schema(max_items = 100)]
    pub holders: Vec<HoldHolderBody>,
}

/// A hold's holders.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HoldHoldersResponse {
    pub hold_id: String,
    /// In slot order (seat ids, then units).
    pub holders: Vec<HoldHolderBody>,
}

fn body_of(holder: &HoldHolder) -> HoldHolderBody {
    let (seat_id, unit) = match &holder.slot {
        HolderSlot::Seat(seat_id) => (Some(seat_id.clone()), None),
        HolderSlot::Unit(unit) => (None, Some(*unit)),
    };
    HoldHolderBody {
        seat_id,
        unit,
        name: holder.details.name.clone(),
        answers: holder.details.answers.clone(),
    }
}

fn response(hold_id: &str, holders: &[HoldHolder]) -> Response {
    axum::Json(HoldHoldersResponse {
        hold_id: hold_id.to_owned(),
        holders: holders.iter().map(body_of).collect(),
    })
    .into_response()
}

/// The slots of a hold's tickets: its seats, or its units 1..=quantity.
fn slots_of(hold: &HoldView) -> Vec<HolderSlot> {
    if hold.seats.is_empty() {
        (1..=hold.quantity).map(HolderSlot::Unit).collect()
    } else {
        hold.seats
            .iter()
            .map(|seat| HolderSlot::Seat(seat.seat_id.clone()))
            .collect()
    }
}

async fn owned_hold(state: &AppState, account: &Account, hold_id: &str) -> ApiResult<HoldView> {
    if hold_id.is_empty() || hold_id.len() > 128 {
        return Err(ApiError::not_found("hold"));
    }
    state
        .store
        .get_hold(hold_id)
        .await?
        .filter(|hold| hold.account_id == account.account_id.as_str())
        .ok_or_else(|| ApiError::not_found("hold"))
}

/// The holders given for one of the caller's holds.
#[utoipa::path(
    get, path = "/v1/holds/{holdId}/holders", tag = "holds",
    params(("holdId" = String, Path)),
    responses(
        (status = 200, description = "The hold's holders", body = HoldHoldersResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such hold for this account", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn get_hold_holders(
    State(state): State<AppState>,
    account: Account,
    Path(hold_id): Path<String>,
) -> ApiResult<Response> {
    let hold = owned_hold(&state, &account, &hold_id).await?;
    let holders = state
        .store
        .hold_holders(&hold.event_id, &hold.hold_id)
        .await?;
    Ok(response(&hold.hold_id, &holders))
}

/// Names the holders of a held hold's tickets before its checkout (replacing any given
/// before). Idempotent by nature: the same body leaves the same holders.
#[utoipa::path(
    put, path = "/v1/holds/{holdId}/holders", tag = "holds",
    params(("holdId" = String, Path)),
    request_body = HoldHoldersBody,
    responses(
        (status = 200, description = "The hold's holders now", body = HoldHoldersResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such hold for this account", body = Problem),
        (status = 409, description = "HOLD_EXPIRED (released or expired) or HOLD_IN_CHECKOUT (checked out: the holders went to the order's tickets)", body = Problem),
        (status = 422, description = "VALIDATION: a seat not in the hold, a unit out of range, a slot named twice, a name or an answer the event's policy refuses", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn put_hold_holders(
    State(state): State<AppState>,
    account: Account,
    Path(hold_id): Path<String>,
    body: JsonBody,
) -> ApiResult<Response> {
    let request = body.parse::<HoldHoldersBody>()?;
    if request.holders.len() > HOLDERS_PER_REQUEST_MAX {
        return Err(ApiError::validation(
            "holders",
            format!("at most {HOLDERS_PER_REQUEST_MAX}"),
        ));
    }
    let hold = owned_hold(&state, &account, &hold_id).await?;
    let event = state.event(&hold.event_id).await?;
    let slots = slots_of(&hold);
    let mut seen = BTreeSet::new();
    let mut holders = Vec::with_capacity(request.holders.len());
    for (i, given) in request.holders.into_iter().enumerate() {
        let field = format!("holders[{i}]");
        let slot = match (given.seat_id, given.unit) {
            (Some(seat_id), None) => HolderSlot::Seat(seat_id),
            (None, Some(unit)) => HolderSlot::Unit(unit),
            _ => {
                return Err(ApiError::validation(
                    &field,
                    "names either a seatId (a hold of seats) or a unit (a hold of a tier)",
                ));
            }
        };
        if !slots.contains(&slot) {
            return Err(ApiError::validation(
                &field,
                match slot {
                    HolderSlot::Seat(_) => "seatId is not a seat of this hold".to_owned(),
                    HolderSlot::Unit(_) => format!("unit must be 1-{}", hold.quantity),
                },
            ));
        }
        if !seen.insert(slot.clone()) {
            return Err(ApiError::validation(&field, "this ticket is named twice"));
        }
        let details = HolderDetails {
            name: given.name,
            answers: given.answers,
        };
        details
            .validate(event.holder_policy.as_ref(), &field)
            .map_err(|e| ApiError::validation(&e.field, e.reason))?;
        holders.push(HoldHolder { slot, details });
    }
    match state
        .store
        .set_hold_holders(
            &hold.event_id,
            &hold.hold_id,
            account.account_id.as_str(),
            &holders,
        )
        .await?
    {
        HoldHoldersSet::Set(holders) => Ok(response(&hold.hold_id, &holders)),
        HoldHoldersSet::NotFound => Err(ApiError::not_found("hold")),
        HoldHoldersSet::NotOpen(status) if status == "PAYMENT_PENDING" || status == "CONFIRMED" => {
            Err(ApiError::new(
                StatusCode::CONFLICT,
                "HOLD_IN_CHECKOUT",
                "the hold is checked out: change a holder on its ticket (PUT /v1/tickets/{ticketId}/holder)",
            ))
        }
        HoldHoldersSet::NotOpen(_) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "HOLD_EXPIRED",
            "the hold expired or was released",
        )),
    }
}

/// Refuses the checkout of `hold` while a ticket lacks what the event's holder policy
/// requires: 422 `HOLDERS_REQUIRED`, naming the first ticket and what it lacks.
pub(crate) async fn require_holders(
    state: &AppState,
    event: &EventRecord,
    hold: &HoldView,
) -> ApiResult<()> {
    let Some(policy) = event
        .holder_policy
        .as_ref()
        .filter(|p| p.requires_anything())
    else {
        return Ok(());
    };
    let given = state
        .store
        .hold_holders(&hold.event_id, &hold.hold_id)
        .await?;
    for slot in slots_of(hold) {
        let details = given.iter().find(|h| h.slot == slot).map(|h| &h.details);
        if let Some(missing) = policy.missing(details) {
            let ticket = match &slot {
                HolderSlot::Seat(seat_id) => format!("seat {seat_id}"),
                HolderSlot::Unit(unit) => format!("unit {unit}"),
            };
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "HOLDERS_REQUIRED",
                format!(
                    "the event asks each ticket's holder before payment: {ticket} lacks {missing} (PUT /v1/holds/{}/holders)",
                    hold.hold_id
                ),
            ));
        }
    }
    Ok(())
}

/// `PUT /v1/tickets/{ticketId}/holder`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TicketHolderBody {
    #[serde(default)]
    #[schema(
        max_length = 200,
        example = "Ada Lovelace",
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    pub name: Option<String>,
    #[serde(default)]
    pub answers: std::collections::BTreeMap<String, String>,
}

/// Changes who will use one of the caller's valid tickets, until the event's start minus its
/// `holderPolicy.changeCutoffSeconds` (store clock). The whole holder is replaced; a required
/// name or answer may not be taken away.
#[utoipa::path(
    put, path = "/v1/tickets/{ticketId}/holder", tag = "tickets",
    params(("ticketId" = String, Path)),
    request_body = TicketHolderBody,
    responses(
        (status = 200, description = "The ticket with its new holder", body = crate::routes::tickets::TicketResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such ticket for this account", body = Problem),
        (status = 409, description = "HOLDER_CHANGE_CLOSED (past the cutoff) or TICKET_NOT_VALID (voided or checked in)", body = Problem),
        (status = 422, description = "VALIDATION: a name or an answer the event's policy refuses, or a required one missing", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn put_ticket_holder(
    State(state): State<AppState>,
    account: Account,
    Path(ticket_id): Path<String>,
    body: JsonBody,
) -> ApiResult<Response> {
    let request = body.parse::<TicketHolderBody>()?;
    if ticket_id.is_empty() || ticket_id.len() > 128 {
        return Err(ApiError::not_found("ticket"));
    }
    let ticket = crate::routes::tickets::owned_ticket(&state, &account, &ticket_id).await?;
    let event = state.event(&ticket.event_id).await?;
    let details = HolderView {
        name: request.name,
        answers: request.answers,
    }
    .into_details();
    let policy = event.holder_policy.as_ref();
    details
        .validate(policy, "holder")
        .map_err(|e| ApiError::validation(&e.field, e.reason))?;
    if let Some(missing) = policy.and_then(|p| p.missing(Some(&details))) {
        return Err(ApiError::validation(
            &format!("holder.{missing}"),
            "required by the event",
        ));
    }
    let cutoff_s = policy.map_or(0, |p| p.change_cutoff_s);
    match state
        .store
        .set_ticket_holder(
            &ticket.event_id,
            &ticket.ticket_id,
            account.account_id.as_str(),
            &details,
            cutoff_s,
        )
        .await?
    {
        TicketHolderSet::Set(ticket) => {
            Ok(axum::Json(crate::routes::tickets::TicketResponse::new(*ticket)).into_response())
        }
        TicketHolderSet::NotFound => Err(ApiError::not_found("ticket")),
        TicketHolderSet::NotValid => Err(ApiError::new(
            StatusCode::CONFLICT,
            "TICKET_NOT_VALID",
            "the ticket is voided or already used",
        )),
        TicketHolderSet::Closed => Err(ApiError::new(
            StatusCode::CONFLICT,
            "HOLDER_CHANGE_CLOSED",
            format!("holders can no longer change: the event starts in less than {cutoff_s} s"),
        )),
    }
}
