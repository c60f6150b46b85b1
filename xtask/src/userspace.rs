// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The userspace stage of `cargo xtask kernel-test` (and `cargo xtask userspace-test` on its
//! own): the test kernel booted again, with a static Rust program as `/init`, which talks to a
//! DRM driver through `/dev/dri/renderD128` (see "The userspace stage" in `xtask/KERNEL.md`).
//!
//! For each [`Stage`]:
//!
//! 1. the program (a binary of a crate of its own, e.g. `xtask/userspace`) is built for
//!    `x86_64-unknown-linux-musl` in release mode: a static executable;
//! 2. an initramfs is written, an uncompressed `newc` cpio archive made here (no `cpio` tool,
//!    no root): `dev/`, `dev/console`, `proc/`, `sys/` and the program as `init`;
//! 3. QEMU (TCG; KVM stops with "emulation failure" on these machines) boots the kernel with it,
//!    the serial console saved to `<cache>/userspace-<name>.log`. A stage of the Tyr driver
//!    gets its GPU the architecture's way: on x86_64 `gpukit.boot=tyr` has Tyr's boot hook
//!    register a platform device by name; on arm64 the board's device tree (`-dtb`, see
//!    [`crate::dt`]) has the GPU's node, to which Tyr binds by OF match, and
//!    `gpukit.boot=board` only keeps the sample driver away;
//! 4. the program's lines (`userspace: <name>: ok|FAIL ...`) are printed, then the kernel log
//!    lines the stage names (Tyr's probe lines for `tyr_demo`); the stage passes only with a
//!    summary line of at least one passed and no failed check, and a kernel log the caller's
//!    checker (kernel-test's lockdep/DMA-API/WARN check) finds clean.
//!
//! The program crates' host unit tests run first (`cargo test`), counted in the tally.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::workspace::Workspace;
use crate::Tally;

/// One program run as `/init` of its own boot of the test kernel.
pub(crate) struct Stage {
    /// The binary's name, also the program name in its output lines.
    pub(crate) name: &'static str,
    /// The crate that has it (`src/bin/<name>.rs`), relative to the workspace root; a Cargo
    /// workspace of its own.
    pub(crate) dir: &'static str,
    /// Whether the stage drives the Tyr driver (which then gets its GPU, see [`cmdline`]);
    /// otherwise the sample driver.
    pub(crate) tyr: bool,
    /// Kernel log lines containing one of these are printed next to the program's lines (the
    /// driver's probe messages), none if empty.
    pub(crate) kernel_lines: &'static [&'static str],
}

/// The stages, in order.
pub(crate) const STAGES: &[Stage] = &[
    Stage {
        name: "drm_sample",
        dir: "xtask/userspace",
        tyr: false,
        kernel_lines: &[],
    },
    // The Tyr driver registers at boot instead of the sample driver (`gpukit.boot=tyr`); its
    // probe lines ("gpukit_tyr: ...") and the DRM core's "[drm] Initialized panthor ..." are
    // shown with the program's.
    Stage {
        name: "tyr_demo",
        dir: "xtask/userspace",
        tyr: true,
        kernel_lines: &["tyr: ", "tyr c000000.gpu: ", "[drm] Initialized panthor"],
    },
    // Tyr again, attacked by a hostile client (huge heaps and BOs, overfull queues, many
    // timeline waits, a 128 TiB sparse map, a close while a thread waits).
    Stage {
        name: "tyr_hostile",
        dir: "xtask/userspace",
        tyr: true,
        kernel_lines: &["tyr: "],
    },
    // Tyr's time against the kernel's: a job released by a CPU write 2 s later, a job that
    // never progresses timed out after 5 s of real time, TIMESTAMP_INFO's CPU clocks.
    Stage {
        name: "tyr_time",
        dir: "xtask/userspace",
        tyr: true,
        kernel_lines: &["tyr: "],
    },
];

// The programs are built for `Arch::musl_target`: static executables without a C library to
// install.
use crate::kernel::Arch;

/// How long one boot may take before QEMU is killed and the stage fails.
const BOOT_TIMEOUT: Duration = Duration::from_secs(300);

/// How long QEMU may keep running once the kernel said it halted or powered down.
const HALT_GRACE: Duration = Duration::from_secs(10);

/// The kernel command line after `console=<the arch's serial console>`: KUnit's built-in suites
/// off (they ran in the KUnit stage), every WARN a panic and a panic a reboot at once (QEMU's
/// `-no-reboot` turns that into an exit, so a WARN ends the boot before the program's summary),
/// our init.
const CMDLINE: &str = "kunit.enable=0 panic_on_warn=1 panic=-1 rdinit=/init";

/// The kernel command line of `stage`'s boot on `arch`: its console, [`CMDLINE`], and for a
/// stage of the Tyr driver what gets it its GPU: on x86_64 `gpukit.boot=tyr` (Tyr's boot hook
/// registers a platform device by name); on arm64 nothing chooses the device, which the
/// board's device tree describes ([`crate::dt`]), and `gpukit.boot=board` only tells the sample
/// driver, which registers a device of its own unless `gpukit.boot=` names another, to stay
/// away.
fn cmdline(stage: &Stage, arch: Arch) -> String {
    let console = arch.console();
    match (stage.tyr, arch) {
        (false, _) => format!("console={console} {CMDLINE}"),
        (true, Arch::X86_64) => format!("console={console} {CMDLINE} gpukit.boot=tyr"),
        (true, Arch::Arm64) => format!("console={console} {CMDLINE} gpukit.boot=board"),
    }
}

