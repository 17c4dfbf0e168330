//! Request bodies: the server's JSON reading (`JsonBody`: at most 64 KiB, an object, 45.0
//! read as 45) and, for each of event creation, trips, holds, checkout, exchanges, queue
//! controls and check-in, the typed parse and every check its handler makes before the
//! store (`boxoffice_server::fuzzing`), against an event with two sections and a tier and an
//! order of two of its seats. A refusal must be a 4xx naming a field; a panic is a 500.
//!
//! Input: the body, or `<Idempotency-Key header> NUL <body>`.

#![no_main]

use std::sync::LazyLock;

use boxoffice_fuzz::{TICKET_SIGNER, split_nul};
use boxoffice_server::body::BODY_BYTES_MAX;
use boxoffice_server::fuzzing::{BodyKind, Fixture};
use libfuzzer_sys::fuzz_target;

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| Fixture::new(TICKET_SIGNER.verifier()));

fuzz_target!(|data: &[u8]| {
    let (idempotency_key, body) = split_nul(data);
    if body.len() > BODY_BYTES_MAX {
        return; // refused with a 413 before it is read
    }
    for kind in BodyKind::ALL {
        if let Err(error) = FIXTURE.check_body(kind, body, idempotency_key) {
            assert!(
                error.status.is_client_error(),
                "{kind:?}: {} {}: {}",
                error.status,
                error.code,
                error.detail
            );
        }
    }
});
