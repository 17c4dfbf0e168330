//! Sale phases' access codes (issue 40): the organiser generates, imports and downloads a
//! presale lane's codes; a fan redeems one on the event's writer (`engine::access`), after
//! which the account may hold in the lane.
//!
//! The rules are the domain's (`boxoffice_domain::phase`: spelling, CSV; the engine: who
//! wins a code); here the requests are parsed, bounded and answered.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use boxoffice_domain::engine::{AccessDecision, AccessRedeem};
use boxoffice_domain::idempotency::IdempotencyScope;
use boxoffice_domain::idempotency::request_digest;
use boxoffice_domain::phase::{
    ACCESS_CODE_GENERATED_LEN, ACCESS_CODE_USES_MAX, ACCESS_CODES_PER_CALL_MAX,
    ACCESS_CODES_PER_PHASE_MAX, Phase, PhaseAccess, code_from_random, normalize_code,
    parse_codes_csv,
};
use boxoffice_store::EventRecord;
use boxoffice_store::phase::{AccessCodeRow, CodeBatch, CodesInserted};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::api::Problem;
use crate::auth::{Account, Admin};
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::idempotency::{REPLAYED_HEADER, request_key};

/// Bytes of one imported CSV at most (a route's own body limit: 64 KiB is every other's).
pub const IMPORT_BODY_BYTES_MAX: usize = 2 * 1024 * 1024;
/// Codes one download lists at most (a phase holds at most
/// `ACCESS_CODES_PER_PHASE_MAX`).
pub const CODES_DOWNLOAD_MAX: u32 = 1_000_000;

/// `POST .../codes` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GenerateCodesBody {
    /// How many codes, 1-100,000.
    #[schema(minimum = 1, maximum = 100_000)]
    pub count: u32,
    /// How many accounts each code admits (default 1).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100_000)]
    pub uses: Option<u32>,
    /// Alternative to the `Idempotency-Key` header (the same key when both are sent).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 255, pattern = "^[!-~]+$")]
    pub idempotency_key: Option<String>,
}

/// One access code and its uses.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccessCodeView {
    pub code: String,
    /// Accounts the code admits in all.
    pub uses: u32,
    pub uses_left: u32,
}

/// Codes made (or, on a replay, the codes the first request made).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccessCodesView {
    pub event_id: String,
    pub phase_id: String,
    pub codes: Vec<AccessCodeView>,
}

/// `POST /v1/events/{eventId}/phases/{phaseId}/access` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RedeemBody {
    /// The access code (case and surrounding blanks do not matter).
    #[schema(min_length = 4, max_length = 40, example = "7KQ2M9XD4R1B")]
    pub code: String,
}

/// Whether the account may buy in a code phase.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccessView {
    pub event_id: String,
    pub phase_id: String,
    /// The account redeemed a code for the phase: it may hold in it.
    pub redeemed: bool,
}

fn view(row: &AccessCodeRow) -> AccessCodeView {
    AccessCodeView {
        code: row.code.clone(),
        uses: row.max_uses,
        uses_left: row.max_uses.saturating_sub(row.uses),
    }
}

/// The event's phase, or 404.
fn phase_of<'a>(event: &'a EventRecord, phase_id: &str) -> ApiResult<&'a Phase> {
    event
        .sale
        .phases
        .iter()
        .find(|p| p.phase_id == phase_id)
        .ok_or_else(|| ApiError::not_found("phase"))
}

/// A code phase of the event, or 404 (no such phase) or 409 `NOT_A_CODE_PHASE`.
fn code_phase<'a>(event: &'a EventRecord, phase_id: &str) -> ApiResult<&'a Phase> {
    let phase = phase_of(event, phase_id)?;
    match phase.access {
        PhaseAccess::Code => Ok(phase),
        PhaseAccess::Open => Err(ApiError::new(
            StatusCode::CONFLICT,
            "NOT_A_CODE_PHASE",
            format!("phase {phase_id} is open to every fan: it has no access codes"),
        )),
    }
}

/// The codes as CSV: `code,uses,usesLeft`.
fn codes_csv(rows: &[AccessCodeRow]) -> String {
    let mut csv = String::with_capacity(rows.len() * 24 + 20);
    csv.push_str("code,uses,usesLeft\r\n");
    for row in rows {
        csv.push_str(&format!(
            "{},{},{}\r\n",
            row.code,
            row.max_uses,
            row.max_uses.saturating_sub(row.uses)
        ));
    }
    csv
}

fn wants_csv(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/csv"))
}

fn csv_response(status: StatusCode, event_id: &str, phase_id: &str, csv: String) -> Response {
    let mut response = (status, csv).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    // Event and phase ids are [A-Za-z0-9_-]: safe in the file name.
    let safe = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect()
    };
    let disposition = format!(
        "attachment; filename=\"codes-{}-{}.csv\"",
        safe(event_id),
        safe(phase_id)
    );
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    response
}

