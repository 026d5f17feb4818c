//! The one place the trace format's column names and types live (format version 1, `docs/TRACE_FORMAT.md`).
//!
//! [`scalar_fields!`] lists every scalar field once; the Parquet reader and writer, the JSONL writer and the Arrow
//! schema are generated from it, and the compiler checks each name against [`RawRecord`](crate::ingest::raw::RawRecord).
//! The two list fields, `eos_token_ids` and `candidates`, are handled beside it.

use std::sync::Arc;

use ::arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};

/// The format version this build reads and writes.
pub const FORMAT_VERSION: i64 = 1;
/// The value of the meta record's `format` field.
pub const FORMAT_NAME: &str = "tokenscope";

/// The column of the record kind.
pub const KIND: &str = "kind";
/// The meta field listing the token ids that end generation.
pub const EOS_TOKEN_IDS: &str = "eos_token_ids";
/// The token field holding the top-k alternatives.
pub const CANDIDATES: &str = "candidates";
/// The fields of one candidate, in order: token_id (Int64), text (Utf8), logprob (Float64), special (Boolean).
pub const CANDIDATE_FIELDS: [&str; 4] = ["token_id", "text", "logprob", "special"];

/// The scalar type of a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    /// UTF-8 string (Parquet: Utf8; readers also take LargeUtf8, Utf8View, dictionaries).
    Str,
    /// 64-bit integer (readers take any integer width; `_ns` fields also Timestamp).
    Int,
    /// 64-bit float (readers take integers and Float32 too).
    Float,
    /// Boolean.
    Bool,
}

impl Scalar {
    /// The Arrow type a writer uses.
    pub fn data_type(self) -> DataType {
        match self {
            Scalar::Str => DataType::Utf8,
            Scalar::Int => DataType::Int64,
            Scalar::Float => DataType::Float64,
            Scalar::Bool => DataType::Boolean,
        }
    }
}

/// Calls `$m! { (name, Scalar), ... }` with every scalar field of the format, in column order.
#[macro_export]
#[doc(hidden)]
macro_rules! scalar_fields {
    ($m:ident) => {
        $m! {
            (kind, Str),
            // meta
            (format, Str), (version, Int), (engine, Str), (engine_version, Str), (created_ns, Int), (clock, Str),
            (note, Str),
            // request
            (request_id, Str), (source, Str), (trace_id, Str), (model, Str), (app_id, Str), (user_id, Str),
            (arrival_ns, Int), (scheduled_ns, Int), (first_token_ns, Int), (finished_ns, Int),
            (input_tokens, Int), (cached_tokens, Int), (context_tokens, Int), (output_tokens, Int),
            (finish_reason, Str), (status, Str), (error_code, Str), (temperature, Float), (top_p, Float),
            (top_k, Int), (max_tokens, Int), (seed, Int), (num_preemptions, Int), (prompt_hash, Str),
            (server_queue_ns, Int), (server_ttft_ns, Int), (server_decode_ns, Int), (sent_ns, Int),
            (server_request_id, Str), (spec_drafted_tokens, Int), (spec_accepted_tokens, Int), (decode_source, Str),
            // iteration
            (iteration, Int), (start_ns, Int), (end_ns, Int), (schedule_ns, Int), (forward_ns, Int),
            (sample_ns, Int), (num_reqs, Int), (num_prefill_reqs, Int), (num_decode_reqs, Int),
            (num_prefill_tokens, Int), (num_decode_tokens, Int), (num_waiting, Int), (kv_usage, Float),
            (num_preempted, Int),
            // stage
            (stage, Str), (tokens, Int), (bytes, Int), (retries, Int),
            // token
            (index, Int), (emitted_ns, Int), (token_id, Int), (text, Str), (special, Bool), (logprob, Float),
            (rank, Int), (received_ns, Int), (spec, Str),
            // sample
            (time_ns, Int), (interval_ns, Int), (num_running, Int), (num_swapped, Int), (kv_tokens, Int),
            (prompt_throughput, Float), (generation_throughput, Float), (prefix_hit_rate, Float),
            (spec_accept_length, Float), (spec_accept_rate, Float), (kv_transfers, Int), (kv_transfers_failed, Int),
            (kv_transfer_ms, Float), (kv_transfer_p90_ms, Float), (kv_transfer_bytes, Int), (num_bootstrapping, Int),
            (num_prealloc, Int), (num_transferring, Int), (num_inflight, Int), (num_retracted, Int),
            // reference
            (top_logprob, Float)
        }
    };
}

macro_rules! name_list {
    ($(($name:ident, $ty:ident)),* $(,)?) => {
        /// Every scalar field with its type, in column order.
        pub const SCALAR_FIELDS: &[(&str, Scalar)] = &[$((stringify!($name), Scalar::$ty)),*];
    };
}
scalar_fields!(name_list);

pub use crate::ingest::raw::KINDS;

