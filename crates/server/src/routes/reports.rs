//! Reports for organisers (admin): an event's figures per section and tier, its sales over
//! time with the waiting room's totals, each as JSON and as a CSV download. The store reads
//! the rows in one snapshot (`boxoffice_store::report`, which also says what each figure
//! means); this module parses, asks and renders.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use boxoffice_domain::OffsetDateTime;
use boxoffice_store::EventRecord;
use boxoffice_store::report::{BUCKET_SECONDS_MAX, EventReport, Figures, Place, Timeline};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::api::Problem;
use crate::auth::Admin;
use crate::error::{ApiError, ApiResult};

/// The timeline's bucket when the request names none (sales per minute).
pub const BUCKET_SECONDS_DEFAULT: u32 = 60;

/// Whether a line is a section or a tier.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LineKind {
    Section,
    Tier,
}

/// One section's or tier's figures.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReportLine {
    pub kind: LineKind,
    /// The section's name or the tier's id.
    pub id: String,
    /// The section's name or the tier's display name.
    pub name: String,
    /// Seats of the section, units of the tier.
    pub capacity: i64,
    /// Seats or units of live holds (in checkout included) by the store's clock.
    pub held_now: i64,
    pub sold: i64,
    /// Always 0: boxoffice has no complimentary tickets.
    pub comps: i64,
    pub checked_in: i64,
    /// Face value of what is sold now (each sold seat or unit at its price).
    pub revenue_minor: i64,
    /// Refunds queued for tickets of this section or tier (exchanges to cheaper seats,
    /// captures of orders that kept no seat).
    pub refunds_due_minor: i64,
}

/// The event's totals (every refund due counted whole).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReportTotals {
    pub capacity: i64,
    pub held_now: i64,
    pub sold: i64,
    pub comps: i64,
    pub checked_in: i64,
    pub revenue_minor: i64,
    pub refunds_due_minor: i64,
    /// What the payments of the confirmed orders charged (an exchange's order: the
    /// difference paid, 0 when nothing was due).
    pub charged_minor: i64,
    /// Confirmed orders, the ones exchanges and transfers made included.
    pub orders_confirmed: i64,
}

/// `GET /v1/admin/events/{eventId}/report` answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventReportResponse {
    pub event_id: String,
    pub currency: String,
    /// The store's clock when the figures were read (all of them at that instant).
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub as_of: OffsetDateTime,
    /// The sections, then the tiers, in the event's order.
    pub lines: Vec<ReportLine>,
    pub totals: ReportTotals,
    /// The confirmed sales split into face value, fees and tax (issue 40); absent when the
    /// event has no ticket types, fees or tax.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sales: Option<crate::sale_api::pricing::SalesView>,
    /// Confirmed box-office sales by payment kind (kinds without a sale are left out).
    pub box_office: Vec<BoxOfficeLine>,
}

/// The confirmed box-office sales of one payment kind.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BoxOfficeLine {
    /// `cash` or `card_present`.
    pub payment: String,
    pub orders: i64,
    /// Seats and tier units.
    pub seats: i64,
    pub charged_minor: i64,
}

/// `?bucketSeconds=` of the timeline.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct TimelineQuery {
    /// Length of a bucket in seconds, 1-86400, default 60 (sales per minute).
    #[param(minimum = 1, maximum = 86400)]
    pub bucket_seconds: Option<u32>,
}

/// Sales confirmed in one bucket.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimelineBucket {
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub start: OffsetDateTime,
    /// Orders confirmed in the bucket (the orders exchanges and transfers make are not
    /// sales).
    pub orders: i64,
    /// Seats or tier units in them.
    pub seats: i64,
    /// What their payments charged.
    pub charged_minor: i64,
}

/// Every sale confirmed, inside the window or not.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimelineTotals {
    pub orders: i64,
    pub seats: i64,
    pub charged_minor: i64,
}

/// The waiting room's totals now (no history of them is kept).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueFigures {
    /// Fans who ever joined the queue.
    pub joined: u64,
    pub waiting: u64,
    /// Admissions ever started (a fan admitted again after a shopping trip ended counts
    /// again).
    pub admitted: u64,
    pub active_shoppers: u64,
    /// Sales confirmed (all time) per admission; null before the first admission.
    pub conversion: Option<f64>,
}

