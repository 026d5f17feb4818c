//! `tokenscope findings TRACE [--json] [--kind K,..] [--slo-ttft-ms X] [--slo-tpot-ms Y] [thresholds]`: the known
//! incident patterns the detectors find, most severe first, each with its sentence, time range (ms after the trace's
//! start, as on the waterfall's ruler) and the requests, steps and tokens involved.

use std::path::Path;
use std::path::PathBuf;

use serde_json::{Value, json};

use super::{Output, validate};
use crate::analysis::findings::{Finding, Kind, STREAMABLE, Severity, Thresholds, find_kinds};
use crate::analysis::summary::Slo;
use crate::load::stream::findings::needing_a_load;
use crate::trace::Trace;

/// How many requests, steps and tokens a finding lists in the text output (JSON lists all).
const LISTED: usize = 8;

#[expect(clippy::cast_precision_loss, reason = "ms of a trace")]
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

/// Where a token row is: its request row and `index`. A loaded trace's rows say; a streamed trace's findings come
/// with the tokens they name.
pub(super) type TokenAt<'a> = &'a dyn Fn(usize) -> Option<(u32, u32)>;

/// A loaded trace's token rows.
fn rows_of(trace: &Trace) -> impl Fn(usize) -> Option<(u32, u32)> + '_ {
    |k| Some((*trace.tokens.request.get(k)?, *trace.tokens.index.get(k)?))
}

/// Tokens of a finding as `request[index]`.
fn tokens(trace: &Trace, f: &Finding, at: TokenAt<'_>) -> Vec<(String, u32)> {
    f.tokens
        .iter()
        .filter_map(|&k| at(k))
        .map(|(r, i)| (trace.request_id(r).to_owned(), i))
        .collect()
}

/// The JSON form of a finding.
pub fn finding_json(trace: &Trace, origin: i64, f: &Finding) -> Value {
    json_of(trace, origin, f, &rows_of(trace))
}

/// The JSON form of a finding whose tokens are found by `at`.
pub(super) fn json_of(trace: &Trace, origin: i64, f: &Finding, at: TokenAt<'_>) -> Value {
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
        "tokens": tokens(trace, f, at).into_iter().map(|(r, i)| json!({"request": r, "index": i})).collect::<Vec<_>>(),
    })
}

/// The text form of the findings.
pub fn findings_text(trace: &Trace, origin: i64, findings: &[Finding], name: &str) -> String {
    text_of(trace, origin, findings, name, &rows_of(trace))
}

/// The text form of findings whose tokens are found by `at`.
fn text_of(trace: &Trace, origin: i64, findings: &[Finding], name: &str, at: TokenAt<'_>) -> String {
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
        let tokens: Vec<String> = tokens(trace, f, at)
            .into_iter()
            .map(|(r, i)| format!("{r}[{i}]"))
            .collect();
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
#[expect(clippy::struct_excessive_bools, reason = "command-line flags, each its own switch")]
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
    #[command(flatten, next_help_heading = "Thresholds of the detectors")]
    pub thresholds: Thresholds,
    /// Stream the trace, or fail saying why it cannot be: its Parquet files (a file, a directory, a partitioned
    /// dataset) read a few row groups at a time, in memory set by the requests and steps, not the tokens, the tokens
    /// in one pass that feeds every detector. What a Parquet trace gets by itself, unless --in-memory; a re-scored
    /// run's kinds (off-distribution, sampling-accident) need the trace loaded.
    #[arg(long, conflicts_with = "in_memory")]
    pub out_of_core: bool,
    /// Load the trace whole before judging it, as the app does (for comparison: the findings are the same).
    #[arg(long)]
    pub in_memory: bool,
    /// Say on standard error how the findings were computed (streamed or loaded) and why.
    #[arg(long)]
    pub verbose: bool,
    // The part of the trace to read, the memory budget, the importer, a server log's clock.
    #[command(flatten)]
    pub reading: super::globals::GlobalArgs,
}

