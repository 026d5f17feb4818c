//! The profile a simulation runs with: one of the named ones (roofline models, never checked against a real
//! server), or a file `tokenscope fit` wrote from a real server's steps, with its measured error.

use std::path::Path;
use std::sync::Arc;

use super::arrivals::PREFIX_BLOCK_TOKENS;
use super::cost::Profile;
use super::engine_config::{EngineConfig, KV_BLOCK_TOKENS};
use super::fit::FittedProfile;

/// A named profile or a fitted one.
#[derive(Debug, Clone, PartialEq)]
pub enum ProfileChoice {
    /// `h100-8b`, `l4-8b` or `cpu-270m`.
    Named(Profile),
    /// A profile file.
    Fitted(Arc<FittedProfile>),
}

impl Default for ProfileChoice {
    fn default() -> Self {
        ProfileChoice::Named(Profile::default())
    }
}

impl From<Profile> for ProfileChoice {
    fn from(p: Profile) -> Self {
        ProfileChoice::Named(p)
    }
}

impl ProfileChoice {
    /// A profile name, else a profile file (`--profile`, `--set profile=`).
    ///
    /// # Errors
    /// Neither a name nor a readable profile file: the message says which names there are, or what is wrong with
    /// the file.
    pub fn parse(value: &str) -> Result<Self, String> {
        use clap::ValueEnum as _;
        if let Ok(p) = Profile::from_str(value, false) {
            return Ok(ProfileChoice::Named(p));
        }
        let path = Path::new(value);
        if !path.exists() {
            let names = Profile::ALL.map(Profile::name).join(", ");
            return Err(format!(
                "{value:?} is neither a profile name ({names}) nor a profile file (`tokenscope fit TRACE -o FILE` \
                 writes one)"
            ));
        }
        FittedProfile::read(path)
            .map(|p| ProfileChoice::Fitted(Arc::new(p)))
            .map_err(|e| e.to_string())
    }

    /// The name outputs give it.
    pub fn name(&self) -> String {
        match self {
            ProfileChoice::Named(p) => p.name().to_owned(),
            ProfileChoice::Fitted(p) => p.name.clone(),
        }
    }

    /// True for the default named profile (which changes nothing as an override).
    pub fn is_default(&self) -> bool {
        *self == ProfileChoice::default()
    }

    /// Sets an engine's step costs, KV cache and sequence cap (and, for a fitted profile, its step budget and
    /// chunked prefill); the prefix cache becomes as large as the KV cache.
    pub fn apply(&self, e: &mut EngineConfig) {
        let kv_blocks = match self {
            ProfileChoice::Named(p) => {
                let (kv_blocks, max_num_seqs) = p.capacity();
                e.cost = p.cost();
                e.max_num_seqs = max_num_seqs;
                kv_blocks
            }
            ProfileChoice::Fitted(p) => {
                let s = &p.scheduler;
                e.cost = p.cost();
                e.max_num_seqs = s.max_num_seqs;
                e.max_num_batched_tokens = s.max_num_batched_tokens;
                e.chunked_prefill = s.chunked_prefill;
                e.prefill_tail = s.prefill_tail;
                s.kv_blocks
            }
        };
        e.kv_blocks = kv_blocks;
        e.prefix_cache_blocks = kv_blocks as usize * KV_BLOCK_TOKENS as usize / PREFIX_BLOCK_TOKENS as usize;
    }

    /// What is known of the profile's error against real serving, in one sentence.
    pub fn error_note(&self) -> String {
        match self {
            ProfileChoice::Named(p) => format!(
                "profile {} is a roofline model that was never validated against a real server: its error is \
                 unknown (fit one on your server's own trace: `tokenscope fit TRACE --validate HELD_OUT -o FILE`)",
                p.name()
            ),
            ProfileChoice::Fitted(p) => p.error_note(),
        }
    }
}