/// `GET /v1/admin/events/{eventId}/report/timeline` answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimelineResponse {
    pub event_id: String,
    pub currency: String,
    pub bucket_seconds: u32,
    /// The first bucket's start: the event's `onSaleAt`.
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub from: OffsetDateTime,
    /// The end of the last bucket (exclusive).
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub to: OffsetDateTime,
    /// The store's clock when the sales were read.
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub as_of: OffsetDateTime,
    /// The window stops before `asOf` (at most 1,440 buckets): ask for longer buckets to
    /// see the rest; `totals` count every sale.
    pub truncated: bool,
    /// Every bucket from `from` to `to`, empty ones included.
    pub buckets: Vec<TimelineBucket>,
    pub totals: TimelineTotals,
    /// Null when the event has no waiting room.
    pub queue: Option<QueueFigures>,
}

fn line_of(event: &EventRecord, place: &Place, figures: &Figures) -> ReportLine {
    let (kind, id, name) = match place {
        Place::Section(name) => (LineKind::Section, name.clone(), name.clone()),
        Place::Tier(tier_id) => (
            LineKind::Tier,
            tier_id.clone(),
            event
                .tiers
                .iter()
                .find(|tier| &tier.tier_id == tier_id)
                .map_or_else(|| tier_id.clone(), |tier| tier.name.clone()),
        ),
    };
    ReportLine {
        kind,
        id,
        name,
        capacity: figures.capacity,
        held_now: figures.held_now,
        sold: figures.sold,
        comps: figures.comps,
        checked_in: figures.checked_in,
        revenue_minor: figures.revenue_minor,
        refunds_due_minor: figures.refunds_due_minor,
    }
}

fn report_response(event: &EventRecord, report: EventReport) -> EventReportResponse {
    let totals = report.totals;
    EventReportResponse {
        event_id: report.event_id,
        currency: report.currency,
        as_of: report.now,
        lines: report
            .lines
            .iter()
            .map(|line| line_of(event, &line.place, &line.figures))
            .collect(),
        totals: ReportTotals {
            capacity: totals.capacity,
            held_now: totals.held_now,
            sold: totals.sold,
            comps: totals.comps,
            checked_in: totals.checked_in,
            revenue_minor: totals.revenue_minor,
            refunds_due_minor: totals.refunds_due_minor,
            charged_minor: report.charged_minor,
            orders_confirmed: report.orders_confirmed,
        },
        sales: None,
        box_office: report
            .box_office
            .iter()
            .map(|row| BoxOfficeLine {
                payment: row.payment_kind.clone(),
                orders: row.orders,
                seats: row.seats,
                charged_minor: row.charged_minor,
            })
            .collect(),
    }
}

async fn event_report(state: &AppState, event_id: &str) -> ApiResult<EventReportResponse> {
    let event = state.event(event_id).await?;
    let rows = state.store.report_rows(&event).await?;
    let mut report = report_response(&event, EventReport::assemble(&event, rows));
    if !boxoffice_domain::pricing::PriceList::of(&event.sale).is_plain() {
        let split = state.store.sales_split(event_id).await?;
        report.sales = Some(crate::sale_api::pricing::SalesView::new(&event, &split));
    }
    Ok(report)
}

