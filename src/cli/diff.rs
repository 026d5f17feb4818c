//! `tokenscope diff A B [--json] [--by FIELD] [--slo-ttft-ms X] [--slo-tpot-ms Y] [--prices FILE] [--top N]`: the
//! figures of two traces side by side with their change, the findings gone and new, and the paired requests that
//! changed most; with `--tokens`, the answers token by token (`diff_tokens`).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::findings::Objectives;
use super::{Output, table, thousands, validate};
use crate::analysis::cost::Prices;
use crate::analysis::diff::{
    Change, CompareOptions, Comparison, Computed, Metric, PairDelta, SeverityChange, Verdict, compare,
    compare_computed, most_changed,
};
use crate::analysis::findings::{Finding, Kind, Thresholds};
use crate::analysis::stats::Unit;
use crate::analysis::summary::{GroupBy, Summary};
use crate::load::Loaded;
use crate::trace::Trace;

/// The arguments of `diff`.
#[derive(Debug, Clone, clap::Args)]
#[expect(clippy::struct_excessive_bools, reason = "command-line flags, each its own switch")]
pub struct DiffArgs {
    /// The trace before.
    pub a: PathBuf,
    /// The trace after.
    pub b: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Also compare the figures per value of this request label.
    #[arg(long, value_enum)]
    pub by: Option<GroupBy>,
    #[command(flatten)]
    pub slo: super::SloArgs,
    /// A price table (as `summary --prices`) for the cost of each.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// Paired requests listed per metric.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Instead of the figures: the answers token by token. Pairs requests by prompt (else by id, else by arrival
    /// and prompt length) and reports per pair where the answers first part, both tokens and both candidate lists
    /// there, top-1 agreement and KL divergence up to it, emitted tokens whose rank changed, special tokens in one
    /// run only, and a verdict: identical, sampling (they part, the distributions agree) or shifted.
    #[arg(long, conflicts_with_all = ["fidelity", "by", "prices"])]
    pub tokens: bool,
    /// With --tokens: a pair whose mean KL(A||B) over its compared positions is above this many nats is shifted.
    #[arg(long, value_name = "NATS", default_value_t = crate::analysis::diff::DEFAULT_KL_SHIFT, requires = "tokens")]
    pub kl_shift: f64,
    /// Instead of the diff: how far B (a simulation of A's requests, or a repeat of A's run) is from A, figure
    /// by figure (TTFT, ITL, TPOT, E2E, queue at p50, p90, p95, p99) with the signed error and a verdict.
    #[arg(long)]
    pub fidelity: bool,
    /// With --fidelity: a figure within this many % of A's is reproduced...
    #[arg(long, value_name = "PCT", default_value_t = 10.0, requires = "fidelity")]
    pub tolerance: f64,
    /// ... or within this many ms of it.
    #[arg(long, value_name = "MS", default_value_t = 5.0, requires = "fidelity")]
    pub floor_ms: f64,
    /// With --fidelity: also draw the CDFs of TTFT, ITL, TPOT and E2E of both runs into this PNG.
    #[arg(long, value_name = "OUT.png", requires = "fidelity")]
    pub png: Option<PathBuf>,
    #[command(flatten, next_help_heading = "Thresholds of the detectors")]
    pub thresholds: Thresholds,
    /// Load both traces whole before comparing them (for comparison: the diff is the same). Without it, two Parquet
    /// traces whose figures all stream are streamed, each in memory set by its requests, not its tokens.
    #[arg(long)]
    pub in_memory: bool,
    /// Say on standard error how the traces were read (streamed or loaded) and why.
    #[arg(long)]
    pub verbose: bool,
    // The part of the trace to read, the memory budget, the importer, a server log's clock.
    #[command(flatten)]
    pub reading: super::globals::GlobalArgs,
}

