//! `tokenscope watch --log FILE|--otlp HOST:PORT [--metrics URL] [--json] [--incidents DIR] [--before-s S] [--after-s S]
//! [--keep-s S] [--ring-bytes SIZE] [--part-s S] [--on-finding CMD] [--interval-s S] [--idle-exit S]`: follows what a
//! server already writes, sending it nothing but a read of its `/metrics`, and says each incident once, as it
//! happens; with `--incidents`, keeps the minutes around it as a trace of its own, and the last minutes as a ring
//! ([`crate::record::watcher`] does the following and the keeping). With `--json` it runs without a window and
//! prints each new finding as a JSON line; without, the app shows the watch (its waterfall, Timeline and findings).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use super::Output;
use super::findings::finding_json;
use crate::record::watcher::{New, Note, WatchOptions, Watcher};
use crate::trace::Trace;

/// The arguments of `watch`.
#[derive(Debug, Clone, clap::Args)]
pub struct WatchArgs {
    /// The server's log to follow: llama-server's `--log-file` (at `-lv 5` every step and token), or a vLLM or SGLang
    /// log (its output redirected to a file: its stats lines, and its request timing lines where enabled). It need
    /// not exist yet. Without it, `--otlp` is what is watched.
    #[arg(long, value_name = "FILE", required_unless_present = "otlp")]
    pub log: Option<PathBuf>,
    /// Also read the server's Prometheus metrics at each look (llama-server started with --metrics:
    /// http://HOST:PORT/metrics; vLLM's, SGLang's): requests running and waiting, KV use and throughputs, as the
    /// samples of source `metrics` (what a server does not export stays absent).
    #[arg(long, value_name = "URL")]
    pub metrics: Option<String>,
    /// Also receive the server's spans on this address, as an OTLP/HTTP collector does (`127.0.0.1:4318`; port 0
    /// takes a free one, said on stderr). gRPC (vLLM's and SGLang's exporters' default: `--otlp-traces-endpoint
    /// http://ADDR`) and OTLP/HTTP (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf`, http://ADDR/v1/traces) are both
    /// taken. The spans' requests join the log's steps in the watch's trace.
    #[arg(long, value_name = "HOST:PORT")]
    pub otlp: Option<String>,
    /// Run without a window and print each finding as one JSON line (the fields of `findings --json`, and
    /// `incident`: its file); without it, the app shows the watch.
    #[arg(long)]
    pub json: bool,
    /// Keep the minutes around each critical or warning finding in this folder, as a trace with the finding in its
    /// note (`incident-NNN-KIND.parquet`).
    #[arg(long, value_name = "DIR")]
    pub incidents: Option<PathBuf>,
    /// Seconds of the log kept before a finding's start in its incident file.
    #[arg(long, value_name = "S", default_value_t = 120.0)]
    pub before_s: f64,
    /// Seconds after a finding during which its incident file is written again with what followed.
    #[arg(long, value_name = "S", default_value_t = 30.0)]
    pub after_s: f64,
    /// Run this command for each new finding, with its incident file (or "-") and the finding as JSON as its two
    /// arguments (for a pager or a chat hook).
    #[arg(long, value_name = "CMD")]
    pub on_finding: Option<String>,
    /// Read the log and the spans received at least every this many seconds (sooner, 0.1 s apart at most, when
    /// they grow), and /metrics every this many.
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    pub interval_s: f64,
    /// Stop when the log has said nothing new (no request, step, token or counter) for this many seconds, writing
    /// what is pending first (default: until interrupted). Lines of no request (a scrape of /metrics) are not news.
    #[arg(long, value_name = "S")]
    pub idle_exit: Option<f64>,
    /// Seconds of the log held in memory and judged by the findings: requests and steps that ended longer before
    /// the log's last line are forgotten (a request still running is kept).
    #[arg(long, value_name = "S", default_value_t = 600.0)]
    pub keep_s: f64,
    /// With --incidents: the most the ring of the last minutes (DIR/ring/) holds on disk (1GB, 500MB, 2GiB); its
    /// oldest parts are deleted beyond it, incident files never.
    #[arg(long, value_name = "SIZE", value_parser = crate::load::budget::parse_size, default_value = "1GB")]
    pub ring_bytes: u64,
    /// With --incidents: seconds of the log in each part of the ring.
    #[arg(long, value_name = "S", default_value_t = 60.0)]
    pub part_s: f64,
}

