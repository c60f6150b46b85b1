// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Workspace automation for the gpukit crate family.
//!
//! ```text
//! cargo xtask ci [--no-kernel] [--only TEXT]  everything CI checks, in order, stopping at the
//!                                first failure (the options are for local runs only)
//! cargo xtask setup              install the toolchain pieces the checks need (idempotent)
//! cargo xtask codegen [--bless]  zero-cost proof: compare probe pairs' assembly, check snapshots
//! cargo xtask demo               run every example of the library crates (release mode)
//! cargo xtask bench [--quick] [--write-docs]  every crate's peer comparison, one line each
//! cargo xtask fuzz <target> [--time S]  run one fuzz target of fuzz/ from its corpus (--list)
//! cargo xtask firmware           fetch Debian's Mali CSF firmware into the cache, print its directory
//! cargo xtask csdump [--base ADDR] <file|->  disassemble a Mali v10 command stream (csf's example)
//! cargo xtask csdump --demo               run the Mali-G610 demo, disassembling its chain's job 1
//! cargo xtask kernel-build [--kdir DIR]  vendor the crates into a Linux 7.2 overlay, build it
//! cargo xtask kernel-test [--kdir DIR]   kernel-build, then run the KUnit suites under QEMU
//!                                        (both: `--arch arm64` for an arm64 kernel, cross-built)
//! cargo xtask kernel-bench [--kdir DIR] [--wall-clock]  the vs-C suites in a kernel built
//!                                        without the checkers, timed by instruction count
//! cargo xtask userspace-test [--arch A] [--cache DIR] [--bzimage PATH]  boot the built kernel with each
//!                                userspace test program as /init (see xtask/KERNEL.md)
//! ```
//!
//! The tool uses only `std` so that it builds in a couple of seconds on a fresh clone.

mod bench;
mod codegen;
mod debian;
mod dt;
mod frames;
mod fuzz;
mod kernel;
mod setup;
mod userspace;
mod workspace;

use std::process::ExitCode;
use std::time::Instant;

use workspace::{Cmd, Workspace};

/// Nightly toolchain used for Miri, pinned so that CI runs are reproducible.
pub(crate) const MIRI_TOOLCHAIN: &str = "nightly-2026-05-20";
/// Oldest Rust release the library crates support (the workspace's `rust-version`).
pub(crate) const MSRV_TOOLCHAIN: &str = "1.89";
/// The bare-metal target that proves every library crate is `no_std`.
pub(crate) const NO_STD_TARGET: &str = "aarch64-unknown-none";

