//! A record as read from a file, before validation: every field optional and leniently typed, so that a field of
//! the wrong type is reported by name (with what it held) instead of failing the whole record.
//!
//! Both readers produce [`RawRecord`]s: the JSONL reader through serde, the Parquet reader from Arrow columns.
//! `validate` turns them into model rows or rejections; it is the one place the format's rules are enforced.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The record kinds of the format.
pub const KINDS: [&str; 7] = ["meta", "request", "iteration", "stage", "token", "sample", "reference"];

/// What a field of the wrong type held, to name it in the rejection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Found {
    /// A floating-point number.
    Float(f64),
    /// An integer.
    Int(i64),
    /// An integer beyond `i64`.
    BigInt,
    /// A string.
    Str,
    /// A boolean.
    Bool,
    /// A list.
    List,
    /// An object (or a struct column).
    Object,
    /// A Parquet column type tokenscope cannot read for this field.
    Column(&'static str),
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::Float(v) => write!(f, "a float ({v})"),
            Found::Int(v) => write!(f, "an integer ({v})"),
            Found::BigInt => f.write_str("an integer too large for 64 bits"),
            Found::Str => f.write_str("a string"),
            Found::Bool => f.write_str("a boolean"),
            Found::List => f.write_str("a list"),
            Found::Object => f.write_str("an object"),
            Found::Column(t) => write!(f, "a column of type {t}"),
        }
    }
}

/// A present field: its value, or what it held instead when of the wrong type.
#[derive(Debug, Clone, PartialEq)]
pub enum Val<T> {
    /// A value of the expected type.
    Ok(T),
    /// A value of another type.
    Wrong(Found),
}

/// An optional, leniently typed field: `None` when absent or null.
pub type Field<T> = Option<Val<T>>;

/// One alternative in a token's `candidates`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct RawCandidate<'a> {
    /// Vocabulary id.
    #[serde(default)]
    pub token_id: Field<i64>,
    /// Decoded text.
    #[serde(default, borrow)]
    pub text: Field<Cow<'a, str>>,
    /// Natural-log probability.
    #[serde(default)]
    pub logprob: Field<f64>,
    /// Special-token flag.
    #[serde(default)]
    pub special: Field<bool>,
}

