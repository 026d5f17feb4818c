//! Background-work benchmark: what the app computes off the UI thread after a trace opens or a setting changes,
//! and the headless renderer, on the `large` trace. The findings panel (every detector), the statistics window
//! (summaries per label and the samples of its plots), the comparison of two traces, and `tokenscope render` (one
//! 2x PNG of the waterfall, renderer set-up included).
//!
//! `cargo bench --bench background [-- --requests N --runs R]`. Uses `target/bench-data/large-N.parquet` (see
//! `benches/common.rs`).

use std::sync::Arc;

use tokenscope::analysis::cost::Prices;
use tokenscope::analysis::diff::{CompareOptions, compare};
use tokenscope::analysis::findings::{Kind, Thresholds, find, find_kinds};
use tokenscope::analysis::summary::{GroupBy, Slo, summarize_all, summarize_by};
use tokenscope::ui::shell::render::{Scene, Size, View, render};
use tokenscope::ui::views::stats::Samples;
use tokenscope::view::TraceView;
use tokenscope::view::layout::{TrackFilter, TrackOrder};

mod common;

use common::time;

fn main() {
    let requests = common::flag("--requests", 50_000);
    let runs = common::flag("--runs", 5).max(1);
    let (path, _) = common::large_files(requests);
    let trace = Arc::new(common::load_lazily(&path));
    println!(
        "background benchmark: {} requests, {} tokens, {} steps; {runs} runs each (median / max)",
        trace.request_count(),
        trace.token_count(),
        trace.iterations.len()
    );
    let slo = Slo::DEFAULT;
    let (median, max, found) = time(runs, || find(&trace, &slo, &Thresholds::default()));
    println!(
        "findings (every detector): {median:.0} / {max:.0} ms, {} findings",
        found.len()
    );
    // Each detector alone, with the indexes it builds (shared ones are built once in a run of all of them).
    for kind in Kind::ALL {
        let (median, _, found) = time(runs, || find_kinds(&trace, &slo, &Thresholds::default(), &[kind]));
        println!("  {}: {median:.0} ms, {} findings", kind.name(), found.len());
    }

    let prices = Prices::default();
    for by in GroupBy::ALL {
        let (median, max, groups) = time(runs, || summarize_by(&trace, by, slo, Some(&prices)));
        println!(
            "statistics by {}: {median:.0} / {max:.0} ms, {} groups",
            by.name(),
            groups.len()
        );
    }
    let (median, max, samples) = time(runs, || Samples::of(&trace, |_| true));
    println!(
        "statistics plots' samples: {median:.0} / {max:.0} ms ({} TTFT values)",
        samples.ttft_ms.len()
    );

    // The app's comparison job (and `tokenscope diff` once loaded): both summaries and both findings runs, the
    // pairing, each pair's figures. Against itself: 50,000 requests paired by id.
    let (summary_median, _, _) = time(runs, || summarize_all(&trace, slo, None));
    let (median, max, compared) = time(runs, || {
        compare(
            &trace,
            &trace,
            &CompareOptions {
                slo,
                ..CompareOptions::default()
            },
        )
    });
    println!(
        "comparison with itself: {median:.0} / {max:.0} ms, {} pairs ({}); a summary alone: {summary_median:.0} ms",
        compared.pairing.pairs.len(),
        compared.pairing.by.describe()
    );

    let (median, max, size) = time(runs.min(3), || {
        let scene = Scene {
            view: TraceView::new(Arc::clone(&trace), TrackOrder::Arrival, &TrackFilter::default()),
            candidates: None,
            source_name: path.display().to_string(),
            time_range: None,
            selection: None,
            request: None,
            token: None,
            slo,
            caption: true,
            scroll_y: None,
            layout: tokenscope::view::lanes::TrackLayout::Tracks,
        };
        let size = Size {
            width: 1400.0,
            height: 860.0,
            pixels_per_point: 2.0,
        };
        render(scene, View::Waterfall, size)
            .unwrap_or_else(|e| panic!("{e}"))
            .size
    });
    println!(
        "headless render of the whole waterfall, {} x {} pixels: {median:.0} / {max:.0} ms",
        size[0], size[1]
    );
}