impl WatchArgs {
    /// The watch these arguments ask for.
    ///
    /// # Errors
    /// A number of seconds that is negative or not a number: which.
    pub fn options(&self) -> Result<WatchOptions, String> {
        for (name, v) in [
            ("--interval-s", self.interval_s),
            ("--before-s", self.before_s),
            ("--after-s", self.after_s),
            ("--keep-s", self.keep_s),
            ("--part-s", self.part_s),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{name} {v}: give a number of seconds, 0 or more"));
            }
        }
        Ok(WatchOptions {
            metrics: self.metrics.clone(),
            otlp: self.otlp.clone(),
            incidents: self.incidents.clone(),
            before_s: self.before_s,
            after_s: self.after_s,
            keep_s: self.keep_s,
            ring_bytes: self.ring_bytes,
            part_s: self.part_s,
            interval: Duration::from_secs_f64(self.interval_s.max(0.05)),
            log: self.log.clone(),
            ..WatchOptions::of(Path::new(""))
        })
    }

    /// Runs `watch`: in the app, or with `--json` without a window until the log says nothing new for
    /// `--idle-exit` seconds (or forever).
    pub fn run(&self) -> Output {
        let options = match self.options() {
            Ok(o) => o,
            Err(e) => return Output::error(e, 2),
        };
        if !self.json {
            return match crate::ui::run_watch(options) {
                Ok(()) => Output::default(),
                Err(e) => Output::error(
                    format!("cannot open the window ({e}); with --json, watch runs without one"),
                    1,
                ),
            };
        }
        let mut watcher = match Watcher::new(options) {
            Ok(w) => w,
            Err(e) => return Output::error(e, 1),
        };
        eprintln!(
            "watching {} (nothing is sent to the server)",
            watcher.options().watched()
        );
        if let Some(addr) = watcher.otlp_addr() {
            eprintln!("receiving spans on http://{addr}/v1/traces");
        }
        loop {
            let idle = self
                .idle_exit
                .is_some_and(|idle| watcher.quiet_for().as_secs_f64() >= idle);
            let (new, notes) = watcher.look(idle);
            for n in notes {
                match n {
                    Note::Restarted => eprintln!(
                        "watch: the server started again; its new run's findings are its own, what was kept of the \
                         last stays"
                    ),
                    Note::Trouble(e) => eprintln!("watch: {e}"),
                }
            }
            if let Some(trace) = watcher.trace() {
                for n in &new {
                    self.say(trace, n);
                }
            }
            if idle {
                break;
            }
            watcher.wait(|| false);
        }
        Output {
            stdout: String::new(),
            stderr: format!("watched {}\n", watcher.summary()),
            code: 0,
        }
    }

    /// Prints a new finding as a JSON line, says it on stderr and runs `--on-finding` for it.
    fn say(&self, trace: &Trace, n: &New) {
        let f = &n.finding;
        let mut v = finding_json(trace, trace.start_ns(), f);
        v["incident"] = n
            .file
            .as_ref()
            .map_or(serde_json::Value::Null, |p| json!(p.display().to_string()));
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{v}");
        let _ = out.flush();
        eprintln!(
            "watch: finding {}: {} ({})",
            n.number,
            f.kind.title(),
            f.severity.name()
        );
        if let Some(cmd) = &self.on_finding {
            let file = n
                .file
                .as_ref()
                .map_or_else(|| "-".to_owned(), |p| p.display().to_string());
            match std::process::Command::new(cmd).arg(&file).arg(v.to_string()).status() {
                Ok(status) if !status.success() => eprintln!("watch: {cmd} exited with {status}"),
                Ok(_) => {}
                Err(e) => eprintln!("watch: cannot run {cmd}: {e}"),
            }
        }
    }
}
