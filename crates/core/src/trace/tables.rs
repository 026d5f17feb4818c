//! The columnar tables of a trace: one struct of vectors per record kind, one row struct to push and read rows.
//!
//! A row struct has `Option` fields; its table stores them as it can afford. The requests' and steps' optional
//! numbers are [`Nullable`] columns (the value alone, a sentinel where absent: read them with `at`, `get` and
//! `iter`), since a trace too large to load keeps those tables whole while its tokens stream; the stages, samples
//! and references keep `Vec<Option<_>>`. The two big tables (tokens, candidates: millions of rows) use sentinels in
//! plain columns, [`NULL_I64`], [`NULL_U32`], [`NULL_F64`] (NaN) and [`Flag::Null`]: read them through the
//! accessors that turn sentinels back into `Option`.

use super::column::{Column, Nullable};
use super::strings::NO_STR;

pub use super::column::{NULL_F64, NULL_I64, NULL_U8, NULL_U32, opt_f64, opt_i64, opt_u8, opt_u32};

const _: () = assert!(NULL_U32 == NO_STR);

/// A nullable boolean in one byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Flag {
    /// The field was absent.
    #[default]
    Null,
    /// `false`.
    False,
    /// `true`.
    True,
}

impl Flag {
    /// The flag as an `Option<bool>`.
    pub fn get(self) -> Option<bool> {
        match self {
            Flag::Null => None,
            Flag::False => Some(false),
            Flag::True => Some(true),
        }
    }

    /// The flag of an `Option<bool>`.
    pub fn from_opt(v: Option<bool>) -> Self {
        match v {
            None => Flag::Null,
            Some(false) => Flag::False,
            Some(true) => Flag::True,
        }
    }
}

/// The storage of a column: `Vec<$ty>`, or the type written after `as` (a [`Nullable`] column of an option).
macro_rules! column_of {
    ($ty:ty) => { Vec<$ty> };
    ($ty:ty, $col:ty) => { $col };
}