/// The bucket asked for, or a 422 naming `bucketSeconds`.
fn bucket_seconds(
    query: Result<Query<TimelineQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<u32> {
    let Query(query) = query.map_err(|e| ApiError::validation("query", e.body_text()))?;
    let bucket_s = query.bucket_seconds.unwrap_or(BUCKET_SECONDS_DEFAULT);
    if !(1..=BUCKET_SECONDS_MAX).contains(&bucket_s) {
        return Err(ApiError::validation(
            "bucketSeconds",
            format!("must be between 1 and {BUCKET_SECONDS_MAX}"),
        ));
    }
    Ok(bucket_s)
}

async fn timeline(state: &AppState, event_id: &str, bucket_s: u32) -> ApiResult<TimelineResponse> {
    let event = state.event(event_id).await?;
    let rows = state.store.timeline_rows(&event, bucket_s).await?;
    let timeline = Timeline::assemble(rows);
    let queue = if event.waiting_room.enabled {
        let room = state
            .waitroom
            .room(&event)
            .await
            .map_err(|e| ApiError::from(crate::runtime::waitroom::RoomError::State(e)))?;
        let view = state
            .waitroom
            .admin_view(&room)
            .await
            .map_err(|e| ApiError::from(crate::runtime::waitroom::RoomError::State(e)))?;
        let admitted = view.stats.admitted_total;
        Some(QueueFigures {
            joined: view.stats.joined,
            waiting: view.stats.waiting,
            admitted,
            active_shoppers: view.stats.active,
            conversion: (admitted > 0).then(|| timeline.orders_total as f64 / admitted as f64),
        })
    } else {
        None
    };
    Ok(timeline_response(&event, timeline, queue))
}

fn timeline_response(
    event: &EventRecord,
    timeline: Timeline,
    queue: Option<QueueFigures>,
) -> TimelineResponse {
    TimelineResponse {
        event_id: event.event_id.clone(),
        currency: event.currency.clone(),
        bucket_seconds: timeline.window.bucket_s,
        from: timeline.window.from,
        to: timeline.window.to(),
        as_of: timeline.now,
        truncated: timeline.truncated,
        buckets: timeline
            .buckets
            .iter()
            .map(|bucket| TimelineBucket {
                start: bucket.start,
                orders: bucket.orders,
                seats: bucket.seats,
                charged_minor: bucket.charged_minor,
            })
            .collect(),
        totals: TimelineTotals {
            orders: timeline.orders_total,
            seats: timeline.seats_total,
            charged_minor: timeline.charged_total_minor,
        },
        queue,
    }
}

/// The first characters with which a spreadsheet reads a cell as a formula (OWASP, "CSV
/// Injection"): `=`, `+`, `-`, `@`, tab and carriage return.
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// One CSV field (RFC 4180): quoted when it holds a comma, a quote, CR or LF, quotes
/// doubled inside. A field that a spreadsheet would run as a formula (an organiser's tier
/// named `=HYPERLINK(...)`) is neutralised as OWASP advises: a `'` in front makes it text.
/// An integer such as `-5` is left alone: it is a number, not a formula.
pub fn csv_field(value: &str) -> String {
    let integer = value
        .strip_prefix('-')
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()));
    let value = if value.starts_with(FORMULA_STARTS) && !integer {
        format!("'{value}")
    } else {
        value.to_owned()
    };
    if value.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value
    }
}

/// Lines of fields, each line ended by CRLF (RFC 4180).
fn csv(rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    for row in rows {
        let fields: Vec<String> = row.iter().map(|field| csv_field(field)).collect();
        out.push_str(&fields.join(","));
        out.push_str("\r\n");
    }
    out
}

/// A download: `text/csv`, saved as `filename` (made of the event id's safe characters).
fn csv_download(kind: &str, event_id: &str, body: String) -> Response {
    let safe: String = event_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    let disposition = format!("attachment; filename=\"{kind}-{safe}.csv\"");
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    response
}

/// The header row of `report.csv`.
pub const REPORT_CSV_HEADER: [&str; 11] = [
    "kind",
    "id",
    "name",
    "capacity",
    "heldNow",
    "sold",
    "comps",
    "checkedIn",
    "revenueMinor",
    "refundsDueMinor",
    "currency",
];

fn report_csv(report: &EventReportResponse) -> String {
    let mut rows = vec![REPORT_CSV_HEADER.iter().map(|h| (*h).to_owned()).collect()];
    for line in &report.lines {
        let kind = match line.kind {
            LineKind::Section => "section",
            LineKind::Tier => "tier",
        };
        rows.push(vec![
            kind.to_owned(),
            line.id.clone(),
            line.name.clone(),
            line.capacity.to_string(),
            line.held_now.to_string(),
            line.sold.to_string(),
            line.comps.to_string(),
            line.checked_in.to_string(),
            line.revenue_minor.to_string(),
            line.refunds_due_minor.to_string(),
            report.currency.clone(),
        ]);
    }
    let totals = &report.totals;
    rows.push(vec![
        "total".to_owned(),
        String::new(),
        String::new(),
        totals.capacity.to_string(),
        totals.held_now.to_string(),
        totals.sold.to_string(),
        totals.comps.to_string(),
        totals.checked_in.to_string(),
        totals.revenue_minor.to_string(),
        totals.refunds_due_minor.to_string(),
        report.currency.clone(),
    ]);
    if let Some(sales) = &report.sales {
        crate::sale_api::pricing::sales_csv_columns(sales, &mut rows);
    }
    csv(&rows)
}

