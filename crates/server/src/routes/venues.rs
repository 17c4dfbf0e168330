//! Venue charts (issue 41): an operator imports a venue's seating chart — as the JSON of
//! docs/VENUES.md or as a CSV of its seats — reads it back and lists the charts; an editor
//! may check a chart without storing it. Admin only.
//!
//! The chart's rules and the CSV's reading are the domain's (`boxoffice_domain::venue`);
//! here a body is read (its own, larger limit), parsed, validated, stored and answered. A
//! refused chart is one 422 `INVALID_CHART` listing its problems, each with its JSON path
//! or its CSV line and column (the first
//! `boxoffice_domain::venue::CHART_PROBLEMS_MAX`, and how many there were).

use axum::body::Bytes;
use axum::extract::{FromRequest, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use boxoffice_domain::idempotency::request_digest;
use boxoffice_domain::venue::{ChartErrors, ChartProblem, VenueChart, parse_chart_csv};
use boxoffice_store::venue::{ChartCreated, ChartSummary, NewChart};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::api::Problem;
use crate::auth::Admin;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::idempotency::{REPLAYED_HEADER, request_key};

/// Bytes of one chart's body at most, JSON or CSV (this route's own limit; 64 KiB is every
/// other's). A 100,000-seat chart is about 4 MB of CSV or 6 MB of JSON; the most seats a
/// chart may have (200,000) fit with room for long labels and qualities.
pub const VENUE_CHART_BODY_BYTES_MAX: usize = 32 * 1024 * 1024;
/// Charts per page of the list, by default and at most.
pub const CHARTS_PAGE_DEFAULT: u32 = 50;
pub const CHARTS_PAGE_MAX: u32 = 200;
/// The path charts are created at (the idempotency scope's endpoint).
const CHARTS_PATH: &str = "/v1/admin/venue-charts";

/// A chart's body as bytes, read within [`VENUE_CHART_BODY_BYTES_MAX`] (the route's
/// `DefaultBodyLimit`); over it, a problem+json 413.
#[derive(Debug)]
pub struct ChartBody(Bytes);

impl FromRequest<AppState> for ChartBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        Bytes::from_request(request, state)
            .await
            .map(Self)
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::new(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "PAYLOAD_TOO_LARGE",
                        format!("a venue chart is limited to {VENUE_CHART_BODY_BYTES_MAX} bytes"),
                    )
                } else {
                    ApiError::new(
                        StatusCode::BAD_REQUEST,
                        "BAD_REQUEST",
                        "could not read the request body",
                    )
                }
            })
    }
}

/// `?name=` of a CSV import.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ChartQuery {
    /// The chart's name, with a `text/csv` body only (a JSON chart names itself).
    #[param(min_length = 1, max_length = 200)]
    pub name: Option<String>,
}

/// A page of charts.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ChartPageQuery {
    /// 1-200, default 50.
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u32>,
    /// `nextCursor` of the previous page (a chart id: a UUID, lower-case).
    #[param(pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")]
    pub cursor: Option<String>,
}

/// A stored chart without its seats.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VenueChartSummary {
    pub chart_id: String,
    pub name: String,
    /// Reserved seats.
    pub seat_count: u64,
    /// Standing places, summed over the standing areas.
    pub standing_capacity: u64,
    /// Reserved sections and standing areas.
    pub section_count: u32,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: OffsetDateTime,
}

impl VenueChartSummary {
    fn of(summary: &ChartSummary) -> Self {
        Self {
            chart_id: summary.chart_id.clone(),
            name: summary.name.clone(),
            seat_count: summary.seat_count,
            standing_capacity: summary.standing_capacity,
            section_count: summary.section_count,
            created_at: summary.created_at,
        }
    }
}

/// A stored chart: its summary and the chart as docs/VENUES.md spells it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VenueChartView {
    #[serde(flatten)]
    pub summary: VenueChartSummary,
    pub chart: VenueChart,
}

/// `GET /v1/admin/venue-charts` answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VenueChartPage {
    pub charts: Vec<VenueChartSummary>,
    /// Absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A chart checked and not stored.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChartCheckView {
    pub valid: bool,
    pub seat_count: u64,
    pub standing_capacity: u64,
    pub section_count: u32,
}

/// One problem of a refused chart (422 `INVALID_CHART`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChartProblemView {
    /// The CSV's 1-based line (absent for JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The JSON path (`sections[2].rows[0].seats[4].label`) or the CSV column (`seat`).
    pub field: String,
    pub reason: String,
}

