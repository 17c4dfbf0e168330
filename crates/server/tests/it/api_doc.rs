//! docs/API.md and the served OpenAPI document cannot drift: every operation the server
//! documents is written in docs/API.md, and every operation docs/API.md names before its
//! "Not built yet" section is served.

use std::collections::BTreeSet;

/// `METHOD /path` with each `{param}` written `{}`.
fn operation(method: &str, path: &str) -> String {
    let mut normalized = String::new();
    let mut in_param = false;
    for c in path.chars() {
        match c {
            '{' => {
                in_param = true;
                normalized.push('{');
            }
            '}' => {
                in_param = false;
                normalized.push('}');
            }
            _ if in_param => {}
            _ => normalized.push(c),
        }
    }
    format!("{} {normalized}", method.to_uppercase())
}

/// The operations docs/API.md names: `` `METHOD /path` `` in the text, and `| METHOD |
/// `/path` |` rows of its tables; the query string is not part of the path.
fn written(doc: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for method in ["GET", "POST", "PUT", "DELETE", "PATCH"] {
        for pattern in [format!("`{method} /"), format!("| {method} | `/")] {
            for (at, _) in doc.match_indices(&pattern) {
                let start = at + pattern.len() - 1;
                let rest = &doc[start..];
                let end = rest
                    .find(|c: char| c == '`' || c == '?' || c.is_whitespace())
                    .unwrap_or(rest.len());
                found.insert(operation(method, &rest[..end]));
            }
        }
    }
    found
}

#[test]
fn the_api_reference_and_the_served_document_name_the_same_operations() {
    let doc = include_str!("../../../../docs/API.md");
    let built = &doc[..doc
        .find("\n## Not built yet")
        .expect("docs/API.md has its 'Not built yet' section")];
    let written = written(built);
    let document = boxoffice_server::openapi();
    let mut served = BTreeSet::new();
    for (path, item) in &document.paths.paths {
        for (method, present) in [
            ("get", item.get.is_some()),
            ("put", item.put.is_some()),
            ("post", item.post.is_some()),
            ("delete", item.delete.is_some()),
            ("patch", item.patch.is_some()),
        ] {
            if present {
                served.insert(operation(method, path));
            }
        }
    }
    assert!(served.len() > 25, "the document's operations: {served:?}");
    let unwritten: Vec<&String> = served.difference(&written).collect();
    assert!(
        unwritten.is_empty(),
        "served but not in docs/API.md: {unwritten:?}"
    );
    // The document itself is served beside the operations it describes.
    served.insert(operation("get", "/openapi.json"));
    let unserved: Vec<&String> = written.difference(&served).collect();
    assert!(
        unserved.is_empty(),
        "in docs/API.md but not served: {unserved:?}"
    );
}

#[test]
fn the_scan_finds_both_forms() {
    let found = written(
        "- `GET /v1/events/{eventId}/seatmap/changes?since=V` returns\n| GET | `/healthz` | anyone |",
    );
    assert_eq!(
        found.into_iter().collect::<Vec<_>>(),
        ["GET /healthz", "GET /v1/events/{}/seatmap/changes"]
    );
}

/// The end game's fields are in the served document as they are answered: `together` with
/// its three values, `split` on a hold, `largestBlock` on a problem, an event's section and
/// the seat map's sections.
#[test]
fn the_document_names_what_is_left() {
    let document = serde_json::to_value(boxoffice_server::openapi()).unwrap();
    let schemas = &document["components"]["schemas"];
    assert_eq!(
        schemas["TogetherBody"]["enum"],
        serde_json::json!(["prefer", "required", "no"])
    );
    let together = &schemas["BestAvailableBody"]["properties"]["together"];
    assert!(
        together
            .to_string()
            .contains("#/components/schemas/TogetherBody"),
        "{together}"
    );
    for (schema, property) in [
        ("HoldResponse", "split"),
        ("Problem", "largestBlock"),
        ("SectionView", "largestBlock"),
        ("SeatMapView", "sections"),
        ("MapSectionView", "largestBlock"),
    ] {
        assert!(
            schemas[schema]["properties"][property].is_object(),
            "{schema}.{property}: {}",
            schemas[schema]
        );
    }
}