impl DiffArgs {
    /// Runs `diff`.
    pub fn run(&self) -> Output {
        if self.tokens {
            return super::diff_tokens::run(&self.a, &self.b, self.kl_shift, self.json);
        }
        if self.fidelity
            && !(self.tolerance.is_finite()
                && self.tolerance > 0.0
                && self.floor_ms.is_finite()
                && self.floor_ms >= 0.0)
        {
            return Output::error("--tolerance must be above 0 and --floor-ms at least 0", 2);
        }
        let options = DiffOptions {
            json: self.json,
            objectives: self.slo.objectives(),
            thresholds: &self.thresholds,
            by: self.by,
            prices: self.prices.as_deref(),
            top: self.top,
            fidelity: self.fidelity.then_some(crate::synth::fidelity::Tolerance {
                pct: self.tolerance,
                floor_ms: self.floor_ms,
            }),
            png: self.png.as_deref(),
            in_memory: self.in_memory,
            verbose: self.verbose,
        };
        run(&self.a, &self.b, &options)
    }
}

/// What `diff` was asked.
#[derive(Debug, Clone)]
pub struct DiffOptions<'a> {
    /// Print JSON.
    pub json: bool,
    /// Objectives for attainment, goodput and the SLO findings.
    pub objectives: Objectives,
    /// The detectors' thresholds.
    pub thresholds: &'a Thresholds,
    /// Per-group figures too.
    pub by: Option<GroupBy>,
    /// A price table.
    pub prices: Option<&'a Path>,
    /// Paired requests listed per metric.
    pub top: usize,
    /// Instead of the diff, the fidelity of B (a simulation, or a repeat) to A (the real run), within this
    /// tolerance.
    pub fidelity: Option<crate::synth::fidelity::Tolerance>,
    /// With `fidelity`: also draw the two runs' CDFs into this PNG.
    pub png: Option<&'a Path>,
    /// Load both traces even when they could be streamed.
    pub in_memory: bool,
    /// Say how the traces were read.
    pub verbose: bool,
}

fn format_relative(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |r| format!("{:+.1} %", r * 100.0))
}

fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Better => "better",
        Verdict::Worse => "WORSE",
        Verdict::Same => "same",
        Verdict::Changed | Verdict::Undefined => "",
    }
}

fn figures_table(changes: &[Change]) -> String {
    let mut rows = vec![
        ["figure", "A", "B", "change", "relative", ""]
            .map(str::to_owned)
            .to_vec(),
    ];
    for c in changes {
        rows.push(vec![
            c.label.to_owned(),
            c.unit.format(c.a),
            c.unit.format(c.b),
            c.change_text(),
            format_relative(c.relative),
            verdict_word(c.verdict).to_owned(),
        ]);
    }
    table(&rows)
}

/// A trace's one-line identity: engine, model, requests, span.
fn identity(trace: &Trace, s: &Summary) -> String {
    let m = &trace.meta;
    let engine = [m.engine.as_deref(), m.engine_version.as_deref(), m.model.as_deref()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "{}{} requests, span {}",
        if engine.is_empty() {
            String::new()
        } else {
            format!("{engine}, ")
        },
        thousands(s.requests),
        s.span_ms
            .map_or_else(|| "-".to_owned(), |v| format!("{:.3} s", v / 1e3))
    )
}

/// A trace, its start (the waterfall ruler's 0, computed once: `Trace::start_ns` reads every time of the trace),
/// and where the token rows its findings name are (a loaded trace's rows; a streamed trace's findings' own list).
pub struct Side<'a> {
    trace: &'a Trace,
    origin: i64,
    at: Box<dyn Fn(usize) -> Option<(u32, u32)> + 'a>,
}

impl<'a> Side<'a> {
    /// A loaded trace.
    pub fn of(trace: &'a Trace) -> Self {
        Side {
            trace,
            origin: trace.start_ns(),
            at: Box::new(|k| Some((*trace.tokens.request.get(k)?, *trace.tokens.index.get(k)?))),
        }
    }

    /// A streamed trace's side: its requests, its start with its tokens counted, the tokens its findings name.
    fn streamed(done: &'a crate::load::stream::findings::StreamedFindings) -> Self {
        Side {
            trace: &done.trace,
            origin: done.start_ns,
            at: Box::new(|k| done.token_index.get(&k).copied()),
        }
    }

    fn finding_json(&self, f: &Finding) -> Value {
        super::findings::json_of(self.trace, self.origin, f, &self.at)
    }
}

