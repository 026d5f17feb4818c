//! What a request's figures need of it, without the trace it came from: its own fields and three facts of its
//! token records (how many, token 0's time, the last one's). A trace streamed row group by row group
//! (`load::stream`) keeps these per request and never a row per token; the figures are those a loaded trace gives
//! ([`super::metrics::request_metrics`]).

use super::metrics::RequestMetrics;
use super::summary::RequestCounts;

/// A request's fields and token facts. Labels are indices into the streamed trace's label list.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RequestFacts {
    /// `arrival_ns`.
    pub arrival_ns: i64,
    /// `scheduled_ns`.
    pub scheduled_ns: Option<i64>,
    /// `first_token_ns`.
    pub first_token_ns: Option<i64>,
    /// `finished_ns`.
    pub finished_ns: Option<i64>,
    /// `input_tokens`.
    pub input_tokens: Option<u32>,
    /// `cached_tokens`.
    pub cached_tokens: Option<u32>,
    /// `output_tokens`.
    pub output_tokens: Option<u32>,
    /// `finish_reason`, as a label.
    pub finish_reason: Option<u32>,
    /// `source` (the default source when absent), `model`, `app_id`, `user_id`, as labels.
    pub labels: [Option<u32>; 4],
    /// Its token records.
    pub tokens: u32,
    /// Token 0's `emitted_ns`, when it has a record.
    pub token0_ns: Option<i64>,
    /// The `emitted_ns` of its token record of the highest index.
    pub last_token_ns: Option<i64>,
}

impl RequestFacts {
    /// When it produced its first token: `first_token_ns`, else token 0's time.
    pub fn first_ns(&self) -> Option<i64> {
        self.first_token_ns.or(self.token0_ns)
    }

    /// When it finished: `finished_ns`, else its last token's time.
    pub fn finish_ns(&self) -> Option<i64> {
        self.finished_ns.or(self.last_token_ns)
    }

    /// Its output tokens: `output_tokens`, else its token records.
    pub fn output(&self) -> u32 {
        self.output_tokens.unwrap_or(self.tokens)
    }

    /// Its latency figures, as [`super::metrics::request_metrics`] gives them for the loaded request.
    pub fn metrics(&self) -> RequestMetrics {
        let arrival = self.arrival_ns;
        let ttft_ns = self.first_ns().map(|t| t - arrival);
        let e2e_ns = self.finish_ns().map(|t| t - arrival);
        let output_tokens = self.output();
        let tpot_ns = match (ttft_ns, e2e_ns) {
            (Some(ttft), Some(e2e)) if output_tokens >= 2 => {
                #[expect(clippy::cast_precision_loss, reason = "ns differences far below 2^53")]
                let decode = (e2e - ttft) as f64;
                Some(decode / f64::from(output_tokens - 1))
            }
            _ => None,
        };
        RequestMetrics {
            queue_ns: self.scheduled_ns.map(|s| s - arrival),
            ttft_ns,
            e2e_ns,
            tpot_ns,
            output_tokens,
        }
    }

    /// What it adds to a summary besides its figures; `label` names a label index.
    pub fn counts<'a>(&self, label: impl Fn(u32) -> &'a str) -> RequestCounts<'a> {
        RequestCounts {
            arrival_ns: self.arrival_ns,
            finish_ns: self.finish_ns(),
            input_tokens: self.input_tokens,
            cached_tokens: self.cached_tokens,
            finish_reason: self.finish_reason.map(label),
            token_mismatch: self.tokens > 0 && self.output_tokens.is_some_and(|u| u != self.tokens),
        }
    }
}

/// The figures of a trace's engine steps that `summary` prints in a line: how many, on how many instances, over
/// what time, the tokens they computed and their durations.
#[derive(Debug, Clone, PartialEq)]
pub struct StepFigures {
    /// Steps.
    pub steps: u64,
    /// Instances that ran them.
    pub instances: usize,
    /// First step's start to last step's end, s.
    pub span_s: f64,
    /// Sum of `num_prefill_tokens`; `None` when no step has it.
    pub prompt_tokens: Option<u64>,
    /// Sum of `num_decode_tokens`; `None` when no step has it.
    pub output_tokens: Option<u64>,
    /// Step durations, ms.
    pub duration_ms: super::metrics::Distribution,
}

/// One step's part of [`StepFigures`]: its source, start and end, ns, and its prefill and decode tokens.
pub type StepRow = (u32, i64, i64, Option<u32>, Option<u32>);

impl StepFigures {
    /// The figures of these steps; `None` for none.
    #[expect(clippy::cast_precision_loss, reason = "ns durations far below 2^53")]
    pub fn of(steps: impl Iterator<Item = StepRow>) -> Option<Self> {
        let mut instances = std::collections::BTreeSet::new();
        let (mut first, mut last) = (i64::MAX, i64::MIN);
        let (mut prompt, mut output): (Option<u64>, Option<u64>) = (None, None);
        let mut durations = Vec::new();
        for (source, start, end, prefill, decode) in steps {
            instances.insert(source);
            first = first.min(start);
            last = last.max(end);
            if let Some(p) = prefill {
                prompt = Some(prompt.unwrap_or(0) + u64::from(p));
            }
            if let Some(d) = decode {
                output = Some(output.unwrap_or(0) + u64::from(d));
            }
            durations.push((end - start) as f64 / 1e6);
        }
        (!durations.is_empty()).then(|| StepFigures {
            steps: durations.len() as u64,
            instances: instances.len(),
            span_s: (last - first) as f64 / 1e9,
            prompt_tokens: prompt,
            output_tokens: output,
            duration_ms: super::metrics::Distribution::of(&mut durations),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_by_hand_from_fields_and_token_facts() {
        // Arrived at 1,000; token 0 at 1,300; last token at 2,300; 5 records, usage 6.
        let f = RequestFacts {
            arrival_ns: 1_000,
            scheduled_ns: Some(1_100),
            tokens: 5,
            token0_ns: Some(1_300),
            last_token_ns: Some(2_300),
            output_tokens: Some(6),
            ..RequestFacts::default()
        };
        let m = f.metrics();
        // TTFT 300, E2E 1,300, TPOT (1,300 - 300) / (6 - 1) = 200, queue 100.
        assert_eq!(
            (m.ttft_ns, m.e2e_ns, m.tpot_ns, m.queue_ns),
            (Some(300), Some(1_300), Some(200.0), Some(100))
        );
        assert!(f.counts(|_| "").token_mismatch);
        // Its own fields come first.
        let g = RequestFacts {
            first_token_ns: Some(1_200),
            finished_ns: Some(3_000),
            output_tokens: None,
            ..f
        };
        let m = g.metrics();
        // TTFT 200, E2E 2,000, TPOT (2,000 - 200) / (5 - 1) = 450.
        assert_eq!(
            (m.ttft_ns, m.e2e_ns, m.tpot_ns, m.output_tokens),
            (Some(200), Some(2_000), Some(450.0), 5)
        );
        assert!(!g.counts(|_| "").token_mismatch);
    }
}
