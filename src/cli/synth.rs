//! `tokenscope synth --scenario NAME [--seed S] [--requests N] [replay options] [--set KEY=VALUE].. -o FILE`:
//! simulates a scenario, or serves a trace's requests again (`--scenario replay --from-trace TRACE`), and writes the
//! trace (Parquet or JSONL by the extension).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{Output, thousands};
use crate::format;
use crate::load::LoadOptions;
pub use crate::synth::overrides::{SET_KEYS, parse_setting};
use crate::synth::{Overrides, Setting, SynthOptions, generate_with, replay_trace};
use crate::trace::Trace;

/// Parses `on` or `off` for `--chunked-prefill`.
pub fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("--chunked-prefill {s:?}: give on or off")),
    }
}

/// Parses `KIND@SECONDS` for `--plant`.
pub fn parse_plant(s: &str) -> Result<(crate::synth::Incident, f64), String> {
    use clap::ValueEnum as _;
    let kinds = || crate::synth::Incident::ALL.map(crate::synth::Incident::name).join(", ");
    let (kind, at) = s.split_once('@').ok_or_else(|| {
        format!(
            "--plant {s:?}: expected KIND@SECONDS, e.g. long-prefill@30 (kinds: {})",
            kinds()
        )
    })?;
    let incident = crate::synth::Incident::from_str(kind, false)
        .map_err(|_| format!("--plant {s:?}: unknown incident {kind:?} (kinds: {})", kinds()))?;
    let at: f64 = at
        .parse()
        .map_err(|e| format!("--plant {s:?}: {at:?} is not a number of seconds ({e})"))?;
    if !(at.is_finite() && at >= 0.0) {
        return Err(format!("--plant {s:?}: give a time of 0 s or more"));
    }
    Ok((incident, at))
}

/// Parses `A..B` (seconds) for `--window`.
pub fn parse_window(s: &str) -> Result<(f64, f64), String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("--window {s:?}: expected FROM..TO in seconds, e.g. 0..120"))?;
    let parse = |v: &str| {
        v.trim()
            .parse::<f64>()
            .map_err(|e| format!("--window {s:?}: {v:?} is not a number ({e})"))
    };
    let (a, b) = (parse(a)?, parse(b)?);
    if !(a.is_finite() && b.is_finite() && a >= 0.0 && b > a) {
        return Err(format!("--window {s:?}: need 0 <= FROM < TO"));
    }
    Ok((a, b))
}

/// An engine's own output that `synth --as` writes instead of a tokenscope trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineOutput {
    /// SGLang's OTLP JSON (`--enable-trace` through the Collector's file exporter).
    SglangOtlp,
}