fn finding_line(tag: &str, side: &Side<'_>, f: &Finding) -> String {
    let trace = side.trace;
    let subject = f.requests.first().map_or("", |&r| trace.request_id(r));
    format!(
        "  {tag:<5} {:<8} {} [{}] at {:.1} s{}{}\n        {}\n",
        f.severity.name().to_uppercase(),
        f.kind.title(),
        f.kind.name(),
        crate::analysis::metrics::ms(f.from_ns.saturating_sub(side.origin)) / 1e3,
        if subject.is_empty() { "" } else { ", " },
        subject,
        f.summary
    )
}

fn findings_text(a: &Side<'_>, b: &Side<'_>, c: &Comparison) -> String {
    let d = &c.findings;
    let mut out = format!(
        "findings: {} in A, {} in B: {} gone, {} new, {} in both\n",
        c.findings_a.len(),
        c.findings_b.len(),
        d.only_a.len(),
        d.only_b.len(),
        d.both.len()
    );
    for &i in &d.only_a {
        out.push_str(&finding_line("gone", a, &c.findings_a[i]));
    }
    for &j in &d.only_b {
        out.push_str(&finding_line("new", b, &c.findings_b[j]));
    }
    for &(i, j) in &d.both {
        let (fa, fb) = (&c.findings_a[i], &c.findings_b[j]);
        let line = finding_line(SeverityChange::of(fa, fb).name(), b, fb);
        // A severity that changed reads "CRITICAL > WARNING".
        out.push_str(&match SeverityChange::of(fa, fb) {
            SeverityChange::Same => line,
            _ => line.replacen(
                &format!("{:<8}", fb.severity.name().to_uppercase()),
                &format!(
                    "{} > {}",
                    fa.severity.name().to_uppercase(),
                    fb.severity.name().to_uppercase()
                ),
                1,
            ),
        });
    }
    out
}

fn fmt_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"))
}

fn signed_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:+.1}"))
}

fn pairs_text(a: &Trace, b: &Trace, c: &Comparison, top: usize) -> String {
    let p = &c.pairing;
    let mut out = format!(
        "requests {}: {} pairs, {} only in A, {} only in B\n",
        p.by.describe(),
        thousands(p.pairs.len() as u64),
        thousands(p.only_a as u64),
        thousands(p.only_b as u64)
    );
    if p.pairs.is_empty() {
        return out;
    }
    for metric in Metric::ALL {
        let s = c.shift(metric);
        out.push_str(&format!(
            "  {:<5} {} faster, {} slower, {} within 1 % (of {}); median change {} ms, largest slowdown {} ms, largest \
             speed-up {} ms\n",
            metric.name(),
            thousands(s.faster),
            thousands(s.slower),
            thousands(s.pairs - s.faster - s.slower),
            thousands(s.pairs),
            signed_ms(s.median_change_ms),
            signed_ms(s.worst_change_ms.filter(|&w| w > 0.0)),
            signed_ms(s.best_change_ms.filter(|&w| w < 0.0)),
        ));
    }
    for metric in [Metric::Ttft, Metric::Tpot] {
        let list = most_changed(&c.deltas, metric, top);
        if list.is_empty() {
            continue;
        }
        out.push_str(&format!("\n{} changed most:\n", metric.name()));
        let mut rows = vec![["request", "A ms", "B ms", "change ms"].map(str::to_owned).to_vec()];
        for d in &list {
            let (x, y) = d.get(metric);
            rows.push(vec![
                request_name(a, b, d),
                fmt_ms(x),
                fmt_ms(y),
                signed_ms(d.change(metric)),
            ]);
        }
        out.push_str(&table(&rows));
    }
    out
}

/// A pair's name: the id, or both ids when they differ (paired by arrival).
fn request_name(a: &Trace, b: &Trace, d: &PairDelta) -> String {
    let (x, y) = (a.request_id(d.a), b.request_id(d.b));
    if x == y { x.to_owned() } else { format!("{x} / {y}") }
}