/// What a stage boots on: the architecture, the kernel image and, for a board, its device
/// tree.
#[derive(Clone, Copy)]
struct Machine<'a> {
    arch: Arch,
    image: &'a Path,
    dtb: Option<&'a Path>,
}

/// Memory (MiB) and CPUs of every boot; the board's device tree is dumped with the same.
const MEMORY: &str = "1024";
const CPUS: &str = "2";

/// The lines of the console `log` that contain one of `patterns` and are not the program's
/// own (`userspace: <name>: ` anywhere in them).
fn kernel_lines(name: &str, patterns: &[&str], log: &str) -> Vec<String> {
    let own = format!("userspace: {name}: ");
    log.lines()
        .filter(|l| !l.contains(&own) && patterns.iter().any(|p| l.contains(p)))
        .map(|l| l.trim_end().to_string())
        .collect()
}

/// Kernel options a boot with an initramfs `/init` needs, checked in the build's `.config`
/// next to the bzImage when it is there.
const NEEDED_CONFIG: &[&str] = &[
    "CONFIG_BLK_DEV_INITRD=y",
    "CONFIG_DEVTMPFS=y",
    "CONFIG_BINFMT_ELF=y",
];

/// A kernel log checker: `Err` if the log shows that a checker was not active, else the
/// report lines found (none for a clean log). kernel-test passes its `check_log`.
pub(crate) type LogCheck<'a> = &'a dyn Fn(&str) -> Result<Vec<String>, String>;

/// What one stage did.
#[derive(Debug, Default)]
pub(crate) struct StageResult {
    /// The stage's (program's) name.
    pub(crate) name: String,
    /// Checks the program passed and failed, from its summary line.
    pub(crate) passed: u64,
    pub(crate) failed: u64,
    /// Its `userspace: <name>: ...` lines, from `ok`/`FAIL`/`summary` on.
    pub(crate) lines: Vec<String>,
    /// The serial console log of the boot.
    pub(crate) log: PathBuf,
    /// Seconds to build the program and to boot, run and power off.
    pub(crate) build_secs: f64,
    pub(crate) boot_secs: f64,
    /// Why the stage failed (`None`: it passed).
    pub(crate) failure: Option<String>,
}

/// Runs every stage against `bzimage`, writing archives and logs to `cache`, checking each
/// boot's kernel log with `check_log`. Adds the host unit tests and the programs' checks to
/// `tally`. Every stage runs even when one fails; the error then lists the failed ones.
pub(crate) fn run_stages(
    ws: &Workspace,
    arch: Arch,
    bzimage: &Path,
    cache: &Path,
    check_log: LogCheck<'_>,
    tally: &mut Tally,
) -> Result<Vec<StageResult>, String> {
    if !bzimage.is_file() {
        return Err(format!("no kernel image at {}", bzimage.display()));
    }
    check_kernel_config(bzimage)?;
    ensure_musl_target(arch)?;
    fs::create_dir_all(cache).map_err(|e| format!("{}: {e}", cache.display()))?;
    let target_dir = target_dir(ws);
    let mut tested: Vec<&str> = Vec::new();
    for stage in STAGES {
        if !tested.contains(&stage.dir) {
            host_tests(ws, stage.dir, &target_dir, tally)?;
            tested.push(stage.dir);
        }
    }
    // The board's device tree, for the arm64 boots of Tyr.
    let dtb = match arch {
        Arch::Arm64 => Some(crate::dt::board_dtb(cache, MEMORY, CPUS)?),
        Arch::X86_64 => None,
    };
    let mut results = Vec::new();
    for stage in STAGES {
        let dtb = dtb.as_deref().filter(|_| stage.tyr);
        let machine = Machine {
            arch,
            image: bzimage,
            dtb,
        };
        let result = run_stage(ws, stage, machine, cache, &target_dir, check_log);
        tally.passed += result.passed;
        tally.failed += result.failed;
        results.push(result);
    }
    eprintln!("\nuserspace summary:");
    eprintln!(
        "  {:<16} {:>6} {:>6} {:>8} {:>8}",
        "program", "passed", "failed", "build s", "boot s"
    );
    for r in &results {
        eprintln!(
            "  {:<16} {:>6} {:>6} {:>8.1} {:>8.1}",
            r.name, r.passed, r.failed, r.build_secs, r.boot_secs
        );
    }
    let failures: Vec<String> = results
        .iter()
        .filter_map(|r| r.failure.as_ref().map(|f| format!("{}: {f}", r.name)))
        .collect();
    if failures.is_empty() {
        Ok(results)
    } else {
        Err(format!(
            "userspace stage(s) failed:\n{}",
            failures.join("\n")
        ))
    }
}

/// Where the programs are built: `$CARGO_TARGET_DIR/userspace`, else `target/userspace`.
fn target_dir(ws: &Workspace) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d).join("userspace"),
        None => PathBuf::from(ws.target_dir("userspace")),
    }
}

/// A `cargo`/`rustup` command with the toolchain the user's default: a `RUSTUP_TOOLCHAIN`
/// inherited from the `cargo xtask` invocation would pick a toolchain the musl target may not
/// be installed for.
fn tool(program: &str) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_remove("RUSTUP_TOOLCHAIN");
    cmd
}

/// Runs `cmd`, showing it first; an error names it and its status.
fn run(mut cmd: Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    eprintln!("$ {shown}");
    let status = cmd
        .status()
        .map_err(|e| format!("cannot start {shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed ({status})"))
    }
}

