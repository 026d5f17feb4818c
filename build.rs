//! Names the commit the binary is built from, for `tokenscope --version`: `TOKENSCOPE_COMMIT` is the commit's short
//! hash and date from git when the sources are a checkout (a clone, `cargo install --path`, `cargo install --git`),
//! else the hash cargo wrote into a published package (`.cargo_vcs_info.json`), else "commit unknown".

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// The hash cargo records in a package it publishes: `{"git": {"sha1": "..."}}`.
fn packaged_sha(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(".cargo_vcs_info.json")).ok()?;
    let at = text.find("\"sha1\"")?;
    let rest = &text[at + "\"sha1\"".len()..];
    let start = rest.find('"')? + 1;
    let len = rest[start..].find('"')?;
    let sha = &rest[start..start + len];
    sha.chars()
        .all(|c| c.is_ascii_hexdigit())
        .then(|| sha.chars().take(10).collect())
}

fn main() {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = match (
        git(&["rev-parse", "--short=10", "HEAD"]),
        git(&["log", "-1", "--format=%cs"]),
    ) {
        (Some(hash), Some(date)) => format!("{hash} {date}"),
        (Some(hash), None) => hash,
        _ => packaged_sha(&dir).unwrap_or_else(|| "commit unknown".to_owned()),
    };
    println!("cargo:rustc-env=TOKENSCOPE_COMMIT={commit}");
    // Built again when HEAD moves: HEAD itself (a checkout of another branch), the branch's ref (a commit) and the
    // packed refs (a ref packed by git gc).
    println!("cargo:rerun-if-changed=build.rs");
    if let Some(git_dir) = git(&["rev-parse", "--git-dir"]) {
        let git_dir = dir.join(git_dir);
        println!("cargo:rerun-if-changed={}", git_dir.join("HEAD").display());
        println!("cargo:rerun-if-changed={}", git_dir.join("packed-refs").display());
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            let common = git(&["rev-parse", "--git-common-dir"]).map_or(git_dir.clone(), |c| dir.join(c));
            println!("cargo:rerun-if-changed={}", common.join(branch).display());
        }
    }
}
