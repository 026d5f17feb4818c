//! OTLP/JSON decoded into the published messages by `opentelemetry-proto`'s serde mapping, the same messages prost
//! decodes from protobuf, so one mapping to spans serves both ([`super::pb::spans`]).
//!
//! The crate reads OTLP/JSON as the specification writes it: lowerCamelCase names, hex ids, enums as numbers, 64-bit
//! integers as strings or numbers. Exports are also written other ways, and those are normalised, then decoded again:
//! - protobuf's own JSON mapping (Python's `json_format` with `preserving_proto_field_name`, some collectors):
//!   snake_case names, ids in base64, enums by name (`"STATUS_CODE_ERROR"`, `"SPAN_KIND_SERVER"`);
//! - doubles written as strings (`"doubleValue": "0.5"`, which protobuf's JSON mapping allows).
//!
//! A string id that is neither hex nor base64 keeps its identity as the hex of its bytes: spans are grouped by it,
//! never read for its value.

use base64::Engine as _;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use serde_json::{Map, Value};

/// The keys whose values are ids (bytes, hex in OTLP/JSON), after normalisation to lowerCamelCase.
const ID_KEYS: [&str; 3] = ["traceId", "spanId", "parentSpanId"];

/// Decodes the exports of one JSON text: one export object, or an array of them. The crate's decoder first; when it
/// refuses the text, or the text has names the crate does not read (snake_case), the normalised text; when that fails
/// too, the crate's first error (it has the line and column).
pub fn decode(bytes: &[u8]) -> Result<Vec<ExportTraceServiceRequest>, serde_json::Error> {
    let strict = decode_strict(bytes);
    if strict.is_ok() && !snake_case(bytes) {
        return strict;
    }
    let lenient = serde_json::from_slice::<Value>(bytes).and_then(|mut value| {
        normalise(&mut value);
        exports(value)
    });
    match (strict, lenient) {
        (_, Ok(exports)) => Ok(exports),
        // The crate's error has the place; the normalised text's names what is still wrong once normalised.
        (Err(e), Err(_)) | (Ok(_), Err(e)) => Err(e),
    }
}

fn decode_strict(bytes: &[u8]) -> Result<Vec<ExportTraceServiceRequest>, serde_json::Error> {
    let first = bytes.iter().find(|c| !c.is_ascii_whitespace());
    if first == Some(&b'[') {
        serde_json::from_slice(bytes)
    } else {
        serde_json::from_slice(bytes).map(|e| vec![e])
    }
}

fn exports(value: Value) -> Result<Vec<ExportTraceServiceRequest>, serde_json::Error> {
    if value.is_array() {
        serde_json::from_value(value)
    } else {
        serde_json::from_value(value).map(|e| vec![e])
    }
}

/// True when the text has a snake_case name of the messages read (which the crate passes over as unknown).
fn snake_case(bytes: &[u8]) -> bool {
    [
        "\"resource_spans\"",
        "\"scope_spans\"",
        "\"start_time_unix_nano\"",
        "\"span_id\"",
    ]
    .iter()
    .any(|needle| memchr::memmem::find(bytes, needle.as_bytes()).is_some())
}