/// Adds the musl target with rustup unless it is installed.
fn ensure_musl_target(arch: Arch) -> Result<(), String> {
    let musl = arch.musl_target();
    let installed = tool("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map_err(|e| format!("cannot run rustup (needed for the {musl} target): {e}"))?;
    if String::from_utf8_lossy(&installed.stdout)
        .lines()
        .any(|l| l.trim() == musl)
    {
        return Ok(());
    }
    let mut cmd = tool("rustup");
    cmd.args(["target", "add", musl]);
    run(cmd)
}

/// Fails early, with the missing lines, when the kernel build's `.config` (found next to
/// `bzimage` as `<build>/arch/<arch>/boot/<image>`) lacks an option the boot needs.
fn check_kernel_config(bzimage: &Path) -> Result<(), String> {
    let Some(build) = bzimage.ancestors().nth(4) else {
        return Ok(());
    };
    let Ok(config) = fs::read_to_string(build.join(".config")) else {
        return Ok(());
    };
    let missing = missing_config(&config);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the kernel in {} cannot run a userspace program: its .config lacks {}",
            build.display(),
            missing.join(", ")
        ))
    }
}

/// The [`NEEDED_CONFIG`] lines `config` does not have.
fn missing_config(config: &str) -> Vec<&'static str> {
    NEEDED_CONFIG
        .iter()
        .filter(|want| !config.lines().any(|l| l.trim() == **want))
        .copied()
        .collect()
}

/// The host unit tests of a program crate.
fn host_tests(
    ws: &Workspace,
    dir: &str,
    target_dir: &Path,
    tally: &mut Tally,
) -> Result<(), String> {
    let manifest = ws.root.join(dir).join("Cargo.toml");
    let mut cmd = tool("cargo");
    cmd.args(["test", "--locked", "--manifest-path"])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", target_dir)
        .stdout(Stdio::piped());
    let shown = format!("{cmd:?}");
    eprintln!("$ {shown}");
    let out = cmd
        .spawn()
        .and_then(|c| c.wait_with_output())
        .map_err(|e| format!("cannot run {shown}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}");
    tally.absorb(&stdout);
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed ({})", out.status))
    }
}

/// Builds the program; returns the executable's path.
fn build_program(
    ws: &Workspace,
    arch: Arch,
    stage: &Stage,
    target_dir: &Path,
) -> Result<PathBuf, String> {
    let manifest = ws.root.join(stage.dir).join("Cargo.toml");
    let musl = arch.musl_target();
    let mut cmd = tool("cargo");
    cmd.args(["build", "--locked", "--release", "--target", musl])
        .args(["--bin", stage.name, "--manifest-path"])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", target_dir);
    if arch == Arch::Arm64 {
        // The host's `cc` cannot link aarch64 objects; the toolchain's own `rust-lld` links the
        // target's self-contained musl (crt objects and libc) with nothing else installed.
        cmd.env("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER", "rust-lld");
    }
    run(cmd)?;
    Ok(target_dir.join(musl).join("release").join(stage.name))
}

/// Builds, packs, boots and checks one stage. Never returns early: what failed is in the
/// result.
fn run_stage(
    ws: &Workspace,
    stage: &Stage,
    machine: Machine<'_>,
    cache: &Path,
    target_dir: &Path,
    check_log: LogCheck<'_>,
) -> StageResult {
    let Machine {
        arch,
        image: bzimage,
        dtb,
    } = machine;
    let mut result = StageResult {
        name: stage.name.to_string(),
        log: cache.join(format!("userspace-{}.log", stage.name)),
        ..StageResult::default()
    };
    eprintln!("\n==> userspace: {} ({})", stage.name, stage.dir);
    let t = Instant::now();
    let program = build_program(ws, arch, stage, target_dir);
    result.build_secs = t.elapsed().as_secs_f64();
    let program = match program {
        Ok(p) => p,
        Err(e) => {
            result.failure = Some(e);
            return result;
        }
    };
    let initramfs = cache.join(format!("userspace-{}.cpio", stage.name));
    if let Err(e) = write_initramfs(&program, &initramfs) {
        result.failure = Some(e);
        return result;
    }
    let t = Instant::now();
    let boot = boot(
        arch,
        bzimage,
        dtb,
        &initramfs,
        &result.log,
        stage.name,
        &cmdline(stage, arch),
    );
    result.boot_secs = t.elapsed().as_secs_f64();
    record(
        cache,
        &format!(
            "{}: build {:.1} s, boot {:.1} s",
            stage.name, result.build_secs, result.boot_secs
        ),
    );
    let log = match boot {
        Ok(log) => log,
        Err(e) => {
            // What the console said is still worth reading.
            let log = fs::read_to_string(&result.log).unwrap_or_default();
            print_kernel_lines(stage, &log);
            result.failure = Some(format!("{e}{}", hints(&log)));
            return result;
        }
    };
    let parsed = parse_output(stage.name, &log);
    eprintln!(
        "\nuserspace: {} ({} lines):",
        stage.name,
        parsed.lines.len()
    );
    for line in &parsed.lines {
        eprintln!("  {line}");
    }
    result.lines = parsed.lines.clone();
    print_kernel_lines(stage, &log);
    let mut problems = Vec::new();
    match parsed.summary {
        Some((p, f)) => {
            result.passed = p;
            result.failed = f;
            if f > 0 || p == 0 {
                problems.push(format!("{p} check(s) passed, {f} failed"));
            }
            if (parsed.ok, parsed.fail) != (p, f) {
                eprintln!(
                    "userspace: {}: note: the summary says {p} passed, {f} failed, the lines \
                     read show {} and {} (a line garbled by kernel output?)",
                    stage.name, parsed.ok, parsed.fail
                );
            }
        }
        None => {
            result.failed = parsed.fail.max(1);
            result.passed = parsed.ok;
            problems.push(format!(
                "no summary line: the program did not finish (log: {}){}",
                result.log.display(),
                hints(&log)
            ));
        }
    }
    if stage.tyr {
        match firmware_lines(&log) {
            Ok(seen) => eprintln!("userspace: {}: {seen} (ok)", stage.name),
            Err(e) => problems.push(e),
        }
    }
    if stage.tyr && arch == Arch::Arm64 {
        // The board's way: the platform bus bound Tyr to the device tree's GPU node.
        let want = format!("bound to {} by OF match", crate::dt::GPU_NODE_PATH);
        match log.lines().find(|l| l.contains(&want)) {
            Some(line) => eprintln!("userspace: {}: {} (ok)", stage.name, line.trim()),
            None => problems.push(format!(
                "Tyr's probe did not log \"{want}\": it was not bound to the device tree's node"
            )),
        }
    }
    match check_log(&log) {
        Ok(reports) if reports.is_empty() => {
            eprintln!(
                "userspace: {}: no lockdep, DMA-API, atomic-sleep or WARN report in the kernel \
                 log (ok)",
                stage.name
            );
        }
        Ok(reports) => problems.push(format!(
            "the kernel log has {} report(s) from the kernel's checkers:\n{}",
            reports.len(),
            reports.join("\n")
        )),
        Err(e) => problems.push(e),
    }
    if !problems.is_empty() {
        result.failure = Some(problems.join("; "));
    }
    result
}

