//! What each engine instance of a trace did: prefill and decode, or one of them (disaggregated serving), as its
//! requests say (their `source` and `decode_source`).

use rustc_hash::FxHashMap as HashMap;

use super::{NO_STR, Trace};

/// What an instance did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InstanceRole {
    /// It prefilled requests that another instance decoded, and decoded none itself.
    Prefill,
    /// It decoded requests another instance prefilled, and prefilled none itself.
    Decode,
    /// Both, or nothing says otherwise (an ordinary instance).
    Both,
}

impl InstanceRole {
    /// An instance's name as shown: with its role when it has one its name does not say (`p0 (prefill)`; `vllm-0`,
    /// `vllm-0-decode` as they are).
    pub fn label(self, name: &str) -> String {
        if self == InstanceRole::Both || name.contains(self.name()) {
            name.to_owned()
        } else {
            format!("{name} ({})", self.name())
        }
    }

    /// The role's name (`prefill`, `decode`, `both`).
    pub fn name(self) -> &'static str {
        match self {
            InstanceRole::Prefill => "prefill",
            InstanceRole::Decode => "decode",
            InstanceRole::Both => "both",
        }
    }
}

impl Trace {
    /// The role of every instance that is a request's `source` or `decode_source`; an instance not named there
    /// (steps or samples only) is [`InstanceRole::Both`]. An instance that served a few requests whole beside the
    /// many it handed on or received (a disaggregated server's own warm-up request, SGLang's room 0) keeps its role:
    /// whole requests count against it from a fifth of the others on.
    pub fn instance_roles(&self) -> HashMap<u32, InstanceRole> {
        // Per instance: requests it prefilled and another decoded, it served whole, it decoded from another.
        let mut seen: HashMap<u32, (u64, u64, u64)> = HashMap::default();
        for (&source, &decode) in self.requests.source.iter().zip(&self.requests.decode_source) {
            let s = seen.entry(source).or_default();
            if decode == NO_STR || decode == source {
                s.1 += 1;
            } else {
                s.0 += 1;
                seen.entry(decode).or_default().2 += 1;
            }
        }
        seen.into_iter()
            .map(|(source, (handed, whole, received))| {
                let role = match (handed, received) {
                    (h, 0) if h > 0 && whole * 5 <= h => InstanceRole::Prefill,
                    (0, r) if r > 0 && whole * 5 <= r => InstanceRole::Decode,
                    _ => InstanceRole::Both,
                };
                (source, role)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::trace_of;

    #[test]
    fn roles_follow_who_prefilled_and_who_decoded() {
        // r1 and r2: prefilled on p, decoded on d; r3 whole on w; r4 prefilled on w, decoded on d.
        let t = trace_of(
            r#"{"kind":"request","request_id":"r1","source":"p","decode_source":"d","arrival_ns":1764403200000000001}
{"kind":"request","request_id":"r2","source":"p","decode_source":"d","arrival_ns":1764403200000000002}
{"kind":"request","request_id":"r3","source":"w","arrival_ns":1764403200000000003}
{"kind":"request","request_id":"r4","source":"w","decode_source":"d","arrival_ns":1764403200000000004}
"#,
        );
        let roles = t.instance_roles();
        let role = |name: &str| roles[&t.labels.lookup(name).unwrap_or(NO_STR)];
        assert_eq!(role("p"), InstanceRole::Prefill);
        assert_eq!(role("d"), InstanceRole::Decode);
        assert_eq!(role("w"), InstanceRole::Both);
        assert_eq!(roles.len(), 3);
        assert!(t.is_disaggregated());
        // A prefill server's own warm-up, served whole beside five it handed on, leaves it a prefill server; a
        // second whole request (two of seven) makes it an ordinary one.
        let handed: String = (1..=5)
            .map(|k| {
                format!(
                    r#"{{"kind":"request","request_id":"h{k}","source":"p","decode_source":"d","arrival_ns":176440320000000000{k}}}
"#
                )
            })
            .collect();
        let warm = r#"{"kind":"request","request_id":"warm","source":"p","arrival_ns":1764403200000000009}
"#;
        let t = trace_of(&format!("{handed}{warm}"));
        assert_eq!(
            t.instance_roles()[&t.labels.lookup("p").unwrap_or(NO_STR)],
            InstanceRole::Prefill
        );
        let again = r#"{"kind":"request","request_id":"warm2","source":"p","arrival_ns":1764403200000000010}
"#;
        let t = trace_of(&format!("{handed}{warm}{again}"));
        assert_eq!(
            t.instance_roles()[&t.labels.lookup("p").unwrap_or(NO_STR)],
            InstanceRole::Both
        );
        // A request whose decode_source names its own source decoded where it prefilled.
        let t = trace_of(
            r#"{"kind":"request","request_id":"r1","source":"p","decode_source":"p","arrival_ns":1764403200000000001}"#,
        );
        assert!(!t.is_disaggregated());
    }
}
