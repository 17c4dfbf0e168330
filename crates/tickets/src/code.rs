//! The ticket code format and the key pair behind it.
//!
//! `BO1.<payload>.<signature>`, both parts base64url without padding: `payload` encodes the
//! claims JSON ([`TicketClaims`]), `signature` is Ed25519 over the bytes `"BO1." + payload`
//! exactly as they appear in the code, so the verifier never re-serializes anything. The
//! verifier checks, in order: length, prefix, shape, base64 of both parts, signature, and only
//! then parses the JSON, so unsigned input never reaches the JSON parser.
//!
//! Keys roll over: the signer signs with its key, and its verifier also accepts codes of the
//! previous keys it was given ([`TicketSigner::with_previous`]), at most
//! [`TICKET_KEYS_MAX`] in all. Each key has an id ([`kid_of`], from the public key) that
//! `GET /v1/tickets/public-keys` lists for door apps; a code itself names no key (a `BO1` code
//! has no unsigned header to carry one, and nothing unsigned is parsed), so a verifier tries
//! each of its keys, the signing one first.

use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{SECRET_KEY_LENGTH, SIGNATURE_LENGTH, Signature, SigningKey, VerifyingKey};

use crate::{TicketClaims, TicketError};

/// Format tag and version that every code starts with, dot included.
pub const TICKET_CODE_PREFIX: &str = "BO1.";
/// Longest code [`TicketVerifier::verify`] looks at; longer input is refused before any
/// decoding. Real codes are 350-410 bytes (three UUIDs and a seat or tier id).
pub const TICKET_CODE_LEN_MAX: usize = 1024;

/// Most keys a verifier holds: the signing one and previous ones still accepted.
pub const TICKET_KEYS_MAX: usize = 4;

/// The id of a ticket key: `ed-` and the first 8 bytes of the SHA-256 of its public key, in
/// hex.
pub fn kid_of(key: &VerifyingKey) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(key.as_bytes());
    format!("ed-{}", hex::encode(&digest[..8]))
}

/// Unix permission bits of a key file this crate creates: owner read and write only.
#[cfg(unix)]
const KEY_FILE_MODE: u32 = 0o600;

/// Signs ticket codes with the server's Ed25519 key. Its `Debug` shows the public key only.
#[derive(Clone)]
pub struct TicketSigner {
    key: SigningKey,
    /// Keys whose codes still verify (a rollover); they never sign.
    previous: Vec<VerifyingKey>,
}

impl fmt::Debug for TicketSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TicketSigner")
            .field(
                "public_key",
                &URL_SAFE_NO_PAD.encode(self.key.verifying_key().as_bytes()),
            )
            .finish_non_exhaustive()
    }
}

impl TicketSigner {
    /// A new key from the operating system's random source.
    pub fn generate() -> Result<Self, TicketError> {
        let mut secret = [0u8; SECRET_KEY_LENGTH];
        getrandom::fill(&mut secret).map_err(|err| TicketError::Random(err.to_string()))?;
        let key = SigningKey::from_bytes(&secret);
        secret.fill(0);
        Ok(Self {
            key,
            previous: Vec::new(),
        })
    }

    /// Reads a PKCS#8 PEM private key (`-----BEGIN PRIVATE KEY-----`), as written by
    /// [`Self::to_pkcs8_pem`] or `openssl genpkey -algorithm ed25519`.
    pub fn from_pkcs8_pem(pem: &str) -> Result<Self, TicketError> {
        let key = SigningKey::from_pkcs8_pem(pem)
            .map_err(|err| TicketError::InvalidKey(err.to_string()))?;
        Ok(Self {
            key,
            previous: Vec::new(),
        })
    }

    /// The private key as PKCS#8 PEM. This is the secret: store it like one.
    pub fn to_pkcs8_pem(&self) -> String {
        self.key
            .to_pkcs8_pem(LineEnding::LF)
            .expect("an Ed25519 key always encodes as PKCS#8")
            .to_string()
    }