/// Checks that Tyr's probe in `log` loaded Arm's firmware image, the one the test kernel has
/// built in (`CONFIG_EXTRA_FIRMWARE`, from the firmware cache): the probe names its path and
/// the git sha of its build-info entry.
fn firmware_lines(log: &str) -> Result<String, String> {
    let dir = crate::debian::firmware_dir()?;
    let path = crate::debian::G610_FIRMWARE;
    let image = fs::read(dir.join(path)).map_err(|e| format!("{path}: {e}"))?;
    let sha = arm_git_sha(&image).ok_or_else(|| format!("{path} has no git sha"))?;
    let named = format!("Firmware image '{path}'");
    let sha_line = format!("Firmware git sha: {sha}");
    for want in [&named, &sha_line] {
        if !log.lines().any(|l| l.contains(want.as_str())) {
            return Err(format!(
                "Tyr's probe did not log \"{want}\": the kernel did not load Arm's image"
            ));
        }
    }
    Ok(format!("Tyr loaded {path}, git sha {sha}"))
}

/// The git sha an image's build-info text carries (`git_sha: <sha>`, NUL-terminated), read
/// without the driver's parser: an independent witness of which file the kernel loaded.
fn arm_git_sha(image: &[u8]) -> Option<String> {
    let key = b"git_sha: ";
    let at = image.windows(key.len()).position(|w| w == key)? + key.len();
    let rest = &image[at..];
    let end = rest.iter().position(|&b| b == 0)?;
    let sha = std::str::from_utf8(&rest[..end]).ok()?.trim();
    (!sha.is_empty()).then(|| sha.to_string())
}

/// Prints the kernel log lines `stage` asks for (none for most stages).
fn print_kernel_lines(stage: &Stage, log: &str) {
    if stage.kernel_lines.is_empty() {
        return;
    }
    let lines = kernel_lines(stage.name, stage.kernel_lines, log);
    let patterns: Vec<String> = stage
        .kernel_lines
        .iter()
        .map(|p| format!("`{p}`"))
        .collect();
    eprintln!(
        "\nuserspace: {}: kernel log lines with {} ({}):",
        stage.name,
        patterns.join(" or "),
        lines.len()
    );
    for line in &lines {
        eprintln!("  {line}");
    }
}

/// Likely causes, read from the console log of a boot that did not get to a summary.
fn hints(log: &str) -> String {
    let mut out = String::new();
    if !log.contains("Unpacking initramfs") && !log.contains("Trying to unpack rootfs") {
        out.push_str("; the kernel did not unpack the initramfs (CONFIG_BLK_DEV_INITRD=y?)");
    }
    if log.contains("Initramfs unpacking failed") {
        out.push_str("; the kernel could not unpack the archive");
    }
    if log.contains("Failed to execute /init") || log.contains("No working init found") {
        out.push_str("; the kernel could not run /init (CONFIG_BINFMT_ELF=y? a static binary?)");
    }
    if log.contains("Attempted to kill init") {
        out.push_str("; /init exited or crashed");
    }
    // The kernel's "Kernel panic - not syncing: kernel: panic_on_warn set ...".
    if log.contains("panic_on_warn set") {
        out.push_str("; a WARN panicked the kernel (panic_on_warn=1): see the WARNING lines");
    }
    out
}

/// Appends a measurement to `<cache>/userspace-timings.log`.
fn record(cache: &Path, line: &str) {
    eprintln!("userspace: {line}");
    if let Ok(mut f) = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(cache.join("userspace-timings.log"))
    {
        let _ = writeln!(f, "{line}");
    }
}