/// The arguments of `synth`.
#[derive(Debug, Clone, clap::Args)]
pub struct SynthArgs {
    /// The scenario.
    #[arg(long, value_enum)]
    pub scenario: crate::synth::Scenario,
    /// Seed of every random choice (same seed, same bytes).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Ordinary requests (each scenario has a default); with replay, at most this many.
    #[arg(long)]
    pub requests: Option<usize>,
    /// Replay: the request trace to replay.
    #[arg(long, value_name = "FILE", conflicts_with = "from_trace")]
    pub arrivals: Option<PathBuf>,
    /// Replay: a trace tokenscope opens (ours, or an engine's output), served again with its requests' ids,
    /// arrival times and lengths on engines configured as its steps suggest (printed); change them with --set,
    /// then compare the two traces with `tokenscope diff`.
    #[arg(long, value_name = "TRACE")]
    pub from_trace: Option<PathBuf>,
    /// Change every instance's configuration (repeat for several): chunked_prefill=on|off,
    /// max_num_batched_tokens=N (alias prefill_budget), max_num_seqs=N, instances=N (when N differs from the
    /// trace's, requests are routed least-loaded instead of to their own instance), prefix_cache_tokens=N (0:
    /// none), profile=h100-8b|l4-8b|cpu-270m|FILE, disaggregation=NpMd (each instance becomes N prefill and M
    /// decode instances, a request's KV moving between them), transfer_gb_per_s=X (25), transfer_latency_ms=X (1),
    /// kv_bytes_per_token=N (the profile's model's).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_setting)]
    pub set: Vec<crate::synth::Setting>,
    /// Replay: multiply the gaps between arrivals (0.5 plays twice as fast).
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// Replay: keep at most N requests.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Replay: keep arrivals in FROM..TO seconds after the trace's first one.
    #[arg(long, value_name = "FROM..TO", value_parser = parse_window)]
    pub window: Option<(f64, f64)>,
    /// Replay --arrivals: engine instances (with --from-trace: --set instances=N).
    #[arg(long, default_value_t = 1, conflicts_with = "from_trace")]
    pub sources: usize,
    /// Prefix-cache capacity per instance, tokens (default: the KV cache's ~416k). More models a KV pool in
    /// CPU memory, as Mooncake serves from.
    #[arg(long, value_name = "TOKENS")]
    pub prefix_cache_tokens: Option<u64>,
    /// The hardware and model every instance stands for: h100-8b, l4-8b (a slower GPU) or cpu-270m (a small
    /// model on two CPU cores, as `record` ran one here), or a profile file `tokenscope fit` wrote from a real
    /// server's steps. A replay says the profile's measured error.
    #[arg(long, value_name = "NAME|FILE", default_value = "h100-8b", value_parser = crate::synth::ProfileChoice::parse)]
    pub profile: crate::synth::ProfileChoice,
    /// Chunked prefill on or off on every instance (default: as the scenario sets it).
    #[arg(long, value_name = "on|off", value_parser = parse_on_off)]
    pub chunked_prefill: Option<bool>,
    /// Plant an incident in the traffic at this time, on the first instance: prefill-interrupts-decode,
    /// long-prefill or eos-mistrigger, `@` seconds after the start.
    #[arg(long, value_name = "KIND@SECONDS", value_parser = parse_plant, conflicts_with = "from_trace")]
    pub plant: Option<(crate::synth::Incident, f64)>,
    /// Write the run as an engine would have traced it instead of as a tokenscope trace: `sglang-otlp`
    /// (SGLang's OTLP JSON, as the Collector's file exporter writes it).
    #[arg(long = "as", value_name = "ENGINE_OUTPUT")]
    pub as_output: Option<EngineOutput>,
    /// The file to write (.parquet, .jsonl, .jsonl.gz, .jsonl.zst).
    #[arg(short, long)]
    pub output: PathBuf,
    // The part of the trace to read, the memory budget, the importer, a server log's clock.
    #[command(flatten)]
    pub reading: super::globals::GlobalArgs,
}

impl SynthArgs {
    /// Runs `synth`.
    pub fn run(&self) -> Output {
        let options = SynthOptions {
            scenario: self.scenario,
            seed: self.seed,
            requests: self.requests,
            arrivals: self.arrivals.clone(),
            replay: crate::synth::arrivals::ReplayOptions {
                time_scale: self.time_scale,
                limit: self.limit,
                window_s: self.window,
            },
            sources: self.sources,
            prefix_cache_tokens: self.prefix_cache_tokens,
            profile: self.profile.clone(),
            chunked_prefill: self.chunked_prefill,
            plant: self.plant,
        };
        run(
            &options,
            self.from_trace.as_deref(),
            &self.set,
            self.as_output,
            &self.output,
        )
    }
}