    /// Loads the key at `path`, or, when there is no file, creates one (and its folder) with
    /// a new key, mode 0600 on Unix. The server keeps its key in its data folder, so codes
    /// issued before a restart stay valid. The file is created exclusively: two processes
    /// racing here never overwrite each other's key.
    pub fn load_or_create(path: &Path) -> Result<Self, TicketError> {
        let file_err = |source: io::Error| TicketError::KeyFile {
            path: path.to_path_buf(),
            source,
        };
        match fs::read_to_string(path) {
            Ok(pem) => return Self::from_pkcs8_pem(&pem),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => return Err(file_err(err)),
        }
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(file_err)?;
        }
        let signer = Self::generate()?;
        let mut options = fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(KEY_FILE_MODE);
        }
        let mut file = match options.open(path) {
            Ok(file) => file,
            // Another process created it since we looked: use its key.
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                let pem = fs::read_to_string(path).map_err(file_err)?;
                return Self::from_pkcs8_pem(&pem);
            }
            Err(err) => return Err(file_err(err)),
        };
        file.write_all(signer.to_pkcs8_pem().as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(file_err)?;
        Ok(signer)
    }

    /// The public key as SPKI PEM (`-----BEGIN PUBLIC KEY-----`), all an offline verifier
    /// needs.
    pub fn public_key_pem(&self) -> String {
        public_key_pem(&self.key.verifying_key())
    }

    /// This signer, whose verifier also accepts codes signed by `previous` (the keys being
    /// rolled over). A previous key equal to the signing one is dropped.
    pub fn with_previous(mut self, previous: &[TicketVerifier]) -> Result<Self, TicketError> {
        let current = self.key.verifying_key();
        let mut keys: Vec<VerifyingKey> = Vec::new();
        for key in previous.iter().flat_map(|v| v.keys.iter()) {
            if *key != current && !keys.contains(key) {
                keys.push(*key);
            }
        }
        if keys.len() + 1 > TICKET_KEYS_MAX {
            return Err(TicketError::InvalidKey(format!(
                "at most {TICKET_KEYS_MAX} ticket keys (the signing one and previous ones)"
            )));
        }
        self.previous = keys;
        Ok(self)
    }

    /// The signing key's seed, from which the rotating codes' event keys are derived
    /// ([`crate::rotating::event_key`]); it never leaves the server.
    pub fn seed(&self) -> [u8; SECRET_KEY_LENGTH] {
        self.key.to_bytes()
    }

    /// The signing key's id.
    pub fn kid(&self) -> String {
        kid_of(&self.key.verifying_key())
    }

    /// A verifier for the codes this signer issues, and those of its previous keys.
    pub fn verifier(&self) -> TicketVerifier {
        TicketVerifier {
            keys: std::iter::once(self.key.verifying_key())
                .chain(self.previous.iter().copied())
                .collect(),
        }
    }

    /// The code for `claims`: `BO1.<payload>.<signature>`. Deterministic: the same claims and
    /// key always give the same code.
    pub fn sign(&self, claims: &TicketClaims) -> String {
        let json = serde_json::to_vec(claims).expect("ticket claims always serialize");
        self.sign_payload(&json)
    }

    /// Signs arbitrary payload bytes; [`Self::sign`] with the JSON, and tests with bad JSON.
    fn sign_payload(&self, payload: &[u8]) -> String {
        use ed25519_dalek::Signer;
        let mut code = String::with_capacity(
            TICKET_CODE_PREFIX.len() + payload.len() * 4 / 3 + 2 + SIGNATURE_LENGTH * 4 / 3 + 2,
        );
        code.push_str(TICKET_CODE_PREFIX);
        URL_SAFE_NO_PAD.encode_string(payload, &mut code);
        let signature = self.key.sign(code.as_bytes());
        code.push('.');
        URL_SAFE_NO_PAD.encode_string(signature.to_bytes(), &mut code);
        code
    }
}

/// Checks ticket codes against its public keys (the signing one first); needs nothing else
/// (no database, no network).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TicketVerifier {
    keys: Vec<VerifyingKey>,
}

impl TicketVerifier {
    /// Reads an SPKI PEM public key (`-----BEGIN PUBLIC KEY-----`), as written by
    /// [`TicketSigner::public_key_pem`].
    pub fn from_public_key_pem(pem: &str) -> Result<Self, TicketError> {
        let key = VerifyingKey::from_public_key_pem(pem)
            .map_err(|err| TicketError::InvalidKey(err.to_string()))?;
        Ok(Self { keys: vec![key] })
    }