/// The operations whose handlers refuse a request without a key (400
/// `IDEMPOTENCY_KEY_REQUIRED`, `idempotency::request_key`).
const KEYED: [&str; 22] = [
    "POST /v1/admin/events",
    "POST /v1/admin/events/{}/allocations",
    "POST /v1/admin/events/{}/allocations/{}/comps",
    "POST /v1/admin/events/{}/allocations/{}/release",
    "POST /v1/admin/events/{}/box-office/sales",
    "POST /v1/admin/events/{}/cancel",
    "POST /v1/admin/events/{}/phases/{}/codes",
    "POST /v1/admin/events/{}/phases/{}/codes/import",
    "POST /v1/admin/events/{}/promo-codes",
    "POST /v1/admin/orders/{}/refunds",
    "POST /v1/admin/trips",
    "POST /v1/admin/venue-charts",
    "POST /v1/admin/webhooks",
    "POST /v1/events/{}/holds",
    "POST /v1/events/{}/waitlist",
    "POST /v1/exchanges/{}/checkout",
    "POST /v1/holds/{}/checkout",
    "POST /v1/orders/{}/exchanges",
    "POST /v1/orders/{}/refunds",
    "POST /v1/orders/{}/transfers",
    "POST /v1/transfers/{}/accept",
    "POST /v1/transfers/{}/decline",
];

/// Every operation of the document with its method, `METHOD /path` as `operation` writes it.
fn operations(document: &serde_json::Value) -> Vec<(String, serde_json::Value)> {
    let mut found = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation_doc) in item.as_object().expect("a path item") {
            found.push((operation(method, path), operation_doc.clone()));
        }
    }
    found
}

/// What a request built from the document sends is what the server takes: the
/// `Idempotency-Key` header is required wherever the server requires a key, and no body
/// describes the seed's `idempotencyKey` (a generated request could then send a key other
/// than the header's, which the server refuses: 422 `IDEMPOTENCY_KEY_MISMATCH`).
#[test]
fn the_idempotency_key_is_the_header_and_required() {
    let document = serde_json::to_value(boxoffice_server::openapi()).unwrap();
    let mut keyed = BTreeSet::new();
    for (name, operation_doc) in operations(&document) {
        for parameter in operation_doc["parameters"].as_array().into_iter().flatten() {
            if parameter["name"] == "Idempotency-Key" {
                assert_eq!(parameter["in"], "header", "{name}");
                assert_eq!(parameter["required"], true, "{name}");
                keyed.insert(name.clone());
            }
        }
    }
    let expected: BTreeSet<String> = KEYED.iter().map(|op| op.to_string()).collect();
    assert_eq!(keyed, expected);
    let text = document["components"].to_string();
    assert!(
        !text.contains("\"idempotencyKey\""),
        "a schema describes idempotencyKey"
    );
}

/// Statuses are enums, a problem's extra members are declared, and every media type an
/// operation answers with maps to a type in a client generator: openapi-python-client maps
/// `text/*`, `application/json`, `+json` and `application/octet-stream`, and at least one of
/// each answer's types must be among them.
#[test]
fn a_generated_client_gets_types() {
    let document = serde_json::to_value(boxoffice_server::openapi()).unwrap();
    let schemas = &document["components"]["schemas"];
    for (schema, property, status) in [
        ("HoldResponse", "status", "HoldStatus"),
        ("OrderResponse", "orderStatus", "OrderStatus"),
        ("OrderResponse", "paymentStatus", "PaymentStatus"),
        ("CheckoutResponse", "orderStatus", "OrderStatus"),
        ("CheckoutResponse", "paymentStatus", "PaymentStatus"),
        ("TicketResponse", "status", "TicketStatus"),
        ("TicketSummary", "status", "TicketStatus"),
        ("MapSeatView", "status", "SeatStatus"),
        ("ExchangeResponse", "status", "ExchangeStatus"),
        ("TransferResponse", "status", "TransferStatus"),
        ("WaitlistResponse", "status", "WaitlistStatus"),
        ("WebhookDeliveryView", "status", "DeliveryStatus"),
        ("QueueStatusResponse", "status", "QueueStatus"),
    ] {
        let declared = &schemas[schema]["properties"][property];
        assert_eq!(
            declared["$ref"],
            format!("#/components/schemas/{status}"),
            "{schema}.{property}: {declared}"
        );
        assert!(
            schemas[status]["enum"]
                .as_array()
                .is_some_and(|e| e.len() >= 3),
            "{status}: {}",
            schemas[status]
        );
    }
    for extra in [
        "field",
        "limit",
        "unavailableSeatIds",
        "largestBlock",
        "tierId",
        "available",
        "current",
        "onSaleAt",
        "waitlistId",
    ] {
        assert!(
            schemas["Problem"]["properties"][extra].is_object(),
            "Problem.{extra}"
        );
    }
    let mappable = |media: &str| {
        media.starts_with("text/")
            || media == "application/json"
            || media.ends_with("+json")
            || media == "application/octet-stream"
    };
    for (name, operation_doc) in operations(&document) {
        for (status, response) in operation_doc["responses"].as_object().expect("responses") {
            let Some(content) = response["content"].as_object() else {
                continue;
            };
            assert!(
                content.keys().any(|media| mappable(media)),
                "{name} {status}: {:?}",
                content.keys()
            );
        }
    }
}