/// The scalar fields a record of each kind may have (`kind` included). Validation reads no others, so readers may
/// skip the rest; a test in `validate` keeps the two in step.
pub fn fields_of_kind(kind: &str) -> &'static [&'static str] {
    match kind {
        "meta" => &[
            "kind",
            "format",
            "version",
            "engine",
            "engine_version",
            "model",
            "created_ns",
            "clock",
            "note",
        ],
        "request" => &[
            "kind",
            "request_id",
            "source",
            "trace_id",
            "model",
            "app_id",
            "user_id",
            "arrival_ns",
            "scheduled_ns",
            "first_token_ns",
            "finished_ns",
            "input_tokens",
            "cached_tokens",
            "context_tokens",
            "output_tokens",
            "finish_reason",
            "status",
            "error_code",
            "temperature",
            "top_p",
            "top_k",
            "max_tokens",
            "seed",
            "num_preemptions",
            "prompt_hash",
            "server_queue_ns",
            "server_ttft_ns",
            "server_decode_ns",
            "sent_ns",
            "server_request_id",
            "spec_drafted_tokens",
            "spec_accepted_tokens",
            "decode_source",
        ],
        "iteration" => &[
            "kind",
            "source",
            "iteration",
            "start_ns",
            "end_ns",
            "schedule_ns",
            "forward_ns",
            "sample_ns",
            "num_reqs",
            "num_prefill_reqs",
            "num_decode_reqs",
            "num_prefill_tokens",
            "num_decode_tokens",
            "num_waiting",
            "kv_usage",
            "num_preempted",
            "spec_drafted_tokens",
            "spec_accepted_tokens",
        ],
        "stage" => &[
            "kind",
            "request_id",
            "stage",
            "start_ns",
            "end_ns",
            "iteration",
            "tokens",
            "bytes",
            "retries",
        ],
        "token" => &[
            "kind",
            "request_id",
            "index",
            "emitted_ns",
            "iteration",
            "token_id",
            "text",
            "special",
            "logprob",
            "rank",
            "received_ns",
            "spec",
            "spec_drafted_tokens",
        ],
        "sample" => &[
            "kind",
            "source",
            "time_ns",
            "interval_ns",
            "num_running",
            "num_waiting",
            "num_swapped",
            "kv_usage",
            "kv_tokens",
            "prompt_throughput",
            "generation_throughput",
            "prefix_hit_rate",
            "spec_accept_length",
            "spec_accept_rate",
            "num_prefill_reqs",
            "num_prefill_tokens",
            "cached_tokens",
            "spec_drafted_tokens",
            "spec_accepted_tokens",
            "kv_transfers",
            "kv_transfers_failed",
            "kv_transfer_ms",
            "kv_transfer_p90_ms",
            "kv_transfer_bytes",
            "num_bootstrapping",
            "num_prealloc",
            "num_transferring",
            "num_inflight",
            "num_retracted",
        ],
        "reference" => &[
            "kind",
            "request_id",
            "index",
            "logprob",
            "rank",
            "top_k",
            "token_id",
            "text",
            "special",
            "top_logprob",
        ],
        _ => &[],
    }
}

/// Fields a record of each kind must have; a Parquet file with such records but without the column is unreadable.
pub fn required_fields(kind: &str) -> &'static [&'static str] {
    match kind {
        "request" => &["request_id", "arrival_ns"],
        "iteration" => &["iteration", "start_ns", "end_ns"],
        "stage" => &["request_id", "stage", "start_ns", "end_ns"],
        "token" => &["request_id", "index", "emitted_ns"],
        "sample" => &["time_ns"],
        "reference" => &["request_id", "index"],
        _ => &[],
    }
}

/// The Arrow type of one candidate.
pub fn candidate_struct() -> DataType {
    DataType::Struct(Fields::from(vec![
        Field::new(CANDIDATE_FIELDS[0], DataType::Int64, true),
        Field::new(CANDIDATE_FIELDS[1], DataType::Utf8, true),
        Field::new(CANDIDATE_FIELDS[2], DataType::Float64, true),
        Field::new(CANDIDATE_FIELDS[3], DataType::Boolean, true),
    ]))
}

/// The Arrow field of a list column's items.
pub fn list_item(data_type: DataType) -> Arc<Field> {
    Arc::new(Field::new("item", data_type, true))
}

/// The schema a writer uses: every scalar field, then `eos_token_ids` and `candidates`; all nullable.
pub fn arrow_schema() -> SchemaRef {
    let mut fields: Vec<Field> = SCALAR_FIELDS
        .iter()
        .map(|&(name, ty)| Field::new(name, ty.data_type(), name != KIND))
        .collect();
    fields.push(Field::new(
        EOS_TOKEN_IDS,
        DataType::List(list_item(DataType::Int64)),
        true,
    ));
    fields.push(Field::new(
        CANDIDATES,
        DataType::List(list_item(candidate_struct())),
        true,
    ));
    Arc::new(Schema::new(fields))
}

/// True for fields holding times or durations in nanoseconds.
pub fn is_time_field(name: &str) -> bool {
    name.ends_with("_ns")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_cover_the_spec() {
        let mut names: Vec<&str> = SCALAR_FIELDS.iter().map(|f| f.0).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "a field is listed twice");
        // 1 kind + 7 meta + 32 request + 14 iteration + 4 stage + 9 token + 20 sample + 1 reference scalar fields
        // (the iteration's, the token's and the sample's `spec_drafted_tokens`/`spec_accepted_tokens` are the
        // request's columns; a reference's others are the token's and the request's `top_k`).
        assert_eq!(SCALAR_FIELDS.len(), 88);
        assert_eq!(arrow_schema().fields().len(), 90);
        for kind in ["request", "iteration", "stage", "token", "sample", "reference"] {
            for f in required_fields(kind) {
                assert!(names.contains(f), "{f}");
            }
        }
    }
}
