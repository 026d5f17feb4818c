//! `tokenscope synth --scenario NAME [--seed S] [--requests N] [replay options] -o FILE`: simulates a scenario and
//! writes its trace (Parquet or JSONL by the extension).

use std::path::Path;

use super::{Output, thousands};
use crate::format;
use crate::synth::{SynthOptions, generate};

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

/// Runs `synth`.
pub fn run(options: &SynthOptions, as_output: Option<EngineOutput>, output: &Path) -> Output {
    if let Some(EngineOutput::SglangOtlp) = as_output {
        let trace = match generate(options) {
            Ok(t) => t,
            Err(e) => return Output::error(e, 1),
        };
        let written = std::fs::File::create(output).and_then(|f| {
            let mut w = std::io::BufWriter::new(f);
            crate::synth::sglang_otlp::write(&trace, &mut w)?;
            std::io::Write::flush(&mut w)
        });
        return match written {
            Ok(()) => Output {
                stdout: format!(
                    "wrote {} as SGLang's OTLP JSON: scenario {}, seed {}: {} requests\n",
                    output.display(),
                    options.scenario.name(),
                    options.seed,
                    thousands(trace.request_count() as u64)
                ),
                stderr: String::new(),
                code: 0,
            },
            Err(e) => Output::error(format!("cannot write {}: {e}", output.display()), 1),
        };
    }
    if format::encoding_of(output).is_none() {
        return Output {
            stdout: String::new(),
            stderr: format!(
                "error: {}: give the output a .parquet or .jsonl name\n",
                output.display()
            ),
            code: 2,
        };
    }
    let trace = match generate(options) {
        Ok(t) => t,
        Err(e) => {
            return Output::error(e, 1);
        }
    };
    if let Err(e) = format::write(&trace, output) {
        return Output::error(e, 1);
    }
    Output {
        stdout: format!(
            "wrote {}: scenario {}, seed {}: {} requests, {} tokens, {} iterations, {} candidates\n",
            output.display(),
            options.scenario.name(),
            options.seed,
            thousands(trace.request_count() as u64),
            thousands(trace.token_count() as u64),
            thousands(trace.iterations.len() as u64),
            thousands(trace.candidates.len() as u64)
        ),
        stderr: String::new(),
        code: 0,
    }
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
    fn windows_parse_or_say_why() {
        assert_eq!(parse_window("0..120"), Ok((0.0, 120.0)));
        assert_eq!(parse_window("1.5..2"), Ok((1.5, 2.0)));
        assert!(parse_window("5..1").is_err());
        assert!(parse_window("abc").unwrap_err().contains("FROM..TO"));
    }
}
