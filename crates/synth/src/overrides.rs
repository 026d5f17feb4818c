//! Changes to the simulated engines' configuration (`synth --set KEY=VALUE`, and the older `--chunked-prefill`,
//! `--prefix-cache-tokens`, `--profile` flags): one [`Overrides`] applied to every instance after the scenario, or
//! the replayed trace, has set it up.

use super::arrivals::PREFIX_BLOCK_TOKENS;
use super::choice::ProfileChoice;
use super::disagg::{self, Disaggregation, TransferCost};
use super::engine_config::EngineConfig;
use super::speculation::{self, Speculation};
use tokenscope_core::analysis::stats::thousands;

pub use super::engine_config::{MAX_BATCHED_TOKENS, MAX_SEQS};
/// The most instances `--set` accepts (the simulator looks at every instance for every event).
pub const MAX_INSTANCES: usize = 1_024;
/// The largest prefix cache `--set` accepts, tokens (a pool of a trillion tokens, ~128 PB of KV for an 8 B model).
pub const MAX_PREFIX_CACHE_TOKENS: u64 = 1_000_000_000_000;

/// One `--set KEY=VALUE`, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum Setting {
    /// `chunked_prefill=on|off`.
    ChunkedPrefill(bool),
    /// `max_num_batched_tokens=N` (alias `prefill_budget`).
    MaxNumBatchedTokens(u32),
    /// `max_num_seqs=N`.
    MaxNumSeqs(u32),
    /// `instances=N`.
    Instances(usize),
    /// `prefix_cache_tokens=N` (0 turns the prefix cache off).
    PrefixCacheTokens(u64),
    /// `profile=h100-8b|l4-8b|cpu-270m|FILE`.
    Profile(ProfileChoice),
    /// `disaggregation=NpMd`: N prefill and M decode instances in place of each instance.
    Disaggregation(u32, u32),
    /// `transfer_gb_per_s=X`: a KV transfer's bandwidth, GB/s.
    TransferGbPerS(f64),
    /// `transfer_latency_ms=X`: a KV transfer's set-up time, ms.
    TransferLatencyMs(f64),
    /// `kv_bytes_per_token=N`: the KV bytes a transfer moves per prompt token.
    KvBytesPerToken(u64),
    /// `spec_draft_tokens=N`: speculative decoding with N drafts a step (0: none).
    SpecDraftTokens(u32),
    /// `spec_acceptance=A1,A2,...` (one per draft position) or `=P` (each draft's chance after the one before).
    SpecAcceptance(Vec<f64>),
    /// `spec_draft_ms=X`: the drafter's cost per draft position and step, ms.
    SpecDraftMs(f64),
}

/// What to change on every instance; `None`: as the scenario or the replayed trace sets it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// Chunked prefill on or off.
    pub chunked_prefill: Option<bool>,
    /// Token budget of a step.
    pub max_num_batched_tokens: Option<u32>,
    /// Most sequences in a step.
    pub max_num_seqs: Option<u32>,
    /// Number of engine instances.
    pub instances: Option<usize>,
    /// Prefix-cache capacity per instance, tokens.
    pub prefix_cache_tokens: Option<u64>,
    /// The hardware and model every instance stands for (its step costs and KV cache).
    pub profile: Option<ProfileChoice>,
    /// Prefill and decode instances in place of each instance.
    pub disaggregation: Option<(u32, u32)>,
    /// A KV transfer's bandwidth, GB/s.
    pub transfer_gb_per_s: Option<f64>,
    /// A KV transfer's set-up time, ms.
    pub transfer_latency_ms: Option<f64>,
    /// KV bytes per prompt token.
    pub kv_bytes_per_token: Option<u64>,
    /// Drafts per step (0: speculation off).
    pub spec_draft_tokens: Option<u32>,
    /// Acceptance by draft position, or one conditional chance.
    pub spec_acceptance: Option<Vec<f64>>,
    /// The drafter's cost per draft position, ms.
    pub spec_draft_ms: Option<f64>,
}

impl Overrides {
    /// The overrides of `settings`, a later setting of a key replacing an earlier one.
    pub fn from_settings(settings: &[Setting]) -> Self {
        let mut o = Overrides::default();
        for s in settings {
            o.set(s.clone());
        }
        o
    }

