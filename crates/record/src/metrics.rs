//! A server's Prometheus `/metrics` read as a sample of its counters (`tokenscope watch --metrics URL`): requests
//! running and waiting, KV-cache use and throughputs, from the gauges llama.cpp (`--metrics`), vLLM and SGLang
//! export. The text is parsed by openmetrics-parser; a gauge a server does not export stays absent, never zero.

use std::time::Duration;

use openmetrics_parser::prometheus::parse_prometheus;
use openmetrics_parser::{MetricsExposition, PrometheusType, PrometheusValue};

type Exposition = MetricsExposition<PrometheusType, PrometheusValue>;

/// The gauges read for each counter, by server: a server exports one of each list's names (or none).
const RUNNING: [&str; 3] = [
    "llamacpp:requests_processing",
    "vllm:num_requests_running",
    "sglang:num_running_reqs",
];
const WAITING: [&str; 3] = [
    "llamacpp:requests_deferred",
    "vllm:num_requests_waiting",
    "sglang:num_queue_reqs",
];
/// KV-cache use as a fraction (vLLM's `_perc` gauges are fractions too, despite their name).
const KV_USAGE: [&str; 4] = [
    "llamacpp:kv_cache_usage_ratio",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "sglang:token_usage",
];
const GENERATION_THROUGHPUT: [&str; 2] = ["llamacpp:predicted_tokens_seconds", "sglang:gen_throughput"];
const PROMPT_THROUGHPUT: [&str; 1] = ["llamacpp:prompt_tokens_seconds"];

/// What one scrape said.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Reading {
    /// Requests running (summed over a data-parallel server's engines).
    pub running: Option<u32>,
    /// Requests waiting (summed likewise).
    pub waiting: Option<u32>,
    /// KV-cache use, 0..1 (the engines' mean).
    pub kv_usage: Option<f64>,
    /// Prompt tokens per second.
    pub prompt_throughput: Option<f64>,
    /// Output tokens per second.
    pub generation_throughput: Option<f64>,
}

/// The values of the first of `names` the scrape has, one per label set; NaN (llama.cpp before its first
/// generation) left out.
fn values(exposition: &Exposition, names: &[&str]) -> Vec<f64> {
    for name in names {
        let Some(family) = exposition.families.get(*name) else {
            continue;
        };
        return family
            .iter_samples()
            .filter_map(|s| match &s.value {
                PrometheusValue::Gauge(v) | PrometheusValue::Unknown(v) => Some(v.as_f64()),
                _ => None,
            })
            .filter(|v| v.is_finite())
            .collect();
    }
    Vec::new()
}

/// Reads the counters out of Prometheus text.
///
/// # Errors
/// The text is not Prometheus text (an empty page is not).
pub fn reading(text: &str) -> Result<Reading, String> {
    let scrape = parse_prometheus(text).map_err(|e| format!("not Prometheus text: {e:?}"))?;
    let count = |names: &[&str]| {
        let v = values(&scrape, names);
        (!v.is_empty()).then(|| v.iter().map(|x| x.max(0.0).round() as u32).sum())
    };
    let mean = |names: &[&str]| {
        let v = values(&scrape, names);
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let sum = |names: &[&str]| {
        let v = values(&scrape, names);
        (!v.is_empty()).then(|| v.iter().sum::<f64>())
    };
    Ok(Reading {
        running: count(&RUNNING),
        waiting: count(&WAITING),
        kv_usage: mean(&KV_USAGE),
        prompt_throughput: sum(&PROMPT_THROUGHPUT),
        generation_throughput: sum(&GENERATION_THROUGHPUT),
    })
}

/// Fetches `/metrics` pages: one HTTP client on a runtime of its own (the watch loop is not async).
pub struct Scraper {
    runtime: tokio::runtime::Runtime,
    client: reqwest::Client,
}

impl Scraper {
    /// A scraper whose requests give up after `timeout`.
    ///
    /// # Errors
    /// The runtime or the client cannot be made.
    pub fn new(timeout: Duration) -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Scraper { runtime, client })
    }

    /// The page at `url`, read whole.
    ///
    /// # Errors
    /// No answer, an HTTP error status, or a body that is not text: the reason, with the URL.
    pub fn fetch(&self, url: &str) -> Result<String, String> {
        self.runtime.block_on(async {
            let response = self.client.get(url).send().await.map_err(|e| format!("{url}: {e}"))?;
            let status = response.status();
            if !status.is_success() {
                return Err(format!(
                    "{url}: HTTP {status} (llama-server exports /metrics only when started with --metrics)"
                ));
            }
            response.text().await.map_err(|e| format!("{url}: {e}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_llama_server_reads_as_two_running_and_two_waiting() {
        // tests/data/record/llamacpp-metrics-busy.txt: four requests sent at once to a server with two slots.
        let text = include_str!("../../../tests/data/record/llamacpp-metrics-busy.txt");
        let r = reading(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.running, Some(2));
        assert_eq!(r.waiting, Some(2));
        assert_eq!(r.prompt_throughput, Some(334.819));
        assert_eq!(r.generation_throughput, Some(0.0));
        // This llama.cpp exports no KV-cache gauge: absent, not zero.
        assert_eq!(r.kv_usage, None);
    }

    #[test]
    fn a_data_parallel_vllm_sums_its_engines_and_averages_their_kv_use() {
        let text = "# TYPE vllm:num_requests_running gauge\n\
                    vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0\n\
                    vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 5.0\n\
                    # TYPE vllm:num_requests_waiting gauge\n\
                    vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 0.0\n\
                    vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 4.0\n\
                    # TYPE vllm:kv_cache_usage_perc gauge\n\
                    vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.25\n\
                    vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"} 0.75\n";
        let r = reading(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.running, r.waiting, r.kv_usage), (Some(8), Some(4), Some(0.5)));
        assert_eq!((r.prompt_throughput, r.generation_throughput), (None, None));
        // A gauge read as NaN (llama.cpp's throughputs before any request) is absent; a page that is no metrics
        // at all is an error.
        let r = reading("# TYPE llamacpp:predicted_tokens_seconds gauge\nllamacpp:predicted_tokens_seconds nan\n");
        assert_eq!(r.map(|r| r.generation_throughput), Ok(None));
        assert!(reading("<html>not found</html>").is_err());
    }
}