impl FindingsArgs {
    /// Runs `findings`.
    pub fn run(&self) -> Output {
        let objectives = self.slo.objectives();
        let inputs: Vec<&Path> = self.traces.iter().map(PathBuf::as_path).collect();
        let (th, kinds) = (&self.thresholds, self.kind.as_deref());
        if let Err(e) = th.check() {
            return Output::error(e, 2);
        }
        if self.out_of_core {
            return streamed(&inputs, self.json, objectives, th, kinds, Why::Asked).unwrap_or_else(|why| {
                Output::error(
                    format!(
                        "its findings cannot be streamed: {why}; leave out --out-of-core to load it (or convert it: \
                         tokenscope convert writes a request's tokens together)"
                    ),
                    1,
                )
            });
        }
        // A Parquet trace streams by itself (its fastest path), unless asked to load or it cannot be streamed.
        let mut loading_why = "--in-memory".to_owned();
        if !self.in_memory {
            match streamable(&inputs) {
                Ok(()) => {
                    let why = match super::over_budget(inputs[0]) {
                        Some(over) => Why::OverBudget(over),
                        None => Why::Fastest,
                    };
                    let unasked = matches!(why, Why::Fastest) && !self.verbose;
                    match streamed(&inputs, self.json, objectives, th, kinds, why) {
                        Ok(mut out) if out.code == 0 => {
                            if unasked {
                                out.stderr = quiet(&out.stderr);
                            }
                            return out;
                        }
                        // A file a stream cannot read is loaded: the load keeps its valid rows and names the others.
                        Ok(out) => out.stderr.trim().clone_into(&mut loading_why),
                        Err(why) => loading_why = why,
                    }
                }
                Err(why) => loading_why = why,
            }
        }
        let mut out = run(&inputs, self.json, objectives, th, kinds);
        if self.verbose {
            out.stderr
                .insert_str(0, &format!("note: the trace was loaded whole: {loading_why}\n"));
        }
        out
    }
}

/// Why a trace is streamed.
enum Why {
    /// `--out-of-core`.
    Asked,
    /// Loaded, it would not fit the memory budget.
    OverBudget(String),
    /// A Parquet trace's findings are computed fastest so.
    Fastest,
}

/// Whether `inputs` are a trace `findings` can stream: one Parquet file or directory, read as tokenscope's format.
fn streamable(inputs: &[&Path]) -> Result<(), String> {
    let [one] = inputs else {
        return Err(
            "several files are loaded together (a client's recording and a server's files are joined)".to_owned(),
        );
    };
    if super::from().is_some() {
        return Err("--from names an importer".to_owned());
    }
    match crate::load::parquet_files(one) {
        Ok(_) => Ok(()),
        Err(_) => Err(format!("{} is not a Parquet trace", one.display())),
    }
}

/// The notes of a streamed run a user did not ask about: only the rejected records are said.
fn quiet(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| l.contains("rejected"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Runs `findings` on the loaded trace.
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
                out.stderr.push_str(&format!(
                    "note: {} stream from a Parquet trace whose requests' tokens are together (as tokenscope writes \
                     them; --out-of-core says why this one cannot); {} need the trace loaded\n",
                    names(&STREAMABLE),
                    names(&needing_a_load())
                ));
            }
            return out;
        }
    };
    let trace = &loaded.trace;
    let findings = find_kinds(trace, &slo, thresholds, kinds.unwrap_or(&Kind::ALL));
    let shown = Shown {
        trace,
        origin: trace.start_ns(),
        name: joined(inputs),
        objectives,
        thresholds,
        not_judged: &[],
    };
    let rejected = loaded.report.rejected_count();
    Output {
        stdout: shown.render(&findings, &rows_of(trace), as_json, loaded_fields()),
        stderr: if rejected > 0 {
            format!("note: {rejected} record(s) were rejected; `tokenscope validate` lists them\n")
        } else {
            String::new()
        },
        code: 0,
    }
}

/// The JSON fields that say the findings were computed on the trace loaded.
fn loaded_fields() -> serde_json::Map<String, Value> {
    let mut more = serde_json::Map::new();
    more.insert("computed_by".to_owned(), json!("loaded"));
    more
}

/// The kinds' names, comma-separated.
fn names(kinds: &[Kind]) -> String {
    kinds.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
}

/// The inputs' names, as the output names the trace.
fn joined(inputs: &[&Path]) -> String {
    inputs
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" + ")
}

/// What the output shows the findings of, and by what.
struct Shown<'a> {
    trace: &'a Trace,
    origin: i64,
    name: String,
    objectives: Objectives,
    thresholds: &'a Thresholds,
    /// Kinds asked for that were not run (a streamed trace).
    not_judged: &'a [Kind],
}

