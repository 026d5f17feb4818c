//! Requests arriving at the simulated engines: a Poisson process with log-normal lengths, or a replay of a real
//! request trace (Mooncake's JSONL with prefix-block hashes, Azure's LLM inference CSV), recognised by its columns.

use std::path::Path;

use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp, LogNormal};
use rand_pcg::Pcg64Mcg;

/// Tokens per prefix-cache block in arrival data (Mooncake's `hash_ids` cover 512 tokens each).
pub const PREFIX_BLOCK_TOKENS: u32 = 512;

/// A request as it arrives.
#[derive(Debug, Clone, PartialEq)]
pub struct Arrival {
    /// `request_id`.
    pub id: String,
    /// Arrival time, ns since the Unix epoch.
    pub at_ns: i64,
    /// Prompt tokens.
    pub input_tokens: u32,
    /// Output tokens the model will generate before its natural stop.
    pub output_tokens: u32,
    /// The request's output limit; generation stops there with `finish_reason = length`.
    pub max_tokens: u32,
    /// Hashes of the prompt's [`PREFIX_BLOCK_TOKENS`]-token blocks: equal leading hashes are a shared prefix.
    pub prefix_blocks: Vec<u64>,
    /// Attribution labels.
    pub app_id: String,
    /// Attribution label.
    pub user_id: String,
    /// The engine instance it must go to, if any (planted incidents).
    pub source: Option<usize>,
    /// A planted early stop: at this output index the stop token is chosen at this probability, rank 2.
    pub mistrigger: Option<(u32, f64)>,
}

/// A log-normal length, clamped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LengthDist {
    /// Median tokens.
    pub median: f64,
    /// Log-space standard deviation.
    pub sigma: f64,
    /// Smallest value.
    pub min: u32,
    /// Largest value.
    pub max: u32,
}

impl LengthDist {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "clamped to u32 range first"
    )]
    fn sample(&self, rng: &mut Pcg64Mcg) -> u32 {
        let v = LogNormal::new(self.median.ln(), self.sigma).map_or(self.median, |d| d.sample(rng));
        v.round().clamp(f64::from(self.min), f64::from(self.max)) as u32
    }
}

/// Traffic of the ordinary kind: who sends what, how long.
#[derive(Debug, Clone, PartialEq)]
pub struct Traffic {
    /// Requests per second.
    pub rate_per_s: f64,
    /// Prompt lengths.
    pub input: LengthDist,
    /// Output lengths.
    pub output: LengthDist,
}

/// Applications with a shared system prompt (in prefix blocks) and their share of traffic.
const APPS: [(&str, u32, f64); 3] = [("chat", 2, 0.6), ("search", 1, 0.25), ("code", 3, 0.15)];
/// Distinct users; picked with Zipf-like weights (user-01 sends the most).
const USERS: u32 = 40;

/// Poisson arrivals of `count` requests from `start_ns`, ids `{prefix}{n:05}`.
pub fn poisson(traffic: &Traffic, count: usize, start_ns: i64, prefix: &str, seed: u64) -> Vec<Arrival> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let gap = Exp::new(traffic.rate_per_s).ok();
    let user_weights: Vec<f64> = (1..=USERS).map(|u| 1.0 / f64::from(u)).collect();
    let user_total: f64 = user_weights.iter().sum();
    let mut unique_block: u64 = 1 << 40;
    let mut t_ns = start_ns;
    (0..count)
        .map(|n| {
            #[expect(
                clippy::cast_possible_truncation,
                reason = "seconds between arrivals, far below 2^63 ns"
            )]
            let dt = (gap.map_or(1.0, |g| g.sample(&mut rng)) * 1e9) as i64;
            t_ns += dt;
            let mut pick = rng.random_range(0.0..1.0);
            let (app_index, app) = APPS
                .iter()
                .enumerate()
                .find(|(_, (_, _, share))| {
                    pick -= share;
                    pick <= 0.0
                })
                .unwrap_or((0, &APPS[0]));
            let mut u = rng.random_range(0.0..user_total);
            let user = user_weights.iter().position(|w| {
                u -= w;
                u <= 0.0
            });
            let input = traffic.input.sample(&mut rng).max(app.1 * PREFIX_BLOCK_TOKENS + 16);
            let output = traffic.output.sample(&mut rng);
            // One request in twenty sets a max_tokens below what the model would say: truncated, finish "length".
            let max_tokens = if rng.random_bool(0.05) {
                (output * 3 / 5).max(1)
            } else {
                2048
            };
            let blocks = input.div_ceil(PREFIX_BLOCK_TOKENS);
            let prefix_blocks = (0..blocks)
                .map(|b| {
                    if b < app.1 {
                        1_000 * (app_index as u64 + 1) + u64::from(b)
                    } else {
                        unique_block += 1;
                        unique_block
                    }
                })
                .collect();
            Arrival {
                id: format!("{prefix}{n:05}"),
                at_ns: t_ns,
                input_tokens: input,
                output_tokens: output,
                max_tokens,
                prefix_blocks,
                app_id: app.0.to_owned(),
                user_id: format!("user-{:02}", user.unwrap_or(0) + 1),
                source: None,
                mistrigger: None,
            }
        })
        .collect()
}