/// Answers inserted or replayed codes as CSV or JSON (per `Accept`).
fn codes_answer(
    headers: &HeaderMap,
    event: &EventRecord,
    phase_id: &str,
    inserted: CodesInserted,
) -> ApiResult<Response> {
    let (rows, replayed) = match inserted {
        CodesInserted::Inserted(rows) => (rows, false),
        CodesInserted::Replayed(rows) => (rows, true),
        CodesInserted::KeyReused => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "IDEMPOTENCY_KEY_REUSED",
                "this Idempotency-Key was used for another request",
            ));
        }
        CodesInserted::Duplicate(code) => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "ACCESS_CODE_EXISTS",
                format!("the phase has code {code} already; nothing was added"),
            )
            .with("accessCode", code));
        }
        CodesInserted::TooMany { held } => {
            return Err(ApiError::validation(
                "count",
                format!("a phase holds at most {ACCESS_CODES_PER_PHASE_MAX} codes; it has {held}"),
            ));
        }
    };
    let mut response = if wants_csv(headers) {
        csv_response(
            StatusCode::CREATED,
            &event.event_id,
            phase_id,
            codes_csv(&rows),
        )
    } else {
        (
            StatusCode::CREATED,
            axum::Json(AccessCodesView {
                event_id: event.event_id.clone(),
                phase_id: phase_id.to_owned(),
                codes: rows.iter().map(view).collect(),
            }),
        )
            .into_response()
    };
    if replayed {
        response
            .headers_mut()
            .insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    }
    Ok(response)
}

/// Generates random access codes for a code phase (admin). Idempotent: a retry with the same
/// key answers the codes the first request made.
#[utoipa::path(
    post, path = "/v1/admin/events/{eventId}/phases/{phaseId}/codes", tag = "phases",
    params(
        ("eventId" = String, Path),
        ("phaseId" = String, Path),
        ("Idempotency-Key" = String, Header, description = "1-255 characters; or body idempotencyKey"),
        ("Accept" = Option<String>, Header, description = "text/csv for a CSV download (code,uses,usesLeft); JSON otherwise"),
    ),
    request_body = GenerateCodesBody,
    responses(
        (status = 201, description = "The codes made (a replay: the first request's, with Idempotent-Replayed)", body = AccessCodesView),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 404, description = "No such event or phase", body = Problem),
        (status = 409, description = "NOT_A_CODE_PHASE, or the same key in flight", body = Problem),
        (status = 422, description = "VALIDATION (count 1-100,000, uses 1-100,000, a phase holds at most 1,000,000 codes) or IDEMPOTENCY_KEY_REUSED", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn generate_codes(
    State(state): State<AppState>,
    Admin(admin): Admin,
    Path((event_id, phase_id)): Path<(String, String)>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    let key = request_key(&headers, &body)?;
    let asked = body.parse::<GenerateCodesBody>()?;
    let event = state.event(&event_id).await?;
    code_phase(&event, &phase_id)?;
    if asked.count == 0 || asked.count > ACCESS_CODES_PER_CALL_MAX {
        return Err(ApiError::validation(
            "count",
            format!("must be 1-{ACCESS_CODES_PER_CALL_MAX}"),
        ));
    }
    let uses = asked.uses.unwrap_or(1);
    if uses == 0 || uses > ACCESS_CODE_USES_MAX {
        return Err(ApiError::validation(
            "uses",
            format!("must be 1-{ACCESS_CODE_USES_MAX}"),
        ));
    }
    let path = format!(
        "/v1/admin/events/{}/phases/{phase_id}/codes",
        event.event_id
    );
    let scope = IdempotencyScope {
        account_id: admin.account_id.to_string(),
        endpoint: format!("POST {path}"),
        key,
    };
    let _in_flight = state.in_flight.claim(&scope)?;
    let digest = request_digest("POST", &path, &body.0);
    // A code drawn twice (60 random bits each: rare even at a million) is drawn again; one
    // that the phase has already makes the store refuse the batch, which is drawn anew once.
    for _ in 0..2 {
        let mut codes = std::collections::BTreeSet::new();
        while codes.len() < asked.count as usize {
            let bytes: [u8; ACCESS_CODE_GENERATED_LEN] = rand::random();
            codes.insert(code_from_random(&bytes));
        }
        let batch = CodeBatch {
            event_id: event.event_id.clone(),
            phase_id: phase_id.clone(),
            batch_key: format!("{}:{}", scope.account_id, scope.key),
            batch_digest: digest.clone(),
            codes: codes.into_iter().map(|code| (code, uses)).collect(),
            phase_codes_max: ACCESS_CODES_PER_PHASE_MAX,
        };
        match state.store.insert_access_codes(&batch).await? {
            CodesInserted::Duplicate(_) => continue,
            inserted => {
                if matches!(inserted, CodesInserted::Inserted(_)) {
                    metrics::counter!("boxoffice_access_codes_created_total", "how" => "generated")
                        .increment(u64::from(asked.count));
                }
                return codes_answer(&headers, &event, &phase_id, inserted);
            }
        }
    }
    Err(ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "UNAVAILABLE",
        "fresh codes collided twice with the phase's; try again",
    ))
}

