// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What the workspace holds, read from its manifests, and a small command runner.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::Tally;

/// A member crate of the workspace, as its manifest and sources describe it.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    /// The package name (`gpukit-...`).
    pub(crate) package: String,
    /// Whether `cargo publish` may publish it (`publish = false` says no).
    pub(crate) publishable: bool,
    /// The features its manifest declares.
    pub(crate) features: Vec<String>,
    /// Whether it has loom models (`tests/loom.rs`, built with `--cfg loom`).
    pub(crate) has_loom_tests: bool,
    /// Its examples (`examples/*.rs`) with the features each one requires.
    pub(crate) examples: Vec<Example>,
}

impl Member {
    /// `--features` value for this crate's host backends (`std`, `alloc`, `host`), the features
    /// its own tests run with under Miri.
    pub(crate) fn backend_features(&self) -> String {
        self.features
            .iter()
            .filter(|f| matches!(f.as_str(), "std" | "alloc" | "host"))
            .cloned()
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// A runnable example of a member crate.
#[derive(Debug, Clone)]
pub(crate) struct Example {
    pub(crate) name: String,
    pub(crate) required_features: Vec<String>,
}

/// The workspace: its root and its members.
pub(crate) struct Workspace {
    pub(crate) root: PathBuf,
    pub(crate) members: Vec<Member>,
}

impl Workspace {
    /// Finds the workspace this xtask binary belongs to and reads its members.
    pub(crate) fn discover() -> Result<Self, String> {
        let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let root = manifest_dir
            .parent()
            .ok_or("xtask has no parent directory")?
            .to_path_buf();
        let text = read(&root.join("Cargo.toml"))?;
        let mut members = Vec::new();
        for dir in member_dirs(&text) {
            members.push(read_member(&root.join(&dir))?);
        }
        Ok(Self { root, members })
    }

    /// `--features` value enabling, across the workspace, every feature of every member that
    /// builds on the host (all but `kernel`): CI lints and tests the host backends too.
    pub(crate) fn host_features(&self) -> String {
        self.members
            .iter()
            .flat_map(|m| {
                m.features
                    .iter()
                    .filter(|f| !matches!(f.as_str(), "kernel" | "default"))
                    .map(move |f| format!("{}/{f}", m.package))
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The crates that are published: the library crates of the family.
    pub(crate) fn library_crates(&self) -> Vec<Member> {
        self.members
            .iter()
            .filter(|m| m.publishable)
            .cloned()
            .collect()
    }

    /// A directory under `target/` for builds that must not share artifacts with the main ones.
    pub(crate) fn target_dir(&self, sub: &str) -> String {
        self.root
            .join("target")
            .join(sub)
            .to_string_lossy()
            .into_owned()
    }
}

fn read(path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// The `members = [...]` list of the root manifest.
fn member_dirs(manifest: &str) -> Vec<String> {
    let mut dirs = Vec::new();
    let mut inside = false;
    for line in manifest.lines() {
        let line = line.trim();
        if !inside {
            if line.starts_with("members") && line.contains('[') {
                inside = true;
            } else {
                continue;
            }
        }
        for piece in line.split('"').skip(1).step_by(2) {
            dirs.push(piece.to_string());
        }
        if line.contains(']') {
            break;
        }
    }
    dirs
}

fn read_member(dir: &Path) -> Result<Member, String> {
    let text = read(&dir.join("Cargo.toml"))?;
    let mut section = String::new();
    let mut package = None;
    let mut publishable = true;
    let mut features = Vec::new();
    let mut declared: Vec<Example> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line.trim_matches(|c| c == '[' || c == ']').to_string();
            if section == "example" {
                declared.push(Example {
                    name: String::new(),
                    required_features: Vec::new(),
                });
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        match section.as_str() {
            "package" if key == "name" => package = Some(value.trim_matches('"').to_string()),
            "package" if key == "publish" => publishable = value != "false",
            "features" if !key.starts_with('#') => features.push(key.to_string()),
            "example" => {
                if let Some(ex) = declared.last_mut() {
                    let quoted = value.split('"').skip(1).step_by(2).map(str::to_string);
                    match key {
                        "name" => ex.name = quoted.take(1).collect(),
                        "required-features" => ex.required_features = quoted.collect(),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    let mut examples = Vec::new();
    if let Ok(entries) = fs::read_dir(dir.join("examples")) {
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| {
                let p = e.path();
                let stem = p.file_stem()?.to_string_lossy().into_owned();
                (p.extension().is_some_and(|x| x == "rs") || p.join("main.rs").is_file())
                    .then_some(stem)
            })
            .collect();
        names.sort();
        for name in names {
            let required_features = declared
                .iter()
                .find(|d| d.name == name)
                .map(|d| d.required_features.clone())
                .unwrap_or_default();
            examples.push(Example {
                name,
                required_features,
            });
        }
    }
    let package = package.ok_or_else(|| format!("{} has no package name", dir.display()))?;
    Ok(Member {
        package,
        publishable,
        features,
        has_loom_tests: dir.join("tests/loom.rs").is_file(),
        examples,
    })
}

/// A command to run from the workspace root, with its output passed through.
pub(crate) struct Cmd {
    inner: Command,
    shown: String,
}

impl Cmd {
    pub(crate) fn new(program: &str) -> Self {
        let mut inner = Command::new(program);
        inner.current_dir(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .expect("xtask lives inside the workspace"),
        );
        Self {
            inner,
            shown: program.to_string(),
        }
    }

    pub(crate) fn cargo(args: &[&str]) -> Self {
        Self::new("cargo").args(args.iter().copied())
    }

    pub(crate) fn args<'a>(mut self, args: impl IntoIterator<Item = &'a str>) -> Self {
        for a in args {
            self.inner.arg(a);
            self.shown.push(' ');
            self.shown.push_str(a);
        }
        self
    }

    pub(crate) fn env(mut self, key: &str, value: &str) -> Self {
        self.inner.env(key, value);
        self.shown = format!("{key}={value} {}", self.shown);
        self
    }

    /// Runs the command; an error names it and its exit status.
    pub(crate) fn status(mut self) -> Result<(), String> {
        eprintln!("$ {}", self.shown);
        let status = self
            .inner
            .status()
            .map_err(|e| format!("cannot start `{}`: {e}", self.shown))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("`{}` failed ({status})", self.shown))
        }
    }

    /// Runs the command and captures its standard output (standard error passes through).
    pub(crate) fn output(mut self) -> Result<String, String> {
        let out = self
            .inner
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot start `{}`: {e}", self.shown))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!("`{}` failed ({})", self.shown, out.status))
        }
    }

    /// Runs a test command, passing its output through and adding its test counts to `tally`.
    pub(crate) fn tally(mut self, tally: &mut Tally) -> Result<(), String> {
        eprintln!("$ {}", self.shown);
        let mut child = self
            .inner
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start `{}`: {e}", self.shown))?;
        let mut seen = String::new();
        if let Some(stdout) = child.stdout.take() {
            let mut out = std::io::stdout().lock();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // Losing a line of the pass-through is not worth failing the run over.
                let _ = writeln!(out, "{line}");
                seen.push_str(&line);
                seen.push('\n');
            }
        }
        let status = child
            .wait()
            .map_err(|e| format!("`{}` vanished: {e}", self.shown))?;
        tally.absorb(&seen);
        if status.success() {
            Ok(())
        } else {
            Err(format!("`{}` failed ({status})", self.shown))
        }
    }
}
