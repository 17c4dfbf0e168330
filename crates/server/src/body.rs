//! JSON request bodies: at most [`BODY_BYTES_MAX`], parsed once into a `Value` (kept for the
//! idempotency digest) and then into the typed request with unknown fields refused. Every
//! failure is a 422 `VALIDATION` whose detail names the field, or a 413.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::AppState;
use crate::error::ApiError;

/// Largest request body accepted (API.md: 64 KiB).
pub const BODY_BYTES_MAX: usize = 64 * 1024;

/// A JSON body as a generic value; see [`JsonBody::parse`] for the typed form.
#[derive(Debug)]
pub struct JsonBody(pub Value);

impl FromRequest<AppState> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::new(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "PAYLOAD_TOO_LARGE",
                        format!("request bodies are limited to {BODY_BYTES_MAX} bytes"),
                    )
                } else {
                    ApiError::new(
                        StatusCode::BAD_REQUEST,
                        "BAD_REQUEST",
                        "could not read the request body",
                    )
                }
            })?;
        Self::from_bytes(&bytes)
    }
}

/// Largest integer a JSON number written with a fraction or an exponent still names exactly.
const EXACT_INTEGER_MAX: f64 = 9_007_199_254_740_992.0; // 2^53

/// `45.0` and `4.5e1` are the integer 45, as JSON Schema reads them (an integer is a number
/// whose fractional part is zero): written as integers, so that the typed fields take them.
fn integral_numbers(value: &mut Value) {
    match value {
        Value::Number(number) => {
            if let Some(float) = number.as_f64().filter(|_| number.is_f64())
                && float.fract() == 0.0
                && float.abs() <= EXACT_INTEGER_MAX
            {
                // In range: the cast is exact.
                *number = serde_json::Number::from(float as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_numbers),
        Value::Object(members) => members.values_mut().for_each(integral_numbers),
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
}

impl JsonBody {
    /// The body of a request whose bytes were read (at most [`BODY_BYTES_MAX`]): a JSON
    /// object, its integral numbers written as integers.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ApiError> {
        if bytes.is_empty() {
            return Err(ApiError::validation("body", "a JSON object is required"));
        }
        let mut value: Value = serde_json::from_slice(bytes)
            .map_err(|e| ApiError::validation("body", format!("malformed JSON: {e}")))?;
        integral_numbers(&mut value);
        if !value.is_object() {
            return Err(ApiError::validation("body", "must be a JSON object"));
        }
        Ok(Self(value))
    }

    /// The typed request; the error names the offending field by its JSON path. An object
    /// of the request is a JSON object only ([`Objects`]).
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, ApiError> {
        serde_path_to_error::deserialize(Objects(&self.0)).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." { "body".to_owned() } else { path };
            ApiError::validation(&field, e.inner())
        })
    }

    /// A string member of the body, if present.
    pub fn str_field(&self, member: &str) -> Result<Option<&str>, ApiError> {
        match self.0.get(member) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(ApiError::validation(member, "must be a string")),
        }
    }
}

/// A JSON value read as serde_json reads it, except that a struct is read from a JSON object
/// only: serde's derive also takes a struct from an array of its fields in order, so that
/// `"waitingRoom": [null, null]` was an empty waiting-room setting (schemathesis: a body the
/// document refuses, accepted).
struct Objects<'a>(&'a Value);

impl<'de> serde::Deserializer<'de> for Objects<'de> {
    type Error = serde_json::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Array(items) => visitor.visit_seq(ObjectsSeq(items.iter())),
            Value::Object(members) => visitor.visit_map(ObjectsMap {
                members: members.iter(),
                value: None,
            }),
            scalar => serde::Deserializer::deserialize_any(scalar, visitor),
        }
    }

    fn deserialize_option<V: serde::de::Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Object(_) => self.deserialize_any(visitor),
            other => Err(serde::de::Error::invalid_type(unexpected(other), &visitor)),
        }
    }

    fn deserialize_newtype_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    /// The API's enums are names (`"prefer"`, `"fifo"`): serde_json's own reading.
    fn deserialize_enum<V: serde::de::Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        serde::Deserializer::deserialize_enum(self.0, name, variants, visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map identifier ignored_any
    }
}