/// Runs `synth`: `options` and, for `--scenario replay --from-trace`, the trace whose requests to serve again;
/// `settings` (`--set`) change every instance's configuration.
pub fn run(
    options: &SynthOptions,
    from_trace: Option<&Path>,
    settings: &[Setting],
    as_output: Option<EngineOutput>,
    output: &Path,
) -> Output {
    if from_trace.is_some() && options.scenario != crate::synth::Scenario::Replay {
        return Output::error(
            format!("--from-trace is for --scenario replay, not {}", options.scenario.name()),
            2,
        );
    }
    if as_output.is_none() && format::encoding_of(output).is_none() {
        return Output {
            stdout: String::new(),
            stderr: format!(
                "error: {}: give the output a .parquet, .jsonl, .jsonl.gz or .jsonl.zst name\n",
                output.display()
            ),
            code: 2,
        };
    }
    // SGLang's OTLP JSON is plain text, one request a line: a .parquet (or compressed) name would hold JSON.
    let name = output.to_string_lossy().to_ascii_lowercase();
    #[expect(
        clippy::case_sensitive_file_extension_comparisons,
        reason = "the name is lowercased above"
    )]
    let json = name.ends_with(".jsonl") || name.ends_with(".json");
    if as_output.is_some() && !json {
        return Output::error(
            format!(
                "{}: --as sglang-otlp writes SGLang's OTLP JSON lines (plain text): give the output a .jsonl name",
                output.display()
            ),
            2,
        );
    }
    let set = Overrides::from_settings(settings);
    if options.scenario == crate::synth::Scenario::Xlarge {
        return xlarge(options, &set, as_output, output);
    }
    let (trace, replayed) = match from_trace {
        Some(path) => match replay_from(path, options, &set) {
            Ok((trace, text)) => (trace, Some(text)),
            Err(out) => return out,
        },
        None => match generate_with(options, &set) {
            Ok(t) => (t, None),
            Err(e) => return Output::error(e, 1),
        },
    };
    let what = match from_trace {
        Some(path) => format!("replay of {}", path.display()),
        None => format!("scenario {}", options.scenario.name()),
    };
    let written = if let Some(EngineOutput::SglangOtlp) = as_output {
        std::fs::File::create(output)
            .and_then(|f| {
                let mut w = std::io::BufWriter::new(f);
                crate::synth::sglang_otlp::write(&trace, &mut w)?;
                std::io::Write::flush(&mut w)
            })
            .map(|()| {
                format!(
                    "wrote {} as SGLang's OTLP JSON: {what}, seed {}: {} requests\n",
                    output.display(),
                    options.seed,
                    thousands(trace.request_count() as u64)
                )
            })
            .map_err(|e| format!("cannot write {}: {e}", output.display()))
    } else {
        format::write(&trace, output)
            .map(|()| {
                format!(
                    "wrote {}: {what}, seed {}: {} requests, {} tokens, {} iterations, {} candidates\n",
                    output.display(),
                    options.seed,
                    thousands(trace.request_count() as u64),
                    thousands(trace.token_count() as u64),
                    thousands(trace.iterations.len() as u64),
                    thousands(trace.candidates.len() as u64)
                )
            })
            .map_err(|e| e.to_string())
    };
    match written {
        Ok(mut stdout) => {
            stdout.push_str(replayed.as_deref().unwrap_or(""));
            Output {
                stdout,
                stderr: String::new(),
                code: 0,
            }
        }
        Err(e) => Output::error(e, 1),
    }
}

/// Writes `xlarge` part by part, saying on stderr how far it is (a part takes about a minute here).
fn xlarge(options: &SynthOptions, set: &Overrides, as_output: Option<EngineOutput>, output: &Path) -> Output {
    if as_output.is_some() {
        return Output::error("--as is not available with xlarge: it is written as Parquet only", 2);
    }
    let progress = |done: usize, parts: usize| eprintln!("xlarge: part {done} of {parts} written");
    match crate::synth::xlarge::write(options, set, output, progress) {
        Ok(w) => Output {
            stdout: format!(
                "wrote {}: scenario xlarge, seed {}, {} parts: {} requests, {} tokens, {} iterations, {} candidates\n",
                output.display(),
                options.seed,
                w.parts,
                thousands(w.requests),
                thousands(w.tokens),
                thousands(w.iterations),
                thousands(w.candidates)
            ),
            stderr: String::new(),
            code: 0,
        },
        Err(e @ crate::synth::SynthError::BadOption(_)) => Output::error(e, 2),
        Err(e) => Output::error(e, 1),
    }
}

