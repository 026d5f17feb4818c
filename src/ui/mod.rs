//! The desktop app (eframe), in three parts, each importing only those below it: the shell (`shell/`: the app, the
//! session of a trace, and the windows that hold sessions: a comparison, a live recording, a watched log), the views
//! of a trace (`views/`: waterfall, high power, findings, statistics, query, timeline) and what both share
//! (`widgets/`: the theme, the one background job type, the command list, PNG capture).

pub mod shell;
pub mod views;
pub mod widgets;

pub use shell::app::App;
pub use shell::session::{DEMO_NAME, Session, TraceSource};

/// Opens the window; returns when it is closed. `budget`: the memory budget of this run's loads, bytes (none: the
/// setting, else half the machine's memory); `from`: the importer of every file (`--from`), instead of recognising
/// it; `log_clock`: the date and zone of server logs (`--log-date`, `--log-tz`); `compare`: a trace to compare the first
/// with.
pub fn run(
    source: TraceSource,
    budget: Option<u64>,
    from: Option<crate::import::Kind>,
    log_clock: crate::import::log_clock::LogClock,
    compare: Option<TraceSource>,
) -> Result<(), eframe::Error> {
    eframe::run_native(
        "tokenscope",
        window("tokenscope"),
        Box::new(move |cc| {
            let mut app = App::with_log_clock(source, cc.storage, budget, from, log_clock);
            if let Some(b) = compare {
                app.compare_with(b);
            }
            Ok(Box::new(app))
        }),
    )
}

/// Opens the window on a recording shown as it is made; returns when the window is closed (the recording then
/// stops, and what it received is written).
pub fn run_live(options: shell::live::LiveOptions) -> Result<(), eframe::Error> {
    eframe::run_native(
        "tokenscope",
        window("tokenscope: recording"),
        Box::new(move |cc| {
            Ok(Box::new(App::recording_in(
                options,
                cc.storage,
                Some(cc.egui_ctx.clone()),
            )))
        }),
    )
}

/// Opens the window on a server's log watched as it is written (`tokenscope watch` without `--json`); returns when
/// the window is closed (the watch then stops).
pub fn run_watch(options: crate::record::watcher::WatchOptions) -> Result<(), eframe::Error> {
    let title = format!("tokenscope: watching {}", options.watched());
    eframe::run_native(
        "tokenscope",
        window(&title),
        Box::new(move |cc| {
            Ok(Box::new(App::watching_in(
                options,
                cc.storage,
                Some(cc.egui_ctx.clone()),
            )))
        }),
    )
}

/// The window's options: its size, title, and files dropped on it.
fn window(title: &str) -> eframe::NativeOptions {
    eframe::NativeOptions {
        viewport: eframe::egui::ViewportBuilder::default()
            .with_inner_size([1400.0, 860.0])
            .with_title(title)
            .with_drag_and_drop(true),
        ..Default::default()
    }
}