/// Every field of every record kind (see the format spec). Unknown fields are ignored.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[allow(missing_docs)]
pub struct RawRecord<'a> {
    #[serde(default, borrow)]
    pub kind: Field<Cow<'a, str>>,
    // meta
    #[serde(default, borrow)]
    pub format: Field<Cow<'a, str>>,
    #[serde(default)]
    pub version: Field<i64>,
    #[serde(default, borrow)]
    pub engine: Field<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub engine_version: Field<Cow<'a, str>>,
    #[serde(default)]
    pub eos_token_ids: Field<Vec<Val<i64>>>,
    #[serde(default)]
    pub created_ns: Field<i64>,
    #[serde(default, borrow)]
    pub clock: Field<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub note: Field<Cow<'a, str>>,
    // request
    #[serde(default, borrow)]
    pub request_id: Field<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub source: Field<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub trace_id: Field<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub model: Field<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub app_id: Field<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub user_id: Field<Cow<'a, str>>,
    #[serde(default)]
    pub arrival_ns: Field<i64>,
    #[serde(default)]
    pub scheduled_ns: Field<i64>,
    #[serde(default)]
    pub first_token_ns: Field<i64>,
    #[serde(default)]
    pub finished_ns: Field<i64>,
    #[serde(default)]
    pub input_tokens: Field<i64>,
    #[serde(default)]
    pub cached_tokens: Field<i64>,
    #[serde(default)]
    pub context_tokens: Field<i64>,
    #[serde(default)]
    pub output_tokens: Field<i64>,
    #[serde(default, borrow)]
    pub finish_reason: Field<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub status: Field<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub error_code: Field<Cow<'a, str>>,
    #[serde(default)]
    pub temperature: Field<f64>,
    #[serde(default)]
    pub top_p: Field<f64>,
    #[serde(default)]
    pub top_k: Field<i64>,
    #[serde(default)]
    pub max_tokens: Field<i64>,
    #[serde(default)]
    pub seed: Field<i64>,
    #[serde(default)]
    pub num_preemptions: Field<i64>,
    #[serde(default, borrow)]
    pub prompt_hash: Field<Cow<'a, str>>,
    #[serde(default)]
    pub server_queue_ns: Field<i64>,
    #[serde(default)]
    pub server_ttft_ns: Field<i64>,
    #[serde(default)]
    pub server_decode_ns: Field<i64>,
    #[serde(default)]
    pub sent_ns: Field<i64>,
    #[serde(default, borrow)]
    pub server_request_id: Field<Cow<'a, str>>,
    #[serde(default)]
    pub spec_drafted_tokens: Field<i64>,
    #[serde(default)]
    pub spec_accepted_tokens: Field<i64>,
    #[serde(default, borrow)]
    pub decode_source: Field<Cow<'a, str>>,
    // iteration
    #[serde(default)]
    pub iteration: Field<i64>,
    #[serde(default)]
    pub start_ns: Field<i64>,
    #[serde(default)]
    pub end_ns: Field<i64>,
    #[serde(default)]
    pub schedule_ns: Field<i64>,
    #[serde(default)]
    pub forward_ns: Field<i64>,
    #[serde(default)]
    pub sample_ns: Field<i64>,
    #[serde(default)]
    pub num_reqs: Field<i64>,
    #[serde(default)]
    pub num_prefill_reqs: Field<i64>,
    #[serde(default)]
    pub num_decode_reqs: Field<i64>,
    #[serde(default)]
    pub num_prefill_tokens: Field<i64>,
    #[serde(default)]
    pub num_decode_tokens: Field<i64>,
    #[serde(default)]
    pub num_waiting: Field<i64>,
    #[serde(default)]
    pub kv_usage: Field<f64>,
    #[serde(default)]
    pub num_preempted: Field<i64>,
    // stage
    #[serde(default, borrow)]
    pub stage: Field<Cow<'a, str>>,
    #[serde(default)]
    pub tokens: Field<i64>,
    #[serde(default)]
    pub bytes: Field<i64>,
    #[serde(default)]
    pub retries: Field<i64>,
    // token
    #[serde(default)]
    pub index: Field<i64>,
    #[serde(default)]
    pub emitted_ns: Field<i64>,
    #[serde(default)]
    pub token_id: Field<i64>,
    #[serde(default, borrow)]
    pub text: Field<Cow<'a, str>>,
    #[serde(default)]
    pub special: Field<bool>,
    #[serde(default)]
    pub logprob: Field<f64>,
    #[serde(default)]
    pub rank: Field<i64>,
    #[serde(default)]
    pub received_ns: Field<i64>,
    #[serde(default, borrow)]
    pub spec: Field<Cow<'a, str>>,
    // sample
    #[serde(default)]
    pub time_ns: Field<i64>,
    #[serde(default)]
    pub interval_ns: Field<i64>,
    #[serde(default)]
    pub num_running: Field<i64>,
    #[serde(default)]
    pub num_swapped: Field<i64>,
    #[serde(default)]
    pub kv_tokens: Field<i64>,
    #[serde(default)]
    pub prompt_throughput: Field<f64>,
    #[serde(default)]
    pub generation_throughput: Field<f64>,
    #[serde(default)]
    pub prefix_hit_rate: Field<f64>,
    #[serde(default)]
    pub spec_accept_length: Field<f64>,
    #[serde(default)]
    pub spec_accept_rate: Field<f64>,
    #[serde(default)]
    pub top_logprob: Field<f64>,
    #[serde(default)]
    pub kv_transfers: Field<i64>,
    #[serde(default)]
    pub kv_transfers_failed: Field<i64>,
    #[serde(default)]
    pub kv_transfer_ms: Field<f64>,
    #[serde(default)]
    pub kv_transfer_p90_ms: Field<f64>,
    #[serde(default)]
    pub kv_transfer_bytes: Field<i64>,
    #[serde(default)]
    pub num_bootstrapping: Field<i64>,
    #[serde(default)]
    pub num_prealloc: Field<i64>,
    #[serde(default)]
    pub num_transferring: Field<i64>,
    #[serde(default)]
    pub num_inflight: Field<i64>,
    #[serde(default)]
    pub num_retracted: Field<i64>,
    #[serde(default, borrow)]
    pub candidates: Field<Vec<RawCandidate<'a>>>,
}

/// Consumes a sequence or map that is not wanted, so the rest of the line still parses.
fn skip_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

fn skip_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Implements the visitor methods for JSON value types a field does not expect, reporting what was found.
macro_rules! wrong_types {
    ($t:ty; $($skip:ident),*) => {
        $(wrong_types!(@one $t; $skip);)*
    };
    (@one $t:ty; int) => {
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Val<$t>, E> { Ok(Val::Wrong(Found::Int(v))) }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Val<$t>, E> {
            Ok(Val::Wrong(i64::try_from(v).map_or(Found::BigInt, Found::Int)))
        }
    };
    (@one $t:ty; float) => {
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Val<$t>, E> { Ok(Val::Wrong(Found::Float(v))) }
    };
    (@one $t:ty; str) => {
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Val<$t>, E> { Ok(Val::Wrong(Found::Str)) }
    };
    (@one $t:ty; bool) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Val<$t>, E> { Ok(Val::Wrong(Found::Bool)) }
    };
    (@one $t:ty; seq) => {
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Val<$t>, A::Error> {
            skip_seq(seq)?;
            Ok(Val::Wrong(Found::List))
        }
    };
    (@one $t:ty; map) => {
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Val<$t>, A::Error> {
            skip_map(map)?;
            Ok(Val::Wrong(Found::Object))
        }
    };
}

