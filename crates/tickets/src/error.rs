//! Why a code, a key or a QR image was refused.

use std::path::PathBuf;

/// Every failure of this crate; each verification failure has its own variant so the gate
/// can log why a scan was refused.
#[derive(Debug, thiserror::Error)]
pub enum TicketError {
    #[error("ticket code is {len} bytes, longer than the {max} allowed")]
    TooLong { len: usize, max: usize },
    #[error("ticket code does not start with {expected:?}")]
    WrongPrefix { expected: &'static str },
    #[error("ticket code is not <prefix>.<payload>.<signature>")]
    Malformed,
    #[error("ticket code {part} is not base64url without padding")]
    BadBase64 { part: &'static str },
    #[error("ticket code signature is {len} bytes, not {expected}")]
    SignatureLength { len: usize, expected: usize },
    #[error("ticket code signature does not match (altered, or signed by another key)")]
    SignatureMismatch,
    #[error("ticket code payload is not valid claims JSON: {0}")]
    BadClaims(#[source] serde_json::Error),
    #[error("invalid ticket key: {0}")]
    InvalidKey(String),
    #[error("ticket key file {path}: {source}")]
    KeyFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no randomness for a new ticket key: {0}")]
    Random(String),
    #[error("cannot render QR code: {0}")]
    Qr(#[from] qrcode::types::QrError),
}