/// The header row of `timeline.csv`.
pub const TIMELINE_CSV_HEADER: [&str; 5] = ["start", "orders", "seats", "chargedMinor", "currency"];

fn timeline_csv(timeline: &TimelineResponse) -> String {
    let time = |t: OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default()
    };
    let mut rows = vec![
        TIMELINE_CSV_HEADER
            .iter()
            .map(|h| (*h).to_owned())
            .collect::<Vec<_>>(),
    ];
    for bucket in &timeline.buckets {
        rows.push(vec![
            time(bucket.start),
            bucket.orders.to_string(),
            bucket.seats.to_string(),
            bucket.charged_minor.to_string(),
            timeline.currency.clone(),
        ]);
    }
    rows.push(vec![
        "total".to_owned(),
        timeline.totals.orders.to_string(),
        timeline.totals.seats.to_string(),
        timeline.totals.charged_minor.to_string(),
        timeline.currency.clone(),
    ]);
    csv(&rows)
}

/// Capacity, held now, sold, comps, checked in, revenue and refunds due per section and tier
/// of an event, and their totals (admin).
#[utoipa::path(
    get, path = "/v1/admin/events/{eventId}/report", tag = "reports",
    params(("eventId" = String, Path)),
    responses(
        (status = 200, description = "The event's figures, read at one instant", body = EventReportResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 404, description = "No such event", body = Problem),
        (status = 429, description = "Store busy; retry after Retry-After", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn get_report(
    State(state): State<AppState>,
    _admin: Admin,
    Path(event_id): Path<String>,
) -> ApiResult<Response> {
    let report = event_report(&state, &event_id).await?;
    Ok(axum::Json(report).into_response())
}

/// The event report as a CSV download: a header row, one row per section and tier, a
/// total row (admin).
#[utoipa::path(
    get, path = "/v1/admin/events/{eventId}/report.csv", tag = "reports",
    params(("eventId" = String, Path)),
    responses(
        (status = 200, description = "The report as CSV (RFC 4180)", body = String, content_type = "text/csv"),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 404, description = "No such event", body = Problem),
        (status = 429, description = "Store busy; retry after Retry-After", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn get_report_csv(
    State(state): State<AppState>,
    _admin: Admin,
    Path(event_id): Path<String>,
) -> ApiResult<Response> {
    let report = event_report(&state, &event_id).await?;
    Ok(csv_download(
        "report",
        &report.event_id,
        report_csv(&report),
    ))
}

/// Sales per bucket from the on-sale (orders confirmed, seats, money charged) and the
/// waiting room's totals with the conversion from admission to sale (admin).
#[utoipa::path(
    get, path = "/v1/admin/events/{eventId}/report/timeline", tag = "reports",
    params(("eventId" = String, Path), TimelineQuery),
    responses(
        (status = 200, description = "Sales over time", body = TimelineResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 404, description = "No such event", body = Problem),
        (status = 422, description = "Bad bucketSeconds", body = Problem),
        (status = 429, description = "Store busy; retry after Retry-After", body = Problem),
        (status = 503, description = "Store or waiting-room state unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn get_timeline(
    State(state): State<AppState>,
    _admin: Admin,
    Path(event_id): Path<String>,
    query: Result<Query<TimelineQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let bucket_s = bucket_seconds(query)?;
    let timeline = timeline(&state, &event_id, bucket_s).await?;
    Ok(axum::Json(timeline).into_response())
}

/// The timeline as a CSV download: a header row, one row per bucket, a total row (admin).
#[utoipa::path(
    get, path = "/v1/admin/events/{eventId}/report/timeline.csv", tag = "reports",
    params(("eventId" = String, Path), TimelineQuery),
    responses(
        (status = 200, description = "Sales over time as CSV (RFC 4180)", body = String, content_type = "text/csv"),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 404, description = "No such event", body = Problem),
        (status = 422, description = "Bad bucketSeconds", body = Problem),
        (status = 429, description = "Store busy; retry after Retry-After", body = Problem),
        (status = 503, description = "Store or waiting-room state unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn get_timeline_csv(
    State(state): State<AppState>,
    _admin: Admin,
    Path(event_id): Path<String>,
    query: Result<Query<TimelineQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let bucket_s = bucket_seconds(query)?;
    let timeline = timeline(&state, &event_id, bucket_s).await?;
    Ok(csv_download(
        "timeline",
        &timeline.event_id,
        timeline_csv(&timeline),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_only_when_they_must_be() {
        assert_eq!(csv_field("A"), "A");
        assert_eq!(csv_field("Floor, standing"), "\"Floor, standing\"");
        assert_eq!(csv_field("the \"pit\""), "\"the \"\"pit\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
        assert_eq!(
            csv(&[vec!["a".into(), "b,c".into()], vec![String::new()]]),
            "a,\"b,c\"\r\n\r\n"
        );
    }

    /// OWASP's CSV injection: no field starts with `=`, `+`, `-`, `@`, tab or CR as given,
    /// in a field alone or in a whole report.
    #[test]
    fn formulas_are_neutralised() {
        assert_eq!(csv_field("=1+2"), "'=1+2");
        assert_eq!(csv_field("+33 1 23"), "'+33 1 23");
        assert_eq!(
            csv_field("-2+3+cmd|' /C calc'!A0"),
            "'-2+3+cmd|' /C calc'!A0"
        );
        assert_eq!(csv_field("@SUM(A1:A9)"), "'@SUM(A1:A9)");
        assert_eq!(csv_field("\tTab"), "'\tTab");
        assert_eq!(csv_field("\rCR"), "\"'\rCR\"");
        assert_eq!(
            csv_field("=HYPERLINK(\"http://x\",\"y\")"),
            "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\""
        );
        // Not formulas: left as they are.
        assert_eq!(csv_field("-5"), "-5");
        assert_eq!(csv_field("-"), "'-");
        assert_eq!(csv_field("a=b"), "a=b");
        assert_eq!(csv_field("Floor"), "Floor");
        let report = EventReportResponse {
            event_id: "e".into(),
            currency: "EUR".into(),
            as_of: OffsetDateTime::UNIX_EPOCH,
            lines: vec![ReportLine {
                kind: LineKind::Tier,
                id: "GA".into(),
                name: "=cmd|' /C calc'!A0".into(),
                capacity: 10,
                held_now: 0,
                sold: 1,
                comps: 0,
                checked_in: 0,
                revenue_minor: 100,
                refunds_due_minor: 0,
            }],
            totals: ReportTotals {
                capacity: 10,
                held_now: 0,
                sold: 1,
                comps: 0,
                checked_in: 0,
                revenue_minor: 100,
                refunds_due_minor: 0,
                charged_minor: 100,
                orders_confirmed: 1,
            },
            sales: None,
            box_office: Vec::new(),
        };
        let csv = report_csv(&report);
        let line = csv.lines().nth(1).expect("the tier's line");
        assert_eq!(line, "tier,GA,'=cmd|' /C calc'!A0,10,0,1,0,0,100,0,EUR");
    }

    #[test]
    fn the_bucket_is_checked() {
        let bucket = |raw: &str| {
            let uri: axum::http::Uri = format!("/x?{raw}").parse().expect("uri");
            bucket_seconds(Query::try_from_uri(&uri))
        };
        assert_eq!(bucket("").ok(), Some(BUCKET_SECONDS_DEFAULT));
        assert_eq!(bucket("bucketSeconds=3600").ok(), Some(3600));
        for bad in [
            "bucketSeconds=0",
            "bucketSeconds=86401",
            "bucketSeconds=x",
            "other=1",
        ] {
            let error = bucket(bad).expect_err(bad);
            assert_eq!(error.status, axum::http::StatusCode::UNPROCESSABLE_ENTITY);
        }
    }
}