/// How a value is named in a type error.
fn unexpected(value: &Value) -> serde::de::Unexpected<'_> {
    use serde::de::Unexpected;
    match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(_) => Unexpected::Other("number"),
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

struct ObjectsSeq<'a>(std::slice::Iter<'a, Value>);

impl<'de> serde::de::SeqAccess<'de> for ObjectsSeq<'de> {
    type Error = serde_json::Error;

    fn next_element_seed<T: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Self::Error> {
        self.0
            .next()
            .map(|item| seed.deserialize(Objects(item)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

struct ObjectsMap<'a> {
    members: serde_json::map::Iter<'a>,
    value: Option<&'a Value>,
}

impl<'de> serde::de::MapAccess<'de> for ObjectsMap<'de> {
    type Error = serde_json::Error;

    fn next_key_seed<K: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        let Some((key, value)) = self.members.next() else {
            return Ok(None);
        };
        self.value = Some(value);
        seed.deserialize(serde::de::value::BorrowedStrDeserializer::new(key))
            .map(Some)
    }

    fn next_value_seed<V: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(Objects(value)),
            None => Err(serde::de::Error::custom("a value without its key")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.members.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A struct is read from an object only, at any depth; everything else reads as before.
    #[test]
    fn a_struct_is_an_object_not_an_array() {
        use crate::api::CreateEventBody;
        let body = |value: Value| JsonBody::from_bytes(value.to_string().as_bytes()).unwrap();
        let event = serde_json::json!({"name": "Show", "startsAt": "2030-01-01T20:00:00Z",
            "currency": "EUR", "tiers": [{"tierId": "GA", "name": "Floor", "capacity": 5,
            "priceMinor": 100}], "waitingRoom": {"enabled": true, "policy": "random"}});
        let parsed: CreateEventBody = body(event.clone()).parse().expect("an event");
        assert_eq!(parsed.tiers[0].capacity, 5);
        assert_eq!(parsed.waiting_room.and_then(|w| w.enabled), Some(true));
        for (member, value, field) in [
            (
                "waitingRoom",
                serde_json::json!([null, null]),
                "waitingRoom",
            ),
            ("waitingRoom", serde_json::json!([true]), "waitingRoom"),
            (
                "tiers",
                serde_json::json!([["GA", "Floor", 5, 100]]),
                "tiers[0]",
            ),
        ] {
            let mut wrong = event.clone();
            wrong[member] = value;
            let refused = body(wrong).parse::<CreateEventBody>().expect_err(member);
            assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
            assert_eq!(refused.extra["field"], field, "{}", refused.detail);
        }
        let mut unknown = event.clone();
        unknown["waitingRoom"]["door"] = serde_json::json!(1);
        let refused = body(unknown)
            .parse::<CreateEventBody>()
            .expect_err("unknown");
        assert_eq!(
            refused.extra["field"], "waitingRoom.door",
            "{}",
            refused.detail
        );
        assert!(
            refused.detail.contains("unknown field"),
            "{}",
            refused.detail
        );
    }

    #[test]
    fn integral_numbers_are_integers_whatever_their_spelling() {
        let mut value = serde_json::json!({
            "a": 45.0, "b": [4.5e1, -3.0, 0.5], "c": {"d": 1e300, "e": 7, "f": "8.0"}
        });
        integral_numbers(&mut value);
        assert_eq!(value["a"], serde_json::json!(45));
        assert!(value["a"].is_i64());
        assert_eq!(value["b"], serde_json::json!([45, -3, 0.5]));
        // Beyond 2^53 a float no longer names one integer: left as it is (and refused).
        assert!(value["c"]["d"].is_f64());
        assert_eq!(value["c"]["e"], serde_json::json!(7));
        assert_eq!(value["c"]["f"], serde_json::json!("8.0"));
    }
}
