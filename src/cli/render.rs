//! `tokenscope render TRACE -o out.png [--from-ms A --to-ms B] [--request ID] [--token N] [--finding N]
//! [--width W --height H] [--view waterfall|request|both] [--scale S] [--no-caption]`: a PNG of the views with no
//! display, drawn by the window's own code (see `ui::render`). Times are ms after the trace's start (the ruler's
//! 0), as for `export`. `--finding N` draws what a click on the Nth finding shows in the app, for CI reports.

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

use super::{Output, validate};
use crate::analysis::findings::{Thresholds, find};
use crate::analysis::summary::Slo;
use crate::load::LoadOptions;
use crate::trace::{CandidateSource, Trace};
use crate::ui::shell::render::{Scene, Size, View, check, render};
use crate::ui::widgets::png;
use crate::view::TraceView;
use crate::view::lanes::TrackLayout;
use crate::view::layout::{TrackFilter, TrackOrder};

/// What to render.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderOptions {
    /// Range start, ms after the trace's start.
    pub from_ms: Option<f64>,
    /// Range end, ms after the trace's start.
    pub to_ms: Option<f64>,
    /// The request to select (id).
    pub request: Option<String>,
    /// The token to select: its `index` in the request's output.
    pub token: Option<u32>,
    /// `waterfall`, `request` or `both`; by default `both` with a request, else `waterfall`.
    pub view: Option<View>,
    /// Image size in points.
    pub width: f32,
    /// Image size in points.
    pub height: f32,
    /// Pixels per point.
    pub scale: f32,
    /// Draw the caption strip.
    pub caption: bool,
    /// Objectives the request is judged by.
    pub slo: Slo,
    /// Render the Nth finding (from 1, in `tokenscope findings`' order, with these objectives and the default
    /// thresholds): its time range selected with a margin, its subject request and token selected.
    pub finding: Option<usize>,
    /// One track per request, or lanes.
    pub layout: TrackLayout,
}

fn usage(message: String) -> Output {
    Output::error(message, 2)
}

/// The arguments of `render`.
#[derive(Debug, Clone, clap::Args)]
pub struct RenderArgs {
    /// The trace: one file or directory, or several files of one run (a client's recording with the server's
    /// files: they are joined).
    #[arg(required = true, num_args = 1..)]
    pub traces: Vec<PathBuf>,
    /// Range start, ms after the trace's start (with --to-ms; default: the whole trace).
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    pub from_ms: Option<f64>,
    /// Range end, ms after the trace's start.
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    pub to_ms: Option<f64>,
    /// The request to select and show in the high-power view (id).
    #[arg(long, value_name = "ID")]
    pub request: Option<String>,
    /// The token to select in it: its index in the output.
    #[arg(long, value_name = "N")]
    pub token: Option<u32>,
    /// Which views: waterfall, request or both (default: both with --request, else waterfall).
    #[arg(long, value_enum)]
    pub view: Option<View>,
    /// Width in points.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1400.0)]
    pub width: f32,
    /// Height in points.
    #[arg(long, allow_negative_numbers = true, default_value_t = 860.0)]
    pub height: f32,
    /// Pixels per point (2: a 2x image).
    #[arg(long, allow_negative_numbers = true, default_value_t = 2.0)]
    pub scale: f32,
    /// Leave out the caption strip (trace, time range in UTC, selection).
    #[arg(long)]
    pub no_caption: bool,
    /// TTFT objective for the request header, ms.
    #[arg(long, value_name = "MS", value_parser = super::positive_ms, default_value_t = 1000.0)]
    pub slo_ttft_ms: f64,
    /// TPOT objective for the request header, ms.
    #[arg(long, value_name = "MS", value_parser = super::positive_ms, default_value_t = 50.0)]
    pub slo_tpot_ms: f64,
    /// Render the Nth finding of `tokenscope findings` (from 1; default objectives and thresholds): its time
    /// range, its request and token selected, as a click on it shows in the app.
    #[arg(long, value_name = "N", conflicts_with_all = ["from_ms", "to_ms", "request", "token"])]
    pub finding: Option<usize>,
    /// The request tracks: one per request, or packed into lanes of requests that do not overlap.
    #[arg(long, value_enum, default_value = "tracks")]
    pub layout: TrackLayout,
    /// The PNG to write.
    #[arg(short, long)]
    pub output: PathBuf,
    // The part of the trace to read, the memory budget, the importer, a server log's clock.
    #[command(flatten)]
    pub reading: super::globals::GlobalArgs,
}

impl RenderArgs {
    /// Runs `render`.
    pub fn run(&self) -> Output {
        let options = RenderOptions {
            finding: self.finding,
            layout: self.layout,
            from_ms: self.from_ms,
            to_ms: self.to_ms,
            request: self.request.clone(),
            token: self.token,
            view: self.view,
            width: self.width,
            height: self.height,
            scale: self.scale,
            caption: !self.no_caption,
            slo: Slo {
                ttft_ms: Some(self.slo_ttft_ms),
                tpot_ms: Some(self.slo_tpot_ms),
            },
        };
        let inputs: Vec<&Path> = self.traces.iter().map(PathBuf::as_path).collect();
        run(&inputs, &options, &self.output)
    }
}