fn groups_text(by: GroupBy, c: &Comparison) -> String {
    let figure = |s: &Option<Summary>, get: fn(&Summary) -> Option<f64>| s.as_ref().and_then(get);
    let mut rows = vec![vec![
        by.name().to_owned(),
        "requests A".to_owned(),
        "B".to_owned(),
        "TTFT p99 A".to_owned(),
        "B".to_owned(),
        "change".to_owned(),
        "TPOT p99 A".to_owned(),
        "B".to_owned(),
        "change".to_owned(),
    ]];
    let has_slo = c.a.slo.is_some();
    if has_slo {
        rows[0].extend(["SLO met A".to_owned(), "B".to_owned()]);
    }
    for g in &c.groups {
        let count = |s: &Option<Summary>| s.as_ref().map_or_else(|| "-".to_owned(), |s| thousands(s.requests));
        let ttft = (figure(&g.a, |s| s.ttft_ms.p99), figure(&g.b, |s| s.ttft_ms.p99));
        let tpot = (figure(&g.a, |s| s.tpot_ms.p99), figure(&g.b, |s| s.tpot_ms.p99));
        let relative = |(x, y): (Option<f64>, Option<f64>)| {
            format_relative(x.zip(y).filter(|(x, _)| *x != 0.0).map(|(x, y)| (y - x) / x))
        };
        let mut row = vec![
            g.key.clone(),
            count(&g.a),
            count(&g.b),
            fmt_ms(ttft.0),
            fmt_ms(ttft.1),
            relative(ttft),
            fmt_ms(tpot.0),
            fmt_ms(tpot.1),
            relative(tpot),
        ];
        if has_slo {
            let met =
                |s: &Option<Summary>| Unit::Share.format(s.as_ref().and_then(|s| s.slo).and_then(|x| x.attainment));
            row.extend([met(&g.a), met(&g.b)]);
        }
        rows.push(row);
    }
    table(&rows)
}

fn delta_json(a: &Trace, b: &Trace, d: &PairDelta, metric: Metric) -> Value {
    let (x, y) = d.get(metric);
    json!({
        "request_a": a.request_id(d.a),
        "request_b": b.request_id(d.b),
        "a_ms": x,
        "b_ms": y,
        "change_ms": d.change(metric),
    })
}

/// The JSON form of a comparison.
pub fn comparison_json(paths: (&Path, &Path), a: &Side<'_>, b: &Side<'_>, c: &Comparison, top: usize) -> Value {
    let findings = |side: &Side<'_>, list: &[Finding], rows: &[usize]| -> Vec<Value> {
        rows.iter().map(|&i| side.finding_json(&list[i])).collect()
    };
    let both: Vec<Value> = c
        .findings
        .both
        .iter()
        .map(|&(i, j)| {
            json!({
                "a": a.finding_json(&c.findings_a[i]),
                "b": b.finding_json(&c.findings_b[j]),
                "severity": SeverityChange::of(&c.findings_a[i], &c.findings_b[j]),
            })
        })
        .collect();
    let mut pairing = json!({
        "by": c.pairing.by,
        "pairs": c.pairing.pairs.len(),
        "only_a": c.pairing.only_a,
        "only_b": c.pairing.only_b,
        "offset_ns": c.offset_ns,
    });
    for metric in Metric::ALL {
        let key = metric.name().to_lowercase();
        pairing[&key] = serde_json::to_value(c.shift(metric)).unwrap_or(Value::Null);
        pairing[format!("most_changed_{key}")] = Value::Array(
            most_changed(&c.deltas, metric, top)
                .iter()
                .map(|d| delta_json(a.trace, b.trace, d, metric))
                .collect(),
        );
    }
    let mut v = json!({
        "a": {"trace": paths.0.display().to_string(), "summary": c.a},
        "b": {"trace": paths.1.display().to_string(), "summary": c.b},
        "figures": c.changes,
        "findings": {
            "only_a": findings(a, &c.findings_a, &c.findings.only_a),
            "only_b": findings(b, &c.findings_b, &c.findings.only_b),
            "both": both,
        },
        "pairing": pairing,
    });
    if !c.groups.is_empty() {
        v["groups"] = Value::Array(
            c.groups
                .iter()
                .map(|g| {
                    let figures: Vec<Change> = match (&g.a, &g.b) {
                        (Some(x), Some(y)) => crate::analysis::diff::changes(x, y),
                        _ => Vec::new(),
                    };
                    json!({"key": g.key, "a": g.a, "b": g.b, "figures": figures})
                })
                .collect(),
        );
    }
    v
}

fn load(path: &Path, as_json: bool) -> Result<Loaded, Output> {
    super::load_for_findings(&[path]).map_err(|e| {
        let mut out = validate::fatal(&e, as_json);
        if !as_json {
            out.stderr = format!("error: {}: {e}\n", path.display());
        }
        out
    })
}

