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