/// The program's output, read from a console log.
#[derive(Debug, Default, PartialEq)]
struct Parsed {
    /// Every `userspace: <name>: ...` line, from that prefix on (kernel output may precede it
    /// on the same console line).
    lines: Vec<String>,
    /// `ok` and `FAIL` lines.
    ok: u64,
    fail: u64,
    /// `(passed, failed)` of the summary line.
    summary: Option<(u64, u64)>,
}

fn parse_output(name: &str, log: &str) -> Parsed {
    let prefix = format!("userspace: {name}: ");
    let mut parsed = Parsed::default();
    for raw in log.lines() {
        let Some(at) = raw.find(&prefix) else {
            continue;
        };
        let line = raw[at..].trim_end();
        let body = &line[prefix.len()..];
        if body.starts_with("ok ") {
            parsed.ok += 1;
        } else if body.starts_with("FAIL ") {
            parsed.fail += 1;
        } else if let Some(counts) = body.strip_prefix("summary: ") {
            parsed.summary = parse_summary(counts);
        }
        parsed.lines.push(line.to_string());
    }
    parsed
}

/// `"<P> passed, <F> failed"`.
fn parse_summary(counts: &str) -> Option<(u64, u64)> {
    let (p, f) = counts.split_once(", ")?;
    let p = p.strip_suffix(" passed")?.parse().ok()?;
    let f = f.strip_suffix(" failed")?.parse().ok()?;
    Some((p, f))
}

/// Writes the initramfs for `program` to `out`.
fn write_initramfs(program: &Path, out: &Path) -> Result<(), String> {
    let binary = fs::read(program).map_err(|e| format!("{}: {e}", program.display()))?;
    let mut cpio = Cpio::default();
    cpio.dir("dev", 0o755);
    cpio.char_device("dev/console", 0o600, 5, 1);
    cpio.dir("proc", 0o755);
    cpio.dir("sys", 0o755);
    cpio.file("init", 0o755, &binary);
    fs::write(out, cpio.finish()).map_err(|e| format!("{}: {e}", out.display()))
}

/// An uncompressed cpio archive in the `newc` format (`070701`), the one the kernel's
/// initramfs unpacker reads: every entry is a 110-byte ASCII header of thirteen 8-digit hex
/// fields, the NUL-terminated name padded to 4 bytes (counting the header), the data padded
/// to 4 bytes; a `TRAILER!!!` entry ends it. Owner root, time 0: the same input gives the same
/// bytes.
#[derive(Default)]
struct Cpio {
    out: Vec<u8>,
    /// The last inode number used (each entry has its own; the kernel only compares them for
    /// hard links, i.e. entries with nlink >= 2 that are not directories).
    ino: u32,
}

const S_IFDIR: u32 = 0o040_000;
const S_IFREG: u32 = 0o100_000;
const S_IFCHR: u32 = 0o020_000;
const TRAILER: &str = "TRAILER!!!";

impl Cpio {
    fn dir(&mut self, name: &str, perm: u32) {
        self.entry(name, S_IFDIR | perm, 2, (0, 0), &[]);
    }

    fn char_device(&mut self, name: &str, perm: u32, major: u32, minor: u32) {
        self.entry(name, S_IFCHR | perm, 1, (major, minor), &[]);
    }

    fn file(&mut self, name: &str, perm: u32, data: &[u8]) {
        self.entry(name, S_IFREG | perm, 1, (0, 0), data);
    }

    fn finish(mut self) -> Vec<u8> {
        self.ino = 0;
        self.header(TRAILER, 0, 1, (0, 0), 0);
        self.out
    }

    fn entry(&mut self, name: &str, mode: u32, nlink: u32, rdev: (u32, u32), data: &[u8]) {
        self.ino += 1;
        let size = u32::try_from(data.len()).expect("a cpio entry holds less than 4 GiB");
        self.header(name, mode, nlink, rdev, size);
        self.out.extend_from_slice(data);
        self.pad();
    }

    fn header(&mut self, name: &str, mode: u32, nlink: u32, rdev: (u32, u32), size: u32) {
        let namesize = u32::try_from(name.len() + 1).expect("short names");
        // ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor, rdevmajor,
        // rdevminor, namesize, check.
        let fields = [
            self.ino, mode, 0, 0, nlink, 0, size, 0, 0, rdev.0, rdev.1, namesize, 0,
        ];
        self.out.extend_from_slice(b"070701");
        for f in fields {
            self.out.extend_from_slice(format!("{f:08X}").as_bytes());
        }
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(0);
        self.pad();
    }

    /// Zero bytes up to the next multiple of 4 (entries start at offset 0, so the archive's
    /// offsets are the ones the format counts).
    fn pad(&mut self) {
        while !self.out.len().is_multiple_of(4) {
            self.out.push(0);
        }
    }
}