/// Runs `diff`.
pub fn run(a_path: &Path, b_path: &Path, options: &DiffOptions<'_>) -> Output {
    if let Err(e) = options.thresholds.check() {
        return Output::error(e, 2);
    }
    let prices = match options.prices.map(Prices::load) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => return Output::error(e, 2),
    };
    // Two Parquet traces whose figures all stream are compared streamed (the fastest path, in memory set by their
    // requests), unless asked to load, or asked for what needs the traces loaded.
    let mut loading_why = "--in-memory".to_owned();
    if !options.in_memory {
        let needs_load = [
            (options.fidelity.is_some(), "--fidelity"),
            (options.by.is_some(), "--by"),
            (prices.is_some(), "--prices"),
        ]
        .into_iter()
        .find_map(|(on, flag)| on.then(|| format!("{flag} needs the traces loaded")));
        match needs_load {
            Some(why) => loading_why = why,
            None => match streamed((a_path, b_path), options) {
                Ok(out) => return out,
                Err(why) => loading_why = why,
            },
        }
    }
    let (a, b) = match (load(a_path, options.json), load(b_path, options.json)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    if let Some(tolerance) = options.fidelity {
        let f = crate::synth::fidelity::compare(&a.trace, &b.trace, tolerance);
        let (a_name, b_name) = (a_path.display().to_string(), b_path.display().to_string());
        let mut stdout = if options.json {
            format!("{:#}\n", json!(f))
        } else {
            crate::synth::fidelity::render(&f, &a_name, &b_name)
        };
        if let Some(png) = options.png {
            let size = crate::ui::shell::render::Size {
                // The CDFs are 150 points high, with their titles and the caption above.
                width: 1400.0,
                height: 232.0,
                pixels_per_point: 2.0,
            };
            let image = match crate::ui::shell::render::render_cdfs(&a.trace, &b.trace, (&a_name, &b_name), size) {
                Ok(image) => image,
                Err(e) => return Output::error(e, 1),
            };
            let written = crate::ui::widgets::png::encode_png(&image)
                .and_then(|bytes| std::fs::write(png, bytes).map_err(|e| e.to_string()));
            if let Err(e) = written {
                return Output::error(format!("{}: {e}", png.display()), 1);
            }
            if !options.json {
                stdout.push_str(&format!(
                    "wrote {} (the CDFs of TTFT, ITL, TPOT and E2E, A and B)\n",
                    png.display()
                ));
            }
        }
        return Output {
            stdout,
            stderr: String::new(),
            code: 0,
        };
    }
    let c = compare(
        &a.trace,
        &b.trace,
        &CompareOptions {
            slo: options.objectives.slo(),
            thresholds: Some(options.thresholds),
            prices: prices.as_ref(),
            by: options.by,
        },
    );
    let (side_a, side_b) = (Side::of(&a.trace), Side::of(&b.trace));
    let mut stdout = shown((a_path, b_path), (&side_a, &side_b), &c, options, "loaded");
    if let (Some(by), false) = (options.by, options.json) {
        stdout.push('\n');
        stdout.push_str(&groups_text(by, &c));
    }
    if options.json
        && let Ok(mut v) = serde_json::from_str::<Value>(&stdout)
    {
        if let Some(by) = options.by {
            v["by"] = json!(by.name());
        }
        if let Some(p) = &prices {
            v["currency"] = json!(p.currency);
        }
        stdout = format!("{v:#}\n");
    }
    let mut stderr: String = [(a_path, &a), (b_path, &b)]
        .iter()
        .filter(|(_, l)| l.report.rejected_count() > 0)
        .map(|(p, l)| {
            format!(
                "note: {}: {} record(s) were rejected; `tokenscope validate` lists them\n",
                p.display(),
                l.report.rejected_count()
            )
        })
        .collect();
    if options.verbose {
        stderr.insert_str(0, &format!("note: both traces were loaded whole: {loading_why}\n"));
    }
    Output {
        stdout,
        stderr,
        code: 0,
    }
}

