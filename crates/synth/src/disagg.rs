//! Disaggregated serving in the simulator (`--set disaggregation=NpMd`): each instance of the scenario or of the
//! replayed trace becomes N prefill and M decode instances. A request queues and prefills on one of its group's
//! prefill instances (the least loaded), its KV cache then moves to the group's least loaded decode instance, and it
//! decodes there, its first token included (as vLLM's disaggregated serving does: the decode instance samples it).
//!
//! A transfer takes `latency + prompt tokens × KV bytes per token / bandwidth`. The defaults stand for one 200 Gb/s
//! RDMA link (25 GB/s) and 1 ms to set a transfer up; the KV bytes per token are the profile's model's. Two
//! simplifications, both optimistic for the prefill instance: it frees a request's KV blocks when the transfer
//! starts (a real one holds them until it ends), and transfers do not share a link's bandwidth.

use super::choice::ProfileChoice;
use super::cost::Profile;
use super::engine_config::EngineConfig;

/// What an instance does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// Prefill and decode (an ordinary instance).
    #[default]
    Both,
    /// Queue and prefill; hands every request over to a decode instance.
    Prefill,
    /// Decode requests a prefill instance handed over (and prefill again those it preempts).
    Decode,
}

/// Default bandwidth of a KV transfer, GB/s (10^9 bytes): one 200 Gb/s RDMA link.
pub const DEFAULT_TRANSFER_GB_PER_S: f64 = 25.0;
/// Default time to set a transfer up, ms.
pub const DEFAULT_TRANSFER_LATENCY_MS: f64 = 1.0;
/// KV bytes per token of the named GPU profiles' 8 B model: 32 layers × 8 KV heads × 128 dims × (K, V) × 2 bytes.
pub const KV_BYTES_PER_TOKEN_8B: u64 = 32 * 8 * 128 * 2 * 2;
/// KV bytes per token of the cpu-270m profile's model (Gemma 3 270M): 18 layers × 1 KV head × 256 dims × (K, V) × 2
/// bytes.
pub const KV_BYTES_PER_TOKEN_270M: u64 = 18 * 256 * 2 * 2;
/// The most prefill or decode instances per instance `disaggregation=NpMd` accepts.
pub const MAX_PER_ROLE: u32 = 64;

/// What moving a request's KV cache from its prefill instance to its decode instance costs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransferCost {
    /// KV-cache bytes per token.
    pub bytes_per_token: u64,
    /// Bandwidth, bytes per second.
    pub bytes_per_s: f64,
    /// Time to set a transfer up, ns.
    pub latency_ns: i64,
}

impl TransferCost {
    /// The bytes of `tokens` tokens' KV.
    pub fn bytes(&self, tokens: u32) -> u64 {
        u64::from(tokens) * self.bytes_per_token
    }

    /// How long moving `tokens` tokens' KV takes, ns.
    pub fn duration_ns(&self, tokens: u32) -> i64 {
        self.latency_ns + (self.bytes(tokens) as f64 / self.bytes_per_s * 1e9).round() as i64
    }
}

/// The shape of a disaggregated deployment and its transfers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Disaggregation {
    /// Prefill instances per instance of the scenario or trace.
    pub prefill: u32,
    /// Decode instances per instance of the scenario or trace.
    pub decode: u32,
    /// The cost of a transfer.
    pub transfer: TransferCost,
}

/// One simulated instance: its configuration, its role and the instance of the scenario or trace it stands for (the
/// group whose requests it serves).
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// Its configuration (its name is its `source`).
    pub config: EngineConfig,
    /// What it does.
    pub role: Role,
    /// The index of the instance of the scenario or trace it is part of.
    pub group: usize,
}

/// Parses `NpMd` (`1p1d`, `2p3d`): prefill and decode instances per instance, each from 1 to [`MAX_PER_ROLE`].
pub fn parse_shape(s: &str) -> Option<(u32, u32)> {
    let s = s.to_ascii_lowercase();
    let (p, rest) = s.split_once('p')?;
    let d = rest.strip_suffix('d')?;
    let (p, d): (u32, u32) = (p.parse().ok()?, d.parse().ok()?);
    let ok = |n: u32| (1..=MAX_PER_ROLE).contains(&n);
    (ok(p) && ok(d)).then_some((p, d))
}

/// The KV bytes per token of the model a profile stands for (a fitted profile's: the 8 B model's, as it does not say).
pub fn kv_bytes_per_token(profile: Option<&ProfileChoice>) -> u64 {
    match profile {
        Some(ProfileChoice::Named(Profile::Cpu)) => KV_BYTES_PER_TOKEN_270M,
        _ => KV_BYTES_PER_TOKEN_8B,
    }
}