/// 422 `INVALID_CHART`: every problem up to the cap in `problems`, their number in
/// `problemsTotal`, and the first one's `field` (and `line`) as a `VALIDATION` names them.
pub fn invalid_chart(errors: &ChartErrors) -> ApiError {
    let first = errors.problems.first();
    let detail = match first {
        Some(problem) if errors.total == 1 => format!("the chart has a problem: {problem}"),
        Some(problem) => format!(
            "the chart has {} problems; the first: {problem}",
            errors.total
        ),
        None => "the chart is not valid".to_owned(),
    };
    let problems: Vec<Value> = errors
        .problems
        .iter()
        .map(|p: &ChartProblem| {
            serde_json::to_value(ChartProblemView {
                line: p.line,
                field: p.field.clone(),
                reason: p.reason.clone(),
            })
            .unwrap_or(Value::Null)
        })
        .collect();
    let mut error = ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "INVALID_CHART", detail)
        .with("problems", problems)
        .with("problemsTotal", errors.total);
    if let Some(problem) = first {
        error = error.with("field", problem.field.clone());
        if let Some(line) = problem.line {
            error = error.with("line", line);
        }
    }
    error
}

fn is_csv(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|media| {
            media
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("text/csv")
        })
}

/// A chart's body as sent: CSV text, or a JSON document.
enum Sent {
    Csv(Bytes),
    Json(JsonBody),
}

fn read_body(headers: &HeaderMap, bytes: Bytes) -> ApiResult<Sent> {
    if is_csv(headers) {
        Ok(Sent::Csv(bytes))
    } else {
        Ok(Sent::Json(JsonBody::from_bytes(&bytes)?))
    }
}

/// The chart a request sends, validated, with the value its idempotency digest is taken of.
fn chart_of(asked: &ChartQuery, sent: Sent) -> ApiResult<(VenueChart, Value)> {
    match sent {
        Sent::Csv(bytes) => {
            let Some(name) = asked.name.as_deref() else {
                return Err(ApiError::validation(
                    "name",
                    "is required with a text/csv body (the CSV has no name)",
                ));
            };
            let text = std::str::from_utf8(&bytes).map_err(|_| {
                invalid_chart(&ChartErrors {
                    problems: vec![ChartProblem {
                        line: None,
                        field: "body".into(),
                        reason: "the CSV is not UTF-8".into(),
                    }],
                    total: 1,
                })
            })?;
            let chart = parse_chart_csv(name, text).map_err(|e| invalid_chart(&e))?;
            Ok((chart, serde_json::json!({ "name": name, "csv": text })))
        }
        Sent::Json(body) => {
            if asked.name.is_some() {
                return Err(ApiError::validation(
                    "name",
                    "is given only with a text/csv body (a JSON chart has its own name)",
                ));
            }
            // The seed's body `idempotencyKey` stands in for the header; it is no part of
            // the chart (nor of the digest).
            let JsonBody(mut members) = body;
            let digested = members.clone();
            if let Some(object) = members.as_object_mut() {
                object.remove("idempotencyKey");
            }
            let chart: VenueChart = JsonBody(members).parse()?;
            chart.validate().map_err(|e| invalid_chart(&e))?;
            Ok((chart, digested))
        }
    }
}

/// Imports a venue chart (admin): the JSON of docs/VENUES.md, or with `Content-Type:
/// text/csv` a CSV of its seats and `?name=`. Stored once per Idempotency-Key.
#[utoipa::path(
    post, path = "/v1/admin/venue-charts", tag = "venues",
    params(
        ChartQuery,
        ("Idempotency-Key" = String, Header, description = "1-255 characters"),
    ),
    request_body(content(
        (VenueChart = "application/json"),
        (String = "text/csv"),
    ), description = "The chart as JSON, or its seats as CSV (section,row,seat,x,y,category,kind[,quality][,capacity]) with ?name=; at most 32 MiB"),
    responses(
        (status = 201, description = "Stored (a retry with the key answers the same, Idempotent-Replayed)", body = VenueChartSummary),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin token", body = Problem),
        (status = 409, description = "The same key in flight", body = Problem),
        (status = 413, description = "Body over 32 MiB", body = Problem),
        (status = 422, description = "INVALID_CHART (problems with their path or line), VALIDATION or IDEMPOTENCY_KEY_REUSED", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn create_chart(
    State(state): State<AppState>,
    Admin(admin): Admin,
    headers: HeaderMap,
    query: Result<Query<ChartQuery>, axum::extract::rejection::QueryRejection>,
    ChartBody(bytes): ChartBody,
) -> ApiResult<Response> {
    let Query(asked) = query.map_err(|e| ApiError::validation("query", e.body_text()))?;
    let sent = read_body(&headers, bytes);
    // A missing key is told first, whatever the body, as every keyed route does.
    let key = match &sent {
        Ok(Sent::Json(body)) => request_key(&headers, body)?,
        Ok(Sent::Csv(_)) | Err(_) => request_key(&headers, &JsonBody(Value::Null))?,
    };
    let (chart, digested) = chart_of(&asked, sent?)?;
    let scope = boxoffice_domain::idempotency::IdempotencyScope {
        account_id: admin.account_id.to_string(),
        endpoint: format!("POST {CHARTS_PATH}"),
        key,
    };
    let _in_flight = state.in_flight.claim(&scope)?;
    let new = NewChart {
        chart_id: uuid::Uuid::now_v7().to_string(),
        chart,
        created_by: scope.account_id.clone(),
        idempotency_key: scope.key.clone(),
        request_digest: request_digest("POST", CHARTS_PATH, &digested),
    };
    let (summary, replayed) = match state.store.create_venue_chart(&new).await? {
        ChartCreated::Created(summary) => {
            metrics::counter!("boxoffice_venue_charts_created_total").increment(1);
            (summary, false)
        }
        ChartCreated::Replayed(summary) => (summary, true),
        ChartCreated::KeyReused => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "IDEMPOTENCY_KEY_REUSED",
                "this Idempotency-Key was used for a different request",
            ));
        }
    };
    let mut response = (
        StatusCode::CREATED,
        axum::Json(VenueChartSummary::of(&summary)),
    )
        .into_response();
    if replayed {
        response
            .headers_mut()
            .insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    }
    Ok(response)
}