/// The comparison as printed: JSON (with `computed_by`), or the text (identities, figures, findings, pairs).
fn shown(
    paths: (&Path, &Path),
    (a, b): (&Side<'_>, &Side<'_>),
    c: &Comparison,
    options: &DiffOptions<'_>,
    by: &str,
) -> String {
    if options.json {
        let mut v = comparison_json(paths, a, b, c, options.top);
        let slo = options.objectives.slo();
        v["slo"] = json!({"ttft_ms": slo.ttft_ms, "tpot_ms": slo.tpot_ms, "defaults": options.objectives == Objectives::Default});
        v["computed_by"] = json!(by);
        return format!("{v:#}\n");
    }
    let mut out = format!(
        "A  {}: {}\nB  {}: {}\n{}\n\n",
        paths.0.display(),
        identity(a.trace, &c.a),
        paths.1.display(),
        identity(b.trace, &c.b),
        options.objectives.line()
    );
    out.push_str(&figures_table(&c.changes));
    out.push('\n');
    out.push_str(&findings_text(a, b, c));
    out.push('\n');
    out.push_str(&pairs_text(a.trace, b.trace, c, options.top));
    out
}

/// One trace streamed for `diff`: its figures, its findings with its requests, and each request's figures by id.
struct StreamedSide {
    files: usize,
    summary: crate::load::stream::StreamedSummary,
    metrics: crate::load::stream::MetricsById,
    done: crate::load::stream::findings::StreamedFindings,
}

impl StreamedSide {
    /// The side of `path`, whose figures stream (`super::streams_exactly`). `Err` with why it is to be loaded
    /// instead.
    fn of(path: &Path, options: &DiffOptions<'_>) -> Result<Self, String> {
        use crate::load::stream::{StreamError, findings, summarize_requests};
        let slo = options.objectives.slo();
        let files = super::window_files(path).map_err(|e| e.to_string())?;
        let failed = |e: StreamError| match e {
            StreamError::Load(e) => e.to_string(),
            StreamError::Unordered(why) => why,
        };
        let (summary, metrics) = summarize_requests(&files, super::window(), slo).map_err(failed)?;
        let done = findings::find(&files, super::window(), &slo, options.thresholds, &Kind::ALL).map_err(failed)?;
        Ok(StreamedSide {
            files: files.len(),
            summary,
            metrics,
            done,
        })
    }

    fn computed(&self) -> Computed<'_> {
        let trace = &self.done.trace;
        Computed {
            trace,
            summary: self.summary.summary.clone(),
            findings: self.done.findings.clone(),
            metrics: Box::new(move |r| self.metrics.get(trace.request_id(r)).copied().unwrap_or_default()),
        }
    }

    /// Records left out, of requests and steps and of tokens.
    fn rejected(&self) -> u64 {
        self.done.report.rejected_count() + self.done.incomplete_tokens
    }
}

/// `diff` of two Parquet traces streamed: each side's figures, findings and requests' figures from its files, one
/// side after the other, neither loaded. `Err` with why a trace is to be loaded instead.
fn streamed(paths: (&Path, &Path), options: &DiffOptions<'_>) -> Result<Output, String> {
    // Both are looked at before either is streamed: a side that must be loaded loads both.
    super::streams_exactly(paths.0)?;
    super::streams_exactly(paths.1)?;
    let a = StreamedSide::of(paths.0, options)?;
    let b = StreamedSide::of(paths.1, options)?;
    let c = compare_computed(a.computed(), b.computed());
    let (side_a, side_b) = (Side::streamed(&a.done), Side::streamed(&b.done));
    let stdout = shown(paths, (&side_a, &side_b), &c, options, "streamed");
    let mut stderr = String::new();
    if options.verbose {
        stderr.push_str(&format!(
            "note: both traces were streamed, neither loaded: A from {} Parquet file(s), its tokens in {} pass(es) for \
             its figures and {} for its findings; B from {}, in {} and {}\n",
            a.files, a.summary.passes, a.done.passes, b.files, b.summary.passes, b.done.passes
        ));
    }
    for (path, side) in [(paths.0, &a), (paths.1, &b)] {
        if side.rejected() > 0 {
            stderr.push_str(&format!(
                "note: {}: {} record(s) were rejected; `tokenscope validate` lists them\n",
                path.display(),
                side.rejected()
            ));
        }
    }
    Ok(Output {
        stdout,
        stderr,
        code: 0,
    })
}