impl Disaggregation {
    /// The instances `engines` become: each its prefill instances, then its decode instances, named after it
    /// (`vllm-0-prefill`, `vllm-0-decode`; numbered from 0 when there are several of a role).
    pub fn expand(&self, engines: &[EngineConfig]) -> Vec<Instance> {
        let mut out = Vec::with_capacity(engines.len() * (self.prefill + self.decode) as usize);
        for (group, e) in engines.iter().enumerate() {
            for (role, count, word) in [
                (Role::Prefill, self.prefill, "prefill"),
                (Role::Decode, self.decode, "decode"),
            ] {
                for k in 0..count {
                    let mut config = e.clone();
                    config.name = if count == 1 {
                        format!("{}-{word}", e.name)
                    } else {
                        format!("{}-{word}-{k}", e.name)
                    };
                    out.push(Instance { config, role, group });
                }
            }
        }
        out
    }

    /// A disaggregated trace's deployment, replayed as it ran, in a sentence.
    pub fn describe_as_given(&self) -> String {
        format!(
            "disaggregated as the trace ran: its {} prefill instance(s) hand each request to the least loaded of its \
             {} decode instance(s), its KV moved at {} GB/s after {} ms, {} bytes per token",
            self.prefill,
            self.decode,
            self.transfer.bytes_per_s / 1e9,
            self.transfer.latency_ns as f64 / 1e6,
            self.transfer.bytes_per_token
        )
    }

    /// The deployment in a sentence, for a replay's notes.
    pub fn describe(&self) -> String {
        format!(
            "disaggregated: each instance became {} prefill and {} decode instance(s); a request's KV moves from the \
             one to the other at {} GB/s after {} ms, {} bytes per token",
            self.prefill,
            self.decode,
            self.transfer.bytes_per_s / 1e9,
            self.transfer.latency_ns as f64 / 1e6,
            self.transfer.bytes_per_token
        )
    }
}

/// Every engine in the role given, all of one group: prefill instances hand their requests to the least loaded
/// decode instance, as a disaggregated deployment's router does.
pub fn as_given(engines: &[EngineConfig], roles: &[Role]) -> Vec<Instance> {
    engines
        .iter()
        .zip(roles)
        .map(|(e, &role)| Instance {
            config: e.clone(),
            role,
            group: 0,
        })
        .collect()
}

/// Every engine as an ordinary instance of its own group.
pub fn plain(engines: &[EngineConfig]) -> Vec<Instance> {
    engines
        .iter()
        .enumerate()
        .map(|(group, e)| Instance {
            config: e.clone(),
            role: Role::Both,
            group,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_within_their_range() {
        assert_eq!(parse_shape("1p1d"), Some((1, 1)));
        assert_eq!(parse_shape("2P3D"), Some((2, 3)));
        for bad in ["", "1p", "p1d", "0p1d", "1p0d", "65p1d", "1d1p", "1p1d2"] {
            assert_eq!(parse_shape(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_transfer_costs_its_latency_plus_its_bytes_over_the_bandwidth() {
        // 8,000 tokens × 131,072 bytes = 1,048,576,000 bytes; at 25 GB/s that is 41.943 ms; plus 1 ms.
        let t = TransferCost {
            bytes_per_token: KV_BYTES_PER_TOKEN_8B,
            bytes_per_s: 25e9,
            latency_ns: 1_000_000,
        };
        assert_eq!(KV_BYTES_PER_TOKEN_8B, 131_072);
        assert_eq!(t.bytes(8_000), 1_048_576_000);
        assert_eq!(t.duration_ns(8_000), 1_000_000 + 41_943_040);
    }

    #[test]
    fn each_instance_becomes_its_prefill_then_its_decode_instances() {
        let engines = [EngineConfig::new("a"), EngineConfig::new("b")];
        let d = Disaggregation {
            prefill: 1,
            decode: 2,
            transfer: TransferCost {
                bytes_per_token: 1,
                bytes_per_s: 1.0,
                latency_ns: 0,
            },
        };
        let got: Vec<(String, Role, usize)> = d
            .expand(&engines)
            .into_iter()
            .map(|i| (i.config.name, i.role, i.group))
            .collect();
        let want = [
            ("a-prefill", Role::Prefill, 0),
            ("a-decode-0", Role::Decode, 0),
            ("a-decode-1", Role::Decode, 0),
            ("b-prefill", Role::Prefill, 1),
            ("b-decode-0", Role::Decode, 1),
            ("b-decode-1", Role::Decode, 1),
        ];
        assert_eq!(got.len(), want.len());
        for ((name, role, group), (n, r, g)) in got.iter().zip(want) {
            assert_eq!((name.as_str(), *role, *group), (n, r, g));
        }
    }
}