fn usage() -> ExitCode {
    eprintln!(
        "usage: cargo xtask <command>\n\n\
         commands:\n  \
           ci [--no-kernel] [--only TEXT]  run every check CI runs; --no-kernel skips the\n  \
                              kernel, --only runs the steps whose name holds TEXT (not in CI)\n  \
           setup              install rustup components, targets and toolchains the checks need\n  \
           codegen [--bless]  compare the assembly of codegen probe pairs; --bless rewrites snapshots\n  \
           demo               run every example of the library crates, in release mode\n  \
           bench [--quick] [--write-docs]  every crate's peer comparison, one line each\n  \
           fuzz <target> [--time S]  run a fuzz target of fuzz/ (default 300 s); --list names them\n  \
           firmware           fetch the Arm Mali CSF firmware (Debian's firmware-misc-nonfree)\n  \
                              into ~/.cache/gpukit/firmware once; print that directory\n  \
           csdump [--base ADDR] <file|->  disassemble a Mali v10 command stream (little-endian\n  \
                              64-bit words; - reads stdin; ADDR is the first word's GPU address)\n  \
           csdump --demo              run the Mali-G610 demo, disassembling its chain's job 1\n  \
           kernel-build [--kdir DIR]  build the crates into a Linux kernel (see xtask/KERNEL.md)\n  \
           kernel-test [--kdir DIR]   kernel-build, then run their KUnit suites under QEMU\n  \
                              (kernel-build/-test: --arch arm64 cross-builds for arm64, boots on\n  \
                              qemu-system-aarch64 -M virt; default x86_64)\n  \
           kernel-bench [--kdir DIR] [--wall-clock]  the comparisons with the C code in a\n  \
                              kernel without lockdep and DMA-API debugging (its own build),\n  \
                              timed by QEMU's instruction counter (or the host's clock)\n  \
           userspace-test [--arch A] [--cache DIR] [--bzimage PATH]  boot the built kernel with the\n  \
                              userspace test programs as /init (see xtask/KERNEL.md)"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ws = match Workspace::discover() {
        Ok(ws) => ws,
        Err(e) => {
            eprintln!("xtask: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match args.first().map(String::as_str) {
        Some("ci") => CiOptions::parse(&args[1..]).and_then(|o| ci(&ws, &o)),
        Some("setup") => setup::run(),
        Some("demo") => demo(&ws),
        Some("bench") => bench::command(&ws, &args[1..]),
        Some("codegen") => codegen::run(&ws, args.iter().any(|a| a == "--bless")),
        Some("fuzz") => fuzz::command(&ws, &args[1..]),
        Some("csdump") => csdump(&args[1..]),
        Some("firmware") => debian::firmware_dir().map(|d| println!("{}", d.display())),
        Some("kernel-build") => {
            kernel::Options::parse(&args[1..]).and_then(|o| kernel::build(&ws, &o))
        }
        Some("kernel-test") => kernel::Options::parse(&args[1..])
            .and_then(|o| kernel::test(&ws, &o, &mut Tally::default())),
        Some("kernel-bench") => {
            kernel::Options::parse_bench(&args[1..]).and_then(|o| kernel::bench(&ws, &o))
        }
        Some("userspace-test") => userspace::command(&ws, &args[1..], &kernel::check_log),
        _ => return usage(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One named check of the CI run.
struct Step<'a> {
    name: String,
    run: Check<'a>,
}

/// The body of a step: runs it, adding any test counts to the tally.
type Check<'a> = Box<dyn Fn(&mut Tally) -> Result<(), String> + 'a>;

/// Test counts gathered from the test runners' own summaries.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) passed: u64,
    pub(crate) failed: u64,
    pub(crate) ignored: u64,
}

impl Tally {
    /// Adds the counts of every `test result:` line cargo's test harness printed.
    pub(crate) fn absorb(&mut self, output: &str) {
        for line in output.lines() {
            let Some(rest) = line.trim().strip_prefix("test result: ") else {
                continue;
            };
            for part in rest.split(';') {
                let mut words = part.split_whitespace().rev();
                let (Some(kind), Some(n)) = (words.next(), words.next()) else {
                    continue;
                };
                let Ok(n) = n.parse::<u64>() else { continue };
                match kind {
                    "passed" => self.passed += n,
                    "failed" => self.failed += n,
                    "ignored" => self.ignored += n,
                    _ => {}
                }
            }
        }
    }
}

/// Options of `cargo xtask ci`.
struct CiOptions {
    /// Leave out the kernel step (local use only: refused when `CI` is set).
    no_kernel: bool,
    /// Run only the steps whose name contains this text (local use only, like `--no-kernel`).
    only: Option<String>,
}

impl CiOptions {
    /// Parses `[--no-kernel] [--only TEXT]`.
    fn parse(args: &[String]) -> Result<Self, String> {
        let mut no_kernel = false;
        let mut only = None;
        let mut args = args.iter();
        while let Some(a) = args.next() {
            match a.as_str() {
                "--no-kernel" => no_kernel = true,
                "--only" => match args.next() {
                    Some(text) => only = Some(text.clone()),
                    None => return Err("ci: --only needs the text of a step's name".into()),
                },
                other => return Err(format!("ci: unknown option `{other}`")),
            }
        }
        if (no_kernel || only.is_some()) && std::env::var_os("CI").is_some() {
            return Err("ci: --no-kernel and --only are for local runs; CI runs every step".into());
        }
        Ok(CiOptions { no_kernel, only })
    }
}

fn ci(ws: &Workspace, opts: &CiOptions) -> Result<(), String> {
    let started = Instant::now();
    let libs = ws.library_crates();
    let features = ws.host_features();
    let mut steps: Vec<Step<'_>> = Vec::new();

    steps.push(Step {
        name: "setup (rustup components, targets, toolchains)".into(),
        run: Box::new(|_| setup::run()),
    });
    // The real Arm firmware image, which the driver's tests and the demo load from the
    // directory named by `TYR_FIRMWARE_DIR` (every later step inherits it): CI parses and loads
    // the image silicon would run, not only the project's own.
    steps.push(Step {
        name: format!(
            "firmware (Debian's firmware-misc-nonfree: {})",
            debian::G610_FIRMWARE
        ),
        run: Box::new(|_| {
            let dir = debian::firmware_dir()?;
            eprintln!("ci: TYR_FIRMWARE_DIR={}", dir.display());
            std::env::set_var("TYR_FIRMWARE_DIR", &dir);
            Ok(())
        }),
    });
    steps.push(Step {
        name: "cargo fmt --check".into(),
        run: Box::new(|_| Cmd::cargo(&["fmt", "--all", "--", "--check"]).status()),
    });
    steps.push(Step {
        name: "cargo clippy --workspace --all-targets -D warnings (default features)".into(),
        run: Box::new(|_| {
            Cmd::cargo(&[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ])
            .status()
        }),
    });
    steps.push(Step {
        name: "cargo clippy --workspace --all-targets -D warnings (host features)".into(),
        run: Box::new(|_| {
            Cmd::cargo(&[
                "clippy",
                "--workspace",
                "--all-targets",
                "--features",
                &features,
                "--",
                "-D",
                "warnings",
            ])
            .status()
        }),
    });
    steps.push(Step {
        name: "cargo test --workspace (unit, integration, doc, compile-fail)".into(),
        run: Box::new(|tally| {
            Cmd::cargo(&["test", "--workspace", "--features", &features]).tally(tally)
        }),
    });
    steps.push(Step {
        name: "examples (cargo xtask demo)".into(),
        run: Box::new(|_| demo(ws)),
    });
    steps.push(Step {
        name: "codegen probes (x86_64, aarch64-unknown-none)".into(),
        run: Box::new(|_| codegen::run(ws, false)),
    });
    // Miri on every library crate: those with `unsafe` need it, and for the others it is cheap
    // insurance that their tests hold under a stricter model of the standard library's code.
    for krate in &libs {
        let pkg = krate.package.clone();
        let features = krate.backend_features();
        let targets: Vec<String> = miri_targets(&pkg).iter().map(|t| t.to_string()).collect();
        let shown = if targets.is_empty() {
            String::new()
        } else {
            format!(" {}", targets.join(" "))
        };
        steps.push(Step {
            name: format!("miri test -p {pkg} --features '{features}'{shown}"),
            run: Box::new(move |tally| {
                let mut args = vec![
                    format!("+{MIRI_TOOLCHAIN}"),
                    "miri".into(),
                    "test".into(),
                    "-p".into(),
                    pkg.clone(),
                    "--features".into(),
                    features.clone(),
                ];
                args.extend(targets.iter().cloned());
                Cmd::new("cargo")
                    .args(args.iter().map(String::as_str))
                    .env("MIRIFLAGS", "-Zmiri-strict-provenance")
                    .tally(tally)
            }),
        });
    }
    // loom models: `tests/loom.rs` of a crate, built with `--cfg loom` in a target dir of its
    // own so that the changed flags do not invalidate the main build's cache.
    for krate in libs.iter().filter(|k| k.has_loom_tests) {
        let pkg = krate.package.clone();
        steps.push(Step {
            name: format!("loom models of {pkg}"),
            run: Box::new(move |tally| {
                Cmd::cargo(&["test", "-p", &pkg, "--test", "loom", "--release"])
                    .env("RUSTFLAGS", "--cfg loom")
                    .env("CARGO_TARGET_DIR", &ws.target_dir("loom"))
                    .tally(tally)
            }),
        });
    }
    for krate in &libs {
        let pkg = krate.package.clone();
        let has_alloc = krate.features.iter().any(|f| f == "alloc");
        steps.push(Step {
            name: format!("no_std build of {pkg} for {NO_STD_TARGET}"),
            run: Box::new(move |_| {
                let base = [
                    "build",
                    "-p",
                    &pkg,
                    "--target",
                    NO_STD_TARGET,
                    "--no-default-features",
                ];
                Cmd::cargo(&base).status()?;
                if has_alloc {
                    let mut with_alloc = base.to_vec();
                    with_alloc.extend(["--features", "alloc"]);
                    Cmd::cargo(&with_alloc).status()?;
                }
                Ok(())
            }),
        });
    }
    steps.push(Step {
        name: format!(
            "downstream/: a user's crate, default features, for {NO_STD_TARGET}; host tests with std"
        ),
        run: Box::new(|tally| {
            let manifest = ws.root.join("downstream/Cargo.toml");
            let manifest = manifest.to_string_lossy();
            let target = ws.target_dir("downstream");
            let build = [
                "build",
                "--locked",
                "--manifest-path",
                &manifest,
                "--target",
                NO_STD_TARGET,
            ];
            Cmd::cargo(&build)
                .env("CARGO_TARGET_DIR", &target)
                .status()?;
            Cmd::cargo(&["test", "--locked", "--manifest-path", &manifest])
                .env("CARGO_TARGET_DIR", &target)
                .tally(tally)
        }),
    });
    // The docs with default features (what a user's `cargo doc` builds, and docs.rs for every crate
    // without `package.metadata.docs.rs`: links to items of the host features must resolve without
    // them), then with the host features; both in the main target dir, as the lints.
    steps.push(Step {
        name: "cargo doc --workspace --no-deps (warnings denied, default features)".into(),
        run: Box::new(|_| {
            Cmd::cargo(&["doc", "--workspace", "--no-deps"])
                .env("RUSTDOCFLAGS", "-D warnings")
                .status()
        }),
    });
    steps.push(Step {
        name: "cargo doc --workspace --no-deps (warnings denied, host features)".into(),
        run: Box::new(|_| {
            Cmd::cargo(&["doc", "--workspace", "--no-deps", "--features", &features])
                .env("RUSTDOCFLAGS", "-D warnings")
                .status()
        }),
    });
    {
        let pkgs: Vec<String> = libs.iter().map(|k| k.package.clone()).collect();
        steps.push(Step {
            name: format!("MSRV {MSRV_TOOLCHAIN}: cargo check of every library crate"),
            run: Box::new(move |_| {
                let mut args = vec![format!("+{MSRV_TOOLCHAIN}"), "check".into(), "--lib".into()];
                for p in &pkgs {
                    args.push("-p".into());
                    args.push(p.clone());
                }
                // A separate target dir: the MSRV compiler's artifacts would otherwise evict the
                // main toolchain's from the shared cache on every run.
                Cmd::new("cargo")
                    .args(args.iter().map(String::as_str))
                    .env("CARGO_TARGET_DIR", &ws.target_dir("msrv"))
                    .status()
            }),
        });
    }
    {
        let pkgs: Vec<String> = libs.iter().map(|k| k.package.clone()).collect();
        steps.push(Step {
            name: "cargo package (every publishable crate, verified build)".into(),
            run: Box::new(move |_| {
                forget_unpacked_packages(&pkgs)?;
                let mut args = vec!["package".to_string(), "--allow-dirty".into()];
                for p in &pkgs {
                    args.push("-p".into());
                    args.push(p.clone());
                }
                Cmd::new("cargo")
                    .args(args.iter().map(String::as_str))
                    .status()
            }),
        });
    }
    // Each fuzz target for a short, bounded time from its corpus (issue 20): what a longer
    // `cargo xtask fuzz <target>` found stays fixed.
    for target in fuzz::TARGETS {
        steps.push(Step {
            name: format!(
                "fuzz {target} ({} s from fuzz/corpus/{target})",
                fuzz::CI_SECONDS
            ),
            run: Box::new(move |_| fuzz::run(ws, target, fuzz::CI_SECONDS)),
        });
    }
    // Every crate's peer comparison, short: fails only if a benchmark crashes, never on a
    // figure (the lines are printed for the log).
    steps.push(Step {
        name: "cargo xtask bench --quick (peer comparisons)".into(),
        run: Box::new(|_| bench::command(ws, &["--quick".to_string()])),
    });
    // Last: the crates inside a real Linux kernel, their KUnit suites under QEMU. The build
    // cache lives outside the clone, so a fresh clone only rebuilds what changed.
    if opts.no_kernel {
        eprintln!("ci: --no-kernel: the kernel steps (kernel-test, x86_64 and arm64) are left out of this local run");
    } else {
        steps.push(Step {
            name: "kernel-test (KUnit suites in Linux 7.2 under QEMU)".into(),
            run: Box::new(|tally| {
                kernel::Options::parse(&[]).and_then(|o| kernel::test(ws, &o, tally))
            }),
        });
        // The same suites and userspace stages on an arm64 kernel (cross-built, booted on
        // `qemu-system-aarch64 -M virt`): Tyr on the architecture of the boards it drives.
        steps.push(Step {
            name: "kernel-test --arch arm64 (the same on arm64, qemu-system-aarch64)".into(),
            run: Box::new(|tally| {
                kernel::Options::parse(&["--arch".into(), "arm64".into()])
                    .and_then(|o| kernel::test(ws, &o, tally))
            }),
        });
    }

    if let Some(text) = &opts.only {
        steps.retain(|s| s.name.contains(text.as_str()));
        if steps.is_empty() {
            return Err(format!("ci: no step's name contains `{text}`"));
        }
    }

    let mut tally = Tally::default();
    let mut report: Vec<(String, &'static str, f64)> = Vec::new();
    let mut failure = None;
    for step in &steps {
        eprintln!("\n==> {}", step.name);
        let t = Instant::now();
        let outcome = (step.run)(&mut tally);
        let secs = t.elapsed().as_secs_f64();
        match outcome {
            Ok(()) => report.push((step.name.clone(), "ok", secs)),
            Err(e) => {
                report.push((step.name.clone(), "FAILED", secs));
                failure = Some(format!("{}: {e}", step.name));
                break;
            }
        }
    }

    eprintln!("\n==> summary");
    for (name, status, secs) in &report {
        eprintln!("  {status:>6}  {secs:7.1}s  {name}");
    }
    for step in steps.iter().skip(report.len()) {
        eprintln!("  {:>6}  {:>8}  {}", "-", "", step.name);
    }
    eprintln!(
        "  total {:.1}s; {} of {} steps passed",
        started.elapsed().as_secs_f64(),
        report.iter().filter(|r| r.1 == "ok").count(),
        steps.len()
    );
    // The closing line CI reads: test counts summed over every test run above.
    println!(
        "tests: {} passed, {} failed, {} skipped",
        tally.passed, tally.failed, tally.ignored
    );
    match failure {
        Some(f) => Err(f),
        None => Ok(()),
    }
}

/// The test targets Miri runs for a package (all of them when empty).
///
/// `tyr`'s driver tests each probe a simulated GPU and run its event thread; under Miri they
/// take minutes each (a two-job submission chain more than five), more than CI can give the
/// whole suite. Its unsafe code (DMA views, the MMIO model, starting and stopping the event
/// thread) is exercised by the unit tests and the driver's probe test; the ioctl and submission
/// suites run natively only. The simulator (`gpukit-mali-sim`, whose memory has unsafe code)
/// runs all its tests under Miri.
fn miri_targets(package: &str) -> &'static [&'static str] {
    match package {
        "gpukit-tyr" => &["--lib", "--test", "driver_probe"],
        _ => &[],
    }
}

/// `cargo xtask csdump [--base ADDR] <file|->`: runs `csf`'s `csdump` example on the file.
///
/// The example runs from the workspace root, so a relative path is made absolute first.
fn csdump(args: &[String]) -> Result<(), String> {
    if args.iter().any(|a| a == "--demo") {
        // The demo's chain as the GPU runs it: the example disassembles it with `csf`.
        return Cmd::cargo(&[
            "run",
            "--quiet",
            "--release",
            "-p",
            "gpukit-tyr",
            "--features",
            "host",
            "--example",
            "mali_g610",
            "--",
            "--csdump",
        ])
        .status();
    }
    let mut forwarded = Vec::new();
    let mut has_file = false;
    let mut after_base = false;
    for a in args {
        let is_path = !after_base && !a.starts_with('-');
        has_file |= is_path || a == "-";
        after_base = a == "--base";
        forwarded.push(if is_path {
            std::path::absolute(a)
                .map_err(|e| format!("csdump: {a}: {e}"))?
                .to_string_lossy()
                .into_owned()
        } else {
            a.clone()
        });
    }
    if !has_file {
        return Err("csdump: which file? (`cargo xtask csdump [--base ADDR] <file|->`)".into());
    }
    let mut cmd = vec![
        "run",
        "--quiet",
        "-p",
        "gpukit-csf",
        "--example",
        "csdump",
        "--",
    ];
    cmd.extend(forwarded.iter().map(String::as_str));
    Cmd::cargo(&cmd).status()
}

/// Runs every example of every library crate, in release mode, stopping at the first failure.
fn demo(ws: &Workspace) -> Result<(), String> {
    let mut ran = 0;
    for krate in ws.library_crates() {
        for example in &krate.examples {
            eprintln!("\n==> {} example `{}`", krate.package, example.name);
            let features = example.required_features.join(",");
            let mut args = vec![
                "run",
                "--quiet",
                "--release",
                "-p",
                &krate.package,
                "--example",
                &example.name,
            ];
            if !features.is_empty() {
                args.extend(["--features", &features]);
            }
            Cmd::cargo(&args).status()?;
            ran += 1;
        }
    }
    if ran == 0 {
        return Err("no examples found in the library crates".into());
    }
    eprintln!("\ndemo: {ran} examples ran successfully");
    Ok(())
}

/// Removes what earlier `cargo package` runs unpacked of this workspace's own packages.
///
/// To verify a package that depends on a sibling, `cargo package` publishes the siblings to a
/// registry under `target/package/tmp-registry` and unpacks them into
/// `$CARGO_HOME/registry/src/-<hash of that path>/<name>-<version>`. An unpacked copy that is
/// already there is used as it is: the version number has not changed, so cargo takes it to be
/// the same code. A later run from a clone at the same path (as CI's is, run after run) then
/// verifies against the sources of an older commit and fails, while a clone at a new path passes.
/// Only the unnamed local registries (`-<hash>`) are touched, and in them only this workspace's
/// package names; a registry folder left empty is removed too.
fn forget_unpacked_packages(packages: &[String]) -> Result<(), String> {
    use std::path::PathBuf;
    let Some(home) = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
    else {
        return Ok(());
    };
    let Ok(registries) = std::fs::read_dir(home.join("registry").join("src")) else {
        return Ok(());
    };
    for registry in registries.flatten() {
        if !registry.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        let dir = registry.path();
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let ours = packages.iter().any(|p| {
                name.strip_prefix(p.as_str())
                    .and_then(|rest| rest.strip_prefix('-'))
                    .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
            });
            if ours {
                std::fs::remove_dir_all(entry.path())
                    .map_err(|e| format!("cannot remove {}: {e}", entry.path().display()))?;
            }
        }
        // Ignored when the folder still holds something that is not ours.
        let _ = std::fs::remove_dir(&dir);
    }
    Ok(())
}