    /// Records one setting.
    pub fn set(&mut self, setting: Setting) {
        match setting {
            Setting::ChunkedPrefill(on) => self.chunked_prefill = Some(on),
            Setting::MaxNumBatchedTokens(n) => self.max_num_batched_tokens = Some(n),
            Setting::MaxNumSeqs(n) => self.max_num_seqs = Some(n),
            Setting::Instances(n) => self.instances = Some(n),
            Setting::PrefixCacheTokens(n) => self.prefix_cache_tokens = Some(n),
            Setting::Profile(p) => self.profile = Some(p),
            Setting::Disaggregation(p, d) => self.disaggregation = Some((p, d)),
            Setting::TransferGbPerS(x) => self.transfer_gb_per_s = Some(x),
            Setting::TransferLatencyMs(x) => self.transfer_latency_ms = Some(x),
            Setting::KvBytesPerToken(n) => self.kv_bytes_per_token = Some(n),
            Setting::SpecDraftTokens(n) => self.spec_draft_tokens = Some(n),
            Setting::SpecAcceptance(a) => self.spec_acceptance = Some(a),
            Setting::SpecDraftMs(x) => self.spec_draft_ms = Some(x),
        }
    }

    /// These overrides with `later`'s on top (a key `later` sets replaces this one's).
    #[must_use]
    pub fn then(self, later: &Overrides) -> Self {
        let profile = later.profile.clone().or(self.profile);
        Overrides {
            chunked_prefill: later.chunked_prefill.or(self.chunked_prefill),
            max_num_batched_tokens: later.max_num_batched_tokens.or(self.max_num_batched_tokens),
            max_num_seqs: later.max_num_seqs.or(self.max_num_seqs),
            instances: later.instances.or(self.instances),
            prefix_cache_tokens: later.prefix_cache_tokens.or(self.prefix_cache_tokens),
            profile,
            disaggregation: later.disaggregation.or(self.disaggregation),
            transfer_gb_per_s: later.transfer_gb_per_s.or(self.transfer_gb_per_s),
            transfer_latency_ms: later.transfer_latency_ms.or(self.transfer_latency_ms),
            kv_bytes_per_token: later.kv_bytes_per_token.or(self.kv_bytes_per_token),
            spec_draft_tokens: later.spec_draft_tokens.or(self.spec_draft_tokens),
            spec_acceptance: later.spec_acceptance.clone().or(self.spec_acceptance),
            spec_draft_ms: later.spec_draft_ms.or(self.spec_draft_ms),
        }
    }

    /// True when nothing is changed.
    pub fn is_empty(&self) -> bool {
        *self == Overrides::default()
    }

    /// Applies the overrides to every instance. A profile comes first (it sets the step costs, the KV cache, the
    /// sequence cap and a prefix cache as large as the KV cache), then each key given. With `instances`, the
    /// instance list is cut or grown; instance `i` beyond the current ones is a copy of instance `i mod n`, named
    /// `instance-{i}`.
    ///
    /// # Errors
    /// A speculative setting that cannot be (see [`Overrides::speculation`]).
    pub fn apply(&self, engines: &mut Vec<EngineConfig>) -> Result<(), String> {
        if let Some(n) = self.instances {
            let n = n.max(1);
            let current = engines.len();
            if current == 0 {
                engines.push(EngineConfig::new("instance-0"));
            }
            let current = current.max(1);
            for i in engines.len()..n {
                let mut e = engines[i % current].clone();
                e.name = format!("instance-{i}");
                engines.push(e);
            }
            engines.truncate(n);
        }
        for e in engines.iter_mut() {
            if let Some(p) = &self.profile {
                p.apply(e);
            }
            if let Some(on) = self.chunked_prefill {
                e.chunked_prefill = on;
            }
            if let Some(n) = self.max_num_batched_tokens {
                e.max_num_batched_tokens = n;
            }
            if let Some(n) = self.max_num_seqs {
                e.max_num_seqs = n;
            }
            if let Some(tokens) = self.prefix_cache_tokens {
                e.prefix_cache_blocks = usize::try_from(tokens / u64::from(PREFIX_BLOCK_TOKENS)).unwrap_or(usize::MAX);
            }
            e.speculation = self.speculation(e.speculation.as_ref())?;
        }
        Ok(())
    }