    /// Reads a PEM key file's public key: an SPKI public key, or the public half of a PKCS#8
    /// private key (a retired signing key).
    pub fn from_pem(pem: &str) -> Result<Self, TicketError> {
        if pem.contains("PRIVATE KEY") {
            return Ok(TicketSigner::from_pkcs8_pem(pem)?.verifier());
        }
        Self::from_public_key_pem(pem)
    }

    /// The first (signing) public key as SPKI PEM.
    pub fn public_key_pem(&self) -> String {
        public_key_pem(&self.keys[0])
    }

    /// Every key, the signing one first: its id and SPKI PEM.
    pub fn public_keys(&self) -> Vec<(String, String)> {
        self.keys
            .iter()
            .map(|key| (kid_of(key), public_key_pem(key)))
            .collect()
    }

    /// The claims of `code` if it is a well-formed code signed by this verifier's key. Uses
    /// strict Ed25519 verification (no malleable or weak-key signatures).
    pub fn verify(&self, code: &str) -> Result<TicketClaims, TicketError> {
        if code.len() > TICKET_CODE_LEN_MAX {
            return Err(TicketError::TooLong {
                len: code.len(),
                max: TICKET_CODE_LEN_MAX,
            });
        }
        let rest = code
            .strip_prefix(TICKET_CODE_PREFIX)
            .ok_or(TicketError::WrongPrefix {
                expected: TICKET_CODE_PREFIX,
            })?;
        let (payload_b64, signature_b64) = rest.split_once('.').ok_or(TicketError::Malformed)?;
        if payload_b64.is_empty() || signature_b64.contains('.') {
            return Err(TicketError::Malformed);
        }
        let payload = URL_SAFE_NO_PAD
            .decode(payload_b64)
            .map_err(|_| TicketError::BadBase64 { part: "payload" })?;
        let signature = URL_SAFE_NO_PAD
            .decode(signature_b64)
            .map_err(|_| TicketError::BadBase64 { part: "signature" })?;
        let signature =
            Signature::from_slice(&signature).map_err(|_| TicketError::SignatureLength {
                len: signature.len(),
                expected: SIGNATURE_LENGTH,
            })?;
        let signed = &code[..TICKET_CODE_PREFIX.len() + payload_b64.len()];
        if !self
            .keys
            .iter()
            .any(|key| key.verify_strict(signed.as_bytes(), &signature).is_ok())
        {
            return Err(TicketError::SignatureMismatch);
        }
        serde_json::from_slice(&payload).map_err(TicketError::BadClaims)
    }
}

fn public_key_pem(key: &VerifyingKey) -> String {
    key.to_public_key_pem(LineEnding::LF)
        .expect("an Ed25519 public key always encodes as SPKI")
}

#[cfg(test)]
mod tests {
    use std::time::{SystemTime, UNIX_EPOCH};

    use super::*;

    fn claims(ticket_id: &str) -> TicketClaims {
        TicketClaims {
            ticket_id: ticket_id.into(),
            event_id: "evt_2026_spring_gala".into(),
            order_id: "0193a4f2-7c1e-7b3a-9f0e-5d2c8b1a6e47".into(),
            seat_id: Some("BALCONY-12-7".into()),
            tier_id: None,
            unit: 1,
            issued_at_unix_s: 1_790_000_000,
        }
    }

    fn signer() -> TicketSigner {
        TicketSigner::generate().unwrap()
    }