/// Imports access codes from a CSV (`code,uses` per line; an optional header line; `uses`
/// absent: 1) for a code phase (admin). All or nothing; an error names its line.
/// Idempotent by key.
#[utoipa::path(
    post, path = "/v1/admin/events/{eventId}/phases/{phaseId}/codes/import", tag = "phases",
    params(
        ("eventId" = String, Path),
        ("phaseId" = String, Path),
        ("Idempotency-Key" = String, Header, description = "1-255 characters"),
        ("Accept" = Option<String>, Header, description = "text/csv for a CSV answer; JSON otherwise"),
    ),
    request_body(content = String, content_type = "text/csv", description = "code,uses per line, at most 2 MiB and 100,000 codes"),
    responses(
        (status = 201, description = "The codes imported", body = AccessCodesView),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 404, description = "No such event or phase", body = Problem),
        (status = 409, description = "NOT_A_CODE_PHASE, ACCESS_CODE_EXISTS (the phase has one of the codes), or the same key in flight", body = Problem),
        (status = 413, description = "Body over 2 MiB", body = Problem),
        (status = 422, description = "CSV_INVALID (with `line`), VALIDATION or IDEMPOTENCY_KEY_REUSED", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn import_codes(
    State(state): State<AppState>,
    Admin(admin): Admin,
    Path((event_id, phase_id)): Path<(String, String)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<Response> {
    let key = request_key(&headers, &JsonBody(serde_json::Value::Null))?;
    let event = state.event(&event_id).await?;
    code_phase(&event, &phase_id)?;
    if body.len() > IMPORT_BODY_BYTES_MAX {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "BODY_TOO_LARGE",
            format!("an import is limited to {IMPORT_BODY_BYTES_MAX} bytes"),
        ));
    }
    let text = std::str::from_utf8(&body).map_err(|_| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "CSV_INVALID",
            "the CSV is not UTF-8",
        )
    })?;
    let codes = parse_codes_csv(text, ACCESS_CODES_PER_CALL_MAX as usize).map_err(|e| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "CSV_INVALID",
            format!("line {}: {}", e.line, e.reason),
        )
        .with("line", e.line)
    })?;
    let path = format!(
        "/v1/admin/events/{}/phases/{phase_id}/codes/import",
        event.event_id
    );
    let scope = IdempotencyScope {
        account_id: admin.account_id.to_string(),
        endpoint: format!("POST {path}"),
        key,
    };
    let _in_flight = state.in_flight.claim(&scope)?;
    let digest = request_digest("POST", &path, &serde_json::Value::String(text.to_owned()));
    let n = codes.len() as u64;
    let batch = CodeBatch {
        event_id: event.event_id.clone(),
        phase_id: phase_id.clone(),
        batch_key: format!("{}:{}", scope.account_id, scope.key),
        batch_digest: digest,
        codes,
        phase_codes_max: ACCESS_CODES_PER_PHASE_MAX,
    };
    let inserted = state.store.insert_access_codes(&batch).await?;
    if matches!(inserted, CodesInserted::Inserted(_)) {
        metrics::counter!("boxoffice_access_codes_created_total", "how" => "imported").increment(n);
    }
    codes_answer(&headers, &event, &phase_id, inserted)
}

