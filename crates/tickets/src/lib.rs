//! Signed ticket codes: what the gate scans. This crate owns the ticket claims, the compact
//! code format, the Ed25519 key that signs it (PKCS#8 PEM, kept in the server's data folder),
//! verification of a scanned code, and the QR code image of it.
//!
//! A code is `BO1.<payload>.<signature>`: `payload` is the base64url (no padding) of the
//! claims as compact JSON, `signature` is the base64url (no padding) Ed25519 signature over
//! the ASCII bytes `"BO1." + payload`. A ticket code can be verified offline with the public
//! key alone ([`TicketSigner::public_key_pem`] → [`TicketVerifier::from_public_key_pem`]):
//! no database, no network, no shared secret. Nothing is encrypted: the claims are readable
//! by anyone holding the code, only forging or altering them is prevented.
//!
//! Start reading at [`code`]. Nothing here is async; the only IO is
//! [`TicketSigner::load_or_create`] reading or writing the key file.

pub mod claims;
pub mod code;
pub mod error;
pub mod qr;
pub mod rotating;

pub use claims::TicketClaims;
pub use code::{TICKET_CODE_LEN_MAX, TICKET_CODE_PREFIX, TicketSigner, TicketVerifier};
pub use error::TicketError;
pub use qr::{QR_SIZE_MIN_PX, qr_svg};
