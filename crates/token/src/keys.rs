//! HS256 keys with ids, and their rollover: one key signs, every listed key verifies.
//!
//! A deployment changes a secret in two steps (docs/DEPLOY.md, "Rotating keys"): first every
//! node gets the new secret as the current one and the old one as *previous* (tokens signed
//! with either verify, new ones are signed with the new one), then, once the old tokens have
//! run out, the previous one is removed and its tokens are refused.
//!
//! Each token names its key in the JWT header's `kid`: the id is derived from the secret
//! ([`kid_of`]), so every node and an identity provider that signs with the same secret agree
//! on it without configuring ids. A token whose `kid` names one of the ring's keys is checked
//! with that key only; a token without `kid`, or with one of its own (signed before ids
//! existed, or by an identity provider that names its keys its own way), is tried against
//! each key, current first. A token of a removed key verifies with none.

use jsonwebtoken::errors::Error as JwtError;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, TokenData, Validation};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

/// Most keys one ring holds (the current one and the previous ones).
pub const KEYS_MAX: usize = 4;

/// The id of an HS256 secret: `hs-` and the first 8 bytes of its SHA-256, in hex. It says
/// which secret signed a token without saying anything useful about the secret.
pub fn kid_of(secret: &[u8]) -> String {
    let digest = Sha256::digest(secret);
    format!("hs-{}", hex::encode(&digest[..8]))
}

/// Why a ring could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeysError {
    /// A secret is shorter than the ring's floor.
    TooShort { min_len: usize },
    /// More than [`KEYS_MAX`] keys.
    TooMany,
    /// The library refused the key.
    Invalid(String),
}

impl std::fmt::Display for KeysError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooShort { min_len } => {
                write!(f, "every secret must be at least {min_len} bytes")
            }
            Self::TooMany => write!(
                f,
                "at most {KEYS_MAX} keys (the current one and previous ones)"
            ),
            Self::Invalid(why) => write!(f, "invalid secret: {why}"),
        }
    }
}

impl std::error::Error for KeysError {}

/// Why a token did not verify: the library's verdict (signature, algorithm, claims, shape)
/// with the key its `kid` names, or with the current key when it names none of the ring's.
pub type VerifyError = JwtError;

#[derive(Clone)]
struct Key {
    kid: String,
    encoding: EncodingKey,
    decoding: DecodingKey,
}

/// HS256 keys: the first signs, all verify.
#[derive(Clone)]
pub struct HsKeys {
    keys: Vec<Key>,
}

impl std::fmt::Debug for HsKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Ids only, never key material.
        f.debug_list()
            .entries(self.keys.iter().map(|k| &k.kid))
            .finish()
    }
}

impl HsKeys {
    /// A ring that signs with `current` and also verifies with each of `previous`, every
    /// secret at least `min_len` bytes. A previous secret equal to the current one is
    /// dropped.
    pub fn new<S: AsRef<[u8]>>(
        current: &[u8],
        previous: &[S],
        min_len: usize,
    ) -> Result<Self, KeysError> {
        let mut keys: Vec<Key> = Vec::with_capacity(1 + previous.len());
        for secret in std::iter::once(current).chain(previous.iter().map(AsRef::as_ref)) {
            if secret.len() < min_len {
                return Err(KeysError::TooShort { min_len });
            }
            let kid = kid_of(secret);
            if keys.iter().any(|k| k.kid == kid) {
                continue;
            }
            keys.push(Key {
                kid,
                encoding: EncodingKey::from_secret(secret)
                    .map_err(|e| KeysError::Invalid(e.to_string()))?,
                decoding: DecodingKey::from_secret(secret)
                    .map_err(|e| KeysError::Invalid(e.to_string()))?,
            });
        }
        if keys.len() > KEYS_MAX {
            return Err(KeysError::TooMany);
        }
        Ok(Self { keys })
    }

    /// The id of the key that signs.
    pub fn kid(&self) -> &str {
        &self.keys[0].kid
    }

