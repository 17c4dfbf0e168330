//! What the fuzz targets share: fixed keys (so that the fuzzer can reach what only signed
//! input reaches) and small helpers. Each target in `fuzz_targets/` says what it checks.

use std::sync::LazyLock;

use boxoffice_tickets::TicketSigner;
use ed25519_dalek::SigningKey;
use ed25519_dalek::pkcs8::EncodePrivateKey;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;

/// The ticket key of every target: fixed, so a crash reproduces from its input alone.
pub static TICKET_SIGNER: LazyLock<TicketSigner> = LazyLock::new(|| {
    let pem = SigningKey::from_bytes(&TICKET_KEY_SEED)
        .to_pkcs8_pem(LineEnding::LF)
        .expect("an Ed25519 key encodes as PKCS#8");
    TicketSigner::from_pkcs8_pem(&pem).expect("the fixed key loads")
});

/// Seed of [`TICKET_SIGNER`]'s key (also what `seeds` signs the seed codes with).
pub const TICKET_KEY_SEED: [u8; 32] = [7; 32];

/// The HS256 secret of account tokens in the targets (the dev secret: 45 bytes).
pub const JWT_SECRET: &str = boxoffice_token::DEV_JWT_SECRET;

/// The waiting room's HS256 secret in the targets.
pub const WAITROOM_SECRET: &[u8] = b"fuzz-waitroom-secret-0123456789";

/// The webhook secret in the targets.
pub const WEBHOOK_SECRET: &str = "whsec_fuzz_0123456789";

/// Splits `data` at its first NUL: `(Some(before), after)`, or `(None, data)` without one.
/// Targets that take two outside values (a header and a body) read them this way, so seeds
/// stay readable text.
pub fn split_nul(data: &[u8]) -> (Option<&[u8]>, &[u8]) {
    match data.iter().position(|b| *b == 0) {
        Some(at) => (Some(&data[..at]), &data[at + 1..]),
        None => (None, data),
    }
}

/// A ticket code whose payload is `payload` as it is (claims JSON or not), signed with
/// [`TICKET_SIGNER`]'s key as `TicketSigner::sign` signs: what only the server can make, so
/// the verifier's JSON reading is fuzzed too.
pub fn sign_ticket_payload(payload: &[u8]) -> String {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use ed25519_dalek::Signer;
    let key = SigningKey::from_bytes(&TICKET_KEY_SEED);
    let mut code = boxoffice_tickets::TICKET_CODE_PREFIX.to_owned();
    URL_SAFE_NO_PAD.encode_string(payload, &mut code);
    let signature = key.sign(code.as_bytes());
    code.push('.');
    URL_SAFE_NO_PAD.encode_string(signature.to_bytes(), &mut code);
    code
}
