//! What several integration tests share: running the built binary.

use std::process::Command;

/// Runs `tokenscope ARGS`: exit code (-1 when killed by a signal), standard output, standard error.
pub fn tokenscope(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tokenscope"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run tokenscope: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Numbers equal to a relative 1e-9 (a streamed figure is summed or divided in another order than a loaded one),
/// everything else exactly.
pub fn assert_json_close(x: &serde_json::Value, y: &serde_json::Value, at: &str) {
    match (x, y) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>(), "{at}");
            for (k, v) in a {
                assert_json_close(v, &b[k], &format!("{at}.{k}"));
            }
        }
        (serde_json::Value::Array(a), serde_json::Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{at}");
            for (i, (u, v)) in a.iter().zip(b).enumerate() {
                assert_json_close(u, v, &format!("{at}[{i}]"));
            }
        }
        (serde_json::Value::Number(a), serde_json::Value::Number(b)) => {
            let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            assert!(
                (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0),
                "{at}: {a} != {b}"
            );
        }
        _ => assert_eq!(x, y, "{at}"),
    }
}

/// The demo trace's requests (`sample_traces/demo.parquet`: `synth --scenario mixed`): the scenario's 300 ordinary
/// requests, and those it plants: chat-victim, rag-24k and four rag-6k (a prefill interrupting decodes), med-question
/// (an EOS mis-trigger), doc-96k and short-700 (a long prefill).
pub const DEMO_REQUESTS: usize = 300 + 6 + 1 + 2;