/// Runs `render`.
pub fn run(inputs: &[&Path], options: &RenderOptions, output: &Path) -> Output {
    let name = inputs
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" + ");
    if !output.extension().is_some_and(|e| e.eq_ignore_ascii_case("png")) {
        return usage(format!("{}: give the output a .png name", output.display()));
    }
    let dir = match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Output::error(
            format!(
                "cannot write {}: the directory {} does not exist",
                output.display(),
                dir.display()
            ),
            1,
        );
    }
    let range = match (options.from_ms, options.to_ms) {
        (None, None) => None,
        (Some(a), Some(b)) if a.is_finite() && b.is_finite() && a >= 0.0 && b > a => Some((a, b)),
        (Some(a), Some(b)) => {
            return usage(format!(
                "--from-ms {a} --to-ms {b}: give 0 <= FROM < TO, in ms after the trace's start"
            ));
        }
        _ => return usage("give both --from-ms and --to-ms, or neither (the whole trace)".to_owned()),
    };
    let which = options
        .view
        .unwrap_or(if options.request.is_some() || options.finding.is_some() {
            View::Both
        } else {
            View::Waterfall
        });
    let size = Size {
        width: options.width,
        height: options.height,
        pixels_per_point: options.scale,
    };
    if options.finding.is_none()
        && let Err(e) = check(which, options.request.is_some(), size)
    {
        return usage(e.to_string());
    }
    let loaded = match super::load(
        inputs,
        LoadOptions {
            lazy_candidates: true,
            ..LoadOptions::default()
        },
    ) {
        Ok(l) => l,
        Err(e) => return validate::fatal(&e, false),
    };
    let reader = match crate::load::open_candidates(&loaded.trace) {
        Ok(r) => r,
        Err(e) => return validate::fatal(&e, false),
    };
    let trace = Arc::new(loaded.trace);
    if let Some(n) = options.finding {
        return render_finding(&name, options, output, &trace, reader, n, size);
    }
    let request = match &options.request {
        None => None,
        Some(id) => match trace.request_row(id) {
            Some(r) => Some(r),
            None => return usage(format!("no request with id {id} in {name}")),
        },
    };
    let token = match (request, options.token) {
        (_, None) => None,
        (None, Some(_)) => return usage("--token needs --request ID".to_owned()),
        (Some(r), Some(n)) => {
            let rows = trace.tokens_of(r);
            let indices = &trace.tokens.index[rows];
            if let Some(k) = indices.iter().position(|&i| i == n) {
                Some(k)
            } else {
                let span = match (indices.first(), indices.last()) {
                    (Some(a), Some(b)) => format!("its tokens are indices {a} to {b}"),
                    _ => "it has no token records".to_owned(),
                };
                return usage(format!("request {} has no token {n}: {span}", trace.request_id(r)));
            }
        }
    };
    let view = TraceView::new(Arc::clone(&trace), TrackOrder::default(), &TrackFilter::default());
    let time_range = range.map(|(a, b)| (trace.at_ms(a), trace.at_ms(b)));
    if let (Some((a_ms, b_ms)), Some((a, b))) = (range, time_range)
        && (b < view.t0_ns || a > view.t1_ns)
    {
        let end_ms = (view.t1_ns - view.t0_ns) as f64 / 1e6;
        return usage(format!(
            "nothing to draw in {a_ms} ms .. {b_ms} ms: the trace spans 0 ms to {end_ms:.0} ms after its start"
        ));
    }
    let scene = Scene {
        view,
        candidates: reader,
        source_name: name.clone(),
        time_range,
        selection: None,
        request,
        token,
        slo: options.slo,
        caption: options.caption,
        scroll_y: None,
        layout: options.layout,
    };
    write_png(scene, which, size, output)
}

/// Draws and writes the PNG.
fn write_png(scene: Scene, which: View, size: Size, output: &Path) -> Output {
    let image = match render(scene, which, size) {
        Ok(i) => i,
        Err(e) => return Output::error(e, 1),
    };
    let png = match png::encode_png(&image) {
        Ok(p) => p,
        Err(e) => return Output::error(format!("cannot encode the PNG: {e}"), 1),
    };
    if let Err(e) = std::fs::write(output, &png) {
        return Output::error(format!("cannot write {}: {e}", output.display()), 1);
    }
    Output {
        stdout: format!(
            "wrote {}: {} x {} pixels\n",
            output.display(),
            image.size[0],
            image.size[1]
        ),
        stderr: String::new(),
        code: 0,
    }
}

/// `--finding N`: the Nth finding's range (with a tenth of its length, at least 1 ms, either side), its range
/// selected, its subject request and token under the microscope.
fn render_finding(
    input: &str,
    options: &RenderOptions,
    output: &Path,
    trace: &Arc<Trace>,
    reader: Option<Arc<dyn CandidateSource>>,
    n: usize,
    size: Size,
) -> Output {
    let found = find(trace, &options.slo, &Thresholds::default());
    let Some(f) = n.checked_sub(1).and_then(|k| found.get(k)) else {
        return usage(format!(
            "--finding {n}: {} has {} finding{} (`tokenscope findings {}` lists them); give 1 to {}",
            input,
            found.len(),
            if found.len() == 1 { "" } else { "s" },
            input,
            found.len().max(1)
        ));
    };
    let (request, token) = f.subject(trace);
    let which = match (options.view, request) {
        (Some(v), _) => v,
        (None, Some(_)) => View::Both,
        (None, None) => View::Waterfall,
    };
    if let Err(e) = check(which, request.is_some(), size) {
        return usage(format!("--finding {n} ({}): {e}", f.kind.name()));
    }
    let pad = ((f.to_ns - f.from_ns) / 10).max(1_000_000);
    let scene = Scene {
        view: TraceView::new(Arc::clone(trace), TrackOrder::default(), &TrackFilter::default()),
        candidates: reader,
        source_name: input.to_owned(),
        time_range: Some((f.from_ns - pad, f.to_ns + pad)),
        selection: Some((f.from_ns, f.to_ns)),
        request,
        token,
        slo: options.slo,
        caption: options.caption,
        scroll_y: None,
        layout: options.layout,
    };
    write_png(scene, which, size, output)
}
