//! The prompts `tokenscope record` sends: JSON lines of `{"prompt": "..."}` or `{"messages": [...]}` (each
//! optionally with `max_tokens`, `app_id`, `user_id`, and `at_ms`: when to send it), or plain text, one prompt per line. A line that cannot be
//! read is rejected with its number and reason; the others are kept.

use std::path::Path;

use serde_json::Value;

/// What is sent: a text prompt, or chat messages as given.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// A text prompt (chat APIs send it as one user message).
    Text(String),
    /// Chat messages, sent as they are (completion APIs send their contents joined by newlines).
    Messages(Value),
}

/// One prompt with its own settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    /// What to send.
    pub body: Body,
    /// Its own output limit, over `--max-tokens`.
    pub max_tokens: Option<u32>,
    /// Attribution labels written on the request.
    pub app_id: Option<String>,
    /// Attribution labels written on the request.
    pub user_id: Option<String>,
    /// Sent no earlier than this many ms after the recording started (the first time through the file): a scripted
    /// scenario, such as a long prompt arriving while others decode.
    pub at_ms: Option<f64>,
}

/// The prompts of a file and the lines it rejected (`line: reason`).
#[derive(Debug, Default)]
pub struct Prompts {
    /// Prompts in file order.
    pub prompts: Vec<Prompt>,
    /// Rejected lines: 1-based line number and why.
    pub rejected: Vec<(usize, String)>,
}

/// Why the prompts file gave nothing to send.
#[derive(Debug, thiserror::Error)]
pub enum PromptsError {
    /// The file cannot be read.
    #[error("cannot read the prompts file {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The system's reason.
        source: std::io::Error,
    },
    /// No line gave a prompt.
    #[error(
        "{path}: no prompt in the file ({rejected} lines rejected{first}); give JSON lines of {{\"prompt\": \"...\"}} \
         or {{\"messages\": [...]}}, or plain text, one prompt per line"
    )]
    Empty {
        /// The path.
        path: String,
        /// Lines rejected.
        rejected: usize,
        /// The first rejection, if any.
        first: String,
    },
}

/// Reads a prompts file.
pub fn load(path: &Path) -> Result<Prompts, PromptsError> {
    let text = std::fs::read_to_string(path).map_err(|source| PromptsError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let prompts = parse(&text);
    if prompts.prompts.is_empty() {
        return Err(PromptsError::Empty {
            path: path.display().to_string(),
            rejected: prompts.rejected.len(),
            first: prompts
                .rejected
                .first()
                .map(|(line, why)| format!("; line {line}: {why}"))
                .unwrap_or_default(),
        });
    }
    Ok(prompts)
}

/// Reads prompts from text: JSON lines when the first non-blank line is a JSON object, plain lines otherwise.
pub fn parse(text: &str) -> Prompts {
    let mut out = Prompts::default();
    let json = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|l| l.trim_start().starts_with('{'));
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if !json {
            out.prompts.push(Prompt {
                body: Body::Text(line.to_owned()),
                max_tokens: None,
                app_id: None,
                user_id: None,
                at_ms: None,
            });
            continue;
        }
        match prompt_of(line) {
            Ok(p) => out.prompts.push(p),
            Err(why) => out.rejected.push((i + 1, why)),
        }
    }
    out
}

fn prompt_of(line: &str) -> Result<Prompt, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON ({e})"))?;
    let body = match (v.get("prompt"), v.get("messages")) {
        (Some(Value::String(s)), _) => Body::Text(s.clone()),
        (_, Some(m @ Value::Array(items))) if !items.is_empty() => Body::Messages(m.clone()),
        (Some(other), _) => return Err(format!("prompt is {other}, not a string")),
        (_, Some(other)) => return Err(format!("messages is {other}, not a non-empty list")),
        (None, None) => return Err("no \"prompt\" or \"messages\"".to_owned()),
    };
    let label = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let max_tokens = match v.get("max_tokens") {
        None | Some(Value::Null) => None,
        Some(m) => Some(
            m.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("max_tokens is {m}, not a positive integer"))?,
        ),
    };
    let at_ms = match v.get("at_ms") {
        None | Some(Value::Null) => None,
        Some(a) => Some(
            a.as_f64()
                .filter(|t| t.is_finite() && *t >= 0.0 && *t < 1e9)
                .ok_or_else(|| format!("at_ms is {a}, not a time in ms from the start (0 or more)"))?,
        ),
    };
    Ok(Prompt {
        body,
        max_tokens,
        app_id: label("app_id"),
        user_id: label("user_id"),
        at_ms,
    })
}

impl Body {
    /// The text of a completion prompt: the text, or the messages' contents joined by newlines.
    pub fn as_text(&self) -> String {
        match self {
            Body::Text(s) => s.clone(),
            Body::Messages(m) => m
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|msg| msg.get("content").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    /// A stable hash of what is sent (the messages, a text prompt as its one user message), 16 hex digits: the
    /// trace's `prompt_hash`, by which `diff --tokens` pairs two runs' answers to the same prompt.
    pub fn hash(&self) -> String {
        let messages = self.as_messages().to_string();
        format!("{:016x}", twox_hash::XxHash64::oneshot(0, messages.as_bytes()))
    }

    /// The chat messages: as given, or the text as one user message.
    pub fn as_messages(&self) -> Value {
        match self {
            Body::Text(s) => serde_json::json!([{ "role": "user", "content": s }]),
            Body::Messages(m) => m.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_with_settings_and_rejections_by_line() {
        let p = parse(
            "{\"prompt\": \"Hi\", \"max_tokens\": 5, \"app_id\": \"chat\"}\n\n{\"messages\": [{\"role\": \"user\", \"content\": \"Yo\"}], \"user_id\": \"u1\"}\nnot json\n{\"prompt\": 3}\n{\"prompt\": \"x\", \"max_tokens\": -1}\n",
        );
        assert_eq!(p.prompts.len(), 2);
        assert_eq!(p.prompts[0].body, Body::Text("Hi".into()));
        assert_eq!(
            (p.prompts[0].max_tokens, p.prompts[0].app_id.as_deref()),
            (Some(5), Some("chat"))
        );
        assert_eq!(p.prompts[1].body.as_text(), "Yo");
        assert_eq!(p.prompts[1].user_id.as_deref(), Some("u1"));
        let lines: Vec<usize> = p.rejected.iter().map(|r| r.0).collect();
        assert_eq!(lines, [4, 5, 6]);
        assert!(p.rejected[2].1.contains("max_tokens"), "{:?}", p.rejected[2]);
    }

    #[test]
    fn a_prompt_may_say_when_it_is_sent() {
        let p =
            parse("{\"prompt\": \"a\", \"at_ms\": 1500}\n{\"prompt\": \"b\"}\n{\"prompt\": \"c\", \"at_ms\": -3}\n");
        assert_eq!(p.prompts.len(), 2);
        assert_eq!(p.prompts[0].at_ms, Some(1500.0));
        assert_eq!(p.prompts[1].at_ms, None);
        assert_eq!(p.rejected[0].0, 3);
        assert!(p.rejected[0].1.contains("at_ms is -3"), "{:?}", p.rejected);
    }

    #[test]
    fn plain_text_is_one_prompt_per_line() {
        let p = parse("What is 2+2?\n\n  Name a color.  \n");
        assert_eq!(p.prompts.len(), 2);
        assert_eq!(p.prompts[1].body, Body::Text("Name a color.".into()));
        assert_eq!(p.prompts[0].body.as_messages()[0]["role"], "user");
    }
}