/// Loads `path` (with the run's window and memory budget) and serves its requests again; the trace, and the lines
/// that say what was replayed on which configuration.
fn replay_from(path: &Path, options: &SynthOptions, set: &Overrides) -> Result<(Trace, String), Output> {
    let load = LoadOptions {
        lazy_candidates: true,
        ..LoadOptions::default()
    };
    let loaded = super::load(&[path], load).map_err(|e| super::validate::fatal(&e, false))?;
    let replay = replay_trace(&loaded.trace, options, set).map_err(|e| Output::error(e, 1))?;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "replayed {} of the trace's {} requests with their ids, arrival times and lengths",
        thousands(replay.trace.request_count() as u64),
        thousands(loaded.trace.request_count() as u64)
    );
    let _ = writeln!(text, "configuration inferred from {}:", path.display());
    for e in &replay.inferred {
        let _ = writeln!(text, "  {}", e.why);
    }
    if replay.applied.is_empty() {
        text.push_str("overrides: none (the inferred configuration as is)\n");
    } else {
        let _ = writeln!(text, "overrides: {}", replay.applied.join(", "));
    }
    for note in &replay.notes {
        let _ = writeln!(text, "note: {note}");
    }
    let rejected = loaded.report.rejected_count();
    if rejected > 0 {
        let _ = writeln!(
            text,
            "note: {rejected} record(s) of {} were rejected at load; `tokenscope validate` lists them",
            path.display()
        );
    }
    Ok((replay.trace, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plants_and_switches_parse_or_say_why() {
        assert_eq!(
            parse_plant("long-prefill@30"),
            Ok((crate::synth::Incident::LongPrefill, 30.0))
        );
        assert!(parse_plant("long-prefill").unwrap_err().contains("KIND@SECONDS"));
        assert!(parse_plant("oops@3").unwrap_err().contains("unknown incident"));
        assert!(parse_plant("eos-mistrigger@-1").unwrap_err().contains("0 s or more"));
        assert_eq!(parse_on_off("off"), Ok(false));
        assert!(parse_on_off("yes").is_err());
    }

    #[test]
    fn settings_parse_or_name_the_key_the_value_and_the_forms() {
        assert_eq!(parse_setting("chunked_prefill=on"), Ok(Setting::ChunkedPrefill(true)));
        assert_eq!(parse_setting("chunked_prefill=off"), Ok(Setting::ChunkedPrefill(false)));
        assert_eq!(
            parse_setting("max_num_batched_tokens=2048"),
            Ok(Setting::MaxNumBatchedTokens(2048))
        );
        assert_eq!(
            parse_setting("prefill_budget=8_192"),
            Ok(Setting::MaxNumBatchedTokens(8192))
        );
        assert_eq!(parse_setting("max_num_seqs=64"), Ok(Setting::MaxNumSeqs(64)));
        assert_eq!(parse_setting("instances=4"), Ok(Setting::Instances(4)));
        assert_eq!(
            parse_setting("prefix_cache_tokens=0"),
            Ok(Setting::PrefixCacheTokens(0))
        );
        assert_eq!(
            parse_setting("profile=l4-8b"),
            Ok(Setting::Profile(crate::synth::Profile::L4.into()))
        );
        let err = |s: &str| parse_setting(s).unwrap_err();
        let e = err("chunked_prefill=yes");
        assert!(
            e.contains("chunked_prefill=\"yes\"") && e.contains("on or chunked_prefill=off"),
            "{e}"
        );
        let e = err("max_num_batched_tokens=0");
        assert!(
            e.contains("max_num_batched_tokens=0: out of range") && e.contains("from 16 to 1,048,576"),
            "{e}"
        );
        let e = err("max_num_seqs=-3");
        assert!(e.contains("max_num_seqs=\"-3\": not a whole number"), "{e}");
        let e = err("instances=99999999999999999999999");
        assert!(e.contains("instances") && e.contains("from 1 to 1,024"), "{e}");
        assert!(err("instances=0").contains("out of range"));
        let e = err("profile=a100");
        assert!(e.contains("\"a100\"") && e.contains("h100-8b, l4-8b, cpu-270m"), "{e}");
        assert_eq!(parse_setting("disaggregation=2p3d"), Ok(Setting::Disaggregation(2, 3)));
        assert_eq!(
            parse_setting("transfer_gb_per_s=12.5"),
            Ok(Setting::TransferGbPerS(12.5))
        );
        assert_eq!(
            parse_setting("transfer_latency_ms=0"),
            Ok(Setting::TransferLatencyMs(0.0))
        );
        assert_eq!(
            parse_setting("kv_bytes_per_token=18432"),
            Ok(Setting::KvBytesPerToken(18_432))
        );
        assert_eq!(
            parse_setting("spec_acceptance=0.8, 0.6,0.4"),
            Ok(Setting::SpecAcceptance(vec![0.8, 0.6, 0.4]))
        );
        assert_eq!(parse_setting("spec_draft_tokens=0"), Ok(Setting::SpecDraftTokens(0)));
        assert!(err("spec_draft_tokens=33").contains("from 0 to 32"));
        assert!(err("spec_acceptance=0.8,x").contains("\"x\" is not a share"));
        let e = err("disaggregation=1p");
        assert!(e.contains("NpMd") && e.contains("1p1d"), "{e}");
        assert!(err("transfer_gb_per_s=0").contains("from 0.001"));
        assert!(err("transfer_latency_ms=-1").contains("from 0 to 60000"));
        let e = err("batch=3");
        assert!(
            e.contains("unknown key \"batch\"") && e.contains("max_num_seqs=N"),
            "{e}"
        );
        assert!(err("chunked_prefill").contains("KEY=VALUE"));
    }

    #[test]
    fn windows_parse_or_say_why() {
        assert_eq!(parse_window("0..120"), Ok((0.0, 120.0)));
        assert_eq!(parse_window("1.5..2"), Ok((1.5, 2.0)));
        assert!(parse_window("5..1").is_err());
        assert!(parse_window("abc").unwrap_err().contains("FROM..TO"));
    }
}