    /// The ids of every key that verifies, the signing one first.
    pub fn kids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|k| k.kid.as_str())
    }

    /// Signs `claims` (HS256) with the current key, naming it in `kid`.
    pub fn sign<T: Serialize>(&self, claims: &T) -> Result<String, JwtError> {
        let key = &self.keys[0];
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(key.kid.clone());
        jsonwebtoken::encode(&header, claims, &key.encoding)
    }

    /// Verifies `token` with the key its `kid` names, or, when it names none of the ring's
    /// keys, with each key (current first; the current key's error when none verifies).
    pub fn verify<T: DeserializeOwned>(
        &self,
        token: &str,
        validation: &Validation,
    ) -> Result<TokenData<T>, VerifyError> {
        let header = jsonwebtoken::decode_header(token)?;
        if let Some(key) = header
            .kid
            .and_then(|kid| self.keys.iter().find(|k| k.kid == kid))
        {
            return jsonwebtoken::decode(token, &key.decoding, validation);
        }
        let mut first_error = None;
        for key in &self.keys {
            match jsonwebtoken::decode(token, &key.decoding, validation) {
                Ok(data) => return Ok(data),
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        Err(first_error.expect("a ring holds at least one key"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct Claims {
        sub: String,
        exp: u64,
    }

    const OLD: &[u8] = b"the-old-secret-0123456789";
    const NEW: &[u8] = b"the-new-secret-0123456789";

    fn claims() -> Claims {
        Claims {
            sub: "ann".into(),
            exp: 4_000_000_000,
        }
    }

    fn validation() -> Validation {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_required_spec_claims(&["exp", "sub"]);
        validation
    }

    fn ring(current: &[u8], previous: &[&[u8]]) -> HsKeys {
        HsKeys::new(current, previous, 16).unwrap()
    }

    #[test]
    fn a_token_names_its_key_and_verifies_with_it() {
        let keys = ring(NEW, &[]);
        let token = keys.sign(&claims()).unwrap();
        let header = jsonwebtoken::decode_header(&token).unwrap();
        assert_eq!(header.kid.as_deref(), Some(kid_of(NEW).as_str()));
        assert_eq!(keys.kid(), kid_of(NEW));
        let data = keys.verify::<Claims>(&token, &validation()).unwrap();
        assert_eq!(data.claims, claims());
    }

    #[test]
    fn old_tokens_verify_during_the_rollover_and_are_refused_after_it() {
        let before = ring(OLD, &[]);
        let old_token = before.sign(&claims()).unwrap();
        // Rollover: the new key signs, the old one still verifies.
        let during = ring(NEW, &[OLD]);
        assert_eq!(
            during.kids().collect::<Vec<_>>(),
            [kid_of(NEW), kid_of(OLD)]
        );
        assert!(during.verify::<Claims>(&old_token, &validation()).is_ok());
        let new_token = during.sign(&claims()).unwrap();
        assert!(during.verify::<Claims>(&new_token, &validation()).is_ok());
        // A node not yet rolled over refuses tokens of a key it does not know.
        assert!(before.verify::<Claims>(&new_token, &validation()).is_err());
        // After: the old key is gone, its tokens are refused, the new ones still verify.
        let after = ring(NEW, &[]);
        assert!(
            after.verify::<Claims>(&old_token, &validation()).is_err(),
            "an old-key token after the rollover"
        );
        assert!(after.verify::<Claims>(&new_token, &validation()).is_ok());
    }

    #[test]
    fn a_token_without_kid_is_tried_against_each_key() {
        let plain = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims(),
            &EncodingKey::from_secret(OLD).unwrap(),
        )
        .unwrap();
        assert!(
            ring(NEW, &[OLD])
                .verify::<Claims>(&plain, &validation())
                .is_ok()
        );
        assert!(
            ring(NEW, &[])
                .verify::<Claims>(&plain, &validation())
                .is_err()
        );
        // An identity provider's own key ids are no ids of ours: tried against each key.
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("idp-key-2026".into());
        let named =
            jsonwebtoken::encode(&header, &claims(), &EncodingKey::from_secret(OLD).unwrap())
                .unwrap();
        assert!(
            ring(NEW, &[OLD])
                .verify::<Claims>(&named, &validation())
                .is_ok()
        );
        assert!(
            ring(NEW, &[])
                .verify::<Claims>(&named, &validation())
                .is_err()
        );
    }

    #[test]
    fn a_kid_cannot_point_a_token_at_another_key() {
        // Signed with OLD but claiming NEW's id: checked with NEW only, and refused.
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(kid_of(NEW));
        let forged =
            jsonwebtoken::encode(&header, &claims(), &EncodingKey::from_secret(OLD).unwrap())
                .unwrap();
        assert!(
            ring(NEW, &[OLD])
                .verify::<Claims>(&forged, &validation())
                .is_err()
        );
    }

    #[test]
    fn short_duplicate_and_too_many_secrets() {
        assert_eq!(
            HsKeys::new(b"short", &[] as &[&[u8]], 16).err(),
            Some(KeysError::TooShort { min_len: 16 })
        );
        assert_eq!(
            HsKeys::new(NEW, &[OLD, b"short"], 16).err(),
            Some(KeysError::TooShort { min_len: 16 })
        );
        assert_eq!(
            ring(NEW, &[NEW, OLD]).kids().count(),
            2,
            "a duplicate is dropped"
        );
        let many: Vec<Vec<u8>> = (0..KEYS_MAX)
            .map(|i| format!("previous-secret-number-{i}").into_bytes())
            .collect();
        assert_eq!(HsKeys::new(NEW, &many, 16).err(), Some(KeysError::TooMany));
        assert_eq!(
            format!("{:?}", ring(NEW, &[OLD])),
            format!("[{:?}, {:?}]", kid_of(NEW), kid_of(OLD))
        );
    }
}
