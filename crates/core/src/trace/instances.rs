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
    /// (steps or samples only) is [`InstanceRole::Both`].
    pub fn instance_roles(&self) -> HashMap<u32, InstanceRole> {
        // Per instance: (prefilled a request decoded elsewhere, served a request whole, decoded one from elsewhere).
        let mut seen: HashMap<u32, (bool, bool, bool)> = HashMap::default();
        for (&source, &decode) in self.requests.source.iter().zip(&self.requests.decode_source) {
            let s = seen.entry(source).or_default();
            if decode == NO_STR {
                s.1 = true;
            } else {
                s.0 = true;
                seen.entry(decode).or_default().2 = true;
            }
        }
        seen.into_iter()
            .map(|(source, (handed, whole, received))| {
                let role = match (handed, whole, received) {
                    (true, false, false) => InstanceRole::Prefill,
                    (false, false, true) => InstanceRole::Decode,
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
        // A request whose decode_source names its own source decoded where it prefilled.
        let t = trace_of(
            r#"{"kind":"request","request_id":"r1","source":"p","decode_source":"p","arrival_ns":1764403200000000001}"#,
        );
        assert!(!t.is_disaggregated());
    }
}