/// Rewrites a JSON value written in protobuf's JSON mapping into OTLP/JSON, in place (see the module's text).
fn normalise(value: &mut Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(normalise),
        Value::Object(map) => {
            let entries = std::mem::take(map);
            *map = entries
                .into_iter()
                .map(|(key, v)| (camel_case(&key), v))
                .collect::<Map<_, _>>();
            for (key, v) in map.iter_mut() {
                match key.as_str() {
                    k if ID_KEYS.contains(&k) => hex_id(v),
                    "code" => by_name(v, |s| {
                        StatusCode::from_str_name(s)
                            .map(|c| c as i32)
                            .or_else(|| s.trim().parse().ok())
                    }),
                    "kind" => by_name(v, |s| SpanKind::from_str_name(s).map(|k| k as i32)),
                    "doubleValue" => {
                        if let Some(f) = v.as_str().and_then(|s| s.trim().parse::<f64>().ok()) {
                            // NaN and the infinities have no JSON number: the value is left empty.
                            *v = serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number);
                        }
                    }
                    "arrayValue" | "kvlistValue" => {
                        normalise(v);
                        // An empty list written as `{}` (the Go collector, protobuf's mapping): its values are none.
                        if let Some(list) = v.as_object_mut() {
                            list.entry("values").or_insert_with(|| Value::Array(Vec::new()));
                        }
                    }
                    _ => normalise(v),
                }
            }
            // What a field cannot be read as is left out, as a field not written: a time that is not a whole
            // non-negative number, an attribute value of the wrong type. The span is kept.
            map.retain(|key, v| match key.as_str() {
                "startTimeUnixNano" | "endTimeUnixNano" | "timeUnixNano" | "observedTimeUnixNano" => {
                    v.as_u64().is_some() || v.as_str().is_some_and(|s| s.trim().parse::<u64>().is_ok())
                }
                "stringValue" => v.is_string(),
                "boolValue" => v.is_boolean(),
                "intValue" => v.as_i64().is_some() || v.as_str().is_some_and(|s| s.trim().parse::<i64>().is_ok()),
                "doubleValue" => v.is_number(),
                "bytesValue" => v
                    .as_str()
                    .is_some_and(|s| base64::engine::general_purpose::STANDARD.decode(s).is_ok()),
                _ => true,
            });
        }
        _ => {}
    }
}

