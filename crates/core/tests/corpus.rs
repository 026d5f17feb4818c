//! The diagnosis corpus (`tokenscope corpus`, `docs/FINDINGS.md`): on three hardware profiles, chunked prefill on and
//! off, chat traffic and real Azure arrivals below and above capacity, every planted incident is found, the clean
//! twins give no finding of an incident kind, and overload comes out above capacity and never below.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use tokenscope_core::analysis::findings::Thresholds;
use tokenscope_core::corpus::{self, Outcome};
use tokenscope_core::synth::{Incident, Profile};

fn outcomes() -> Vec<Outcome> {
    corpus::run(&corpus::cases(), &crate::common::repo(""), &Thresholds::default()).unwrap()
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
    // Below capacity, no overload but one: on the CPU, the planted 24k- and four 6k-token prompts arrive within 2 s,
    // 48,000 tokens that take it half a minute to compute, and chat requests queue behind them that long.
    let below: Vec<String> = all
        .iter()
        .filter(|o| !o.case.overloaded() && o.overload)
        .map(|o| o.case.name())
        .collect();
    assert_eq!(below, ["cpu-270m chunked chat + prefill-interrupts-decode"]);
    // Overload above capacity: every run but one, where a 46,800-token prompt planted on the L4 holds the instance
    // for most of the episode: the prefill monopoly's finding says it.
    let missed: Vec<String> = all
        .iter()
        .filter(|o| o.case.overloaded() && !o.overload)
        .map(|o| o.case.name())
        .collect();
    assert_eq!(missed, ["l4-8b chunked azure x1 + long-prefill"]);
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