    /// An instance's speculative decoding under these overrides, from what it had (`base`: the scenario's, or
    /// what a replayed trace's verify steps say). `spec_draft_tokens=0` turns it off; otherwise each key given
    /// replaces the base's figure: the draft length is the one given, else the acceptance list's length, else the
    /// base's; the acceptance is the one given, else the base's if the length is unchanged, else 0.7 per draft
    /// after the one before; the drafter's cost the one given, else the base's, else 1 ms.
    ///
    /// # Errors
    /// A drafter's cost or an acceptance with no draft length to apply to, or a combination [`Speculation::new`]
    /// refuses.
    pub fn speculation(&self, base: Option<&Speculation>) -> Result<Option<Speculation>, String> {
        if self.spec_draft_tokens == Some(0) {
            return Ok(None);
        }
        let listed = self.spec_acceptance.as_ref().filter(|a| a.len() > 1).map(Vec::len);
        let Some(k) = self
            .spec_draft_tokens
            .or_else(|| listed.and_then(|n| u32::try_from(n).ok()))
            .or(base.map(|b| b.draft_tokens))
        else {
            return match (&self.spec_acceptance, self.spec_draft_ms) {
                (None, None) => Ok(None),
                _ => Err("--set spec_acceptance and spec_draft_ms apply to speculative decoding: add --set                           spec_draft_tokens=N (the drafts a step proposes)"
                    .to_owned()),
            };
        };
        let acceptance = self
            .spec_acceptance
            .clone()
            .or_else(|| base.filter(|b| b.draft_tokens == k).map(|b| b.acceptance.clone()));
        let draft_ms = self
            .spec_draft_ms
            .or(base.map(|b| b.draft_ms))
            .unwrap_or(speculation::DEFAULT_DRAFT_MS);
        Speculation::new(k, acceptance.as_deref(), draft_ms)
            .map(Some)
            .map_err(|e| format!("--set {e}"))
    }

    /// The disaggregated deployment asked for, its transfer's figures defaulted from the documented constants and
    /// the profile's model ([`super::disagg`]).
    ///
    /// # Errors
    /// A transfer key given without `disaggregation=NpMd` (it would change nothing).
    pub fn disaggregation(&self) -> Result<Option<Disaggregation>, String> {
        let Some((prefill, decode)) = self.disaggregation else {
            let given: Vec<&str> = [
                self.transfer_gb_per_s.map(|_| "transfer_gb_per_s"),
                self.transfer_latency_ms.map(|_| "transfer_latency_ms"),
                self.kv_bytes_per_token.map(|_| "kv_bytes_per_token"),
            ]
            .into_iter()
            .flatten()
            .collect();
            return if given.is_empty() {
                Ok(None)
            } else {
                Err(format!(
                    "--set {}: a KV transfer's cost applies to a disaggregated deployment; add --set \
                     disaggregation=1p1d (or NpMd)",
                    given.join(", ")
                ))
            };
        };
        Ok(Some(Disaggregation {
            prefill,
            decode,
            transfer: self.transfer_cost(),
        }))
    }

    /// A KV transfer's cost: the `transfer_*` and `kv_bytes_per_token` keys given, else their defaults.
    pub fn transfer_cost(&self) -> TransferCost {
        let gb_per_s = self.transfer_gb_per_s.unwrap_or(disagg::DEFAULT_TRANSFER_GB_PER_S);
        let latency_ms = self.transfer_latency_ms.unwrap_or(disagg::DEFAULT_TRANSFER_LATENCY_MS);
        TransferCost {
            bytes_per_token: self
                .kv_bytes_per_token
                .unwrap_or_else(|| disagg::kv_bytes_per_token(self.profile.as_ref())),
            bytes_per_s: gb_per_s * 1e9,
            latency_ns: (latency_ms * 1e6).round() as i64,
        }
    }