/// Boots `bzimage` with `initramfs` and the kernel command line `cmdline` under QEMU (TCG),
/// saving the console to `log`; returns the
/// console output once QEMU exits (the program powered off, or the kernel panicked and
/// rebooted), or an error on a timeout.
fn boot(
    arch: Arch,
    bzimage: &Path,
    dtb: Option<&Path>,
    initramfs: &Path,
    log: &Path,
    name: &str,
    cmdline: &str,
) -> Result<String, String> {
    let (qemu, package) = arch.qemu();
    let mut cmd = Command::new(qemu);
    cmd.args(["-accel", "tcg"])
        .args(arch.machine())
        .args(["-m", MEMORY, "-smp", CPUS])
        .args(["-nographic", "-no-reboot"])
        .arg("-kernel")
        .arg(bzimage)
        .arg("-initrd")
        .arg(initramfs)
        .args(["-append", cmdline])
        .args(
            dtb.map(|d| vec!["-dtb".as_ref(), d.as_os_str()])
                .unwrap_or_default(),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let shown = format!("{cmd:?}");
    eprintln!("$ {shown}");
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {qemu} (Debian package {package}): {e}"))?;
    let mut file = fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let (tx, rx) = mpsc::channel::<String>();
    let stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut stdout = BufReader::new(stdout);
        let mut raw = Vec::new();
        loop {
            raw.clear();
            match stdout.read_until(b'\n', &mut raw) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&raw);
                    let line = line.trim_end_matches(['\n', '\r']).to_string();
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            }
        }
    });
    let mut stderr = child.stderr.take().expect("piped");
    let errors = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });

    let started = Instant::now();
    let prefix = format!("userspace: {name}: ");
    let mut console = String::new();
    let mut halted: Option<Instant> = None;
    let mut timed_out = false;
    loop {
        match rx.recv_timeout(Duration::from_millis(500)) {
            Ok(line) => {
                let _ = writeln!(file, "{line}");
                if let Some(at) = line.find(&prefix) {
                    eprintln!("  {}", &line[at..]);
                }
                // "reboot: System halted", or "reboot: Power off not available: System halted
                // instead" when a program asks for a power-off the kernel cannot do.
                if line.contains("reboot: Power down") || line.contains("System halted") {
                    halted.get_or_insert_with(Instant::now);
                }
                console.push_str(&line);
                console.push('\n');
                continue;
            }
            // QEMU closed its output: it exited.
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let halt_expired = halted.is_some_and(|t| t.elapsed() > HALT_GRACE);
        if started.elapsed() > BOOT_TIMEOUT || halt_expired {
            timed_out = !halt_expired;
            let _ = child.kill();
            break;
        }
    }
    let status = child.wait().map_err(|e| format!("qemu vanished: {e}"))?;
    let _ = reader.join();
    let qemu_errors = errors.join().unwrap_or_default();
    eprintln!(
        "userspace: {name}: QEMU ran {:.1} s ({status}); console in {}",
        started.elapsed().as_secs_f64(),
        log.display()
    );
    if timed_out {
        return Err(format!(
            "QEMU did not finish within {} s and was killed",
            BOOT_TIMEOUT.as_secs()
        ));
    }
    // A kill after the kernel halted, or QEMU's own exit on power-off or reboot: both fine.
    if !status.success() && halted.is_none() {
        let qemu_errors = qemu_errors.trim();
        if !qemu_errors.is_empty() || console.is_empty() {
            return Err(format!("QEMU failed ({status}): {qemu_errors}"));
        }
    }
    Ok(console)
}

/// `cargo xtask userspace-test [--arch x86_64|arm64] [--cache DIR] [--bzimage PATH]`: the stages
/// on their own, against the kernel kernel-test last built for the architecture (the newest
/// image of its kernel caches, unless named).
pub(crate) fn command(
    ws: &Workspace,
    args: &[String],
    check_log: LogCheck<'_>,
) -> Result<(), String> {
    let mut cache = None;
    let mut bzimage = None;
    let mut arch = Arch::X86_64;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--cache" => cache = Some(PathBuf::from(it.next().ok_or("--cache needs a directory")?)),
            "--arch" => arch = Arch::parse(it.next().ok_or("--arch needs x86_64 or arm64")?)?,
            "--bzimage" => {
                bzimage = Some(PathBuf::from(it.next().ok_or("--bzimage needs a file")?))
            }
            other => return Err(format!("userspace-test: unknown option `{other}`")),
        }
    }
    let cache = match cache {
        Some(c) => c,
        None => newest_kernel_cache(arch)?,
    };
    let bzimage = bzimage.unwrap_or_else(|| cache.join("build").join(arch.image()));
    wait_for_builds(&cache);
    eprintln!(
        "userspace: kernel {}, logs in {}",
        bzimage.display(),
        cache.display()
    );
    let mut tally = Tally::default();
    let result = run_stages(ws, arch, &bzimage, &cache, check_log, &mut tally);
    println!(
        "tests: {} passed, {} failed, {} skipped",
        tally.passed, tally.failed, tally.ignored
    );
    result.map(|_| ())
}

/// The cache directory (`${XDG_CACHE_HOME:-~/.cache}/gpukit/kernel/<tree>/`, `kernel-arm64/`
/// for arm64) whose kernel image is the newest.
fn newest_kernel_cache(arch: Arch) -> Result<PathBuf, String> {
    let image = Path::new("build").join(arch.image());
    let dir = crate::kernel::cache_dir(crate::kernel::Flavour::Test, arch);
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .ok_or("neither XDG_CACHE_HOME nor HOME is set")?
        .join("gpukit")
        .join(dir);
    let entries = fs::read_dir(&base).map_err(|e| {
        format!(
            "no kernel cache in {} ({e}): run `cargo xtask kernel-build` first",
            base.display()
        )
    })?;
    entries
        .flatten()
        .filter_map(|e| {
            let modified = e.path().join(&image).metadata().ok()?.modified().ok()?;
            Some((modified, e.path()))
        })
        .max()
        .map(|(_, dir)| dir)
        .ok_or_else(|| {
            format!(
                "no {} under {}: run `cargo xtask kernel-build` first",
                image.display(),
                base.display()
            )
        })
}