/// A code phase's codes with their uses left, as a CSV download (admin).
#[utoipa::path(
    get, path = "/v1/admin/events/{eventId}/phases/{phaseId}/codes", tag = "phases",
    params(("eventId" = String, Path), ("phaseId" = String, Path)),
    responses(
        (status = 200, description = "code,uses,usesLeft per line (RFC 4180)", body = String, content_type = "text/csv"),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 404, description = "No such event or phase", body = Problem),
        (status = 409, description = "NOT_A_CODE_PHASE", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn list_codes(
    State(state): State<AppState>,
    _admin: Admin,
    Path((event_id, phase_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let event = state.event(&event_id).await?;
    code_phase(&event, &phase_id)?;
    let rows = state
        .store
        .access_codes(&event.event_id, &phase_id, CODES_DOWNLOAD_MAX)
        .await?;
    Ok(csv_response(
        StatusCode::OK,
        &event.event_id,
        &phase_id,
        codes_csv(&rows),
    ))
}

/// Redeems an access code for a presale lane: the account may then hold in it. Decided on
/// the event's writer: a single-use code raced by many accounts admits exactly one. A second
/// redemption by the same account (any code) answers the same success without a use.
#[utoipa::path(
    post, path = "/v1/events/{eventId}/phases/{phaseId}/access", tag = "phases",
    params(("eventId" = String, Path), ("phaseId" = String, Path)),
    request_body = RedeemBody,
    responses(
        (status = 200, description = "Redeemed (or redeemed before by this account)", body = AccessView),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such event or phase", body = Problem),
        (status = 409, description = "ACCESS_CODE_USED_UP, NOT_A_CODE_PHASE, PHASE_ENDED or EVENT_CANCELLED", body = Problem),
        (status = 422, description = "ACCESS_CODE_INVALID: the phase has no such code; VALIDATION", body = Problem),
        (status = 429, description = "RATE_LIMITED: redemptions count against holds-per-account; or the event's writer is busy", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn redeem_access(
    State(state): State<AppState>,
    account: Account,
    Path((event_id, phase_id)): Path<(String, String)>,
    body: JsonBody,
) -> ApiResult<Response> {
    // Every guess costs a hold's place in the account's rate: codes are not brute-forced.
    state.limits.take(
        crate::limits::Limit::HoldsPerAccount,
        account.account_id.as_str(),
    )?;
    let asked = body.parse::<RedeemBody>()?;
    let event = state.event(&event_id).await?;
    code_phase(&event, &phase_id)?;
    let code =
        normalize_code(&asked.code).map_err(|reason| ApiError::validation("code", reason))?;
    let row = state
        .store
        .access_code(&event.event_id, &phase_id, &code)
        .await?;
    let request = AccessRedeem {
        account_id: account.account_id.to_string(),
        phase_id: phase_id.clone(),
        code,
        max_uses: row.map(|row| row.max_uses),
    };
    let decision = state.writers.redeem_access(event.clone(), request).await?;
    metrics::counter!("boxoffice_access_redemptions_total", "decision" => decision_name(&decision))
        .increment(1);
    let refused = |status: StatusCode, code: &'static str, detail: String| {
        Err(ApiError::new(status, code, detail).with("phaseId", phase_id.clone()))
    };
    match decision {
        AccessDecision::Redeemed | AccessDecision::AlreadyRedeemed => Ok(axum::Json(AccessView {
            event_id: event.event_id.clone(),
            phase_id,
            redeemed: true,
        })
        .into_response()),
        AccessDecision::UnknownCode => refused(
            StatusCode::UNPROCESSABLE_ENTITY,
            "ACCESS_CODE_INVALID",
            "the phase has no such code".into(),
        ),
        AccessDecision::UsedUp => refused(
            StatusCode::CONFLICT,
            "ACCESS_CODE_USED_UP",
            "every use of this code is taken".into(),
        ),
        AccessDecision::UnknownPhase => Err(ApiError::not_found("phase")),
        AccessDecision::NotCodePhase => refused(
            StatusCode::CONFLICT,
            "NOT_A_CODE_PHASE",
            format!("phase {phase_id} is open to every fan"),
        ),
        AccessDecision::PhaseEnded => refused(
            StatusCode::CONFLICT,
            "PHASE_ENDED",
            format!("phase {phase_id} has ended"),
        ),
        AccessDecision::EventCancelled => Err(crate::routes::cancellation::event_cancelled()),
    }
}

fn decision_name(decision: &AccessDecision) -> &'static str {
    match decision {
        AccessDecision::Redeemed => "redeemed",
        AccessDecision::AlreadyRedeemed => "already",
        AccessDecision::UnknownCode => "unknown_code",
        AccessDecision::UsedUp => "used_up",
        AccessDecision::UnknownPhase => "unknown_phase",
        AccessDecision::NotCodePhase => "not_code_phase",
        AccessDecision::PhaseEnded => "phase_ended",
        AccessDecision::EventCancelled => "cancelled",
    }
}

/// Whether the account redeemed a code for the phase (the storefront asks before it shows
/// the code entry).
#[utoipa::path(
    get, path = "/v1/events/{eventId}/phases/{phaseId}/access", tag = "phases",
    params(("eventId" = String, Path), ("phaseId" = String, Path)),
    responses(
        (status = 200, description = "The account's access to the phase", body = AccessView),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such event or phase", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn get_access(
    State(state): State<AppState>,
    account: Account,
    Path((event_id, phase_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let event = state.event(&event_id).await?;
    let phase = phase_of(&event, &phase_id)?;
    let redeemed = match phase.access {
        PhaseAccess::Open => true,
        PhaseAccess::Code => {
            state
                .store
                .access_redeemed(&event.event_id, &phase_id, account.account_id.as_str())
                .await?
        }
    };
    Ok(axum::Json(AccessView {
        event_id: event.event_id.clone(),
        phase_id,
        redeemed,
    })
    .into_response())
}
