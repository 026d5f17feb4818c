//! The diagnosis corpus (`tokenscope corpus`, `docs/FINDINGS.md`): on three hardware profiles, chunked prefill on and
//! off, chat traffic and real Azure arrivals below and above capacity, every planted incident is found, the clean
//! twins give no finding of an incident kind, and overload comes out for the clean twins above capacity and never
//! below (a planted incident may move it, for its own reason).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use tokenscope_core::analysis::findings::{Finding, Kind, Thresholds};
use tokenscope_core::analysis::summary::Slo;
use tokenscope_core::format::parquet::write;
use tokenscope_core::load::stream::findings::find;
use tokenscope_core::trace::Trace;
use tokenscope_synth::corpus::{self, Case, Outcome};
use tokenscope_synth::{Incident, Profile};

/// Every case's outcome; each case's findings streamed from its trace written to Parquet are checked to be the
/// loaded ones, finding by finding (every kind a stream judges, which is every kind of these unscored runs).
fn outcomes() -> Vec<Outcome> {
    let dir = tempfile::tempdir().unwrap();
    let th = Thresholds::default();
    let streamed_as_loaded = |case: &Case, trace: &Trace, loaded: &[Finding]| {
        let file = dir
            .path()
            .join(format!("{}.parquet", case.name().replace(['/', ' '], "_")));
        write(trace, &file).unwrap();
        let streamed = find(std::slice::from_ref(&file), None, &Slo::DEFAULT, &th, &Kind::ALL).unwrap();
        assert_eq!(streamed.findings, loaded, "{}: streamed against loaded", case.name());
        assert_eq!(
            streamed.passes,
            1 + u32::from(loaded.iter().any(|f| f.kind == Kind::ChronicInterference))
        );
        std::fs::remove_file(file).unwrap();
    };
    corpus::run_each(&corpus::cases(), &crate::common::repo(""), &th, &streamed_as_loaded).unwrap()
}

#[test]
fn the_detectors_hold_on_every_profile_of_the_corpus() {
    let all = outcomes();
    // 3 profiles × 2 chunking × 3 loads × (clean + 3 incidents).
    assert_eq!(all.len(), 72);
    for o in &all {
        let name = o.case.name();
        if o.case.plant.is_some() {
            assert_eq!(o.found, Some(true), "{name}: the planted incident was missed");
        }
        assert!(
            o.false_findings.is_empty(),
            "{name}: incident findings naming no planted request: {:?}",
            o.false_findings
        );
    }
    // Overload is a property of the traffic, so the clean twins carry the claim: below capacity no clean run gives
    // one, above capacity every clean run does. A planted incident may change either: its prompts are work the load
    // did not count (on the CPU the planted 24k- and four 6k-token prompts take half a minute, and chat queues
    // behind them), or one prompt holds the instance for most of the episode (then the prefill monopoly is what is
    // found). So a run with a plant may differ from its clean twin, and one without may not.
    for o in &all {
        if o.case.plant.is_none() {
            assert_eq!(o.overload, o.case.overloaded(), "{}", o.case.name());
        }
    }
    // And each run that differs does for its plant's reason: below capacity, the planted interrupting prompts' work
    // (overload found); above, the planted long prefill holding the instance (overload not found).
    for o in all.iter().filter(|o| o.overload != o.case.overloaded()) {
        let reason = if o.case.overloaded() {
            Incident::LongPrefill
        } else {
            Incident::Interrupts
        };
        assert_eq!(o.case.plant, Some(reason), "{}", o.case.name());
    }
    let differing = all.iter().filter(|o| o.overload != o.case.overloaded()).count();
    assert!(
        differing <= all.len() / 12,
        "{differing} of {} runs differ from their load",
        all.len()
    );
    // The planted prompts stand out from ordinary traffic on every profile: the measure the detectors compare with
    // `outsized_prefill_factor` (3) is under 2 for every ordinary prompt and over 3.3 for every planted large one.
    for o in &all {
        assert!(
            o.largest_ordinary_ratio < 2.0,
            "{}: {}",
            o.case.name(),
            o.largest_ordinary_ratio
        );
        if matches!(o.case.plant, Some(Incident::Interrupts | Incident::LongPrefill)) {
            assert!(
                o.planted_ratio.unwrap() > 3.3,
                "{}: {:?}",
                o.case.name(),
                o.planted_ratio
            );
        }
    }
    let profiles: Vec<Profile> = all.iter().map(|o| o.case.profile).collect();
    assert!(Profile::ALL.iter().all(|p| profiles.contains(p)));
}
