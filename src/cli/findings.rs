//! `tokenscope findings TRACE [--json] [--kind K,..] [--slo-ttft-ms X] [--slo-tpot-ms Y] [thresholds]`: the known
//! incident patterns the detectors find, most severe first, each with its sentence, time range (ms after the trace's
//! start, as on the waterfall's ruler) and the requests, steps and tokens involved.

use std::path::Path;
use std::path::PathBuf;

use serde_json::{Value, json};

use super::{Output, validate};
use crate::analysis::findings::{Finding, Kind, Severity, Thresholds, find_kinds};
use crate::analysis::summary::Slo;
use crate::trace::Trace;

/// How many requests, steps and tokens a finding lists in the text output (JSON lists all).
const LISTED: usize = 8;

#[allow(clippy::cast_precision_loss)] // ms of a trace
fn ms_after(origin: i64, ns: i64) -> f64 {
    (ns - origin) as f64 / 1e6
}

fn listed(items: &[String]) -> String {
    let mut s = items.iter().take(LISTED).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > LISTED {
        s.push_str(&format!(" and {} more", items.len() - LISTED));
    }
    s
}

/// Step numbers of a finding as `source#iteration`.
fn steps(trace: &Trace, f: &Finding) -> Vec<String> {
    let it = &trace.iterations;
    f.steps
        .iter()
        .map(|&s| {
            let i = s as usize;
            format!("{}#{}", trace.label(it.source[i]).unwrap_or("?"), it.iteration[i])
        })
        .collect()
}

/// Tokens of a finding as `request[index]`.
fn tokens(trace: &Trace, f: &Finding) -> Vec<(String, u32)> {
    let t = &trace.tokens;
    f.tokens
        .iter()
        .map(|&k| (trace.request_id(t.request[k]).to_owned(), t.index[k]))
        .collect()
}

/// The JSON form of a finding.
pub fn finding_json(trace: &Trace, origin: i64, f: &Finding) -> Value {
    json!({
        "kind": f.kind.name(),
        "title": f.kind.title(),
        "severity": f.severity.name(),
        "summary": f.summary,
        "from_ns": f.from_ns,
        "to_ns": f.to_ns,
        "from_ms": ms_after(origin, f.from_ns),
        "to_ms": ms_after(origin, f.to_ns),
        "requests": f.requests.iter().map(|&r| trace.request_id(r)).collect::<Vec<_>>(),
        "steps": steps(trace, f),
        "tokens": tokens(trace, f).into_iter().map(|(r, i)| json!({"request": r, "index": i})).collect::<Vec<_>>(),
    })
}

/// The text form of the findings.
pub fn findings_text(trace: &Trace, origin: i64, findings: &[Finding], name: &str) -> String {
    let n = |s| findings.iter().filter(|f| f.severity == s).count();
    let mut out = format!(
        "{name}: {} finding{} ({} critical, {} warning, {} info)\n",
        findings.len(),
        if findings.len() == 1 { "" } else { "s" },
        n(Severity::Critical),
        n(Severity::Warning),
        n(Severity::Info)
    );
    for f in findings {
        out.push_str(&format!(
            "\n{:<8}  {}  [{}]  {:.1} ms .. {:.1} ms\n  {}\n",
            f.severity.name().to_uppercase(),
            f.kind.title(),
            f.kind.name(),
            ms_after(origin, f.from_ns),
            ms_after(origin, f.to_ns),
            f.summary
        ));
        let requests: Vec<String> = f.requests.iter().map(|&r| trace.request_id(r).to_owned()).collect();
        if !requests.is_empty() {
            out.push_str(&format!("  requests: {}\n", listed(&requests)));
        }
        let steps = steps(trace, f);
        if !steps.is_empty() {
            out.push_str(&format!("  steps: {}\n", listed(&steps)));
        }
        let tokens: Vec<String> = tokens(trace, f).into_iter().map(|(r, i)| format!("{r}[{i}]")).collect();
        if !tokens.is_empty() {
            out.push_str(&format!("  tokens: {}\n", listed(&tokens)));
        }
    }
    out
}

/// The objectives SLO violations are judged by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Objectives {
    /// As given on the command line (none with `--no-slo`).
    Given(Slo),
    /// None given: the app's defaults ([`Slo::DEFAULT`]), said in the output, so that a run missing every
    /// reasonable objective is never "0 findings".
    Default,
}

