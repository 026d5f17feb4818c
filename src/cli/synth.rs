//! `tokenscope synth --scenario NAME [--seed S] [--requests N] [replay options] -o FILE`: simulates a scenario and
//! writes its trace (Parquet or JSONL by the extension).

use std::path::Path;

use super::{Output, thousands};
use crate::format;
use crate::synth::{SynthOptions, generate};

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
    fn windows_parse_or_say_why() {
        assert_eq!(parse_window("0..120"), Ok((0.0, 120.0)));
        assert_eq!(parse_window("1.5..2"), Ok((1.5, 2.0)));
        assert!(parse_window("5..1").is_err());
        assert!(parse_window("abc").unwrap_err().contains("FROM..TO"));
    }
}
