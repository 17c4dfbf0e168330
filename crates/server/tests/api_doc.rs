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
    let doc = include_str!("../../../docs/API.md");
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