impl Objectives {
    /// The objectives of `--slo-ttft-ms`, `--slo-tpot-ms` and `--no-slo`: those given, none, or the defaults.
    pub fn from_flags(ttft_ms: Option<f64>, tpot_ms: Option<f64>, no_slo: bool) -> Self {
        let given = Slo { ttft_ms, tpot_ms };
        match (given.is_set(), no_slo) {
            (true, _) => Objectives::Given(given),
            (false, true) => Objectives::Given(Slo::default()),
            (false, false) => Objectives::Default,
        }
    }

    /// The objectives.
    pub fn slo(self) -> Slo {
        match self {
            Objectives::Given(s) => s,
            Objectives::Default => Slo::DEFAULT,
        }
    }

    /// A line saying what requests were judged by.
    pub fn line(self) -> String {
        let slo = self.slo();
        let judged = [
            slo.ttft_ms.map(|t| format!("TTFT <= {t} ms")),
            slo.tpot_ms.map(|t| format!("TPOT <= {t} ms")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>();
        match (self, judged.is_empty()) {
            (_, true) => "objectives: none (--no-slo)".to_owned(),
            (Objectives::Default, false) => format!(
                "objectives: {} (defaults; --slo-ttft-ms, --slo-tpot-ms or --no-slo to change)",
                judged.join(", ")
            ),
            (Objectives::Given(_), false) => format!("objectives: {}", judged.join(", ")),
        }
    }
}

/// The arguments of `findings`.
#[derive(Debug, Clone, clap::Args)]
pub struct FindingsArgs {
    /// The trace: one file or directory, or several files of one run (a client's recording with the server's
    /// files: they are joined).
    #[arg(required = true, num_args = 1..)]
    pub traces: Vec<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Only these kinds (comma-separated).
    #[arg(long, value_delimiter = ',', value_enum)]
    pub kind: Option<Vec<Kind>>,
    #[command(flatten)]
    pub slo: super::SloArgs,
    #[command(flatten)]
    pub thresholds: Thresholds,
}

impl FindingsArgs {
    /// Runs `findings`.
    pub fn run(&self) -> Output {
        let objectives = self.slo.objectives();
        let inputs: Vec<&Path> = self.traces.iter().map(PathBuf::as_path).collect();
        run(&inputs, self.json, objectives, &self.thresholds, self.kind.as_deref())
    }
}

/// Runs `findings`.
pub fn run(
    inputs: &[&Path],
    as_json: bool,
    objectives: Objectives,
    thresholds: &Thresholds,
    kinds: Option<&[Kind]>,
) -> Output {
    let slo = objectives.slo();
    if let Err(e) = thresholds.check() {
        return Output::error(e, 2);
    }
    let loaded = match super::load_for_findings(inputs) {
        Ok(l) => l,
        Err(e) => {
            let mut out = validate::fatal(&e, as_json);
            if matches!(e, crate::load::LoadError::OverBudget { .. }) && !as_json {
                // Which detectors need the trace whole, and what does not.
                out.stderr.push_str(
                    "note: findings needs the trace loaded: every detector reads the requests with their steps and \
                     tokens together (overload, interference, KV saturation, SLO violations and repetition loops \
                     are windowed, but do not stream yet); `summary` and `timeline` stream a trace of any size\n",
                );
            }
            return out;
        }
    };
    let trace = &loaded.trace;
    let findings = find_kinds(trace, &slo, thresholds, kinds.unwrap_or(&Kind::ALL));
    let origin = trace.start_ns();
    let name = inputs
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" + ");
    let stdout = if as_json {
        let list: Vec<Value> = findings.iter().map(|f| finding_json(trace, origin, f)).collect();
        format!(
            "{:#}\n",
            json!({
                "trace": name,
                "slo": {"ttft_ms": slo.ttft_ms, "tpot_ms": slo.tpot_ms, "defaults": objectives == Objectives::Default},
                "thresholds": thresholds,
                "findings": list,
            })
        )
    } else {
        let text = findings_text(trace, origin, &findings, &name);
        // The objectives right under the count: what the SLO findings (or their absence) mean. A trace without
        // requests (a server log's counters, an iteration log) has nothing they could judge.
        match text.split_once('\n') {
            Some((head, rest)) if trace.request_count() > 0 => format!("{head}\n{}\n{rest}", objectives.line()),
            _ => text,
        }
    };
    let rejected = loaded.report.rejected_count();
    Output {
        stdout,
        stderr: if rejected > 0 {
            format!("note: {rejected} record(s) were rejected; `tokenscope validate` lists them\n")
        } else {
            String::new()
        },
        code: 0,
    }
}