/// Why arrivals could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ArrivalsError {
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The system's reason.
        source: std::io::Error,
    },
    /// A line that does not fit the detected format.
    #[error("{path}:{line}: {message}")]
    Parse {
        /// The path.
        path: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Neither Mooncake JSONL nor Azure CSV.
    #[error(
        "{path}: not a known request trace; expected Mooncake JSONL (timestamp, input_length, output_length, \
         hash_ids) or Azure CSV (TIMESTAMP, ContextTokens, GeneratedTokens)"
    )]
    UnknownFormat {
        /// The path.
        path: String,
    },
}

/// Which part of a replayed trace to take, and how fast to play it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplayOptions {
    /// Multiplies the gaps between arrivals (0.5 plays twice as fast).
    pub time_scale: f64,
    /// Keep at most this many requests (after the window).
    pub limit: Option<usize>,
    /// Keep requests arriving in `[from, to)` seconds after the trace's first arrival.
    pub window_s: Option<(f64, f64)>,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            time_scale: 1.0,
            limit: None,
            window_s: None,
        }
    }
}

/// One request of a replayed trace: offset from the trace's first arrival, lengths, prefix blocks.
struct Replayed {
    offset_ns: i64,
    input: u32,
    output: u32,
    blocks: Vec<u64>,
}

#[derive(serde::Deserialize)]
struct MooncakeRow {
    timestamp: u64,
    input_length: u32,
    output_length: u32,
    #[serde(default)]
    hash_ids: Vec<u64>,
}

fn parse_error(path: &Path, line: usize, message: impl Into<String>) -> ArrivalsError {
    ArrivalsError::Parse {
        path: path.display().to_string(),
        line,
        message: message.into(),
    }
}

fn read_mooncake(path: &Path, text: &str) -> Result<Vec<Replayed>, ArrivalsError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let row: MooncakeRow = serde_json::from_str(line).map_err(|e| parse_error(path, i + 1, e.to_string()))?;
        out.push(Replayed {
            offset_ns: i64::try_from(row.timestamp)
                .unwrap_or(i64::MAX / 2)
                .saturating_mul(1_000_000),
            input: row.input_length.max(1),
            output: row.output_length.max(1),
            blocks: row.hash_ids,
        });
    }
    Ok(out)
}

fn read_azure(path: &Path, text: &str) -> Result<Vec<Replayed>, ArrivalsError> {
    let mut lines = text.lines().enumerate();
    let header: Vec<&str> = lines
        .next()
        .map(|(_, h)| h.split(',').map(str::trim).collect())
        .unwrap_or_default();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let (Some(t), Some(ctx), Some(gen_col)) = (col("TIMESTAMP"), col("ContextTokens"), col("GeneratedTokens")) else {
        return Err(ArrivalsError::UnknownFormat {
            path: path.display().to_string(),
        });
    };
    let mut first_ns = None;
    let mut out = Vec::new();
    for (i, line) in lines.filter(|(_, l)| !l.trim().is_empty()) {
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        let cell = |c: usize| cells.get(c).copied().unwrap_or("");
        // "2023-11-16 18:15:46.6805900": UTC wall-clock with 100 ns digits.
        let at = chrono::NaiveDateTime::parse_from_str(cell(t), "%Y-%m-%d %H:%M:%S%.f")
            .map_err(|e| parse_error(path, i + 1, format!("TIMESTAMP {:?}: {e}", cell(t))))?
            .and_utc()
            .timestamp_nanos_opt()
            .ok_or_else(|| parse_error(path, i + 1, "TIMESTAMP out of range"))?;
        let number = |c: usize, name: &str| {
            cell(c)
                .parse::<u32>()
                .map_err(|e| parse_error(path, i + 1, format!("{name} {:?}: {e}", cell(c))))
        };
        let first = *first_ns.get_or_insert(at);
        out.push(Replayed {
            offset_ns: at.saturating_sub(first),
            input: number(ctx, "ContextTokens")?.max(1),
            output: number(gen_col, "GeneratedTokens")?.max(1),
            blocks: Vec::new(),
        });
    }
    Ok(out)
}

