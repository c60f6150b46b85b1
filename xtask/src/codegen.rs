// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The zero-cost proof: probe pairs must compile to the same instructions.
//!
//! `xtask/codegen-probes` exports pairs of functions, `<name>_lib` written with a crate of the
//! family and `<name>_hand` written with plain integer code. This command compiles that crate in
//! release mode for each target below, cuts the assembly into functions, normalises local labels
//! and requires both members of every pair to be identical. A pair that LLVM merged into one body
//! (one symbol an alias of the other) is identical by construction and passes too.
//!
//! The normalised assembly is also kept in `xtask/codegen-probes/snapshots/<target>/`, headed by
//! the compiler version that produced it. With that same compiler a difference is an error (the
//! code changed; look at it and run `cargo xtask codegen --bless`); with another compiler it is
//! reported but not fatal, since a new LLVM may choose other, equally good instructions, and the
//! pairwise check above is what holds the zero-cost claim.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::workspace::{Cmd, Workspace};

/// The targets whose code generation the probes pin.
const TARGETS: [&str; 2] = ["x86_64-unknown-linux-gnu", "aarch64-unknown-none"];

pub(crate) fn run(ws: &Workspace, bless: bool) -> Result<(), String> {
    let rustc = Cmd::new("rustc").args(["--version"]).output()?;
    let rustc = rustc.trim().to_string();
    let target_dir = ws.target_dir("codegen");
    let snapshot_root = ws.root.join("xtask/codegen-probes/snapshots");
    let mut failures = Vec::new();
    let mut stale = Vec::new();
    let mut pairs_checked = 0;

    for target in TARGETS {
        let asm_path = build_asm(&target_dir, target)?;
        let asm = fs::read_to_string(&asm_path)
            .map_err(|e| format!("cannot read {}: {e}", asm_path.display()))?;
        // AT&T syntax comments start with `#`; on aarch64 `#` marks an immediate and `//` a comment.
        let comment = if target.starts_with("x86_64") {
            "#"
        } else {
            "//"
        };
        let functions = split_functions(&asm, comment);
        let aliases = aliases(&asm);

        let mut names: Vec<&String> = functions.keys().chain(aliases.keys()).collect();
        names.sort();
        names.dedup();
        let stems: Vec<&str> = names
            .iter()
            .filter_map(|n| n.strip_suffix("_lib"))
            .collect();
        if stems.is_empty() {
            return Err(format!(
                "no `_lib` probe functions found in {}",
                asm_path.display()
            ));
        }

        for stem in stems {
            let lib = format!("{stem}_lib");
            let hand = format!("{stem}_hand");
            pairs_checked += 1;
            let merged = aliases.get(&lib) == Some(&hand) || aliases.get(&hand) == Some(&lib);
            let body = |name: &str| {
                functions
                    .get(name)
                    .or_else(|| aliases.get(name).and_then(|a| functions.get(a)))
            };
            let (Some(lib_body), Some(hand_body)) = (body(&lib), body(&hand)) else {
                failures.push(format!(
                    "{target}: `{lib}` has no `{hand}` partner (or no body)"
                ));
                continue;
            };
            if merged || lib_body == hand_body {
                eprintln!(
                    "  same   {target:<26} {stem} ({} instructions{})",
                    lib_body.len(),
                    if merged { ", merged by LLVM" } else { "" }
                );
            } else {
                failures.push(format!(
                    "{target}: `{lib}` and `{hand}` differ\n{}",
                    side_by_side(lib_body, hand_body)
                ));
                continue;
            }

            let snapshot = snapshot_root.join(target).join(format!("{stem}.s"));
            let text = format!("; {rustc}\n{}\n", lib_body.join("\n"));
            if bless {
                write(&snapshot, &text)?;
                continue;
            }
            match fs::read_to_string(&snapshot) {
                Ok(old) if old == text => {}
                Ok(old) => {
                    let same_compiler = old.lines().next() == Some(&format!("; {rustc}"));
                    let msg = format!(
                        "{target}: `{stem}` no longer matches {}",
                        snapshot.display()
                    );
                    if same_compiler {
                        failures.push(format!(
                            "{msg} (same compiler: run `cargo xtask codegen --bless` after review)"
                        ));
                    } else {
                        stale.push(msg);
                    }
                }
                Err(_) => failures.push(format!(
                    "{target}: no snapshot {} (run `cargo xtask codegen --bless`)",
                    snapshot.display()
                )),
            }
        }
    }

    for s in &stale {
        eprintln!("  note: {s}; the snapshot was taken with another compiler");
    }
    if failures.is_empty() {
        eprintln!(
            "codegen: {pairs_checked} probe pairs identical across {} targets",
            TARGETS.len()
        );
        Ok(())
    } else {
        for f in &failures {
            eprintln!("codegen: {f}");
        }
        Err(format!("{} codegen check(s) failed", failures.len()))
    }
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Compiles the probe crate to assembly and returns the path of the `.s` file.
fn build_asm(target_dir: &str, target: &str) -> Result<PathBuf, String> {
    let deps = Path::new(target_dir).join(target).join("release/deps");
    Cmd::cargo(&[
        "rustc",
        "-p",
        "codegen-probes",
        "--lib",
        "--release",
        "--target",
        target,
        "--",
        "--emit",
        "asm",
        "-C",
        "codegen-units=1",
        "-C",
        "debuginfo=0",
    ])
    .env("CARGO_TARGET_DIR", target_dir)
    .status()?;
    // Cargo leaves the assembly of an up-to-date build in place and rewrites it when anything the
    // probes depend on changes; builds with other flags or compilers leave files with other
    // hashes behind. The newest one is the current build's.
    fs::read_dir(&deps)
        .map_err(|e| format!("cannot read {}: {e}", deps.display()))?
        .flatten()
        .filter(|e| {
            let p = e.path();
            p.extension().is_some_and(|x| x == "s")
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("codegen_probes"))
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .map(|e| e.path())
        .ok_or_else(|| format!("rustc wrote no assembly under {}", deps.display()))
}

/// Cuts assembly into global functions: name to normalised instruction lines.
fn split_functions(asm: &str, comment: &str) -> BTreeMap<String, Vec<String>> {
    let mut globals = Vec::new();
    for line in asm.lines() {
        let t = line.trim();
        if let Some(rest) = t
            .strip_prefix(".globl")
            .or_else(|| t.strip_prefix(".global"))
        {
            globals.push(rest.trim().to_string());
        }
    }
    let mut out = BTreeMap::new();
    let mut current: Option<(String, Vec<String>)> = None;
    for line in asm.lines() {
        let t = line.trim();
        if let Some(label) = t.strip_suffix(':') {
            if globals.iter().any(|g| g == label) {
                if let Some((name, body)) = current.take() {
                    out.insert(name, normalise(&body, comment));
                }
                current = Some((label.to_string(), Vec::new()));
                continue;
            }
        }
        let Some((_, body)) = current.as_mut() else {
            continue;
        };
        // `.Lfunc_end` closes the function; `.size` does too on ELF.
        if t.starts_with(".Lfunc_end") || t.starts_with(".size") {
            let (name, body) = current.take().expect("checked above");
            out.insert(name, normalise(&body, comment));
            continue;
        }
        body.push(t.to_string());
    }
    if let Some((name, body)) = current {
        out.insert(name, normalise(&body, comment));
    }
    out
}

/// Symbols that are defined as another symbol (`.set a, b` or `a = b`).
fn aliases(asm: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in asm.lines() {
        let t = line.trim();
        let pair = if let Some(rest) = t.strip_prefix(".set") {
            rest.split_once(',')
        } else if !t.starts_with('.') && !t.starts_with('#') && !t.starts_with("//") {
            t.split_once(" = ")
        } else {
            None
        };
        if let Some((a, b)) = pair {
            out.insert(a.trim().to_string(), b.trim().to_string());
        }
    }
    out
}

/// Keeps instructions and local labels, drops directives and comments, and renames local labels
/// in order of appearance so that two functions can be compared.
fn normalise(lines: &[String], comment: &str) -> Vec<String> {
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut out = Vec::new();
    for line in lines {
        let code = line.split(comment).next().unwrap_or("").trim();
        if code.is_empty() || (code.starts_with('.') && !code.ends_with(':')) {
            continue;
        }
        let mut rendered = String::new();
        for (i, word) in code.split([' ', '\t', ',']).enumerate() {
            if word.is_empty() {
                continue;
            }
            if i > 0 {
                rendered.push(' ');
            }
            let bare = word.trim_end_matches(':');
            if bare.starts_with(".L") {
                let n = names.len();
                let renamed = names
                    .entry(bare.to_string())
                    .or_insert_with(|| format!(".L{n}"))
                    .clone();
                rendered.push_str(&word.replace(bare, &renamed));
            } else {
                rendered.push_str(word);
            }
        }
        out.push(rendered);
    }
    out
}

fn side_by_side(a: &[String], b: &[String]) -> String {
    let mut out = format!("    {:<40} | {}\n", "_lib", "_hand");
    for i in 0..a.len().max(b.len()) {
        let l = a.get(i).map(String::as_str).unwrap_or("");
        let r = b.get(i).map(String::as_str).unwrap_or("");
        let mark = if l == r { ' ' } else { '*' };
        out.push_str(&format!("  {mark} {l:<40} | {r}\n"));
    }
    out
}
