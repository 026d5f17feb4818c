//! The ordinary server logs of vLLM and SGLang, as their own logging code writes them
//! (`tests/data/import/{vllm,sglang}/logs/`, made by `scripts/engines/engine-logs/` calling the engines' stats
//! loggers of each installed release with known values; `README.md` there quotes every line's source). Each log's
//! `.truth.json` lists the values its lines were written from: every stats line must come back as a sample with
//! those values, to the precision the line prints them, at its time and on its engine.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tokenscope::import::log_clock::LogClock;
use tokenscope::load::{LoadOptions, load_with};
use tokenscope::trace::{Sample, Trace};

/// One expected sample: its time (whole seconds, as printed), its source and its counters with their tolerance.
#[derive(Debug)]
struct Expected {
    line: u64,
    time_s: i64,
    source: String,
    values: Vec<(&'static str, f64, f64)>,
}

fn logs(engine: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/import")
        .join(engine)
        .join("logs");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    out.sort();
    out
}

fn truth(log: &Path) -> Value {
    let path = log.with_extension("truth.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// Seconds since the epoch of a printed time, UTC: `"2025-11-03 15:00:12"`, or vLLM's `"11-03 15:00:12"` in `year`.
fn printed_s(printed: &str, year: i32) -> i64 {
    let full = if printed.len() == 14 {
        format!("{year}-{printed}")
    } else {
        printed.to_owned()
    };
    chrono::NaiveDateTime::parse_from_str(&full, "%Y-%m-%d %H:%M:%S")
        .unwrap_or_else(|e| panic!("{printed}: {e}"))
        .and_utc()
        .timestamp()
}

fn f(line: &Value, key: &str) -> Option<f64> {
    line.get(key).and_then(Value::as_f64)
}

/// The samples a log's truth says its lines hold: a second line of a reading (vLLM's speculative decoding, V0's
/// prefix cache) joins the reading of its engine printed in the same second.
fn expected(truth: &Value, year: i32) -> Vec<Expected> {
    let mut out: Vec<Expected> = Vec::new();
    let mut last_printed: Vec<(String, String)> = Vec::new();
    for line in truth["lines"].as_array().unwrap() {
        let kind = line["kind"].as_str().unwrap_or("");
        if line.get("emitted").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let printed = line.get("time_printed").and_then(Value::as_str).unwrap_or("");
        let source = match (
            line.get("engine").and_then(Value::as_i64),
            line.get("dp_rank").and_then(Value::as_i64),
        ) {
            (Some(e), _) if e > 0 => format!("engine-{e:03}"),
            (_, Some(dp)) => format!("dp{dp}"),
            _ => "engine".to_owned(),
        };
        let at = line["log_line"].as_u64().unwrap_or(0);
        // Tolerances: half the last digit each line prints (throughputs %.1f, KV use %.1f %, SGLang's usage %.2f).
        let mut v: Vec<(&'static str, f64, f64)> = Vec::new();
        let mut put = |name, value: Option<f64>, tol| {
            if let Some(x) = value {
                v.push((name, x, tol));
            }
        };
        match kind {
            "stats" => {
                put("running", f(line, "running"), 0.0);
                put("waiting", f(line, "waiting"), 0.0);
                put("kv_usage", f(line, "kv_cache_usage"), 0.000_51);
                put("prompt_throughput", f(line, "prompt_throughput"), 0.051);
                put("generation_throughput", f(line, "generation_throughput"), 0.051);
                if line["prefix_cache_hit_rate_printed"].as_bool() == Some(true) {
                    put("prefix_hit_rate", f(line, "prefix_cache_hit_rate"), 0.000_51);
                }
            }
            "stats_v0" => {
                put("running", f(line, "running"), 0.0);
                put("waiting", f(line, "pending"), 0.0);
                put("swapped", f(line, "swapped"), 0.0);
                put("kv_usage", f(line, "gpu_kv_cache_usage"), 0.000_51);
                put("prompt_throughput", f(line, "prompt_throughput"), 0.051);
                put("generation_throughput", f(line, "generation_throughput"), 0.051);
            }
            "spec" => {
                put("spec_accept_length", f(line, "mean_acceptance_length"), 0.0051);
                put("spec_accept_rate", f(line, "draft_acceptance_rate"), 0.000_51);
                // The interval's counts, printed whole (`Accepted: %d tokens, Drafted: %d tokens`).
                put("spec_drafted_tokens", f(line, "draft_tokens"), 0.0);
                put("spec_accepted_tokens", f(line, "accepted_tokens"), 0.0);
            }
            "kv_transfer" => {
                // vLLM's KV connector line (NIXL's stats): the interval's transfers; times printed to 3 decimals, the
                // size as MB (2^20 bytes) per transfer to 3; with no successful one, time and size absent.
                put("kv_transfers", f(line, "num_successful_transfers"), 0.0);
                if line["failures_printed"].as_bool() == Some(true) {
                    put("kv_transfers_failed", f(line, "num_failed_transfers"), 0.0);
                }
                put("kv_transfer_ms", f(line, "avg_xfer_time_ms"), 0.000_51);
                put("kv_transfer_p90_ms", f(line, "p90_xfer_time_ms"), 0.000_51);
                let n = f(line, "num_successful_transfers").unwrap_or(0.0);
                put("kv_transfer_bytes", f(line, "total_bytes"), n * 0.000_51 * 1_048_576.0);
            }
            "spec_v0" => put("spec_accept_rate", f(line, "draft_acceptance_rate"), 0.000_51),
            "prefix_v0" => put("prefix_hit_rate", f(line, "gpu_prefix_cache_hit_rate"), 0.000_051),
            "prefill" => {
                put("num_prefill_reqs", f(line, "new_seq"), 0.0);
                put("num_prefill_tokens", f(line, "new_token"), 0.0);
                put("cached_tokens", f(line, "cached_token"), 0.0);
                put("kv_usage", f(line, "token_usage"), 0.0051);
                put("running", f(line, "running_req"), 0.0);
                put("waiting", f(line, "queue_req"), 0.0);
                put("prompt_throughput", f(line, "input_throughput"), 0.0051);
                // A disaggregated prefill server's queues: KV caches being sent, handshakes (and 0.5.3's prealloc).
                put("num_inflight", f(line, "inflight_req"), 0.0);
                put("num_bootstrapping", f(line, "bootstrap_req"), 0.0);
                put("num_prealloc", f(line, "prealloc_req"), 0.0);
            }
            "decode" => {
                put("running", f(line, "running_req"), 0.0);
                put("kv_tokens", f(line, "num_token"), 0.0);
                put("kv_usage", f(line, "token_usage"), 0.0051);
                put("generation_throughput", f(line, "gen_throughput"), 0.0051);
                put("waiting", f(line, "queue_req"), 0.0);
                put("spec_accept_length", f(line, "accept_len"), 0.0051);
                put("spec_accept_rate", f(line, "accept_rate"), 0.0051);
                // A disaggregated decode server's queues: waiting for room, receiving their KV cache, retracted.
                put("num_prealloc", f(line, "prealloc_req"), 0.0);
                put("num_transferring", f(line, "transfer_req"), 0.0);
                put("num_retracted", f(line, "retracted_req"), 0.0);
            }
            _ => continue,
        }
        let second_line = matches!(kind, "spec" | "spec_v0" | "prefix_v0" | "kv_transfer");
        if second_line
            && last_printed.iter().any(|(s, p)| *s == source && p == printed)
            && let Some(reading) = out.iter_mut().rev().find(|e| e.source == source)
        {
            reading.values.extend(v);
            continue;
        }
        last_printed.retain(|(s, _)| *s != source);
        last_printed.push((source.clone(), printed.to_owned()));
        // The year a line was written in (a log may cross New Year), else the log's first.
        let line_year = line
            .get("time_iso")
            .and_then(Value::as_str)
            .map_or(year, |iso| iso[..4].parse().unwrap());
        out.push(Expected {
            line: at,
            time_s: printed_s(printed, line_year),
            source,
            values: v,
        });
    }
    out
}

fn value(s: &Sample, name: &str) -> Option<f64> {
    match name {
        "running" => s.num_running.map(f64::from),
        "waiting" => s.num_waiting.map(f64::from),
        "swapped" => s.num_swapped.map(f64::from),
        "kv_usage" => s.kv_usage,
        "kv_tokens" => s.kv_tokens.map(f64::from),
        "prompt_throughput" => s.prompt_throughput,
        "generation_throughput" => s.generation_throughput,
        "prefix_hit_rate" => s.prefix_hit_rate,
        "spec_accept_length" => s.spec_accept_length,
        "spec_accept_rate" => s.spec_accept_rate,
        "spec_drafted_tokens" => s.spec_drafted_tokens.map(f64::from),
        "spec_accepted_tokens" => s.spec_accepted_tokens.map(f64::from),
        "num_prefill_reqs" => s.num_prefill_reqs.map(f64::from),
        "num_prefill_tokens" => s.num_prefill_tokens.map(f64::from),
        "cached_tokens" => s.cached_tokens.map(f64::from),
        "num_inflight" => s.num_inflight.map(f64::from),
        "num_bootstrapping" => s.num_bootstrapping.map(f64::from),
        "num_prealloc" => s.num_prealloc.map(f64::from),
        "num_transferring" => s.num_transferring.map(f64::from),
        "num_retracted" => s.num_retracted.map(f64::from),
        "kv_transfers" => s.kv_transfers.map(f64::from),
        "kv_transfers_failed" => s.kv_transfers_failed.map(f64::from),
        "kv_transfer_ms" => s.kv_transfer_ms,
        "kv_transfer_p90_ms" => s.kv_transfer_p90_ms,
        #[expect(clippy::cast_precision_loss, reason = "bytes compared within a tolerance")]
        "kv_transfer_bytes" => s.kv_transfer_bytes.map(|b| b as f64),
        other => panic!("no counter {other}"),
    }
}

/// The log's samples in file order (by time, then as read: the builder's sort is stable).
fn samples_of(trace: &Trace) -> Vec<(i64, String, Sample)> {
    let mut rows: Vec<(i64, String, Sample)> = (0..trace.samples.len())
        .map(|i| {
            let s = trace.samples.row(i);
            (s.time_ns, trace.label(s.source).unwrap_or("").to_owned(), s)
        })
        .collect();
    rows.sort_by_key(|r| r.0);
    rows
}

/// Checks every log of `engine` against its truth; returns how many samples were checked.
fn check_engine(engine: &str) -> usize {
    let mut checked = 0;
    for log in logs(engine) {
        let truth = truth(&log);
        let lines = truth["lines"].as_array().unwrap();
        let year = lines
            .iter()
            .find_map(|l| l.get("time_iso").and_then(Value::as_str))
            .map_or(2024, |iso| iso[..4].parse().unwrap());
        let mut want = expected(&truth, year);
        if truth.get("pair_truth").is_some() {
            // A server of a disaggregated deployment: its log file names its instance, its samples' source too.
            let instance = log
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            for w in &mut want {
                w.source.clone_from(&instance);
            }
        }
        let options = LoadOptions {
            log_clock: LogClock {
                date: chrono::NaiveDate::from_ymd_opt(year, 1, 1),
                utc_offset_s: None,
            },
            ..LoadOptions::default()
        };
        let name = log.display().to_string();
        if want.is_empty() {
            // A log without a stats line (a data-parallel engine that logs nowhere this process writes): nothing is
            // invented; it is refused as no trace, or loads with no sample.
            if let Ok(l) = load_with(&log, &tokenscope::load::Progress::default(), options) {
                assert_eq!(l.trace.samples.len(), 0, "{name}");
            }
            continue;
        }
        let loaded =
            load_with(&log, &tokenscope::load::Progress::default(), options).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            loaded.report.rejected_count(),
            0,
            "{name}: {:?}",
            loaded.report.rejected
        );
        let got = samples_of(&loaded.trace);
        assert_eq!(got.len(), want.len(), "{name}: samples {got:#?}\nexpected {want:#?}");
        // Same second and same source, in order: pair each expected reading with the next unused sample.
        let mut used = vec![false; got.len()];
        for w in &want {
            let k = (0..got.len())
                .find(|&k| !used[k] && got[k].0 == w.time_s * 1_000_000_000 && got[k].1 == w.source)
                .unwrap_or_else(|| panic!("{name}:{}: no sample at {} s on {}", w.line, w.time_s, w.source));
            used[k] = true;
            for &(counter, x, tol) in &w.values {
                let v = value(&got[k].2, counter)
                    .unwrap_or_else(|| panic!("{name}:{}: {counter} absent, expected {x}", w.line));
                assert!(
                    (v - x).abs() <= tol + 1e-9,
                    "{name}:{}: {counter} {v}, expected {x} (±{tol})",
                    w.line
                );
            }
            checked += 1;
        }
    }
    checked
}

#[test]
fn every_vllm_stats_line_of_every_release_comes_back_as_the_values_it_was_written_from() {
    // 0.15.1 and 0.33.0 (single engine, speculative decoding, two engines logged apart and aggregated, colours
    // off), and the V0 wording of 0.6, hand-written from its source.
    let checked = check_engine("vllm");
    assert!(checked >= 40, "only {checked} samples checked");
}

#[test]
fn every_sglang_batch_line_of_every_release_comes_back_as_the_values_it_was_written_from() {
    // 0.5.3, 0.5.9, 0.5.10 and 0.5.23: prefill and decode lines, speculative decoding, two data-parallel ranks.
    let checked = check_engine("sglang");
    assert!(checked >= 40, "only {checked} samples checked");
}

#[test]
fn a_log_read_in_another_zone_moves_by_its_offset_and_says_so() {
    let log = logs("sglang").into_iter().find(|p| p.ends_with("0.5.23.log")).unwrap();
    let progress = tokenscope::load::Progress::default();
    let utc = load_with(&log, &progress, LoadOptions::default()).unwrap();
    let shanghai = load_with(
        &log,
        &progress,
        LoadOptions {
            log_clock: LogClock {
                date: None,
                utc_offset_s: Some(8 * 3600),
            },
            ..LoadOptions::default()
        },
    )
    .unwrap();
    // The same lines, eight hours earlier on the epoch.
    assert_eq!(utc.trace.samples.len(), shanghai.trace.samples.len());
    assert_eq!(
        utc.trace.samples.time_ns[0] - shanghai.trace.samples.time_ns[0],
        8 * 3_600_000_000_000
    );
    let notes = |l: &tokenscope::load::Loaded| l.report.notes.join("\n");
    assert!(
        notes(&utc).contains("as UTC (the log names no zone; give the server's with --log-tz)"),
        "{}",
        notes(&utc)
    );
    assert!(
        notes(&shanghai).contains("as +08:00 (--log-tz)"),
        "{}",
        notes(&shanghai)
    );
}

#[test]
fn samples_convert_to_both_encodings_and_read_back_the_same() {
    // A log's samples written by `convert` as Parquet and as JSONL, and read back: every counter, absent ones
    // absent, in both.
    let log = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample_traces/engines/vllm-log/server.log");
    let dir = tempfile::tempdir().unwrap();
    let progress = tokenscope::load::Progress::default();
    let original = load_with(&log, &progress, LoadOptions::default()).unwrap().trace;
    assert_eq!(original.samples.len(), 9);
    for name in ["log.parquet", "log.jsonl"] {
        let out = dir.path().join(name);
        let (code, stdout, stderr) =
            crate::common::tokenscope(&["convert", log.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        assert_eq!(code, 0, "{stdout}{stderr}");
        let back = load_with(&out, &progress, LoadOptions::default()).unwrap().trace;
        let rows = |t: &Trace| (0..t.samples.len()).map(|i| t.samples.row(i)).collect::<Vec<Sample>>();
        // Sources are label ids of each trace's own table: compare the rows with the source's name instead.
        let named = |t: &Trace| {
            rows(t)
                .into_iter()
                .map(|mut s| {
                    let name = t.label(s.source).unwrap_or("").to_owned();
                    s.source = 0;
                    (name, s)
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(named(&back), named(&original), "{name}");
        // The first reading has no interval (nothing before it); the others cover the 10 s since the last.
        assert_eq!(back.samples.interval_ns[0], None);
        assert_eq!(back.samples.interval_ns[1], Some(10_000_000_000));
        assert_eq!(back.samples.spec_accept_length[0], None, "absent stays absent");
        assert_eq!(back.meta.engine.as_deref(), Some("vllm"));
    }
}

#[test]
fn a_file_that_mixes_three_servers_logs_keeps_each_servers_readings_apart() {
    // `docker compose logs` of two vLLM servers and an SGLang one: each line names its server, the lines of the three
    // interleaved. Each server's readings are its own log's, under its name.
    let dir = tempfile::tempdir().unwrap();
    let progress = tokenscope::load::Progress::default();
    let options = || LoadOptions {
        log_clock: LogClock {
            date: chrono::NaiveDate::from_ymd_opt(2025, 11, 3),
            utc_offset_s: None,
        },
        ..LoadOptions::default()
    };
    let parts = [
        ("vllm-a", "vllm/logs/0.33.0.log"),
        ("vllm-b", "vllm/logs/0.15.1-spec.log"),
        ("sglang", "sglang/logs/0.5.23.log"),
    ];
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/import");
    let texts: Vec<String> = parts
        .iter()
        .map(|(_, p)| std::fs::read_to_string(data.join(p)).unwrap())
        .collect();
    let mut mixed = String::new();
    let longest = texts.iter().map(|t| t.lines().count()).max().unwrap();
    for i in 0..longest {
        for ((name, _), text) in parts.iter().zip(&texts) {
            if let Some(line) = text.lines().nth(i) {
                mixed.push_str(&format!("{name:<8}| {line}\n"));
            }
        }
    }
    let path = dir.path().join("compose.log");
    std::fs::write(&path, mixed).unwrap();
    let loaded = load_with(&path, &progress, options()).unwrap();
    assert_eq!(loaded.report.rejected_count(), 0, "{:?}", loaded.report.rejected);
    let t = &loaded.trace;
    for (name, p) in parts {
        let alone = load_with(&data.join(p), &progress, options()).unwrap().trace;
        let mine = (0..t.samples.len())
            .filter(|&i| t.label(t.samples.source[i]) == Some(name))
            .count();
        assert_eq!(mine, alone.samples.len(), "{name}");
        assert!(mine > 0, "{name}");
    }
}

#[test]
fn a_starved_data_parallel_rank_is_named_and_a_balanced_pair_is_not() {
    use tokenscope::analysis::findings::{Kind, Thresholds, find_kinds};
    use tokenscope::analysis::summary::Slo;
    let open = |log: &Path| {
        let options = LoadOptions {
            log_clock: LogClock {
                date: chrono::NaiveDate::from_ymd_opt(2025, 1, 1),
                utc_offset_s: None,
            },
            ..LoadOptions::default()
        };
        // A log with no stats line (dp2-default) is no trace.
        load_with(log, &tokenscope::load::Progress::default(), options)
            .ok()
            .map(|l| l.trace)
    };
    for log in logs("vllm") {
        let name = log
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some(trace) = open(&log) else { continue };
        let found = find_kinds(&trace, &Slo::default(), &Thresholds::default(), &[Kind::RankImbalance]);
        if !name.contains("dp2-skew") {
            assert!(found.is_empty(), "{name}: {found:#?}");
            continue;
        }
        // The scenario (scripts/engines/engine-logs/vllm_log.py, dp2-skew): every request goes to engine 0 for the
        // four 10-s intervals read at 18:01:23, :33, :43 and :53 (its queue 6, 14, 22, 9) while engine 1 reads
        // "Running: 0 reqs, Waiting: 0 reqs" at 18:01:23 and then, idle, logs nothing until 18:02:03.
        let [f] = found.as_slice() else {
            panic!("{name}: {found:#?}")
        };
        assert_eq!(
            f.summary,
            "engine had requests waiting (up to 22) in 4 readings over 40 s while instance engine-001 of the same \
             server was idle (nothing running or waiting): the load was not spread over its ranks",
            "{name}"
        );
        let at = |hms: &str| {
            chrono::NaiveDateTime::parse_from_str(&format!("2025-11-03 {hms}"), "%Y-%m-%d %H:%M:%S")
                .unwrap_or_else(|e| panic!("{e}"))
                .and_utc()
                .timestamp_nanos_opt()
                .unwrap_or(0)
        };
        assert_eq!((f.from_ns, f.to_ns), (at("18:01:13"), at("18:01:53")), "{name}");
    }
}

/// Unix seconds of a truth's timestamp, ns.
fn epoch_ns(v: &Value) -> i64 {
    (v.as_f64().unwrap_or_else(|| panic!("{v}")) * 1e9).round() as i64
}

#[test]
fn a_disaggregated_sglang_deployments_two_logs_open_as_each_request_whole_across_its_instances() {
    use tokenscope::analysis::findings::{Kind, Thresholds, find};
    use tokenscope::analysis::summary::Slo;
    use tokenscope::trace::StageKind;
    // Written by each release's own timing and stats code (scripts/engines/engine-logs/sglang_log.py, scenario pd):
    // six requests through a prefill and a decode server, r1's KV transfer 400 ms, the others' 5 to 20 ms.
    for v in ["0.5.3", "0.5.9", "0.5.10", "0.5.23"] {
        let dir = "tests/data/import/sglang/logs";
        let truth: Value = serde_json::from_str(
            &std::fs::read_to_string(format!("{dir}/{v}-pd.truth.json")).unwrap_or_else(|e| panic!("{e}")),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let (prefill, decode) = (format!("{v}-pd-prefill"), format!("{v}-pd-decode"));
        let files = [format!("{dir}/{prefill}.log"), format!("{dir}/{decode}.log")];
        let paths: Vec<&Path> = files.iter().map(Path::new).collect();
        let loaded =
            tokenscope::load::load_many(&paths, &tokenscope::load::Progress::default(), LoadOptions::default())
                .unwrap_or_else(|e| panic!("{v}: {e}"));
        assert_eq!(loaded.report.rejected_count(), 0, "{v}: {:?}", loaded.report.rejected);
        let t = &loaded.trace;
        // Six requests joined by their bootstrap room, and each server's warm-up alone.
        assert_eq!(t.request_count(), 8, "{v}");
        // Releases that print the transfer's size and speed (0.5.10 on) give it; 0.5.9 prints zeros, 0.5.3 nothing.
        let transfer_printed = matches!(v, "0.5.10" | "0.5.23");
        let mut arrival_offsets = Vec::new();
        for r in truth["requests"].as_array().unwrap_or_else(|| panic!("{v}: requests")) {
            let id = r["decode"]["rid"].as_str().unwrap_or_default();
            let row = t
                .request_row(id)
                .unwrap_or_else(|| panic!("{v}: {id} ({})", r["request"]));
            let q = t.requests.row(row as usize);
            assert_eq!(t.label(q.source), Some(prefill.as_str()), "{v} {id}");
            assert_eq!(t.label(t.decode_source(row)), Some(decode.as_str()), "{v} {id}");
            assert_eq!(q.input_tokens.map(i64::from), r["prompt_tokens"].as_i64(), "{v} {id}");
            assert_eq!(
                q.output_tokens.map(i64::from),
                r["decode"]["output_len"].as_i64(),
                "{v} {id}"
            );
            let p_entry = epoch_ns(&r["prefill"]["timestamps_epoch"]["prefill_bootstrap_queue_entry"]);
            let done = epoch_ns(&r["decode"]["timestamps_epoch"]["completion"]);
            let first = epoch_ns(&r["decode"]["timestamps_epoch"]["forward_entry"]);
            // The request's span on its arrival: to the ms printed on 0.5.23 (entry_time), else as far as the logs'
            // whole seconds place a perf_counter clock; its first token and end from each server's arrival (printed
            // to the ms) by the printed durations (10 µs): within a ms of the code's own timestamps.
            let arrival = q.arrival_ns;
            arrival_offsets.push(arrival - p_entry);
            let shift = arrival - p_entry;
            assert!(
                (q.finished_ns.unwrap_or(0) - shift - done).abs() < 1_000_000,
                "{v} {id}: end"
            );
            assert!(
                (q.first_token_ns.unwrap_or(0) - shift - first).abs() < 1_000_000,
                "{v} {id}: first token"
            );
            let transfers: Vec<(i64, i64, Option<u32>)> = t
                .stages_of(row)
                .iter()
                .filter(|s| s.kind == StageKind::KvTransfer)
                .map(|s| (s.start_ns - shift, s.end_ns - shift, s.tokens))
                .collect();
            let sizes: Vec<(Option<u64>, Option<u32>)> = t
                .explicit_stages_of(row)
                .filter(|&i| t.stages.kind[i] == StageKind::KvTransfer)
                .map(|i| (t.stages.bytes[i], t.stages.retries[i]))
                .collect();
            if transfer_printed {
                // transfer_total / transfer_speed, the speed printed to 2 decimals: within 1 % and 1 ms.
                let (start, end) = (
                    epoch_ns(&r["kv_transfer"]["start_epoch"]),
                    epoch_ns(&r["kv_transfer"]["end_epoch"]),
                );
                let tol = (end - start) / 100 + 1_000_000;
                assert_eq!(transfers.len(), 1, "{v} {id}: {transfers:?}");
                let (s0, e0, tokens) = transfers[0];
                assert!(
                    (s0 - start).abs() <= tol && (e0 - end).abs() <= tol,
                    "{v} {id}: {transfers:?} vs {start}..{end}"
                );
                assert_eq!(tokens.map(i64::from), r["prompt_tokens"].as_i64(), "{v} {id}");
                // Its bytes: transfer_total, MB of 2^20 bytes printed to 2 decimals (within 0.005 MB); its retries
                // where the prefill's line prints them.
                let bytes = r["kv_transfer"]["bytes"].as_i64().unwrap_or(-1);
                let (got, retries) = sizes[0];
                let got = got.and_then(|b| i64::try_from(b).ok()).unwrap_or(0);
                assert!((got - bytes).abs() <= 5_243, "{v} {id}: {got} bytes for {bytes}");
                let printed = r["prefill"]["printed"].as_str().unwrap_or_default();
                let want = printed
                    .split_once("#retries=")
                    .and_then(|(_, n)| n.trim().parse::<u32>().ok());
                assert_eq!(retries, want, "{v} {id}: retries of {printed}");
            } else {
                assert!(
                    transfers.is_empty(),
                    "{v} {id}: a transfer the log does not give: {transfers:?}"
                );
            }
        }
        // 0.5.23's arrival is printed to the ms; a perf_counter clock is placed within the second its lines name.
        let worst = arrival_offsets.iter().map(|d| d.abs()).max().unwrap_or(0);
        let bound = if v == "0.5.23" { 1_000_000 } else { 1_000_000_000 };
        assert!(worst < bound, "{v}: arrivals off by up to {worst} ns");
        // The slow transfer is named, on r1 alone, where the log gives transfers.
        let slow: Vec<String> = find(t, &Slo::DEFAULT, &Thresholds::default())
            .iter()
            .filter(|f| f.kind == Kind::SlowKvTransfer)
            .flat_map(|f| f.requests.iter().map(|&r| t.request_id(r).to_owned()))
            .collect();
        let r1 = truth["requests"][1]["decode"]["rid"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if transfer_printed {
            assert_eq!(slow.first(), Some(&r1), "{v}: {slow:?}");
        } else {
            assert!(slow.is_empty(), "{v}: {slow:?}");
        }
    }
}

#[test]
fn a_vllm_kv_connectors_lines_keep_each_server_apart_and_an_interval_without_a_transfer_times_nothing() {
    // vLLM's own NIXL stats and logging code (scenario pd-nixl): a prefill and a decode server's logs, opened together.
    let dir = "tests/data/import/vllm/logs";
    for v in ["0.15.1", "0.33.0"] {
        let files = [
            format!("{dir}/{v}-pd-nixl-prefill.log"),
            format!("{dir}/{v}-pd-nixl-decode.log"),
        ];
        let paths: Vec<&Path> = files.iter().map(Path::new).collect();
        let loaded =
            tokenscope::load::load_many(&paths, &tokenscope::load::Progress::default(), LoadOptions::default())
                .unwrap_or_else(|e| panic!("{v}: {e}"));
        let t = &loaded.trace;
        let mut sources: Vec<&str> = t.samples.source.iter().filter_map(|&s| t.label(s)).collect();
        sources.sort_unstable();
        sources.dedup();
        assert_eq!(
            sources,
            [format!("{v}-pd-nixl-decode"), format!("{v}-pd-nixl-prefill")],
            "{v}"
        );
        // The prefill server's one KV line: no transfer of its own (a request's blocks expired), so no time, nothing
        // moved; 0.15.1 prints no failure count, absent rather than 0.
        let prefill = t.labels.lookup(&format!("{v}-pd-nixl-prefill")).unwrap_or(u32::MAX);
        let kv: Vec<_> = (0..t.samples.len())
            .map(|i| t.samples.row(i))
            .filter(|s| s.source == prefill && s.kv_transfers.is_some())
            .collect();
        assert_eq!(kv.len(), 1, "{v}: {kv:?}");
        let s = kv[0];
        assert_eq!(
            (
                s.kv_transfers,
                s.kv_transfer_ms,
                s.kv_transfer_p90_ms,
                s.kv_transfer_bytes
            ),
            (Some(0), None, None, Some(0)),
            "{v}"
        );
        assert_eq!(s.kv_transfers_failed, (v == "0.33.0").then_some(0), "{v}");
    }
}