    /// `code` with the byte at `index` replaced by another base64url character.
    fn flip(code: &str, index: usize) -> String {
        let mut bytes = code.as_bytes().to_vec();
        bytes[index] = if bytes[index] == b'A' { b'B' } else { b'A' };
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn codes_of_a_previous_key_verify_during_the_rollover_and_not_after() {
        let old = signer();
        let code = old.sign(&claims("0193a4f2-8d00-7000-8000-000000000009"));
        let retired = TicketVerifier::from_pem(&old.to_pkcs8_pem()).unwrap();
        assert_eq!(
            retired,
            old.verifier(),
            "a private key file gives its public key"
        );
        let new = signer().with_previous(&[retired]).unwrap();
        assert!(new.verifier().verify(&code).is_ok(), "during the rollover");
        let keys = new.verifier().public_keys();
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0].0, new.kid(), "the signing key first");
        assert_eq!(keys[1].0, old.kid());
        assert_ne!(new.kid(), old.kid());
        let fresh = new.sign(&claims("0193a4f2-8d00-7000-8000-00000000000a"));
        assert!(matches!(
            old.verifier().verify(&fresh),
            Err(TicketError::SignatureMismatch)
        ));
        let after = TicketSigner::from_pkcs8_pem(&new.to_pkcs8_pem()).unwrap();
        assert!(matches!(
            after.verifier().verify(&code),
            Err(TicketError::SignatureMismatch)
        ));
        assert!(after.verifier().verify(&fresh).is_ok());
        let many: Vec<TicketVerifier> = (0..TICKET_KEYS_MAX).map(|_| signer().verifier()).collect();
        assert!(
            signer().with_previous(&many).is_err(),
            "a bounded number of keys"
        );
    }

    #[test]
    fn sign_then_verify_round_trips() {
        let signer = signer();
        let claims = claims("0193a4f2-8d00-7000-8000-000000000001");
        let code = signer.sign(&claims);
        assert!(code.starts_with(TICKET_CODE_PREFIX));
        assert_eq!(signer.verifier().verify(&code).unwrap(), claims);
        assert_eq!(signer.sign(&claims), code, "signing is deterministic");
    }

    #[test]
    fn codes_with_uuid_ids_stay_short_enough_for_a_qr_code() {
        const UUID: &str = "0193a4f2-8d00-7000-8000-000000000001";
        let seated = TicketClaims {
            ticket_id: UUID.into(),
            event_id: UUID.into(),
            order_id: UUID.into(),
            seat_id: Some("A-12-7".into()),
            tier_id: None,
            unit: 1,
            issued_at_unix_s: 1_790_000_000,
        };
        let longest_tier = TicketClaims {
            seat_id: None,
            tier_id: Some("T".repeat(32)),
            unit: 9999,
            ..seated.clone()
        };
        let signer = signer();
        let cases = [(&seated, 400), (&longest_tier, 420)];
        for (claims, len_max) in cases {
            let code = signer.sign(claims);
            assert!(code.len() < len_max, "{} bytes: {code}", code.len());
            assert!(code.len() < TICKET_CODE_LEN_MAX / 2);
        }
    }

    #[test]
    fn every_kind_of_tampering_is_rejected() {
        let signer = signer();
        let verifier = signer.verifier();
        let code = signer.sign(&claims("t-1"));
        let other = signer.sign(&claims("t-2"));
        // `prefixed_payload_b` is "BO1.<payload of t-2>".
        let (_, sig_a) = code.rsplit_once('.').unwrap();
        let (prefixed_payload_b, _) = other.rsplit_once('.').unwrap();
        let payload_start = TICKET_CODE_PREFIX.len();
        let signature_start = code.rfind('.').unwrap() + 1;
        let bad_json = signer.sign_payload(b"{\"ticketId\":");

        use TicketError as E;
        type Check = fn(&TicketError) -> bool;
        let cases: Vec<(&str, String, Check)> = vec![
            (
                "payload char flipped",
                flip(&code, payload_start + 5),
                |e| matches!(e, E::SignatureMismatch),
            ),
            (
                "signature char flipped",
                flip(&code, signature_start + 5),
                |e| matches!(e, E::SignatureMismatch),
            ),
            (
                "payload from another ticket",
                format!("{prefixed_payload_b}.{sig_a}"),
                |e| matches!(e, E::SignatureMismatch),
            ),
            (
                "signed by another key",
                TicketSigner::generate().unwrap().sign(&claims("t-1")),
                |e| matches!(e, E::SignatureMismatch),
            ),
            (
                "truncated signature",
                code[..code.len() - 4].to_owned(),
                |e| matches!(e, E::SignatureLength { .. } | E::BadBase64 { .. }),
            ),
            (
                "truncated to the payload",
                code[..signature_start - 1].to_owned(),
                |e| matches!(e, E::Malformed),
            ),
            ("empty", String::new(), |e| {
                matches!(e, E::WrongPrefix { .. })
            }),
            ("wrong prefix", code.replacen("BO1.", "BO2.", 1), |e| {
                matches!(e, E::WrongPrefix { .. })
            }),
            ("lowercase prefix", code.replacen("BO1.", "bo1.", 1), |e| {
                matches!(e, E::WrongPrefix { .. })
            }),
            ("extra part", format!("{code}.AAAA"), |e| {
                matches!(e, E::Malformed)
            }),
            (
                "not base64",
                format!("{}*{}", &code[..signature_start], &code[signature_start..]),
                |e| matches!(e, E::BadBase64 { part: "signature" }),
            ),
            ("padded signature", format!("{code}=="), |e| {
                matches!(e, E::BadBase64 { part: "signature" })
            }),
            ("signed but not claims JSON", bad_json, |e| {
                matches!(e, E::BadClaims(_))
            }),
            (
                "oversize",
                format!("{code}{}", "A".repeat(TICKET_CODE_LEN_MAX)),
                |e| matches!(e, E::TooLong { .. }),
            ),
        ];
        for (name, tampered, expected) in cases {
            assert_ne!(tampered, code, "{name}: test input must differ");
            match verifier.verify(&tampered) {
                Ok(claims) => panic!("{name}: accepted as {claims:?}"),
                Err(err) => assert!(expected(&err), "{name}: unexpected error {err:?}"),
            }
        }
        // The untouched code still verifies: the cases failed for their own reason.
        assert!(verifier.verify(&code).is_ok());
    }

    #[test]
    fn pem_round_trip_and_verification_with_only_the_public_key() {
        let signer = signer();
        let pem = signer.to_pkcs8_pem();
        assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        let reloaded = TicketSigner::from_pkcs8_pem(&pem).unwrap();
        assert_eq!(reloaded.public_key_pem(), signer.public_key_pem());

        let public_pem = signer.public_key_pem();
        assert!(public_pem.starts_with("-----BEGIN PUBLIC KEY-----"));
        let offline = TicketVerifier::from_public_key_pem(&public_pem).unwrap();
        assert_eq!(offline.public_key_pem(), public_pem);
        let claims = claims("t-pem");
        assert_eq!(offline.verify(&reloaded.sign(&claims)).unwrap(), claims);
    }

    #[test]
    fn invalid_pem_is_refused() {
        let signer = signer();
        for bad in ["", "not a pem", &signer.public_key_pem()] {
            assert!(matches!(
                TicketSigner::from_pkcs8_pem(bad),
                Err(TicketError::InvalidKey(_))
            ));
        }
        for bad in ["", "not a pem", &signer.to_pkcs8_pem()] {
            assert!(matches!(
                TicketVerifier::from_public_key_pem(bad),
                Err(TicketError::InvalidKey(_))
            ));
        }
    }

    #[test]
    fn debug_does_not_show_the_secret() {
        let signer = signer();
        let debug = format!("{signer:?}");
        let secret = URL_SAFE_NO_PAD.encode(signer.key.to_bytes());
        assert!(!debug.contains(&secret));
        assert!(debug.contains("public_key"));
    }

    #[test]
    fn load_or_create_creates_then_reloads_the_same_key() {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!(
            "boxoffice-tickets-test-{}-{nanos}",
            std::process::id()
        ));
        let path = dir.join("data").join("ticket-key.pem");
        assert!(!path.exists());

        let created = TicketSigner::load_or_create(&path).unwrap();
        assert!(path.exists());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, KEY_FILE_MODE, "mode {mode:o}");
        }
        let reloaded = TicketSigner::load_or_create(&path).unwrap();
        assert_eq!(reloaded.public_key_pem(), created.public_key_pem());
        let code = created.sign(&claims("t-file"));
        assert!(reloaded.verifier().verify(&code).is_ok());

        fs::write(&path, "garbage").unwrap();
        assert!(matches!(
            TicketSigner::load_or_create(&path),
            Err(TicketError::InvalidKey(_))
        ));
        fs::remove_dir_all(&dir).unwrap();
    }
}