/// Reads a real request trace as arrivals starting at `start_ns`, recognising Mooncake JSONL or Azure CSV.
pub fn replay(path: &Path, options: ReplayOptions, start_ns: i64) -> Result<Vec<Arrival>, ArrivalsError> {
    let text = std::fs::read_to_string(path).map_err(|source| ArrivalsError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let first = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let mut rows = if first.starts_with('{') {
        read_mooncake(path, &text)?
    } else if first.contains("TIMESTAMP") {
        read_azure(path, &text)?
    } else {
        return Err(ArrivalsError::UnknownFormat {
            path: path.display().to_string(),
        });
    };
    let origin = rows.iter().map(|r| r.offset_ns).min().unwrap_or(0);
    if let Some((from, to)) = options.window_s {
        #[expect(clippy::cast_possible_truncation, reason = "seconds of a trace, far below 2^63 ns")]
        let (from, to) = ((from * 1e9) as i64, (to * 1e9) as i64);
        rows.retain(|r| (from..to).contains(&(r.offset_ns - origin)));
    }
    if let Some(limit) = options.limit {
        rows.truncate(limit);
    }
    let window_origin = rows.iter().map(|r| r.offset_ns).min().unwrap_or(0);
    let mut unique_block: u64 = 1 << 40;
    Ok(rows
        .into_iter()
        .enumerate()
        .map(|(n, r)| {
            let at_ns = start_ns.saturating_add(((r.offset_ns - window_origin) as f64 * options.time_scale) as i64);
            let blocks = if r.blocks.is_empty() {
                (0..r.input.div_ceil(PREFIX_BLOCK_TOKENS))
                    .map(|_| {
                        unique_block += 1;
                        unique_block
                    })
                    .collect()
            } else {
                r.blocks
            };
            Arrival {
                id: format!("replay-{n:06}"),
                at_ns,
                input_tokens: r.input,
                output_tokens: r.output,
                max_tokens: r.output.max(1),
                prefix_blocks: blocks,
                app_id: "replay".to_owned(),
                user_id: "replay".to_owned(),
                source: None,
                mistrigger: None,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_arrivals_are_seeded_and_ordered() {
        let traffic = Traffic {
            rate_per_s: 10.0,
            input: LengthDist {
                median: 1000.0,
                sigma: 1.0,
                min: 16,
                max: 32_000,
            },
            output: LengthDist {
                median: 150.0,
                sigma: 0.8,
                min: 1,
                max: 2048,
            },
        };
        let a = poisson(&traffic, 500, 0, "r-", 3);
        assert_eq!(a, poisson(&traffic, 500, 0, "r-", 3), "same seed, same arrivals");
        assert!(a.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));
        // 500 arrivals at 10/s span about 50 s.
        let span_s = (a[499].at_ns - a[0].at_ns) as f64 / 1e9;
        assert!((40.0..60.0).contains(&span_s), "{span_s}");
        // Requests of one app share their leading prefix blocks.
        let chats: Vec<&Arrival> = a.iter().filter(|r| r.app_id == "chat").collect();
        assert!(chats.len() > 200);
        assert!(chats.iter().all(|r| r.prefix_blocks[..2] == [1000, 1001]));
        assert!(
            chats
                .iter()
                .all(|r| r.prefix_blocks.len() as u32 == r.input_tokens.div_ceil(512))
        );
    }
}