/// Checks a chart without storing it (admin; an editor's "check" button): 200 with its
/// counts, or the 422 `INVALID_CHART` an import would get.
#[utoipa::path(
    post, path = "/v1/admin/venue-charts/validate", tag = "venues",
    params(ChartQuery),
    request_body(content(
        (VenueChart = "application/json"),
        (String = "text/csv"),
    ), description = "As for POST /v1/admin/venue-charts"),
    responses(
        (status = 200, description = "The chart is valid: its counts", body = ChartCheckView),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin token", body = Problem),
        (status = 413, description = "Body over 32 MiB", body = Problem),
        (status = 422, description = "INVALID_CHART (problems with their path or line) or VALIDATION", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn validate_chart(
    Admin(_admin): Admin,
    headers: HeaderMap,
    query: Result<Query<ChartQuery>, axum::extract::rejection::QueryRejection>,
    ChartBody(bytes): ChartBody,
) -> ApiResult<Response> {
    let Query(asked) = query.map_err(|e| ApiError::validation("query", e.body_text()))?;
    let (chart, _) = chart_of(&asked, read_body(&headers, bytes)?)?;
    Ok(axum::Json(ChartCheckView {
        valid: true,
        seat_count: chart.seat_count() as u64,
        standing_capacity: chart.standing_capacity(),
        section_count: u32::try_from(chart.sections.len()).unwrap_or(u32::MAX),
    })
    .into_response())
}

/// The venue charts, oldest first (admin).
#[utoipa::path(
    get, path = "/v1/admin/venue-charts", tag = "venues", params(ChartPageQuery),
    responses(
        (status = 200, description = "A page of charts (without their seats)", body = VenueChartPage),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin token", body = Problem),
        (status = 422, description = "Bad limit or cursor", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn list_charts(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    query: Result<Query<ChartPageQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let Query(page) = query.map_err(|e| ApiError::validation("query", e.body_text()))?;
    let limit = page.limit.unwrap_or(CHARTS_PAGE_DEFAULT);
    if !(1..=CHARTS_PAGE_MAX).contains(&limit) {
        return Err(ApiError::validation(
            "limit",
            format!("must be between 1 and {CHARTS_PAGE_MAX}"),
        ));
    }
    crate::routes::check_cursor(page.cursor.as_deref())?;
    // One extra row tells whether there is a next page.
    let mut charts = state
        .store
        .list_venue_charts(page.cursor.as_deref(), limit + 1)
        .await?;
    let next_cursor = if charts.len() > limit as usize {
        charts.truncate(limit as usize);
        charts.last().map(|c| c.chart_id.clone())
    } else {
        None
    };
    Ok(axum::Json(VenueChartPage {
        charts: charts.iter().map(VenueChartSummary::of).collect(),
        next_cursor,
    })
    .into_response())
}

/// One venue chart with its sections, rows and seats (admin).
#[utoipa::path(
    get, path = "/v1/admin/venue-charts/{chartId}", tag = "venues",
    params(("chartId" = String, Path)),
    responses(
        (status = 200, description = "The chart", body = VenueChartView),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin token", body = Problem),
        (status = 404, description = "No such chart", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn get_chart(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    Path(chart_id): Path<String>,
) -> ApiResult<Response> {
    let Some((summary, chart)) = state.store.venue_chart(&chart_id).await? else {
        return Err(ApiError::not_found("venue chart"));
    };
    Ok(axum::Json(VenueChartView {
        summary: VenueChartSummary::of(&summary),
        chart,
    })
    .into_response())
}
