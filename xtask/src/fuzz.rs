// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `cargo xtask fuzz`: the coverage-guided fuzz targets of `fuzz/` (cargo fuzz, libFuzzer).
//!
//! The fuzz crate is a workspace of its own, built with the pinned nightly that Miri uses (the
//! sanitizer coverage instrumentation needs nightly), so that normal builds never need it.
//! Each target starts from its corpus in `fuzz/corpus/<target>`; inputs libFuzzer finds on the
//! way go to a scratch directory under the target dir, so a run never changes the repository.
//! A crash leaves its input under `<target dir>/fuzz/artifacts/<target>/`.

use std::path::PathBuf;
use std::process::Command;

use crate::workspace::{Cmd, Workspace};
use crate::MIRI_TOOLCHAIN;

/// The fuzz targets (binaries of `fuzz/Cargo.toml`).
pub(crate) const TARGETS: &[&str] = &[
    "ioctl",
    "io_pgtable",
    "gpuvm",
    "jobqueue",
    "sync_ops",
    "fw_image",
];

/// Seconds each target runs in `cargo xtask ci`.
pub(crate) const CI_SECONDS: u32 = 30;

/// Seconds of `cargo xtask fuzz <target>` without `--time`.
const DEFAULT_SECONDS: u32 = 300;

/// Installs cargo-fuzz if it is missing (the toolchain itself comes from `setup`).
fn ensure_cargo_fuzz() -> Result<(), String> {
    let present = Command::new("cargo")
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if present {
        return Ok(());
    }
    Cmd::cargo(&["install", "--locked", "cargo-fuzz"]).status()
}

/// Where fuzz builds, scratch corpora and crash artifacts go.
fn fuzz_dir(ws: &Workspace) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d).join("fuzz"),
        None => PathBuf::from(ws.target_dir("fuzz")),
    }
}

/// Runs `target` for `seconds` from its corpus; fails if libFuzzer finds a crash, a leak or a
/// timeout.
pub(crate) fn run(ws: &Workspace, target: &str, seconds: u32) -> Result<(), String> {
    if !TARGETS.contains(&target) {
        return Err(format!(
            "unknown fuzz target `{target}` (targets: {})",
            TARGETS.join(", ")
        ));
    }
    ensure_cargo_fuzz()?;
    let out = fuzz_dir(ws);
    let scratch = out.join("corpus").join(target);
    let artifacts = out.join("artifacts").join(target);
    for d in [&scratch, &artifacts] {
        std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    let corpus = ws.root.join("fuzz").join("corpus").join(target);
    let toolchain = format!("+{MIRI_TOOLCHAIN}");
    let fuzz_manifest_dir = ws.root.join("fuzz");
    let target_dir = out.clone();
    let max_time = format!("-max_total_time={seconds}");
    let artifact_prefix = format!("-artifact_prefix={}/", artifacts.display());
    let args: Vec<String> = vec![
        toolchain,
        "fuzz".into(),
        "run".into(),
        "--debug-assertions".into(),
        "--fuzz-dir".into(),
        fuzz_manifest_dir.display().to_string(),
        "--target-dir".into(),
        target_dir.display().to_string(),
        target.into(),
        scratch.display().to_string(),
        corpus.display().to_string(),
        "--".into(),
        max_time,
        "-rss_limit_mb=4096".into(),
        "-timeout=20".into(),
        artifact_prefix,
    ];
    Cmd::new("cargo")
        .args(args.iter().map(String::as_str))
        .status()
}

/// `cargo xtask fuzz <target> [--time S]`, or `--list`.
pub(crate) fn command(ws: &Workspace, args: &[String]) -> Result<(), String> {
    let mut target = None;
    let mut seconds = DEFAULT_SECONDS;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--list" => {
                for t in TARGETS {
                    println!("{t}");
                }
                return Ok(());
            }
            "--time" => {
                let v = it.next().ok_or("--time needs a number of seconds")?;
                seconds = v
                    .parse()
                    .map_err(|_| format!("--time: `{v}` is not a number of seconds"))?;
            }
            t if target.is_none() && !t.starts_with('-') => target = Some(t.to_string()),
            other => return Err(format!("fuzz: unexpected argument `{other}`")),
        }
    }
    let target = target.ok_or_else(|| {
        format!(
            "usage: cargo xtask fuzz <target> [--time S] | --list (targets: {})",
            TARGETS.join(", ")
        )
    })?;
    crate::setup::run()?;
    run(ws, &target, seconds)
}