/// Every request body is an object that refuses unknown members at its top, as the server
/// does (serde's `deny_unknown_fields`), where a client generator reads it: the rules a
/// handler's annotations cannot say sit beside the properties, in `allOf`, not around them.
#[test]
fn request_bodies_refuse_unknown_members() {
    let document = serde_json::to_value(boxoffice_server::openapi()).unwrap();
    let schemas = &document["components"]["schemas"];
    let mut bodies = 0;
    for (name, operation_doc) in operations(&document) {
        let Some(schema) =
            operation_doc["requestBody"]["content"]["application/json"].get("schema")
        else {
            continue;
        };
        let reference = schema["$ref"].as_str().expect("a named body");
        let body = &schemas[reference.trim_start_matches("#/components/schemas/")];
        assert_eq!(body["type"], "object", "{name}: {body}");
        assert_eq!(body["additionalProperties"], false, "{name}: {body}");
        bodies += 1;
    }
    assert!(bodies >= 14, "{bodies}");
}

/// A page cursor's pattern is the one the server checks (`routes::CURSOR_PATTERN`).
#[test]
fn cursors_have_the_servers_syntax() {
    let document = serde_json::to_value(boxoffice_server::openapi()).unwrap();
    for path in ["/v1/events", "/v1/orders"] {
        let cursor = document["paths"][path]["get"]["parameters"]
            .as_array()
            .expect("parameters")
            .iter()
            .find(|p| p["name"] == "cursor")
            .expect("a cursor")
            .clone();
        assert_eq!(
            cursor["schema"]["pattern"],
            boxoffice_server::routes::CURSOR_PATTERN,
            "{path}"
        );
    }
}

/// An exchange from a tier to a tier names no seats to count, so the server requires its
/// `quantity` (422 `VALIDATION` "is required when both sides are tiers"): the document says
/// so beside the two sides' shapes, and a generated request cannot leave it out.
#[test]
fn an_exchange_between_tiers_gives_its_quantity() {
    let document = serde_json::to_value(boxoffice_server::openapi()).unwrap();
    let body = &document["components"]["schemas"]["CreateExchangeBody"];
    let rules = body["allOf"].as_array().expect("the shapes");
    let quantity_rule = rules
        .iter()
        .filter_map(|rule| rule["anyOf"].as_array())
        .find(|alternatives| {
            alternatives
                .iter()
                .any(|a| a["required"] == serde_json::json!(["quantity"]))
        })
        .unwrap_or_else(|| panic!("no rule names the quantity: {body}"));
    // Either the quantity is given, or one side is not a tier (absent or null).
    assert_eq!(quantity_rule.len(), 3, "{quantity_rule:?}");
    for side in ["fromTierId", "toTierId"] {
        assert!(
            quantity_rule
                .iter()
                .any(|a| a["properties"][side]["type"] == "null"
                    && a["required"] == serde_json::json!([])),
            "{side}: {quantity_rule:?}"
        );
    }
}