impl Shown<'_> {
    /// The findings as text, or as JSON with `more` fields.
    fn render(
        &self,
        findings: &[Finding],
        at: TokenAt<'_>,
        as_json: bool,
        more: serde_json::Map<String, Value>,
    ) -> String {
        let (trace, origin, slo) = (self.trace, self.origin, self.objectives.slo());
        if as_json {
            let list: Vec<Value> = findings.iter().map(|f| json_of(trace, origin, f, at)).collect();
            let mut v = json!({
                "trace": self.name,
                "slo": {"ttft_ms": slo.ttft_ms, "tpot_ms": slo.tpot_ms, "defaults": self.objectives == Objectives::Default},
                "thresholds": self.thresholds,
                "findings": list,
            });
            if let Some(map) = v.as_object_mut() {
                map.extend(more);
            }
            return format!("{v:#}\n");
        }
        let text = text_of(trace, origin, findings, &self.name, at);
        // The objectives right under the count: what the SLO findings (or their absence) mean. A trace without
        // requests (a server log's counters, an iteration log) has nothing they could judge. Then the kinds not
        // judged, so that their absence is never read as a clean bill.
        let mut head_lines = Vec::new();
        if trace.request_count() > 0 {
            head_lines.push(self.objectives.line());
        }
        if !self.not_judged.is_empty() {
            head_lines.push(format!(
                "not judged (they need the trace loaded): {}",
                names(self.not_judged)
            ));
        }
        match text.split_once('\n') {
            Some((head, rest)) if !head_lines.is_empty() => format!("{head}\n{}\n{rest}", head_lines.join("\n")),
            _ => text,
        }
    }
}

/// `findings --out-of-core`, or `findings` of a Parquet trace over the memory budget (`over`: why): the kinds that
/// can be judged without loading the trace, its tokens streamed from its files (`load::stream::findings`). `Err`
/// with the reason when the trace cannot be streamed and must be loaded.
fn streamed(
    paths: &[&Path],
    as_json: bool,
    objectives: Objectives,
    thresholds: &Thresholds,
    kinds: Option<&[Kind]>,
    why: Why,
) -> Result<Output, String> {
    let [path] = paths else {
        return Ok(Output::error(
            "--out-of-core reads one file or dataset directory; give several files as one directory, or leave out \
             --out-of-core to open them together",
            2,
        ));
    };
    let files = match super::window_files(path) {
        Ok(f) => f,
        Err(e) => return Ok(validate::fatal(&e, as_json)),
    };
    let asked = kinds.unwrap_or(&Kind::ALL);
    let slo = objectives.slo();
    let done = match crate::load::stream::findings::find(&files, super::window(), &slo, thresholds, asked) {
        Ok(d) => d,
        Err(crate::load::stream::StreamError::Load(e)) => return Ok(validate::fatal(&e, as_json)),
        Err(crate::load::stream::StreamError::Unordered(why)) => return Err(why),
    };
    // A re-scored run's kinds find nothing without its references; with them the stream was refused above.
    let not_judged: Vec<Kind> = asked
        .iter()
        .copied()
        .filter(|k| !STREAMABLE.contains(k) && !done.trace.references.is_empty())
        .collect();
    let shown = Shown {
        trace: &done.trace,
        origin: done.start_ns,
        name: joined(paths),
        objectives,
        thresholds,
        not_judged: &not_judged,
    };
    let at = |k: usize| done.token_index.get(&k).copied();
    let mut more = serde_json::Map::new();
    more.insert("computed_by".to_owned(), json!("streamed"));
    more.insert(
        "not_judged".to_owned(),
        json!(not_judged.iter().map(|k| k.name()).collect::<Vec<_>>()),
    );
    more.insert("passes".to_owned(), json!(done.passes));
    let why = match why {
        Why::Asked => String::new(),
        Why::OverBudget(o) => format!("{o}: "),
        Why::Fastest => "a Parquet trace's fastest path: ".to_owned(),
    };
    let mut stderr = format!(
        "note: {why}streamed from {} Parquet file(s), the tokens in {} pass(es), without loading the trace; token \
         records are checked only by the rules of the fields read (`tokenscope validate` checks every rule)\n",
        files.len(),
        done.passes
    );
    let rejected = done.report.rejected_count() + done.incomplete_tokens;
    if rejected > 0 {
        stderr.push_str(&format!(
            "note: {rejected} record(s) were rejected; `tokenscope validate` lists them\n"
        ));
    }
    Ok(Output {
        stdout: shown.render(&done.findings, &at, as_json, more),
        stderr,
        code: 0,
    })
}