/// `start_time_unix_nano` → `startTimeUnixNano`; a lowerCamelCase name is left as it is.
fn camel_case(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// An enum written by name becomes its number; an unknown name is left for the decoder to refuse.
fn by_name(v: &mut Value, number: impl Fn(&str) -> Option<i32>) {
    if let Some(n) = v.as_str().and_then(number) {
        *v = Value::from(n);
    }
}

/// An id as hex: hex is kept, base64 is decoded, and anything else becomes the hex of its bytes.
fn hex_id(v: &mut Value) {
    let Some(s) = v.as_str() else { return };
    if s.len() % 2 == 0 && s.bytes().all(|c| c.is_ascii_hexdigit()) {
        return;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s)
        .unwrap_or_else(|_| s.as_bytes().to_vec());
    *v = Value::String(bytes.iter().map(|b| format!("{b:02x}")).collect());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_span(text: &str) -> opentelemetry_proto::tonic::trace::v1::Span {
        let mut exports = decode(text.as_bytes()).unwrap();
        assert_eq!(exports.len(), 1);
        let rs = exports.remove(0).resource_spans.remove(0);
        rs.scope_spans.into_iter().next().unwrap().spans.remove(0)
    }

    #[test]
    fn otlp_json_as_the_collector_writes_it() {
        let s = one_span(
            r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"00000000000000001a2b3c4d5e6f7081",
            "spanId":"a100000000000003","name":"tokenize","kind":1,"startTimeUnixNano":"1764403200000000000",
            "endTimeUnixNano":1764403200001000000,"attributes":[{"key":"pid","value":{"intValue":"4100"}}],
            "status":{}}]}]}]}"#,
        );
        assert_eq!(
            s.trace_id,
            [0, 0, 0, 0, 0, 0, 0, 0, 0x1a, 0x2b, 0x3c, 0x4d, 0x5e, 0x6f, 0x70, 0x81]
        );
        assert_eq!(s.span_id, [0xa1, 0, 0, 0, 0, 0, 0, 3]);
        assert_eq!(
            (s.start_time_unix_nano, s.end_time_unix_nano),
            (1_764_403_200_000_000_000, 1_764_403_200_001_000_000)
        );
        assert_eq!(s.name, "tokenize");
    }

    #[test]
    fn protobufs_own_json_mapping_is_normalised() {
        // snake_case names, ids in base64 ("AAAAAAAAAAEaKzxNXm9wgQ==" is 16 bytes ending 1a2b3c4d5e6f7081 with a 1
        // before), enums by name, a double as a string.
        let s = one_span(
            r#"{"resource_spans":[{"scope_spans":[{"spans":[{"trace_id":"AAAAAAAAAAEaKzxNXm9wgQ==",
            "span_id":"oQAAAAAAAAM=","parent_span_id":"","name":"x","kind":"SPAN_KIND_SERVER",
            "start_time_unix_nano":"5","end_time_unix_nano":"7",
            "attributes":[{"key":"p","value":{"double_value":"0.5"}}],
            "status":{"code":"STATUS_CODE_ERROR"}}]}]}]}"#,
        );
        assert_eq!(
            s.trace_id,
            [0, 0, 0, 0, 0, 0, 0, 1, 0x1a, 0x2b, 0x3c, 0x4d, 0x5e, 0x6f, 0x70, 0x81]
        );
        assert_eq!(s.span_id, [0xa1, 0, 0, 0, 0, 0, 0, 3]);
        assert!(s.parent_span_id.is_empty());
        assert_eq!(s.kind, SpanKind::Server as i32);
        assert_eq!((s.start_time_unix_nano, s.end_time_unix_nano), (5, 7));
        assert_eq!(s.status.map(|st| st.code), Some(2));
        let v = s.attributes[0].value.as_ref().and_then(|v| v.value.clone());
        assert_eq!(
            v,
            Some(opentelemetry_proto::tonic::common::v1::any_value::Value::DoubleValue(
                0.5
            ))
        );
    }

    #[test]
    fn an_id_that_is_no_encoding_keeps_its_identity() {
        // "req-1!" is neither hex nor base64: its bytes, as hex.
        let s = one_span(r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"req-1!","name":"x"}]}]}]}"#);
        assert_eq!(s.trace_id, b"req-1!");
    }

    #[test]
    fn an_array_of_exports_and_a_refusal_with_its_place() {
        let exports = decode(br#"[{"resourceSpans":[]},{"resourceSpans":[]}]"#).unwrap();
        assert_eq!(exports.len(), 2);
        let e = decode(b"{\"resourceSpans\":\n[{\"scopeSpans\": 3}]}").unwrap_err();
        assert_eq!(e.line(), 2, "{e}");
    }

    #[test]
    fn what_a_field_cannot_be_read_as_is_left_out_and_the_span_kept() {
        // Empty lists written as {}, times as a float, null and negative, values of the wrong type, bad base64, a
        // status code as a string: the old hand-written reader kept such spans, reading those fields as absent.
        let s = one_span(
            r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0a","name":"x",
            "startTimeUnixNano":1.7644032e18,"endTimeUnixNano":null,
            "events":[{"timeUnixNano":-5,"name":"e"}],
            "attributes":[{"key":"a","value":{"arrayValue":{}}},{"key":"k","value":{"kvlistValue":{}}},
              {"key":"s","value":{"stringValue":5}},{"key":"b","value":{"boolValue":"yes"}},
              {"key":"i","value":{"intValue":1.5}},{"key":"y","value":{"bytesValue":"!!"}},
              {"key":"n","value":{"intValue":"7"}}],
            "status":{"code":"2"}}]}]}]}"#,
        );
        assert_eq!((s.start_time_unix_nano, s.end_time_unix_nano), (0, 0));
        assert_eq!(s.events[0].time_unix_nano, 0);
        assert_eq!(s.status.map(|st| st.code), Some(2));
        use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
        let values: Vec<Option<V>> = s
            .attributes
            .iter()
            .map(|kv| kv.value.as_ref().and_then(|v| v.value.clone()))
            .collect();
        assert!(matches!(&values[0], Some(V::ArrayValue(a)) if a.values.is_empty()));
        assert!(matches!(&values[1], Some(V::KvlistValue(l)) if l.values.is_empty()));
        assert_eq!(values[2..6], [None, None, None, None]);
        assert_eq!(values[6], Some(V::IntValue(7)));
    }

    #[test]
    fn snake_case_that_still_cannot_be_read_is_refused_not_read_as_nothing() {
        // Strictly this reads as an empty export (every name unknown); normalised it fails: refused.
        let e = decode(br#"{"resource_spans":[{"scope_spans":[{"spans":3}]}]}"#).unwrap_err();
        assert!(e.to_string().contains("sequence"), "{e}");
    }

    #[test]
    fn names_become_lower_camel_case() {
        assert_eq!(camel_case("start_time_unix_nano"), "startTimeUnixNano");
        assert_eq!(camel_case("startTimeUnixNano"), "startTimeUnixNano");
        assert_eq!(camel_case("key"), "key");
    }
}