struct IntVisitor;

impl<'de> Visitor<'de> for IntVisitor {
    type Value = Val<i64>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Val<i64>, E> {
        Ok(Val::Ok(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Val<i64>, E> {
        Ok(i64::try_from(v).map_or(Val::Wrong(Found::BigInt), Val::Ok))
    }
    wrong_types!(i64; float, str, bool, seq, map);
}

impl<'de> Deserialize<'de> for Val<i64> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(IntVisitor)
    }
}

struct FloatVisitor;

impl<'de> Visitor<'de> for FloatVisitor {
    type Value = Val<f64>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number")
    }
    #[expect(clippy::cast_precision_loss, reason = "an integer logprob or temperature is small")]
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Val<f64>, E> {
        Ok(Val::Ok(v as f64))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Val<f64>, E> {
        Ok(Val::Ok(v as f64))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Val<f64>, E> {
        Ok(Val::Ok(v))
    }
    wrong_types!(f64; str, bool, seq, map);
}

impl<'de> Deserialize<'de> for Val<f64> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FloatVisitor)
    }
}

struct BoolVisitor;

impl<'de> Visitor<'de> for BoolVisitor {
    type Value = Val<bool>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a boolean")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Val<bool>, E> {
        Ok(Val::Ok(v))
    }
    wrong_types!(bool; int, float, str, seq, map);
}

impl<'de> Deserialize<'de> for Val<bool> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(BoolVisitor)
    }
}

struct StrVisitor;

impl<'de> Visitor<'de> for StrVisitor {
    type Value = Val<Cow<'de, str>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Val::Ok(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Val::Ok(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Val::Ok(Cow::Owned(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Val::Wrong(Found::Int(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Val::Wrong(i64::try_from(v).map_or(Found::BigInt, Found::Int)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Val::Wrong(Found::Float(v)))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Val::Wrong(Found::Bool))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        skip_seq(seq)?;
        Ok(Val::Wrong(Found::List))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        skip_map(map)?;
        Ok(Val::Wrong(Found::Object))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Val<Cow<'a, str>> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrVisitor)
    }
}

/// A list field: a JSON array of `T`, or what stood there instead.
struct ListVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ListVisitor<T> {
    type Value = Val<Vec<T>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(v) = seq.next_element()? {
            out.push(v);
        }
        Ok(Val::Ok(out))
    }
    wrong_types!(Vec<T>; int, float, str, bool, map);
}

impl<'de: 'a, 'a> Deserialize<'de> for Val<Vec<RawCandidate<'a>>> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ListVisitor(std::marker::PhantomData))
    }
}

impl<'de> Deserialize<'de> for Val<Vec<Val<i64>>> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ListVisitor(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> RawRecord<'_> {
        match serde_json::from_str(line) {
            Ok(r) => r,
            Err(e) => panic!("{line}: {e}"),
        }
    }

    #[test]
    fn wrong_types_are_kept_as_found() {
        let r = parse(r#"{"kind":"request","request_id":42,"arrival_ns":1.5,"input_tokens":"9","x_extra":[1]}"#);
        assert_eq!(r.kind, Some(Val::Ok(Cow::Borrowed("request"))));
        assert_eq!(r.request_id, Some(Val::Wrong(Found::Int(42))));
        assert_eq!(r.arrival_ns, Some(Val::Wrong(Found::Float(1.5))));
        assert_eq!(r.input_tokens, Some(Val::Wrong(Found::Str)));
        assert_eq!(r.output_tokens, None);
    }

    #[test]
    fn null_is_absent_and_escaped_strings_are_owned() {
        let r = parse(r#"{"kind":"token","text":"a\nb","logprob":null,"candidates":[{"token_id":3,"logprob":-1}]}"#);
        assert_eq!(r.text, Some(Val::Ok(Cow::Owned("a\nb".to_owned()))));
        assert_eq!(r.logprob, None);
        let Some(Val::Ok(c)) = r.candidates else {
            panic!("candidates")
        };
        assert_eq!(c[0].token_id, Some(Val::Ok(3)));
        assert_eq!(c[0].logprob, Some(Val::Ok(-1.0)));
    }

    #[test]
    fn integer_beyond_i64_is_named() {
        let r = parse(r#"{"arrival_ns":18446744073709551615}"#);
        assert_eq!(r.arrival_ns, Some(Val::Wrong(Found::BigInt)));
    }
}