/// Declares a row struct and its columnar table (one column per field: a `Vec`, or the [`Column`] written after the
/// field's type with `as`) with `push`, `row`, `len` and `permute`.
macro_rules! table {
    (
        $(#[$tm:meta])* $table:ident,
        $(#[$rm:meta])* $row:ident {
            $( $(#[$fm:meta])* $field:ident : $ty:ty $(as $col:ty)? ),+ $(,)?
        }
    ) => {
        $(#[$rm])*
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub struct $row {
            $( $(#[$fm])* pub $field: $ty, )+
        }

        $(#[$tm])*
        #[derive(Debug, Clone, Default)]
        pub struct $table {
            $( $(#[$fm])* pub $field: column_of!($ty $(, $col)?), )+
        }

        impl $table {
            /// Number of rows.
            pub fn len(&self) -> usize {
                [$(Column::<$ty>::rows(&self.$field)),+][0]
            }

            /// True when the table has no rows.
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// Appends a row.
            pub fn push(&mut self, row: $row) {
                $( Column::<$ty>::put(&mut self.$field, row.$field); )+
            }

            /// Appends every row of `other`, column by column.
            pub fn append(&mut self, other: &Self) {
                $( Column::<$ty>::append_column(&mut self.$field, &other.$field); )+
            }

            /// Makes room for `additional` more rows in every column it can; false when some column could not
            /// grow (the count was absurd, or memory short): the table then grows as rows come.
            pub fn try_reserve(&mut self, additional: usize) -> bool {
                true $( && Column::<$ty>::reserve_rows(&mut self.$field, additional) )+
            }

            /// The row at `i`. Panics when `i` is out of range, like slice indexing: callers hold valid row ids.
            pub fn row(&self, i: usize) -> $row {
                $row { $( $field: Column::<$ty>::value(&self.$field, i), )+ }
            }

            /// Reorders rows so that new row `k` is old row `order[k]`; rows not in `order` are dropped.
            pub fn permute(&mut self, order: &[u32]) {
                $( self.$field = Column::<$ty>::permuted(&self.$field, order); )+
            }

            /// Keeps the rows `keep` says, in place.
            pub fn retain_rows(&mut self, keep: &[bool]) {
                $( Column::<$ty>::retain_rows(&mut self.$field, keep); )+
            }

            /// Bytes held by the columns.
            pub fn heap_bytes(&self) -> usize {
                0 $( + Column::<$ty>::bytes(&self.$field) )+
            }
        }
    };
}

table! {
    /// One row per request, sorted by arrival time (then id).
    Requests,
    /// A request, as in the format's `kind = "request"`. String fields are ids in `Trace::labels`.
    Request {
        /// `request_id`, unique within the trace.
        id: u32,
        /// Engine instance; `"engine"` when the record had none.
        source: u32,
        /// W3C trace id, or [`NO_STR`].
        trace_id: u32,
        /// Attribution label, or [`NO_STR`].
        model: u32,
        /// Attribution label, or [`NO_STR`].
        app_id: u32,
        /// Attribution label, or [`NO_STR`].
        user_id: u32,
        /// When the engine received the request (ns since the Unix epoch).
        arrival_ns: i64,
        /// End of queueing.
        scheduled_ns: Option<i64> as Nullable<i64>,
        /// When the first output token was produced.
        first_token_ns: Option<i64> as Nullable<i64>,
        /// When the request finished.
        finished_ns: Option<i64> as Nullable<i64>,
        /// Prompt tokens (engine usage).
        input_tokens: Option<u32> as Nullable<u32>,
        /// Prompt tokens served from the prefix cache.
        cached_tokens: Option<u32> as Nullable<u32>,
        /// Prompt tokens that are conversation history.
        context_tokens: Option<u32> as Nullable<u32>,
        /// Generated tokens (engine usage).
        output_tokens: Option<u32> as Nullable<u32>,
        /// `stop`, `length`, `abort`, `error`, or [`NO_STR`].
        finish_reason: u32,
        /// `ok`, `timeout`, `rate_limited`, `error`, or [`NO_STR`].
        status: u32,
        /// Engine error code, or [`NO_STR`].
        error_code: u32,
        /// Sampling temperature.
        temperature: Option<f64> as Nullable<f64>,
        /// Nucleus sampling threshold.
        top_p: Option<f64> as Nullable<f64>,
        /// Top-k sampling.
        top_k: Option<i64> as Nullable<i64>,
        /// Output limit.
        max_tokens: Option<i64> as Nullable<i64>,
        /// Sampling seed.
        seed: Option<i64> as Nullable<i64>,
        /// Times the request was preempted.
        num_preemptions: Option<u32> as Nullable<u32>,
        /// A hash of the prompt, or [`NO_STR`].
        prompt_hash: u32,
        /// The server's own queue time, when it reports it (vLLM's per-request metrics).
        server_queue_ns: Option<i64> as Nullable<i64>,
        /// The server's own time to the first token (vLLM's metrics; llama.cpp's prompt processing time).
        server_ttft_ns: Option<i64> as Nullable<i64>,
        /// The server's own time generating after the first token (vLLM's generation time; llama.cpp's).
        server_decode_ns: Option<i64> as Nullable<i64>,
        /// When the client sent the request, in a joined trace (its `arrival_ns` is then the server's arrival).
        sent_ns: Option<i64> as Nullable<i64>,
        /// The id the server answered with (the response's `id`), in a recording; or [`NO_STR`].
        server_request_id: u32,
        /// Speculative decoding: draft tokens proposed for the request over its verify steps.
        spec_drafted_tokens: Option<u32> as Nullable<u32>,
        /// Speculative decoding: of those, the ones verification accepted.
        spec_accepted_tokens: Option<u32> as Nullable<u32>,
        /// Disaggregated serving: the instance that decoded the request when it is not `source` (which then is the
        /// instance that queued and prefilled it); [`NO_STR`] when the request decoded where it prefilled. Its
        /// tokens and decode stages name steps of this instance; its `kv_transfer` stages move its KV cache here.
        decode_source: u32,
    }
}

table! {
    /// One row per engine step, sorted by source then start time.
    Iterations,
    /// An engine step, as in the format's `kind = "iteration"`.
    Iteration {
        /// Engine instance (id in `Trace::labels`).
        source: u32,
        /// Step counter, unique per source.
        iteration: i64,
        /// Start of the step.
        start_ns: i64,
        /// End of the step.
        end_ns: i64,
        /// Time spent scheduling inside the step.
        schedule_ns: Option<i64> as Nullable<i64>,
        /// Time spent in the model forward pass.
        forward_ns: Option<i64> as Nullable<i64>,
        /// Time spent sampling and detokenizing.
        sample_ns: Option<i64> as Nullable<i64>,
        /// Requests in the batch.
        num_reqs: Option<u32> as Nullable<u32>,
        /// Requests prefilling in the batch.
        num_prefill_reqs: Option<u32> as Nullable<u32>,
        /// Requests decoding in the batch.
        num_decode_reqs: Option<u32> as Nullable<u32>,
        /// Prompt tokens computed in the step.
        num_prefill_tokens: Option<u32> as Nullable<u32>,
        /// Output tokens computed in the step.
        num_decode_tokens: Option<u32> as Nullable<u32>,
        /// Requests waiting at the step's start.
        num_waiting: Option<u32> as Nullable<u32>,
        /// KV-cache use, 0..1.
        kv_usage: Option<f64> as Nullable<f64>,
        /// Requests preempted in this step.
        num_preempted: Option<u32> as Nullable<u32>,
        /// Speculative decoding: draft tokens the step verified, over its requests.
        spec_drafted_tokens: Option<u32> as Nullable<u32>,
        /// Speculative decoding: of those, the ones it accepted.
        spec_accepted_tokens: Option<u32> as Nullable<u32>,
    }
}

table! {
    /// One row per reading of an engine instance's counters, sorted by source then time.
    Samples,
    /// An engine's counters at a time, as in the format's `kind = "sample"`: what a server's periodic log line (or a
    /// metrics scrape) says. Rates and averages cover `interval_ns` up to `time_ns`.
    Sample {
        /// Engine instance (id in `Trace::labels`).
        source: u32,
        /// When the counters were read.
        time_ns: i64,
        /// The window rates and averages cover, ending at `time_ns`.
        interval_ns: Option<i64>,
        /// Requests running.
        num_running: Option<u32>,
        /// Requests waiting in the queue.
        num_waiting: Option<u32>,
        /// Requests swapped out to CPU memory (vLLM's V0 engine).
        num_swapped: Option<u32>,
        /// KV-cache use, 0..1.
        kv_usage: Option<f64>,
        /// KV-cache tokens in use.
        kv_tokens: Option<u32>,
        /// Prompt tokens computed per second over the interval.
        prompt_throughput: Option<f64>,
        /// Output tokens generated per second over the interval.
        generation_throughput: Option<f64>,
        /// Share of prompt tokens served from the prefix cache, 0..1.
        prefix_hit_rate: Option<f64>,
        /// Speculative decoding: tokens accepted per verification step (the bonus token included).
        spec_accept_length: Option<f64>,
        /// Speculative decoding: share of drafted tokens accepted, 0..1.
        spec_accept_rate: Option<f64>,
        /// A prefill batch's new sequences (SGLang's `#new-seq`).
        num_prefill_reqs: Option<u32>,
        /// A prefill batch's prompt tokens computed (SGLang's `#new-token`).
        num_prefill_tokens: Option<u32>,
        /// A prefill batch's prompt tokens served from the prefix cache (SGLang's `#cached-token`).
        cached_tokens: Option<u32>,
        /// Speculative decoding: draft tokens proposed over the interval (vLLM's `Drafted: N tokens`).
        spec_drafted_tokens: Option<u32>,
        /// Speculative decoding: of those, the ones accepted (vLLM's `Accepted: N tokens`).
        spec_accepted_tokens: Option<u32>,
        /// KV transfers that succeeded over the interval (vLLM's `KV Transfer metrics`: `Num successful transfers`).
        kv_transfers: Option<u32>,
        /// KV transfers that failed over the interval (`Num failed transfers`).
        kv_transfers_failed: Option<u32>,
        /// Mean time of a KV transfer over the interval, ms (`Avg xfer time (ms)`).
        kv_transfer_ms: Option<f64>,
        /// 90th percentile of a KV transfer's time over the interval, ms (`P90 xfer time (ms)`).
        kv_transfer_p90_ms: Option<f64>,
        /// Bytes moved by the interval's KV transfers (`Avg MB per transfer` times their number, MB of 2^20 bytes).
        kv_transfer_bytes: Option<u64>,
        /// Disaggregated prefill instance: requests in their bootstrap handshake (SGLang's `#bootstrap-req`).
        num_bootstrapping: Option<u32>,
        /// Disaggregated decode instance: requests waiting for their KV cache's room (SGLang's `#prealloc-req`).
        num_prealloc: Option<u32>,
        /// Disaggregated decode instance: requests receiving their KV cache (SGLang's `#transfer-req`).
        num_transferring: Option<u32>,
        /// Disaggregated prefill instance: requests whose KV cache is being sent (SGLang's `#inflight-req`).
        num_inflight: Option<u32>,
        /// Requests retracted (their KV cache given back) to make room (SGLang's `#retracted-req`).
        num_retracted: Option<u32>,
    }
}

table! {
    /// One row per re-scored token (`tokenscope rescore`), sorted by token row.
    References,
    /// What a reference (the same model asked again for its distribution at the token's position, given the prompt
    /// and the answer before it) says of a generated token, as in the format's `kind = "reference"`.
    Reference {
        /// The token's request: label id of its `request_id` in a builder, its row in a trace.
        request: u32,
        /// The token's position in the output.
        index: u32,
        /// Row of the token in `Trace::tokens` ([`NULL_U32`] in a builder).
        token: u32,
        /// The emitted token's logprob under the reference; `None` when it is not among the reference's listed ones.
        logprob: Option<f64>,
        /// Its 1-based rank there; `None` when not listed (beyond `listed`).
        rank: Option<u32>,
        /// How many of the reference's most probable tokens were listed.
        listed: Option<u32>,
        /// The reference's most probable token.
        top_token_id: Option<u32>,
        /// Its text (id in `Trace::texts`, [`NO_STR`] when not given).
        top_text: u32,
        /// Whether it is a special token.
        top_special: Option<bool>,
        /// Its logprob.
        top_logprob: Option<f64>,
    }
}

impl Sample {
    /// A reading of `source` at `time_ns` that says nothing yet: every counter absent.
    pub fn at(source: u32, time_ns: i64) -> Self {
        Sample {
            source,
            time_ns,
            interval_ns: None,
            num_running: None,
            num_waiting: None,
            num_swapped: None,
            kv_usage: None,
            kv_tokens: None,
            prompt_throughput: None,
            generation_throughput: None,
            prefix_hit_rate: None,
            spec_accept_length: None,
            spec_accept_rate: None,
            num_prefill_reqs: None,
            num_prefill_tokens: None,
            cached_tokens: None,
            spec_drafted_tokens: None,
            spec_accepted_tokens: None,
            kv_transfers: None,
            kv_transfers_failed: None,
            kv_transfer_ms: None,
            kv_transfer_p90_ms: None,
            kv_transfer_bytes: None,
            num_bootstrapping: None,
            num_prealloc: None,
            num_transferring: None,
            num_inflight: None,
            num_retracted: None,
        }
    }
}

impl Request {
    /// Rewrites every label id of the request (id, source, attribution, reasons, hashes) through `f`: for moving a
    /// request into another trace's label table.
    pub fn map_labels(&mut self, mut f: impl FnMut(u32) -> u32) {
        for field in [
            &mut self.id,
            &mut self.source,
            &mut self.trace_id,
            &mut self.model,
            &mut self.app_id,
            &mut self.user_id,
            &mut self.finish_reason,
            &mut self.status,
            &mut self.error_code,
            &mut self.prompt_hash,
            &mut self.server_request_id,
            &mut self.decode_source,
        ] {
            *field = f(*field);
        }
    }
}

/// What a stage span is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StageKind {
    /// Waiting to be scheduled.
    Queue,
    /// Computing the prompt (a chunk of it per step with chunked prefill).
    Prefill,
    /// Generating output tokens.
    Decode,
    /// Evicted from the batch, waiting to resume.
    Preempted,
    /// Moving KV cache between instances (disaggregated serving).
    KvTransfer,
    /// Tokenizing the prompt.
    Tokenize,
    /// Detokenizing output.
    Detokenize,
    /// Anything else.
    Other,
    /// Waiting for the first token, queue and prefill not split: what a client-side trace (a recording, a
    /// benchmark export) knows of a request between its send and its first token.
    Waiting,
}

impl StageKind {
    /// Every stage kind, in the order of the format's table.
    pub const ALL: [StageKind; 9] = [
        StageKind::Queue,
        StageKind::Prefill,
        StageKind::Decode,
        StageKind::Preempted,
        StageKind::KvTransfer,
        StageKind::Tokenize,
        StageKind::Detokenize,
        StageKind::Other,
        StageKind::Waiting,
    ];

    /// The name written in the format's `stage` field.
    pub fn name(self) -> &'static str {
        match self {
            StageKind::Queue => "queue",
            StageKind::Prefill => "prefill",
            StageKind::Decode => "decode",
            StageKind::Preempted => "preempted",
            StageKind::KvTransfer => "kv_transfer",
            StageKind::Tokenize => "tokenize",
            StageKind::Detokenize => "detokenize",
            StageKind::Other => "other",
            StageKind::Waiting => "waiting",
        }
    }

    /// The kind named `s` in the format.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// What a token was in a speculative verify step (the format's `spec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum SpecRole {
    /// The source does not say (absent).
    #[default]
    Unknown,
    /// A token of a step that verified no draft.
    Plain,
    /// A draft token its verify step accepted.
    Draft,
    /// The target model's own token ending a verify step: after the accepted drafts, in place of the first one
    /// rejected or after the last.
    Bonus,
}

impl SpecRole {
    /// The name written in the format's `spec` field; `None` for [`SpecRole::Unknown`].
    pub fn name(self) -> Option<&'static str> {
        match self {
            SpecRole::Unknown => None,
            SpecRole::Plain => Some("plain"),
            SpecRole::Draft => Some("draft"),
            SpecRole::Bonus => Some("bonus"),
        }
    }

    /// The role named `s` in the format.
    pub fn parse(s: &str) -> Option<Self> {
        [SpecRole::Plain, SpecRole::Draft, SpecRole::Bonus]
            .into_iter()
            .find(|r| r.name() == Some(s))
    }
}

table! {
    /// Explicit stage records, sorted by request then start time. Derived stages are not stored: see
    /// `Trace::stages_of`.
    Stages,
    /// A span of one request, as in the format's `kind = "stage"`.
    Stage {
        /// Row of the request in `Trace::requests`.
        request: u32,
        /// What the span is.
        kind: StageKind,
        /// Start of the span.
        start_ns: i64,
        /// End of the span.
        end_ns: i64,
        /// The engine step number the span belongs to.
        iteration: Option<i64>,
        /// Row of that step in `Trace::iterations`, when it is in the trace.
        iter_row: Option<u32>,
        /// Tokens computed for the request in the span (a KV transfer: the tokens whose cache it moved).
        tokens: Option<u32>,
        /// A KV transfer's bytes, where the engine says.
        bytes: Option<u64>,
        /// A KV transfer's retries, where the engine says.
        retries: Option<u32>,
    }
}

table! {
    /// One row per generated token, sorted by request then `index`. Sentinel columns: see the module doc.
    Tokens,
    /// A generated token, as in the format's `kind = "token"`.
    Token {
        /// Row of the request in `Trace::requests`.
        request: u32,
        /// 0-based position in the output.
        index: u32,
        /// When the engine produced it.
        emitted_ns: i64,
        /// The step that produced it, or [`NULL_I64`].
        iteration: i64,
        /// Row of that step in `Trace::iterations`, or [`NULL_U32`].
        iter_row: u32,
        /// Vocabulary id, or [`NULL_U32`].
        token_id: u32,
        /// Decoded text (id in `Trace::texts`), or [`NO_STR`].
        text: u32,
        /// Marked special by the producer.
        special: Flag,
        /// Natural-log probability of the chosen token, or NaN.
        logprob: f64,
        /// 1-based rank among all candidates as written, or [`NULL_U32`].
        rank: u32,
        /// When the client received the token's chunk, in a joined trace (`emitted_ns` is then the server's time),
        /// or [`NULL_I64`].
        received_ns: i64,
        /// Speculative decoding: what the token was in its verify step.
        spec: SpecRole,
        /// Speculative decoding, on the first token a verify step emitted for the request: the draft tokens the
        /// step proposed for it; [`NULL_U8`] on the others and where the source does not say.
        spec_drafted: u8,
    }
}

table! {
    /// Top-k alternatives of every token, flattened; `Trace::candidates_of` gives a token's slice.
    Candidates,
    /// One alternative of a token.
    Candidate {
        /// Vocabulary id, or [`NULL_U32`].
        token_id: u32,
        /// Decoded text (id in `Trace::texts`), or [`NO_STR`].
        text: u32,
        /// Natural-log probability.
        logprob: f64,
        /// Marked special by the producer.
        special: Flag,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_names_round_trip() {
        for k in StageKind::ALL {
            assert_eq!(StageKind::parse(k.name()), Some(k));
        }
        assert_eq!(StageKind::parse("prefil"), None);
    }

    #[test]
    fn permute_reorders_every_column() {
        let mut c = Candidates::default();
        for i in 0..3u32 {
            c.push(Candidate {
                token_id: i,
                text: i + 10,
                logprob: -f64::from(i),
                special: Flag::Null,
            });
        }
        c.permute(&[2, 0]);
        assert_eq!(c.len(), 2);
        assert_eq!(c.token_id, vec![2, 0]);
        assert_eq!(c.text, vec![12, 10]);
        assert_eq!(c.logprob, vec![-2.0, -0.0]);
    }

    #[test]
    fn sentinels_read_back_as_none() {
        assert_eq!(opt_i64(NULL_I64), None);
        assert_eq!(opt_i64(-3), Some(-3));
        assert_eq!(opt_u32(NULL_U32), None);
        assert_eq!(opt_f64(NULL_F64), None);
        assert_eq!(opt_f64(-0.5), Some(-0.5));
        assert_eq!(Flag::from_opt(Some(true)).get(), Some(true));
        assert_eq!(Flag::default().get(), None);
    }
}