/// Waits while a kernel build holds the cache's lock (`<cache>/lock/pid`, see kernel.rs): the
/// bzImage may be half written until it ends.
fn wait_for_builds(cache: &Path) {
    let pid_file = cache.join("lock").join("pid");
    let mut told = false;
    loop {
        let owner = fs::read_to_string(&pid_file).unwrap_or_default();
        let owner = owner.trim();
        if owner.is_empty() || !Path::new("/proc").join(owner).exists() {
            return;
        }
        if !told {
            eprintln!(
                "userspace: waiting for process {owner} to release {}",
                pid_file.display()
            );
            told = true;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_git_sha_is_read_from_build_info_text() {
        let mut image = vec![0xc3u8; 40];
        image.extend_from_slice(b"git_sha: 95a25d71 \0tail");
        assert_eq!(arm_git_sha(&image).as_deref(), Some("95a25d71"));
        // Unterminated, empty or absent: no sha.
        assert_eq!(arm_git_sha(b"git_sha: 95a25d71"), None);
        assert_eq!(arm_git_sha(b"git_sha: \0"), None);
        assert_eq!(arm_git_sha(b"no build info"), None);
    }

    /// An entry read back: name, mode, nlink, (rdevmajor, rdevminor), data.
    type Entry = (String, u32, u32, (u32, u32), Vec<u8>);

    /// Reads a `newc` archive back, checking the magic, the alignment of every header and the
    /// padding bytes on the way.
    fn read_cpio(mut a: &[u8]) -> Vec<Entry> {
        let total = a.len();
        let mut entries = Vec::new();
        loop {
            let at = total - a.len();
            assert_eq!(at % 4, 0, "header at {at} is not 4-aligned");
            assert_eq!(&a[..6], b"070701");
            let field = |i: usize| {
                let s = std::str::from_utf8(&a[6 + 8 * i..14 + 8 * i]).unwrap();
                assert!(s
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b)));
                u32::from_str_radix(s, 16).unwrap()
            };
            let (mode, nlink, size) = (field(1), field(4), field(6) as usize);
            let (uid, gid, mtime, check) = (field(2), field(3), field(5), field(12));
            assert_eq!((uid, gid, mtime, check), (0, 0, 0, 0));
            let rdev = (field(9), field(10));
            let namesize = field(11) as usize;
            let name = std::str::from_utf8(&a[110..110 + namesize - 1])
                .unwrap()
                .to_string();
            assert_eq!(a[110 + namesize - 1], 0, "name not NUL-terminated");
            let data_at = (110 + namesize).next_multiple_of(4);
            assert!(a[110 + namesize..data_at].iter().all(|&b| b == 0));
            let end = (data_at + size).next_multiple_of(4);
            assert!(a[data_at + size..end].iter().all(|&b| b == 0));
            let data = a[data_at..data_at + size].to_vec();
            a = &a[end..];
            if name == TRAILER {
                assert!(a.is_empty(), "bytes after the trailer");
                return entries;
            }
            entries.push((name, mode, nlink, rdev, data));
        }
    }

    #[test]
    fn cpio_header_fields() {
        let mut c = Cpio::default();
        c.dir("dev", 0o755);
        let out = c.finish();
        let header = std::str::from_utf8(&out[..110]).unwrap();
        assert_eq!(
            header,
            "070701\
             00000001\
             000041ED\
             00000000\
             00000000\
             00000002\
             00000000\
             00000000\
             00000000\
             00000000\
             00000000\
             00000000\
             00000004\
             00000000"
        );
        // "dev\0" ends at 114: two bytes of padding, the next header at 116.
        assert_eq!(&out[110..116], b"dev\0\0\0");
        assert_eq!(&out[116..122], b"070701");
    }

    #[test]
    fn cpio_padding_and_trailer() {
        let mut c = Cpio::default();
        // name "init\0" = 5 bytes: header + name = 115, padded to 116; data of 5 bytes padded
        // to 8.
        c.file("init", 0o755, b"\x7fELF!");
        let out = c.finish();
        assert_eq!(&out[110..116], b"init\0\0");
        assert_eq!(&out[116..124], b"\x7fELF!\0\0\0");
        assert_eq!(&out[124..130], b"070701");
        // The trailer: inode 0, mode 0, one link, name "TRAILER!!!\0" (11 bytes, 121 -> 124).
        let trailer = std::str::from_utf8(&out[124..124 + 110]).unwrap();
        assert_eq!(&trailer[6..14], "00000000");
        assert_eq!(&trailer[14..22], "00000000");
        assert_eq!(&trailer[38..46], "00000001");
        assert_eq!(&trailer[94..102], "0000000B");
        assert_eq!(&out[234..245], b"TRAILER!!!\0");
        assert_eq!(out.len(), 248);
    }

    #[test]
    fn initramfs_entries_round_trip() {
        let dir = std::env::temp_dir().join(format!("gpukit-cpio-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let program = dir.join("prog");
        let body: Vec<u8> = (0..1001u32).map(|i| i as u8).collect();
        fs::write(&program, &body).unwrap();
        let archive = dir.join("initramfs.cpio");
        write_initramfs(&program, &archive).unwrap();
        let bytes = fs::read(&archive).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(bytes.len() % 4, 0);
        let entries = read_cpio(&bytes);
        let summary: Vec<_> = entries
            .iter()
            .map(|(n, m, l, r, d)| (n.as_str(), *m, *l, *r, d.len()))
            .collect();
        assert_eq!(
            summary,
            [
                ("dev", 0o040_755, 2, (0, 0), 0),
                ("dev/console", 0o020_600, 1, (5, 1), 0),
                ("proc", 0o040_755, 2, (0, 0), 0),
                ("sys", 0o040_755, 2, (0, 0), 0),
                ("init", 0o100_755, 1, (0, 0), 1001),
            ]
        );
        assert_eq!(entries[4].4, body);
    }

    #[test]
    fn output_parsing() {
        let log = "\
[    1.0] Run /init as init process\r
userspace: drm_sample: started as PID 1
userspace: drm_sample: ok mount devtmpfs on /dev
[    1.2] some kernel line userspace: drm_sample: ok open /dev/dri/renderD128
userspace: drm_sample: opened /dev/dri/renderD128
userspace: other: ok not ours
userspace: drm_sample: FAIL BO_CREATE of 8192 bytes gives a non-zero handle: EINVAL (22)
userspace: drm_sample: summary: 2 passed, 1 failed\r
[    1.5] reboot: Power down
";
        let p = parse_output("drm_sample", log);
        assert_eq!((p.ok, p.fail, p.summary), (2, 1, Some((2, 1))));
        assert_eq!(p.lines.len(), 6);
        assert_eq!(
            p.lines[2],
            "userspace: drm_sample: ok open /dev/dri/renderD128"
        );
        assert_eq!(
            p.lines[5],
            "userspace: drm_sample: summary: 2 passed, 1 failed"
        );
        assert_eq!(parse_output("drm_sample", "no output\n"), Parsed::default());
        assert_eq!(parse_summary("10 passed, 0 failed"), Some((10, 0)));
        assert_eq!(parse_summary("10 passed"), None);
    }

    #[test]
    fn command_lines_per_stage() {
        let sample = STAGES.iter().find(|s| s.name == "drm_sample").unwrap();
        assert_eq!(
            cmdline(sample, Arch::X86_64),
            "console=ttyS0 kunit.enable=0 panic_on_warn=1 panic=-1 rdinit=/init"
        );
        let tyr = STAGES.iter().find(|s| s.name == "tyr_demo").unwrap();
        assert_eq!(
            cmdline(tyr, Arch::X86_64),
            "console=ttyS0 kunit.enable=0 panic_on_warn=1 panic=-1 rdinit=/init gpukit.boot=tyr"
        );
        let hostile = STAGES.iter().find(|s| s.name == "tyr_hostile").unwrap();
        assert!(cmdline(hostile, Arch::X86_64)
            .ends_with("panic_on_warn=1 panic=-1 rdinit=/init gpukit.boot=tyr"));
        // On arm64 nothing on the command line chooses Tyr's device: the device tree does.
        assert_eq!(
            cmdline(tyr, Arch::Arm64),
            "console=ttyAMA0 kunit.enable=0 panic_on_warn=1 panic=-1 rdinit=/init gpukit.boot=board"
        );
        assert_eq!(
            cmdline(sample, Arch::Arm64),
            "console=ttyAMA0 kunit.enable=0 panic_on_warn=1 panic=-1 rdinit=/init"
        );
        // drm_sample comes first and all are built from the same crate.
        assert_eq!(STAGES[0].name, "drm_sample");
        assert!(STAGES.iter().all(|s| s.dir == "xtask/userspace"));
    }

    #[test]
    fn kernel_lines_of_interest() {
        let log = "\
[    0.90] gpukit_tyr: GPU_ID 0xa8670005 (Mali-G610), 4 shader cores\r
[    0.91] gpukit_tyr: firmware booted: 8 group slots\r
[    0.92] [drm] Initialized panthor 1.8.0 for tyr on minor 0\r
[    0.95] [drm] Initialized gpukit_sample 1.0.0 for faux on minor 1
userspace: tyr_demo: note about tyr: not a kernel line
[    1.00] random: crng init done
[    1.10] some prefix userspace: tyr_demo: ok GROUP_CREATE tyr: x
";
        let patterns = ["tyr: ", "[drm] Initialized panthor"];
        assert_eq!(
            kernel_lines("tyr_demo", &patterns, log),
            [
                "[    0.90] gpukit_tyr: GPU_ID 0xa8670005 (Mali-G610), 4 shader cores",
                "[    0.91] gpukit_tyr: firmware booted: 8 group slots",
                "[    0.92] [drm] Initialized panthor 1.8.0 for tyr on minor 0",
            ]
        );
        assert_eq!(
            kernel_lines("p", &patterns, "noise gpukit_tyr: probed  \n"),
            ["noise gpukit_tyr: probed"]
        );
        assert!(kernel_lines("p", &[], log).is_empty());
    }

    #[test]
    fn config_check_and_hints() {
        let config = "CONFIG_BLK_DEV_INITRD=y\n# CONFIG_DEVTMPFS is not set\nCONFIG_BINFMT_ELF=y\n";
        assert_eq!(missing_config(config), ["CONFIG_DEVTMPFS=y"]);
        assert!(hints("VFS: Unable to mount root fs").contains("CONFIG_BLK_DEV_INITRD"));
        assert_eq!(
            hints("Unpacking initramfs...\nRun /init as init process"),
            ""
        );
        let warned = "Unpacking initramfs...\nWARNING: CPU: 0 PID: 1 at x.c:1 f+0x1/0x2\n\
                      Kernel panic - not syncing: kernel: panic_on_warn set ...\n";
        assert!(hints(warned).contains("a WARN panicked the kernel"));
    }
}