    /// The overrides as `key=value` words, in a fixed order (empty when nothing is changed).
    pub fn describe(&self) -> Vec<String> {
        let on_off = |on: bool| if on { "on" } else { "off" };
        [
            self.chunked_prefill.map(|on| format!("chunked_prefill={}", on_off(on))),
            self.max_num_batched_tokens
                .map(|n| format!("max_num_batched_tokens={n}")),
            self.max_num_seqs.map(|n| format!("max_num_seqs={n}")),
            self.instances.map(|n| format!("instances={n}")),
            self.prefix_cache_tokens.map(|n| format!("prefix_cache_tokens={n}")),
            self.profile.as_ref().map(|p| format!("profile={}", p.name())),
            self.disaggregation.map(|(p, d)| format!("disaggregation={p}p{d}d")),
            self.transfer_gb_per_s.map(|x| format!("transfer_gb_per_s={x}")),
            self.transfer_latency_ms.map(|x| format!("transfer_latency_ms={x}")),
            self.kv_bytes_per_token.map(|n| format!("kv_bytes_per_token={n}")),
            self.spec_draft_tokens.map(|n| format!("spec_draft_tokens={n}")),
            self.spec_acceptance.as_ref().map(|a| {
                let a: Vec<String> = a.iter().map(f64::to_string).collect();
                format!("spec_acceptance={}", a.join(","))
            }),
            self.spec_draft_ms.map(|x| format!("spec_draft_ms={x}")),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// The keys `--set` accepts, with their values, for error messages and help.
pub const SET_KEYS: &str = "chunked_prefill=on|off, max_num_batched_tokens=N (alias prefill_budget), max_num_seqs=N, \
                            instances=N, prefix_cache_tokens=N (0: no prefix cache), profile=h100-8b|l4-8b|cpu-270m|FILE, \
                            disaggregation=NpMd (1p1d: one prefill and one decode instance in place of each), \
                            transfer_gb_per_s=X (default 25), transfer_latency_ms=X (default 1), kv_bytes_per_token=N \
                            (default: the profile's model's, 131072 for the 8 B GPU profiles), spec_draft_tokens=N \
                            (speculative decoding, N drafts a step; 0: off), spec_acceptance=A1,A2,... (acceptance by \
                            draft position) or =P (each draft's chance after the one before; default 0.7), \
                            spec_draft_ms=X (the drafter's cost per draft position, default 1)";

/// Parses `KEY=VALUE` for `--set`: a change to every simulated instance's configuration. An unknown key, a value of
/// the wrong form or out of range is an error naming the key, the value and what is accepted.
///
/// # Errors
/// The message for the command line, as above.
pub fn parse_setting(s: &str) -> Result<Setting, String> {
    let Some((key, value)) = s.split_once('=') else {
        return Err(format!("--set {s:?}: expected KEY=VALUE; keys: {SET_KEYS}"));
    };
    let (key, value) = (key.trim(), value.trim());
    // A whole number in `range`; `_` may group digits (8_192).
    let number = |range: std::ops::RangeInclusive<u64>| -> Result<u64, String> {
        let n: u64 = value.replace('_', "").parse().map_err(|_| {
            format!(
                "--set {key}={value:?}: not a whole number; give {key}=N with N from {} to {}",
                thousands(*range.start()),
                thousands(*range.end())
            )
        })?;
        if range.contains(&n) {
            Ok(n)
        } else {
            Err(format!(
                "--set {key}={value}: out of range; give {key}=N with N from {} to {}",
                thousands(*range.start()),
                thousands(*range.end())
            ))
        }
    };
    // A number of GB/s or ms in `lo..=hi`.
    let positive = |lo: f64, hi: f64| -> Result<f64, String> {
        match value.parse::<f64>() {
            Ok(x) if (lo..=hi).contains(&x) => Ok(x),
            _ => Err(format!("--set {key}={value:?}: give a number from {lo} to {hi}")),
        }
    };
    // The ranges fit the target types (u32 and usize), so the conversions below cannot fail.
    let small = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    match key {
        "chunked_prefill" => match value {
            "on" => Ok(Setting::ChunkedPrefill(true)),
            "off" => Ok(Setting::ChunkedPrefill(false)),
            _ => Err(format!(
                "--set chunked_prefill={value:?}: give chunked_prefill=on or chunked_prefill=off"
            )),
        },
        "max_num_batched_tokens" | "prefill_budget" => {
            number(16..=u64::from(MAX_BATCHED_TOKENS)).map(|n| Setting::MaxNumBatchedTokens(small(n)))
        }
        "max_num_seqs" => number(1..=u64::from(MAX_SEQS)).map(|n| Setting::MaxNumSeqs(small(n))),
        "instances" => {
            number(1..=MAX_INSTANCES as u64).map(|n| Setting::Instances(usize::try_from(n).unwrap_or(MAX_INSTANCES)))
        }
        "prefix_cache_tokens" => number(0..=MAX_PREFIX_CACHE_TOKENS).map(Setting::PrefixCacheTokens),
        "disaggregation" => disagg::parse_shape(value)
            .map(|(p, d)| Setting::Disaggregation(p, d))
            .ok_or_else(|| {
                format!(
                    "--set disaggregation={value:?}: give NpMd, N prefill and M decode instances in place of each \
                     instance, each from 1 to {} (1p1d, 2p4d)",
                    disagg::MAX_PER_ROLE
                )
            }),
        "transfer_gb_per_s" => positive(0.001, 1e6).map(Setting::TransferGbPerS),
        "transfer_latency_ms" => positive(0.0, 60_000.0).map(Setting::TransferLatencyMs),
        "kv_bytes_per_token" => number(1..=1 << 30).map(Setting::KvBytesPerToken),
        "spec_draft_tokens" => {
            number(0..=u64::from(speculation::MAX_DRAFT_TOKENS)).map(|n| Setting::SpecDraftTokens(small(n)))
        }
        "spec_acceptance" => {
            let shares: Result<Vec<f64>, String> = value
                .split(',')
                .map(|v| match v.trim().parse::<f64>() {
                    Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
                    _ => Err(format!(
                        "--set spec_acceptance={value:?}: {v:?} is not a share from 0 to 1; give one per draft \
                         position (0.8,0.6,0.4) or one for each draft after the one before (0.7)"
                    )),
                })
                .collect();
            shares.map(Setting::SpecAcceptance)
        }
        "spec_draft_ms" => positive(0.0, 10_000.0).map(Setting::SpecDraftMs),
        "profile" => ProfileChoice::parse(value)
            .map(Setting::Profile)
            .map_err(|e| format!("--set profile={value:?}: {e}")),
        _ => Err(format!("--set {s:?}: unknown key {key:?}; keys: {SET_KEYS}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_settings_win_and_apply_to_every_instance() {
        let o = Overrides::from_settings(&[
            Setting::MaxNumBatchedTokens(4096),
            Setting::ChunkedPrefill(false),
            Setting::MaxNumBatchedTokens(2048),
        ]);
        assert_eq!(o.max_num_batched_tokens, Some(2048));
        assert_eq!(o.describe(), ["chunked_prefill=off", "max_num_batched_tokens=2048"]);
        let mut engines = vec![EngineConfig::new("a"), EngineConfig::new("b")];
        o.apply(&mut engines).unwrap();
        assert!(
            engines
                .iter()
                .all(|e| !e.chunked_prefill && e.max_num_batched_tokens == 2048)
        );
        // A flag given before, replaced by a --set of the same key; other keys kept.
        let flags = Overrides {
            chunked_prefill: Some(true),
            prefix_cache_tokens: Some(1024),
            ..Overrides::default()
        };
        let merged = flags.then(&o);
        assert_eq!(merged.chunked_prefill, Some(false));
        assert_eq!(merged.prefix_cache_tokens, Some(1024));
    }

    #[test]
    fn a_profile_comes_before_the_keys_given_with_it() {
        // cpu-270m caps sequences at 8; max_num_seqs=32 given with it wins. Its KV cache: 2,048 blocks of 16 tokens
        // = 32,768 tokens = 64 prefix blocks of 512; prefix_cache_tokens=5,000 -> 9 blocks (rounded down).
        let o = Overrides::from_settings(&[
            Setting::MaxNumSeqs(32),
            Setting::Profile(super::super::Profile::Cpu.into()),
        ]);
        let mut engines = vec![EngineConfig::new("a")];
        o.apply(&mut engines).unwrap();
        assert_eq!(
            (
                engines[0].max_num_seqs,
                engines[0].kv_blocks,
                engines[0].prefix_cache_blocks
            ),
            (32, 2_048, 64)
        );
        Overrides::from_settings(&[Setting::PrefixCacheTokens(5_000)])
            .apply(&mut engines)
            .unwrap();
        assert_eq!(engines[0].prefix_cache_blocks, 9);
    }

    #[test]
    fn instances_cut_or_grow_the_list_copying_in_turn() {
        let mut engines = vec![
            EngineConfig {
                chunked_prefill: false,
                ..EngineConfig::new("vllm-0")
            },
            EngineConfig::new("vllm-1"),
        ];
        Overrides::from_settings(&[Setting::Instances(5)])
            .apply(&mut engines)
            .unwrap();
        let names: Vec<&str> = engines.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["vllm-0", "vllm-1", "instance-2", "instance-3", "instance-4"]);
        let chunked: Vec<bool> = engines.iter().map(|e| e.chunked_prefill).collect();
        assert_eq!(chunked, [false, true, false, true, false]);
        Overrides::from_settings(&[Setting::Instances(1)])
            .apply(&mut engines)
            .unwrap();
        assert_eq!(engines.len(), 1);
        assert_eq!(engines[0].name, "vllm-0");
    }

    #[test]
    fn speculation_is_set_turned_off_or_taken_from_the_trace() {
        let mut engines = vec![EngineConfig::new("a")];
        // A draft length alone: 0.7 per draft after the one before, the drafter 1 ms.
        Overrides::from_settings(&[Setting::SpecDraftTokens(2)])
            .apply(&mut engines)
            .unwrap();
        let s = engines[0].speculation.clone().unwrap();
        assert_eq!((s.draft_tokens, s.draft_ms), (2, 1.0));
        assert!((s.acceptance[0] - 0.7).abs() < 1e-12 && (s.acceptance[1] - 0.49).abs() < 1e-12);
        // A list gives the length; the cost of the base is kept.
        Overrides::from_settings(&[Setting::SpecAcceptance(vec![0.9, 0.8, 0.5])])
            .apply(&mut engines)
            .unwrap();
        let s = engines[0].speculation.clone().unwrap();
        assert_eq!((s.draft_tokens, s.acceptance.clone()), (3, vec![0.9, 0.8, 0.5]));
        // Off.
        Overrides::from_settings(&[Setting::SpecDraftTokens(0)])
            .apply(&mut engines)
            .unwrap();
        assert!(engines[0].speculation.is_none());
        // A cost with nothing to speculate: the error says what to add.
        let e = Overrides::from_settings(&[Setting::SpecDraftMs(2.0)])
            .apply(&mut engines)
            .unwrap_err();
        assert!(e.contains("spec_draft_tokens=N"), "{e}");
        let e = Overrides::from_settings(&[Setting::SpecDraftTokens(3), Setting::SpecAcceptance(vec![0.5, 0.4])])
            .apply(&mut engines)
            .unwrap_err();
        assert!(e.contains("2 values for 3 draft tokens"), "{e}");
    }

    #[test]
    fn a_disaggregation_takes_its_transfer_from_the_keys_or_the_profile() {
        // The 8 B model's 131,072 bytes a token at 25 GB/s after 1 ms, unless given; the cpu profile's model has
        // 18 layers of one 256-wide KV head: 18 x 256 x 2 x 2 = 18,432 bytes.
        let d = Overrides::from_settings(&[Setting::Disaggregation(1, 2)])
            .disaggregation()
            .unwrap()
            .unwrap();
        assert_eq!((d.prefill, d.decode), (1, 2));
        assert_eq!(d.transfer.bytes_per_token, 131_072);
        assert_eq!(d.transfer.bytes_per_s, 25e9);
        assert_eq!(d.transfer.latency_ns, 1_000_000);
        let d = Overrides::from_settings(&[
            Setting::Profile(super::super::Profile::Cpu.into()),
            Setting::Disaggregation(1, 1),
            Setting::TransferGbPerS(2.5),
            Setting::TransferLatencyMs(0.25),
        ])
        .disaggregation()
        .unwrap()
        .unwrap();
        assert_eq!(d.transfer.bytes_per_token, 18_432);
        assert_eq!(d.transfer.bytes_per_s, 2.5e9);
        assert_eq!(d.transfer.latency_ns, 250_000);
        // A transfer key alone would change nothing: an error that says what to add.
        let e = Overrides::from_settings(&[Setting::TransferGbPerS(10.0)])
            .disaggregation()
            .unwrap_err();
        assert!(
            e.contains("transfer_gb_per_s") && e.contains("disaggregation=1p1d"),
            "{e}"
        );
        assert_eq!(Overrides::default().disaggregation(), Ok(None));
    }
}
