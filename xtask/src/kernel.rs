// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `cargo xtask kernel-build` and `cargo xtask kernel-test`: the library crates inside Linux.
//!
//! Linux builds its third-party Rust crates (`zerocopy`, `pin-init`) from `rust/` with explicit
//! `rustc` rules in `rust/Makefile`, not with Cargo. The crate family goes in the same way:
//!
//! 1. The user's tree (`--kdir`, default: Debian's `linux-source-7.2`, which the tool fetches and
//!    unpacks once into `~/.cache/linux-src`, see [`crate::debian`]) is never written.
//!    The tool owns an overlay of it under `~/.cache/gpukit/kernel/<version>-<hash>/src`: a tree
//!    of hard links (a copy where links are impossible) made once, plus the files the tool adds
//!    or replaces. Objects go to `.../build` (`make O=`), so the overlay stays clean.
//! 2. The library crates' `src/` trees and the third-party crates they need that Linux does not
//!    ship (`bitflags`, and the `paste` proc macro) are copied to `rust/gpukit/` of the overlay,
//!    and rules written like `zerocopy`'s are appended to the overlay's `rust/Makefile`: each crate
//!    is a `rustc_library` with `--cfg feature="kernel" --cfg gpukit_kernel --extern kernel`.
//!    A file is only rewritten when its content changed, so `make` sees unchanged timestamps and
//!    a second run (or a fresh clone with the same sources) rebuilds only what changed.
//! 3. `tools/testing/kunit/kunit.py` configures (`CONFIG_RUST`, `CONFIG_KUNIT`) and builds an
//!    x86_64 kernel with `LLVM=-19`; `kernel-test` also boots it under QEMU with TCG (KVM stops
//!    with "emulation failure" on these machines) and fails unless every suite passes.
//!
//! The KUnit suites live in each crate (`src/kernel/kunit.rs`), compiled only in this build.

use std::collections::BTreeSet;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::workspace::{Cmd, Workspace};
use crate::Tally;

/// The Linux series the crates are built into when no `--kdir` is given.
const LINUX_SERIES: &str = "7.2";
/// `LLVM=` suffix of the Clang/LLVM toolchain the kernel is built with.
const LLVM_SUFFIX: &str = "-19";

/// The name of one of that toolchain's tools (`llvm-objdump` is `llvm-objdump-19`).
pub(crate) fn llvm_tool(tool: &str) -> String {
    format!("{tool}{LLVM_SUFFIX}")
}
/// Parallel make jobs (the machines have two cores, shared).
const JOBS: &str = "2";
/// Seconds `kunit.py` waits for the test run before giving up (QEMU under TCG is slow).
const KUNIT_TIMEOUT: &str = "1200";

/// A library crate vendored into the kernel build.
struct Vendored {
    /// Directory in the workspace.
    dir: &'static str,
    /// Crate name (the `[lib] name`), also the object's name in `rust/gpukit/`.
    name: &'static str,
    /// `--extern` crates it needs besides `kernel` and `pin_init`.
    externs: &'static [&'static str],
    /// C files (relative to the crate's `src/`) built into the kernel next to it.
    c_files: &'static [&'static str],
    /// Whether its KUnit suite (`src/kernel/kunit.rs`) is a crate of its own, `<name>_kunit`
    /// (for a crate that forbids `unsafe` code, which the suite registration needs).
    kunit_crate: bool,
}

/// The library crates in dependency order.
const CRATES: &[Vendored] = &[
    Vendored {
        dir: "bounded",
        name: "bounded",
        externs: &[],
        c_files: &[],
        kunit_crate: false,
    },
    Vendored {
        dir: "register",
        name: "register",
        externs: &["bounded", "paste"],
        c_files: &[],
        kunit_crate: false,
    },
    Vendored {
        dir: "drm-ctx",
        name: "drm_ctx",
        externs: &[],
        c_files: &["kernel/drm.c"],
        kunit_crate: false,
    },
    Vendored {
        dir: "io-pgtable",
        name: "io_pgtable",
        externs: &["bitflags"],
        c_files: &["kernel/dma.c", "kernel/vs_c.c"],
        kunit_crate: false,
    },
    Vendored {
        dir: "gpuvm",
        name: "gpuvm",
        externs: &[],
        c_files: &["kernel/vs_c.c"],
        kunit_crate: true,
    },
    Vendored {
        dir: "jobqueue",
        name: "jobqueue",
        externs: &[],
        c_files: &["kernel/fence.c", "kernel/vs_c.c"],
        kunit_crate: false,
    },
    // Plain `no_std` code without a `kernel` feature: the `--cfg feature="kernel"` every crate
    // gets is simply unused here.
    Vendored {
        dir: "csf",
        name: "csf",
        externs: &[],
        c_files: &[],
        kunit_crate: false,
    },
    Vendored {
        dir: "tyr/sim",
        name: "mali_sim",
        externs: &["csf"],
        c_files: &[],
        kunit_crate: false,
    },
    Vendored {
        dir: "tyr",
        name: "tyr",
        externs: &[
            "bounded",
            "register",
            "drm_ctx",
            "io_pgtable",
            "gpuvm",
            "jobqueue",
            "csf",
            "mali_sim",
            "static_assertions",
        ],
        c_files: &["kernel/boot.c"],
        kunit_crate: false,
    },
];

/// A driver built into the test kernel from a directory of a crate (outside its `src/`): a
/// crate root, the library crates it uses, and C files (its boot hook), all under the Kconfig
/// symbol `config`.
struct Driver {
    /// Directory in the workspace, vendored to the same path under `rust/gpukit/`.
    dir: &'static str,
    /// The crate root, relative to `dir`.
    root: &'static str,
    /// Crate name, also the object's name in `rust/gpukit/`.
    name: &'static str,
    externs: &'static [&'static str],
    c_files: &'static [&'static str],
    config: &'static str,
}

/// The drivers built into the test kernel; the userspace stage of `kernel-test` talks to them.
const DRIVERS: &[Driver] = &[Driver {
    dir: "drm-ctx/sample",
    root: "kernel.rs",
    name: "gpukit_drm_sample",
    externs: &["drm_ctx", "jobqueue"],
    c_files: &["init.c"],
    config: "CONFIG_GPUKIT_SAMPLE_DRM",
}];

/// A third-party crate from the Cargo registry that Linux does not provide.
struct ThirdParty {
    name: &'static str,
    /// Major version the workspace asks for (`Cargo.lock` may hold several).
    major: &'static str,
    proc_macro: bool,
}

const THIRD_PARTY: &[ThirdParty] = &[
    ThirdParty {
        name: "bitflags",
        major: "2.",
        proc_macro: false,
    },
    ThirdParty {
        name: "paste",
        major: "1.",
        proc_macro: true,
    },
    ThirdParty {
        name: "static_assertions",
        major: "1.",
        proc_macro: false,
    },
];

/// Which kernel a command builds: the test kernel (KUnit with the kernel's checkers) or the
/// benchmark kernel (the same crates and C code, without the debugging options).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavour {
    /// `kernel-build`, `kernel-test`: lockdep, DMA-API debugging, atomic-sleep checks.
    Test,
    /// `kernel-bench`: the comparisons with the C code in a kernel without those checkers.
    Bench,
}

/// The architecture a kernel is built for (`--arch`). The build is the same overlay, the same
/// crates and the same kunitconfig; what differs is `ARCH=`, the serial console, the kernel
/// image and the QEMU that boots it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Arch {
    /// The default: `qemu-system-x86_64 -cpu max`, console `ttyS0`.
    X86_64,
    /// Cross-built with the same clang/LLVM; `qemu-system-aarch64 -M virt,gic-version=3 -cpu
    /// max`, console `ttyAMA0` (the PL011 of `virt`).
    Arm64,
}

impl Arch {
    /// Parses the value of `--arch`.
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        match s {
            "x86_64" => Ok(Arch::X86_64),
            "arm64" | "aarch64" => Ok(Arch::Arm64),
            other => Err(format!("--arch: `{other}` is not x86_64 or arm64")),
        }
    }

    /// Linux's name of it (`ARCH=`, kunit.py's `linux_arch`).
    pub(crate) fn linux(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Arm64 => "arm64",
        }
    }

    /// The bootable image, relative to the build directory.
    pub(crate) fn image(self) -> &'static str {
        match self {
            Arch::X86_64 => "arch/x86/boot/bzImage",
            Arch::Arm64 => "arch/arm64/boot/Image",
        }
    }

    /// The QEMU system emulator and the Debian package that has it.
    pub(crate) fn qemu(self) -> (&'static str, &'static str) {
        match self {
            Arch::X86_64 => ("qemu-system-x86_64", "qemu-system-x86"),
            Arch::Arm64 => ("qemu-system-aarch64", "qemu-system-arm"),
        }
    }

    /// The kernel's serial console device.
    pub(crate) fn console(self) -> &'static str {
        match self {
            Arch::X86_64 => "ttyS0",
            Arch::Arm64 => "ttyAMA0",
        }
    }

    /// The options of the QEMU command line that pick the machine (besides `-accel tcg`).
    pub(crate) fn machine(self) -> &'static [&'static str] {
        match self {
            Arch::X86_64 => &["-cpu", "max", "-bios", "qboot.rom"],
            // `pauth-impdef=on`: the `max` CPU with QEMU's own pointer-authentication hash
            // instead of the architected QARMA5, which QEMU's manual calls expensive under TCG
            // (the kernel signs return addresses in every function that spills them).
            Arch::Arm64 => &["-M", "virt,gic-version=3", "-cpu", "max,pauth-impdef=on"],
        }
    }

    /// The Rust target of the userspace programs (static, musl).
    pub(crate) fn musl_target(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64-unknown-linux-musl",
            Arch::Arm64 => "aarch64-unknown-linux-musl",
        }
    }
}

/// Command-line options of the kernel subcommands.
pub(crate) struct Options {
    kdir: Option<PathBuf>,
    arch: Arch,
    flavour: Flavour,
    /// `kernel-bench`: time by the host's clock instead of QEMU's instruction counter.
    wall_clock: bool,
    /// Build `jobqueue`'s lockdep canary case (an allocation inside a `dma_fence` signalling
    /// section), and expect the kernel log check to catch it.
    lockdep_canary: bool,
}

impl Options {
    /// Parses `[--kdir DIR] [--arch x86_64|arm64] [--lockdep-canary]`.
    pub(crate) fn parse(args: &[String]) -> Result<Self, String> {
        let mut kdir = None;
        let mut arch = Arch::X86_64;
        let mut lockdep_canary = false;
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--kdir" => {
                    let d = it.next().ok_or("--kdir needs a directory")?;
                    kdir = Some(PathBuf::from(d));
                }
                "--arch" => arch = Arch::parse(it.next().ok_or("--arch needs x86_64 or arm64")?)?,
                "--lockdep-canary" => lockdep_canary = true,
                other => return Err(format!("unknown option `{other}`")),
            }
        }
        Ok(Options {
            kdir,
            arch,
            flavour: Flavour::Test,
            wall_clock: false,
            lockdep_canary,
        })
    }

    /// Parses the options of `kernel-bench`: `[--kdir DIR] [--wall-clock]`.
    pub(crate) fn parse_bench(args: &[String]) -> Result<Self, String> {
        let wall_clock = args.iter().any(|a| a == "--wall-clock");
        let rest: Vec<String> = args
            .iter()
            .filter(|a| *a != "--wall-clock")
            .cloned()
            .collect();
        let mut opts = Self::parse(&rest)?;
        if opts.lockdep_canary {
            return Err("--lockdep-canary is an option of kernel-test".into());
        }
        if opts.arch != Arch::X86_64 {
            return Err("kernel-bench runs on x86_64 only (no --arch)".into());
        }
        opts.flavour = Flavour::Bench;
        opts.wall_clock = wall_clock;
        Ok(opts)
    }
}

/// Where everything lives for one source tree.
struct Layout {
    kdir: PathBuf,
    arch: Arch,
    flavour: Flavour,
    wall_clock: bool,
    cache: PathBuf,
    src: PathBuf,
    build: PathBuf,
}

impl Layout {
    fn new(opts: &Options) -> Result<Self, String> {
        let kdir = match &opts.kdir {
            Some(d) => d.clone(),
            None => crate::debian::linux_source(LINUX_SERIES)?,
        };
        let kdir =
            fs::canonicalize(&kdir).map_err(|e| format!("kernel tree {}: {e}", kdir.display()))?;
        let version = kernel_version(&kdir)?;
        let home = std::env::var_os("HOME").ok_or("HOME is not set")?;
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(home).join(".cache"));
        let key = format!(
            "linux-{version}-{:016x}",
            fnv1a(kdir.to_string_lossy().as_bytes())
        );
        let cache = base
            .join("gpukit")
            .join(cache_dir(opts.flavour, opts.arch))
            .join(key);
        Ok(Layout {
            src: cache.join("src"),
            build: cache.join("build"),
            kdir,
            arch: opts.arch,
            flavour: opts.flavour,
            wall_clock: opts.wall_clock,
            cache,
        })
    }
}

/// The directory under `gpukit/` of the cache that holds a kernel's overlays. The benchmark
/// kernel has its own overlay and objects (another configuration), in a directory of its own so
/// that `userspace-test` never picks it up as the test kernel. An arm64 kernel, likewise, in
/// `kernel-arm64`: the x86_64 caches keep their names.
pub(crate) fn cache_dir(flavour: Flavour, arch: Arch) -> &'static str {
    match (flavour, arch) {
        (Flavour::Test, Arch::X86_64) => "kernel",
        (Flavour::Test, Arch::Arm64) => "kernel-arm64",
        (Flavour::Bench, _) => "kernel-bench",
    }
}

/// 64-bit FNV-1a: a stable, dependency-free hash for cache directory names.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// `VERSION.PATCHLEVEL.SUBLEVEL` from the tree's top-level Makefile.
fn kernel_version(kdir: &Path) -> Result<String, String> {
    let mk = fs::read_to_string(kdir.join("Makefile"))
        .map_err(|e| format!("{} is not a Linux tree: {e}", kdir.display()))?;
    let field = |name: &str| {
        mk.lines()
            .find_map(|l| {
                l.strip_prefix(name)?
                    .trim()
                    .strip_prefix('=')
                    .map(str::trim)
            })
            .unwrap_or("0")
            .to_string()
    };
    Ok(format!(
        "{}.{}.{}",
        field("VERSION"),
        field("PATCHLEVEL"),
        field("SUBLEVEL")
    ))
}

/// Installs what the kernel build needs, only where it is missing.
fn install_tools(with_qemu: Option<Arch>) -> Result<(), String> {
    let have = |cmd: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {cmd}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let mut packages = Vec::new();
    let mut want = |ok: bool, pkg: &'static str| {
        if !ok {
            packages.push(pkg);
        }
    };
    want(have(&format!("clang{LLVM_SUFFIX}")), "clang-19");
    want(have(&format!("ld.lld{LLVM_SUFFIX}")), "lld-19");
    want(have(&format!("llvm-ar{LLVM_SUFFIX}")), "llvm-19");
    want(
        Path::new("/usr/lib/llvm-19/lib/libclang.so.1").exists()
            || Path::new("/usr/lib/llvm-19/lib/libclang.so").exists(),
        "libclang-19-dev",
    );
    want(have("bc"), "bc");
    want(have("flex"), "flex");
    want(have("bison"), "bison");
    want(have("cpio"), "cpio");
    want(Path::new("/usr/include/libelf.h").exists(), "libelf-dev");
    want(
        Path::new("/usr/include/openssl/ssl.h").exists(),
        "libssl-dev",
    );
    if let Some(arch) = with_qemu {
        let (qemu, package) = arch.qemu();
        want(have(qemu), package);
        if arch == Arch::Arm64 {
            // `dtc`, for the board's device tree (see `crate::dt`).
            want(have("dtc"), "device-tree-compiler");
        }
    }
    if !packages.is_empty() {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        let apt = |args: &[&str]| {
            let mut cmd = if root {
                Cmd::new("apt-get")
            } else {
                Cmd::new("sudo").args(["apt-get"])
            };
            cmd = cmd.args(args.iter().copied());
            cmd.env("DEBIAN_FRONTEND", "noninteractive").status()
        };
        apt(&["update"])?;
        let mut args = vec!["install", "-y"];
        args.extend(packages.iter().copied());
        apt(&args)?;
    }
    if !have("bindgen") {
        Cmd::cargo(&["install", "--locked", "bindgen-cli"]).status()?;
    }
    let components = Command::new("rustup")
        .args(["component", "list", "--installed"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    if !components.lines().any(|l| l.starts_with("rust-src")) {
        Cmd::new("rustup")
            .args(["component", "add", "rust-src"])
            .status()?;
    }
    Ok(())
}

/// Makes the overlay of the user's tree, once.
fn ensure_overlay(l: &Layout) -> Result<(), String> {
    let marker = l.cache.join("overlay-complete");
    if marker.exists() {
        return Ok(());
    }
    for dirty in [".config", "include/config", "include/generated"] {
        if l.kdir.join(dirty).exists() {
            return Err(format!(
                "{} is not clean (it has {dirty}); an out-of-tree build needs a clean source tree \
                 (`make mrproper` there, or pass another --kdir)",
                l.kdir.display()
            ));
        }
    }
    if l.src.exists() {
        fs::remove_dir_all(&l.src).map_err(|e| format!("{}: {e}", l.src.display()))?;
    }
    fs::create_dir_all(&l.cache).map_err(|e| format!("{}: {e}", l.cache.display()))?;
    eprintln!(
        "kernel: overlay {} -> {}",
        l.kdir.display(),
        l.src.display()
    );
    let src = l.kdir.to_string_lossy().into_owned();
    let dst = l.src.to_string_lossy().into_owned();
    // Hard links cost no space and keep the user's files untouched as long as the tool only ever
    // *replaces* files in the overlay (write to a new file, then rename), which it does.
    if Cmd::new("cp").args(["-al", &src, &dst]).status().is_err() {
        let _ = fs::remove_dir_all(&l.src);
        Cmd::new("cp").args(["-a", &src, &dst]).status()?;
    }
    fs::write(&marker, b"").map_err(|e| format!("{}: {e}", marker.display()))
}

/// Writes `content` to `path` unless it already holds exactly that; replaces rather than
/// rewrites (the old file may be a hard link into the user's tree). Returns whether it wrote.
fn sync_file(path: &Path, content: &[u8]) -> Result<bool, String> {
    if fs::read(path).is_ok_and(|old| old == content) {
        return Ok(false);
    }
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let tmp = path.with_extension("gpukit-tmp");
    fs::write(&tmp, content).map_err(|e| format!("{}: {e}", tmp.display()))?;
    fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(true)
}

/// Copies every file under `from` to `to` (content-compared); returns the relative paths seen.
fn sync_tree(from: &Path, to: &Path, seen: &mut BTreeSet<PathBuf>) -> Result<usize, String> {
    let mut written = 0;
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = from.join(&rel);
        let entries = fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
            let rel = rel.join(entry.file_name());
            let ty = entry.file_type().map_err(|e| e.to_string())?;
            if ty.is_dir() {
                stack.push(rel);
            } else if ty.is_file() {
                let content = fs::read(entry.path()).map_err(|e| e.to_string())?;
                if sync_file(&to.join(&rel), &content)? {
                    written += 1;
                }
                seen.insert(to.join(&rel));
            }
        }
    }
    Ok(written)
}

/// Removes files under `root` that are not in `keep` (a source file deleted in the workspace).
fn prune(root: &Path, keep: &BTreeSet<PathBuf>) -> Result<(), String> {
    let Ok(entries) = fs::read_dir(root) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let p = entry.path();
        if p.is_dir() {
            prune(&p, keep)?;
        } else if !keep.contains(&p) {
            fs::remove_file(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        }
    }
    Ok(())
}

/// The source directory of a registry crate at the version `Cargo.lock` pins.
fn registry_crate(ws: &Workspace, tp: &ThirdParty) -> Result<PathBuf, String> {
    let lock = fs::read_to_string(ws.root.join("Cargo.lock")).map_err(|e| e.to_string())?;
    let mut version = None;
    let mut lines = lock.lines();
    while let Some(l) = lines.next() {
        if l.trim() == format!("name = \"{}\"", tp.name) {
            if let Some(v) = lines
                .next()
                .and_then(|v| v.trim().strip_prefix("version = "))
            {
                let v = v.trim_matches('"');
                if v.starts_with(tp.major) {
                    version = Some(v.to_string());
                }
            }
        }
    }
    let version = version.ok_or_else(|| format!("{} is not in Cargo.lock", tp.name))?;
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .ok_or("neither CARGO_HOME nor HOME is set")?;
    let find = || -> Option<PathBuf> {
        let reg = home.join("registry").join("src");
        fs::read_dir(reg).ok()?.flatten().find_map(|idx| {
            let d = idx.path().join(format!("{}-{version}", tp.name));
            d.join("src/lib.rs").exists().then_some(d)
        })
    };
    if let Some(d) = find() {
        return Ok(d);
    }
    Cmd::cargo(&["fetch"]).status()?;
    find().ok_or_else(|| format!("{}-{version} not found in the Cargo registry", tp.name))
}

/// The rules appended to the overlay's `rust/Makefile`.
fn makefile_rules(canary: bool) -> String {
    let mut m = String::new();
    let w = |m: &mut String, s: &str| {
        m.push_str(s);
        m.push('\n');
    };
    w(
        &mut m,
        "\n# gpukit: generated by `cargo xtask kernel-build`; not part of Linux.",
    );
    w(&mut m, "ifdef CONFIG_RUST");
    w(
        &mut m,
        "libgpukit_paste_name := $(patsubst lib%,gpukit/lib%,$(call procmacro-name,paste))",
    );
    w(&mut m, "always-$(CONFIG_RUST) += $(libgpukit_paste_name)");
    let objs: Vec<String> = ["gpukit/bitflags.o", "gpukit/static_assertions.o"]
        .into_iter()
        .map(String::from)
        .chain(CRATES.iter().map(|c| format!("gpukit/{}.o", c.name)))
        .chain(
            CRATES
                .iter()
                .filter(|c| c.kunit_crate)
                .map(|c| format!("gpukit/{}_kunit.o", c.name)),
        )
        .chain(CRATES.iter().flat_map(|c| {
            c.c_files
                .iter()
                .map(move |f| format!("gpukit/{}/src/{}", c.dir, f.replace(".c", ".o")))
        }))
        .collect();
    w(&mut m, &format!("obj-$(CONFIG_RUST) += {}", objs.join(" ")));
    // Every crate of the family: the `kernel` feature on, the cfg that lifts the
    // outside-a-Linux-tree `compile_error!`, the kernel crates, and the one unstable feature
    // the expansion of `#[kunit_tests]` needs (`#[used(compiler)]`), as drivers get it.
    w(
        &mut m,
        "gpukit-flags := --cfg='feature=\"kernel\"' --cfg=gpukit_kernel \\\n    \
         -L$(objtree)/$(obj)/gpukit --extern kernel --extern pin_init \\\n    \
         -Zcrate-attr='feature(used_with_arg)'",
    );
    w(&mut m, "");
    w(
        &mut m,
        "$(obj)/$(libgpukit_paste_name): private skip_clippy = 1",
    );
    w(
        &mut m,
        "$(obj)/$(libgpukit_paste_name): private rustc_target_flags = --cap-lints=allow",
    );
    w(
        &mut m,
        "$(obj)/$(libgpukit_paste_name): $(src)/gpukit/paste/src/lib.rs FORCE",
    );
    w(&mut m, "\t+$(call if_changed_dep,rustc_procmacro)");
    w(&mut m, "");
    w(&mut m, "$(obj)/gpukit/bitflags.o: private skip_clippy = 1");
    w(
        &mut m,
        "$(obj)/gpukit/bitflags.o: private skip_gendwarfksyms = 1",
    );
    w(
        &mut m,
        "$(obj)/gpukit/bitflags.o: private rustc_target_flags = --cap-lints=allow",
    );
    w(
        &mut m,
        "$(obj)/gpukit/bitflags.o: $(src)/gpukit/bitflags/src/lib.rs $(obj)/compiler_builtins.o FORCE",
    );
    w(&mut m, "\t+$(call if_changed_rule,rustc_library)");
    w(&mut m, "");
    w(
        &mut m,
        "$(obj)/gpukit/static_assertions.o: private skip_clippy = 1",
    );
    w(
        &mut m,
        "$(obj)/gpukit/static_assertions.o: private skip_gendwarfksyms = 1",
    );
    w(
        &mut m,
        "$(obj)/gpukit/static_assertions.o: private rustc_target_flags = --cap-lints=allow",
    );
    w(
        &mut m,
        "$(obj)/gpukit/static_assertions.o: $(src)/gpukit/static_assertions/src/lib.rs $(obj)/compiler_builtins.o FORCE",
    );
    w(&mut m, "\t+$(call if_changed_rule,rustc_library)");
    for c in CRATES {
        let target = format!("$(obj)/gpukit/{}.o", c.name);
        let mut flags = String::from("$(gpukit-flags)");
        if canary && c.name == "jobqueue" {
            flags.push_str(" --cfg=gpukit_lockdep_canary");
        }
        let mut deps = String::from("$(obj)/kernel.o");
        for e in c.externs {
            if *e == "paste" {
                flags.push_str(" --extern paste=$(objtree)/$(obj)/$(libgpukit_paste_name)");
                deps.push_str(" $(obj)/$(libgpukit_paste_name)");
            } else {
                flags.push_str(&format!(" --extern {e}"));
                deps.push_str(&format!(" $(obj)/gpukit/{e}.o"));
            }
        }
        w(&mut m, "");
        w(&mut m, &format!("{target}: private skip_gendwarfksyms = 1"));
        w(
            &mut m,
            &format!("{target}: private rustc_target_flags = {flags}"),
        );
        w(
            &mut m,
            &format!("{target}: $(src)/gpukit/{}/src/lib.rs {deps} FORCE", c.dir),
        );
        w(&mut m, "\t+$(call if_changed_rule,rustc_library)");
        if c.kunit_crate {
            let suite = format!("$(obj)/gpukit/{}_kunit.o", c.name);
            w(&mut m, "");
            w(&mut m, &format!("{suite}: private skip_gendwarfksyms = 1"));
            w(
                &mut m,
                &format!(
                    "{suite}: private rustc_target_flags = {flags} --extern {}",
                    c.name
                ),
            );
            w(
                &mut m,
                &format!(
                    "{suite}: $(src)/gpukit/{}/src/kernel/kunit.rs {target} FORCE",
                    c.dir
                ),
            );
            w(&mut m, "\t+$(call if_changed_rule,rustc_library)");
        }
    }
    for d in DRIVERS {
        let target = format!("$(obj)/gpukit/{}.o", d.name);
        let mut objs = vec![format!("gpukit/{}.o", d.name)];
        objs.extend(
            d.c_files
                .iter()
                .map(|f| format!("gpukit/{}/{}", d.dir, f.replace(".c", ".o"))),
        );
        let mut flags = String::from("$(gpukit-flags)");
        let mut deps = String::from("$(obj)/kernel.o");
        for e in d.externs {
            flags.push_str(&format!(" --extern {e}"));
            deps.push_str(&format!(" $(obj)/gpukit/{e}.o"));
        }
        w(&mut m, "");
        w(
            &mut m,
            &format!("obj-$({}) += {}", d.config, objs.join(" ")),
        );
        w(&mut m, &format!("{target}: private skip_gendwarfksyms = 1"));
        w(
            &mut m,
            &format!("{target}: private rustc_target_flags = {flags}"),
        );
        w(
            &mut m,
            &format!("{target}: $(src)/gpukit/{}/{} {deps} FORCE", d.dir, d.root),
        );
        w(&mut m, "\t+$(call if_changed_rule,rustc_library)");
    }
    w(&mut m, "endif # CONFIG_RUST");
    m
}

/// Brings the overlay's vendored files up to date; returns how many files changed.
fn vendor(ws: &Workspace, l: &Layout, canary: bool) -> Result<usize, String> {
    let libs: BTreeSet<String> = ws
        .library_crates()
        .iter()
        .map(|m| m.package.trim_start_matches("gpukit-").to_string())
        // The simulator lives in the driver's directory.
        .map(|d| if d == "mali-sim" { "tyr/sim".into() } else { d })
        .collect();
    let known: BTreeSet<String> = CRATES.iter().map(|c| c.dir.to_string()).collect();
    if libs != known {
        return Err(format!(
            "the library crates {libs:?} differ from the ones xtask/src/kernel.rs vendors \
             {known:?}: update its CRATES table"
        ));
    }
    let root = l.src.join("rust").join("gpukit");
    let mut seen = BTreeSet::new();
    let mut changed = 0;
    for c in CRATES {
        changed += sync_tree(
            &ws.root.join(c.dir).join("src"),
            &root.join(c.dir).join("src"),
            &mut seen,
        )?;
    }
    for d in DRIVERS {
        changed += sync_tree(&ws.root.join(d.dir), &root.join(d.dir), &mut seen)?;
    }
    for tp in THIRD_PARTY {
        let dir = registry_crate(ws, tp)?;
        changed += sync_tree(&dir.join("src"), &root.join(tp.name).join("src"), &mut seen)?;
        let _ = tp.proc_macro;
    }
    prune(&root, &seen)?;
    let pristine = fs::read_to_string(l.kdir.join("rust/Makefile"))
        .map_err(|e| format!("rust/Makefile: {e}"))?;
    if !pristine.contains("$(obj)/zerocopy.o") {
        return Err(
            "this tree's rust/Makefile does not build zerocopy: Linux 7.2 is needed".into(),
        );
    }
    let makefile = format!("{pristine}{}", makefile_rules(canary));
    if sync_file(&l.src.join("rust/Makefile"), makefile.as_bytes())? {
        changed += 1;
    }
    let pristine = fs::read_to_string(l.kdir.join(KCONFIG_FILE))
        .map_err(|e| format!("{KCONFIG_FILE}: {e}"))?;
    let kconfig = format!("{pristine}{KCONFIG_VS_C}");
    if sync_file(&l.src.join(KCONFIG_FILE), kconfig.as_bytes())? {
        changed += 1;
    }
    Ok(changed)
}

/// The Kconfig file the overlay appends [`KCONFIG_VS_C`] to.
const KCONFIG_FILE: &str = "lib/Kconfig.debug";

/// A test-only symbol: the C implementations the crates are compared with are selected by
/// drivers, not by hand (`DRM_GPUVM` and `DRM_SCHED` have no prompt), so this symbol selects
/// them for the KUnit kernel. `IOMMU_IO_PGTABLE_LPAE` is meant for Arm (or `COMPILE_TEST`)
/// builds; its C code is portable, and selecting it on x86_64 only makes `olddefconfig` note
/// the unmet dependency. Kconfig does not follow the selects of a symbol selected against its
/// dependencies, so the core `IOMMU_IO_PGTABLE` is selected here too.
const KCONFIG_VS_C: &str = "
# gpukit: generated by `cargo xtask kernel-build`; not part of Linux.
config GPUKIT_VS_C
\tbool \"gpukit: KUnit comparisons of the Rust crates with the C implementations\"
\tdepends on KUNIT && DRM && IOMMU_SUPPORT && !GENERIC_ATOMIC64
\tselect IOMMU_IO_PGTABLE
\tselect IOMMU_IO_PGTABLE_LPAE
\tselect DRM_GPUVM
\tselect DRM_SCHED
\thelp
\t  Builds the C io-pgtable, drm_gpuvm and drm_sched into the test kernel so that
\t  gpukit's KUnit suites can drive both implementations with the same operations.

config GPUKIT_DRM
\tbool \"gpukit: drm-ctx's kernel backend (kernel::drm, shmem GEM objects)\"
\tdepends on RUST && DRM && MMU
\tselect RUST_DRM_GEM_SHMEM_HELPER
\thelp
\t  The kernel DRM pieces drm-ctx's kernel backend is built on; the Rust
\t  shmem GEM abstraction is only built when a driver selects it.

config GPUKIT_SAMPLE_DRM
\tbool \"gpukit: the drm-ctx sample driver on a faux device\"
\tdepends on GPUKIT_DRM
\thelp
\t  Registers the render node of drm-ctx's sample driver at boot, for the
\t  userspace stage of cargo xtask kernel-test.
";

/// The kernel configuration the suites run under. Besides KUnit and Rust: the DRM core (its
/// syncobjs and, through `DMA_SHARED_BUFFER`, `dma_fence`), lockdep with its dependency
/// checking (`PROVE_LOCKING`, which proves the `dma_fence` signalling annotations and the
/// reclaim rules), atomic-sleep checks, and DMA-API debugging (every map, sync and unmap is
/// checked against the mappings the device holds).
const KUNITCONFIG: &str = "\
CONFIG_KUNIT=y
CONFIG_RUST=y
CONFIG_DRM=y
CONFIG_DEBUG_KERNEL=y
CONFIG_PROVE_LOCKING=y
CONFIG_DEBUG_ATOMIC_SLEEP=y
CONFIG_DMA_API_DEBUG=y
CONFIG_IOMMU_SUPPORT=y
CONFIG_GPUKIT_VS_C=y
CONFIG_GPUKIT_DRM=y
CONFIG_GPUKIT_SAMPLE_DRM=y
CONFIG_BLK_DEV_INITRD=y
CONFIG_DEVTMPFS=y
CONFIG_BINFMT_ELF=y
CONFIG_SHMEM=y
";

/// The configuration of `kernel-bench`: the test kernel's, without the checkers (lockdep, the
/// atomic-sleep check, DMA-API debugging and `DEBUG_KERNEL` itself), so that what the
/// comparisons time is the two implementations rather than the checkers' bookkeeping, which
/// both sides pay on every lock, fence and DMA sync in the test kernel; and with
/// high-resolution timers, so that the simulated ring of the jobqueue comparison completes its
/// jobs when they are due rather than at the next scheduler tick.
const BENCHCONFIG: &str = "\
CONFIG_KUNIT=y
CONFIG_HIGH_RES_TIMERS=y
CONFIG_RUST=y
CONFIG_DRM=y
CONFIG_IOMMU_SUPPORT=y
CONFIG_GPUKIT_VS_C=y
CONFIG_GPUKIT_DRM=y
CONFIG_SHMEM=y
";

/// The checkers the test configuration turns on and the benchmark configuration must not have.
const CHECKERS: &[&str] = &[
    "CONFIG_DEBUG_KERNEL",
    "CONFIG_PROVE_LOCKING",
    "CONFIG_DEBUG_ATOMIC_SLEEP",
    "CONFIG_DMA_API_DEBUG",
];

/// Writes the kunitconfig, the TCG QEMU configuration and the QEMU wrapper.
fn kunit_files(l: &Layout) -> Result<(), String> {
    let config = match l.flavour {
        Flavour::Test => {
            // The Arm firmware image built into the kernel (`EXTRA_FIRMWARE`), so that Tyr's
            // `request_firmware` finds it in the KUnit boot, which has no root file system, as
            // in the userspace boots. The image is copied next to the build so that a later
            // fetch into the cache cannot change what an unchanged configuration built in.
            let fw = crate::debian::firmware_dir()?;
            let dir = l.cache.join("firmware");
            let to = dir.join(crate::debian::G610_FIRMWARE);
            let bytes = fs::read(fw.join(crate::debian::G610_FIRMWARE))
                .map_err(|e| format!("firmware image: {e}"))?;
            fs::create_dir_all(to.parent().expect("a file in a directory"))
                .map_err(|e| format!("{}: {e}", to.display()))?;
            sync_file(&to, &bytes)?;
            format!(
                "{KUNITCONFIG}CONFIG_FW_LOADER=y\nCONFIG_RUST_FW_LOADER_ABSTRACTIONS=y\nCONFIG_EXTRA_FIRMWARE=\"{}\"\n\
                 CONFIG_EXTRA_FIRMWARE_DIR=\"{}\"\n",
                crate::debian::G610_FIRMWARE,
                dir.display()
            )
        }
        Flavour::Bench => BENCHCONFIG.to_string(),
    };
    sync_file(&l.cache.join("kunitconfig"), config.as_bytes())?;
    if l.arch == Arch::Arm64 {
        return arm64_qemu_files(l);
    }
    sync_file(
        &l.cache.join("qemu_x86_64_tcg.py"),
        b"from ..qemu_config import QemuArchParams\n\n\
          # Written by `cargo xtask kernel-test`: x86_64 under TCG only (see bin/).\n\
          QEMU_ARCH = QemuArchParams(linux_arch='x86_64',\n\
          \x20                          kconfig='''\n\
          CONFIG_SERIAL_8250=y\n\
          CONFIG_SERIAL_8250_CONSOLE=y''',\n\
          \x20                          qemu_arch='x86_64-gpukit-tcg',\n\
          \x20                          kernel_path='arch/x86/boot/bzImage',\n\
          \x20                          kernel_command_line='console=ttyS0',\n\
          \x20                          extra_qemu_params=['-bios', 'qboot.rom', '-cpu', 'max'])\n",
    )?;
    let wrapper = l.cache.join("bin").join("qemu-system-x86_64-gpukit-tcg");
    // The benchmark kernel runs (unless `--wall-clock`) with QEMU's instruction counter as
    // its clock (`-icount`): every guest instruction advances guest time by 1 ns, whatever
    // the host is doing. Under TCG wall time follows the host's load (other builds on a
    // shared 2-core machine moved single figures by 5x), while counted time is the same in
    // every run; it measures the instructions each side executes (TCG models no caches either
    // way), and idle guest time passes at once (`sleep=off`).
    let accel = match l.flavour {
        Flavour::Bench if !l.wall_clock => "-accel tcg -icount shift=0,sleep=off",
        _ => "-accel tcg",
    };
    sync_file(
        &wrapper,
        format!(
            "#!/bin/bash\n\
             # Written by `cargo xtask kernel-test`. kunit.py asks QEMU for KVM first; under KVM\n\
             # the guest stops with \"emulation failure\" on these hosts, so drop every -accel\n\
             # option and use TCG.\n\
             args=()\n\
             while [ $# -gt 0 ]; do\n\
             \x20 if [ \"$1\" = -accel ]; then shift 2; continue; fi\n\
             \x20 args+=(\"$1\"); shift\n\
             done\n\
             exec qemu-system-x86_64 {accel} \"${{args[@]}}\"\n"
        )
        .as_bytes(),
    )?;
    Cmd::new("chmod")
        .args(["+x", &wrapper.to_string_lossy()])
        .status()
}

/// The arm64 counterparts of the x86_64 QEMU configuration and wrapper: `virt` with a GICv3
/// and the `max` CPU under TCG (QEMU's cheaper pointer-authentication hash, see
/// [`Arch::machine`]), the PL011 console (the options of kunit.py's own `arm64.py`),
/// the uncompressed `Image`, and `panic_on_warn=1`, which every arm64 boot has. Its kernel
/// options add what the board's GPU node needs (`crate::dt`): fixed regulators for its supply
/// (fixed clocks come with arm64's `COMMON_CLK`), and devfreq with `simple_ondemand`, which
/// brings the operating-point library (`PM_OPP`).
fn arm64_qemu_files(l: &Layout) -> Result<(), String> {
    sync_file(
        &l.cache.join("qemu_arm64_tcg.py"),
        b"from ..qemu_config import QemuArchParams\n\n\
          # Written by `cargo xtask kernel-test --arch arm64`: virt, GICv3, TCG only (see bin/).\n\
          QEMU_ARCH = QemuArchParams(linux_arch='arm64',\n\
          \x20                          kconfig='''\n\
          CONFIG_SERIAL_AMBA_PL011=y\n\
          CONFIG_SERIAL_AMBA_PL011_CONSOLE=y\n\
          CONFIG_REGULATOR=y\n\
          CONFIG_REGULATOR_FIXED_VOLTAGE=y\n\
          CONFIG_PM_DEVFREQ=y\n\
          CONFIG_DEVFREQ_GOV_SIMPLE_ONDEMAND=y''',\n\
          \x20                          qemu_arch='aarch64-gpukit-tcg',\n\
          \x20                          kernel_path='arch/arm64/boot/Image',\n\
          \x20                          kernel_command_line='console=ttyAMA0 panic_on_warn=1 panic=-1',\n\
          \x20                          extra_qemu_params=['-machine', 'virt,gic-version=3', '-cpu', 'max,pauth-impdef=on'])\n",
    )?;
    let wrapper = l.cache.join("bin").join("qemu-system-aarch64-gpukit-tcg");
    sync_file(
        &wrapper,
        b"#!/bin/bash\n\
          # Written by `cargo xtask kernel-test --arch arm64`: an arm64 guest on an x86_64 host\n\
          # runs under TCG; drop the -accel options kunit.py passes.\n\
          args=()\n\
          while [ $# -gt 0 ]; do\n\
          \x20 if [ \"$1\" = -accel ]; then shift 2; continue; fi\n\
          \x20 args+=(\"$1\"); shift\n\
          done\n\
          exec qemu-system-aarch64 -accel tcg \"${args[@]}\"\n",
    )?;
    Cmd::new("chmod")
        .args(["+x", &wrapper.to_string_lossy()])
        .status()
}

/// Runs `kunit.py <sub>` (`build` or `exec`) in the overlay and returns its standard output.
/// `filter` (a glob of suite names) limits an `exec` to some suites.
fn kunit(l: &Layout, sub: &str, filter: Option<&str>) -> Result<String, String> {
    let path = format!(
        "{}:{}",
        l.cache.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let build_dir = format!("--build_dir={}", l.build.display());
    let kunitconfig = format!("--kunitconfig={}", l.cache.join("kunitconfig").display());
    let qemu = format!(
        "--qemu_config={}",
        l.cache
            .join(format!("qemu_{}_tcg.py", l.arch.linux()))
            .display()
    );
    let llvm = format!("LLVM={LLVM_SUFFIX}");
    let arch = format!("--arch={}", l.arch.linux());
    let mut args = vec![
        "tools/testing/kunit/kunit.py",
        sub,
        &arch,
        &build_dir,
        &kunitconfig,
        &qemu,
        "--make_options",
        &llvm,
    ];
    if sub == "exec" {
        args.extend(["--timeout", KUNIT_TIMEOUT]);
        args.extend(filter);
    } else {
        args.extend(["--jobs", JOBS]);
    }
    eprintln!("$ (cd {} && python3 {})", l.src.display(), args.join(" "));
    let mut child = Command::new("python3")
        .args(&args)
        .current_dir(&l.src)
        .env("PATH", path)
        // Keep the workspace's toolchain choice (if any) out of the kernel build.
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("CARGO_TARGET_DIR")
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start kunit.py: {e}"))?;
    let mut seen = String::new();
    if let Some(stdout) = child.stdout.take() {
        let mut out = std::io::stderr().lock();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = writeln!(out, "{line}");
            seen.push_str(&line);
            seen.push('\n');
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    if status.success() {
        Ok(seen)
    } else {
        Err(format!("kunit.py {sub} failed ({status})"))
    }
}

/// Checks that `cargo check --features kernel` outside a Linux tree stops with the crate's own
/// message rather than with an unresolved-crate error.
fn feature_guard(ws: &Workspace) -> Result<(), String> {
    const MESSAGE: &str = "the `kernel` feature only builds inside a Linux tree";
    let target = ws.target_dir("kernel-guard");
    // A crate without a `kernel` feature is not built into the kernel (yet): Cargo itself
    // refuses the feature, which is clear enough.
    for m in ws
        .library_crates()
        .into_iter()
        .filter(|m| m.features.iter().any(|f| f == "kernel"))
    {
        let out = Command::new("cargo")
            .args(["check", "--quiet", "--lib", "-p", &m.package])
            .args(["--no-default-features", "--features", "kernel"])
            .current_dir(&ws.root)
            .env("CARGO_TARGET_DIR", &target)
            .output()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() || !stderr.contains(MESSAGE) || stderr.contains("E0433") {
            return Err(format!(
                "`cargo check -p {} --features kernel` should stop with \"{MESSAGE}\"; got:\n{stderr}",
                m.package
            ));
        }
    }
    eprintln!("kernel: every crate refuses `--features kernel` outside a Linux tree (ok)");
    Ok(())
}

/// Appends a measurement to `timings.log` in the cache and prints it.
fn record(l: &Layout, what: &str, secs: f64) {
    let line = format!("{what}: {secs:.1} s\n");
    eprint!("kernel: {line}");
    if let Ok(mut f) = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(l.cache.join("timings.log"))
    {
        let _ = f.write_all(line.as_bytes());
    }
}

/// Exclusive use of one cache directory: two runs (a CI job and a developer, say) must not
/// vendor into and build in the same overlay at once. A directory created atomically holds the
/// owner's process id; a lock whose owner is gone is taken over.
struct CacheLock(PathBuf);

impl CacheLock {
    fn take(cache: &Path) -> Result<Self, String> {
        fs::create_dir_all(cache).map_err(|e| format!("{}: {e}", cache.display()))?;
        let dir = cache.join("lock");
        let mut waited = false;
        loop {
            if fs::create_dir(&dir).is_ok() {
                let _ = fs::write(dir.join("pid"), std::process::id().to_string());
                return Ok(CacheLock(dir));
            }
            let owner = fs::read_to_string(dir.join("pid")).unwrap_or_default();
            let alive = !owner.trim().is_empty() && Path::new("/proc").join(owner.trim()).exists();
            if !alive {
                // Give a new owner a moment to write its pid before calling the lock stale.
                std::thread::sleep(std::time::Duration::from_secs(1));
                if fs::read_to_string(dir.join("pid")).unwrap_or_default() == owner {
                    let _ = fs::remove_dir_all(&dir);
                }
                continue;
            }
            if !waited {
                eprintln!(
                    "kernel: waiting for process {} to release {}",
                    owner.trim(),
                    dir.display()
                );
                waited = true;
            }
            std::thread::sleep(std::time::Duration::from_secs(2));
        }
    }
}

impl Drop for CacheLock {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Prepares the overlay and builds the kernel; returns the layout for a test run and the lock
/// on its cache.
fn build_inner(
    ws: &Workspace,
    opts: &Options,
    with_qemu: bool,
) -> Result<(Layout, CacheLock), String> {
    install_tools(with_qemu.then_some(opts.arch))?;
    feature_guard(ws)?;
    let l = Layout::new(opts)?;
    let lock = CacheLock::take(&l.cache)?;
    let first = !l.build.join("vmlinux").exists();
    ensure_overlay(&l)?;
    let changed = vendor(ws, &l, opts.lockdep_canary)?;
    kunit_files(&l)?;
    eprintln!(
        "kernel: {changed} vendored file(s) changed; building in {}",
        l.build.display()
    );
    let t = Instant::now();
    kunit(&l, "build", None)?;
    let kind = if first { "first build" } else { "rebuild" };
    record(
        &l,
        &format!("{kind} ({changed} files changed)"),
        t.elapsed().as_secs_f64(),
    );
    check_frames(&l)?;
    Ok((l, lock))
}

/// The stack frames of the crates' code in the kernel just built (see [`crate::frames`]).
fn check_frames(l: &Layout) -> Result<(), String> {
    let names: Vec<&str> = CRATES
        .iter()
        .map(|c| c.name)
        .chain(DRIVERS.iter().map(|d| d.name))
        .chain(["gpuvm_kunit"])
        .collect();
    let largest = crate::frames::check(l.arch, &l.build.join("vmlinux"), &names)?;
    eprintln!(
        "kernel: every stack frame of the crates is within its bound ({} bytes, tests {}); \
         the largest:",
        crate::frames::DRIVER_FRAME,
        crate::frames::TEST_FRAME
    );
    for f in largest {
        let kind = if f.test { "test" } else { "code" };
        eprintln!("  {:>5} {kind} {}", f.bytes, f.name);
    }
    Ok(())
}

/// `cargo xtask kernel-build`.
pub(crate) fn build(ws: &Workspace, opts: &Options) -> Result<(), String> {
    build_inner(ws, opts, false).map(|_| ())
}

/// Per-suite results parsed from kunit.py's report.
#[derive(Default)]
struct Suite {
    name: String,
    passed: u64,
    failed: u64,
    skipped: u64,
}

/// Reads kunit.py's parsed report: `==== name (N subtests) ====` opens a suite, `[PASSED] x`
/// (and `FAILED`, `SKIPPED`) lines inside it are its cases, `==== [PASSED] name ====` closes it.
fn parse_report(out: &str) -> Vec<Suite> {
    let mut suites: Vec<Suite> = Vec::new();
    let mut open = false;
    for line in out.lines() {
        // Drop the `[hh:mm:ss] ` time stamp.
        let line = match line.find("] ") {
            Some(i) if line.starts_with('[') => &line[i + 2..],
            _ => line,
        };
        let body = line.trim_matches('=').trim();
        if line.starts_with('=') {
            // `(N subtests)`, or `(1 subtest)` for a suite of one case.
            if let Some(name) = body
                .strip_suffix(" subtests)")
                .or_else(|| body.strip_suffix(" subtest)"))
                .and_then(|b| b.rsplit_once(" ("))
            {
                suites.push(Suite {
                    name: name.0.to_string(),
                    ..Suite::default()
                });
                open = true;
            } else {
                open = false;
            }
            continue;
        }
        if !open {
            continue;
        }
        let Some(s) = suites.last_mut() else { continue };
        if line.starts_with("[PASSED] ") {
            s.passed += 1;
        } else if line.starts_with("[FAILED] ") {
            s.failed += 1;
        } else if line.starts_with("[SKIPPED] ") {
            s.skipped += 1;
        }
    }
    suites
}

/// `cargo xtask kernel-test`: builds (incrementally), boots under QEMU, checks every suite.
pub(crate) fn test(ws: &Workspace, opts: &Options, tally: &mut Tally) -> Result<(), String> {
    let (l, _lock) = build_inner(ws, opts, true)?;
    let t = Instant::now();
    // `exec`, not `run`: the kernel was just built; `run` would only run make again.
    let run = kunit(&l, "exec", None);
    record(&l, "kunit.py exec (QEMU, TCG)", t.elapsed().as_secs_f64());
    let out = run?;
    let suites = parse_report(&out);
    eprintln!("\nKUnit summary:");
    eprintln!(
        "  {:<28} {:>6} {:>6} {:>7}",
        "suite", "passed", "failed", "skipped"
    );
    for s in &suites {
        eprintln!(
            "  {:<28} {:>6} {:>6} {:>7}",
            s.name, s.passed, s.failed, s.skipped
        );
        tally.passed += s.passed;
        tally.failed += s.failed;
        tally.ignored += s.skipped;
    }
    if let Some(total) = out.lines().find(|l| l.contains("Testing complete.")) {
        eprintln!("  {}", total.trim());
    }
    let mut missing = Vec::new();
    for c in CRATES {
        let name = format!("gpukit_{}", c.name);
        match suites.iter().find(|s| s.name == name) {
            Some(s) if s.passed > 0 && s.failed == 0 => {}
            Some(_) => return Err(format!("KUnit suite {name} did not pass")),
            None => missing.push(name),
        }
    }
    if !missing.is_empty() {
        return Err(format!("KUnit suites missing from the run: {missing:?}"));
    }
    if let Some(bad) = suites.iter().find(|s| s.failed > 0) {
        return Err(format!("KUnit suite {} failed", bad.name));
    }
    let log = fs::read_to_string(l.build.join("test.log"))
        .map_err(|e| format!("the kernel log {}: {e}", l.build.join("test.log").display()))?;
    print_comparisons(&log);
    let reports = check_log(&log)?;
    if opts.lockdep_canary {
        return if reports.iter().any(|r| r.contains("WARNING: possible")) {
            eprintln!(
                "kernel: the lockdep canary fired as it must ({} report line(s)); rebuild \
                 without --lockdep-canary before running the suites for real",
                reports.len()
            );
            Ok(())
        } else {
            Err(
                "the lockdep canary allocated in a signalling section and lockdep said nothing"
                    .into(),
            )
        };
    }
    if !reports.is_empty() {
        return Err(format!(
            "the kernel log has {} report(s) from the kernel's checkers:\n{}",
            reports.len(),
            reports.join("\n")
        ));
    }
    eprintln!("kernel: no lockdep, DMA-API, atomic-sleep or WARN report in the kernel log (ok)");
    // The userspace stage: the same kernel booted with each test program as /init, talking to
    // the drivers built in through /dev/dri (xtask/src/userspace.rs).
    let t = Instant::now();
    let image = l.build.join(l.arch.image());
    let stages = crate::userspace::run_stages(ws, l.arch, &image, &l.cache, &check_log, tally);
    record(&l, "userspace stage", t.elapsed().as_secs_f64());
    stages?;
    uapi_abi(&l, tally)
}

/// Tyr's uAPI against the C header of the tree just built: a C compiler prints every struct's
/// size and field offsets and every constant of `include/uapi/drm/panthor_drm.h`, and the test
/// (`tyr/tests/uapi_abi_c.rs`, ignored in a plain `cargo test`) compares them with the Rust
/// definitions.
fn uapi_abi(l: &Layout, tally: &mut Tally) -> Result<(), String> {
    let kdir = l.kdir.to_string_lossy().into_owned();
    Cmd::cargo(&[
        "test",
        "-p",
        "gpukit-tyr",
        "--features",
        "host,std",
        "--test",
        "uapi_abi_c",
        "--",
        "--ignored",
    ])
    .env("LINUX_SRC", &kdir)
    .tally(tally)
}

/// `cargo xtask kernel-bench`: the comparisons with the C code (the `*_vs_c` suites) in a
/// kernel built without lockdep, DMA-API debugging and the atomic-sleep check.
pub(crate) fn bench(ws: &Workspace, opts: &Options) -> Result<(), String> {
    debug_assert!(opts.flavour == Flavour::Bench);
    let (l, _lock) = build_inner(ws, opts, true)?;
    let config = fs::read_to_string(l.build.join(".config"))
        .map_err(|e| format!("{}: {e}", l.build.join(".config").display()))?;
    if let Some(on) = CHECKERS
        .iter()
        .find(|c| config.lines().any(|line| line == format!("{c}=y")))
    {
        return Err(format!(
            "the benchmark kernel has {on}=y (something in its configuration selects it)"
        ));
    }
    let t = Instant::now();
    let run = kunit(&l, "exec", Some("gpukit_*_vs_c"));
    record(
        &l,
        "kunit.py exec of the vs-C suites (QEMU, TCG)",
        t.elapsed().as_secs_f64(),
    );
    let out = run?;
    let suites = parse_report(&out);
    for c in CRATES
        .iter()
        .filter(|c| c.c_files.contains(&"kernel/vs_c.c"))
    {
        let name = format!("gpukit_{}_vs_c", c.name);
        match suites.iter().find(|s| s.name == name) {
            Some(s) if s.passed > 0 && s.failed == 0 => {}
            Some(_) => return Err(format!("KUnit suite {name} did not pass")),
            None => return Err(format!("KUnit suite {name} is missing from the run")),
        }
    }
    let log = fs::read_to_string(l.build.join("test.log"))
        .map_err(|e| format!("the kernel log {}: {e}", l.build.join("test.log").display()))?;
    if let Some((what, _)) = CHECKER_BANNERS.iter().find(|(_, b)| log.contains(b)) {
        return Err(format!("{what} was active in the benchmark kernel"));
    }
    if !print_comparisons(&log)
        .iter()
        .any(|line| line.starts_with("vs-C: "))
    {
        return Err("the benchmark kernel printed no vs-C line".into());
    }
    let reports = log_reports(&log);
    if !reports.is_empty() {
        return Err(format!(
            "the kernel log has {} WARN/BUG report(s):\n{}",
            reports.len(),
            reports.join("\n")
        ));
    }
    Ok(())
}

/// Printed at boot when a checker is compiled in and active.
const CHECKER_BANNERS: &[(&str, &str)] = &[
    ("lockdep", "Lock dependency validator"),
    ("DMA-API debugging", "DMA-API: debugging enabled"),
];

/// Prints the lines of the comparisons with the C code (`differential: ...` for the
/// step-by-step checks, `vs-C: ...` for timings, `floor: ...` for a cost they explain) and
/// returns them.
fn print_comparisons(log: &str) -> Vec<&str> {
    let compared: Vec<&str> = log
        .lines()
        .filter_map(|line| {
            ["differential: ", "vs-C: ", "floor: "]
                .iter()
                .find_map(|tag| line.find(tag).map(|i| &line[i..]))
        })
        .collect();
    if !compared.is_empty() {
        eprintln!("\nComparisons with the C implementations:");
        for line in &compared {
            eprintln!("  {line}");
        }
    }
    compared
}

/// Checks that the kernel's checkers were on in this boot and returns the lines where one of
/// them reported something (each with the two lines after it).
pub(crate) fn check_log(log: &str) -> Result<Vec<String>, String> {
    for (what, banner) in CHECKER_BANNERS {
        if !log.contains(banner) {
            return Err(format!(
                "{what} was not active in the test kernel (no \"{banner}\" in its log)"
            ));
        }
    }
    Ok(log_reports(log))
}

/// The lines of a kernel log where a checker, `WARN()` or `BUG()` reported something (each with
/// the two lines after it).
fn log_reports(log: &str) -> Vec<String> {
    /// What lockdep, DMA-API debugging, the atomic-sleep check, WARN() and BUG() print.
    const REPORTS: &[&str] = &[
        "WARNING:",
        "BUG:",
        "DMA-API: ",
        "INFO: possible",
        "INFO: lockdep",
        "DEBUG_LOCKS_WARN_ON",
        "Oops",
        "Kernel panic",
        "turning off the locking correctness validator",
    ];
    let lines: Vec<&str> = log.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        // The boot banners above are not reports.
        if line.contains("DMA-API: debugging enabled") || line.contains("DMA-API: preallocated") {
            continue;
        }
        if REPORTS.iter().any(|r| line.contains(r)) {
            let end = (i + 3).min(lines.len());
            out.push(lines[i..end].join("\n    "));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{cache_dir, parse_report, Arch, Flavour, Options};

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn arch_option_and_cache_dirs() {
        let x86 = Options::parse(&args(&["--lockdep-canary"])).unwrap();
        assert_eq!(x86.arch, Arch::X86_64);
        assert_eq!(cache_dir(x86.flavour, x86.arch), "kernel");
        let arm = Options::parse(&args(&["--arch", "arm64"])).unwrap();
        assert_eq!(arm.arch, Arch::Arm64);
        assert_eq!(cache_dir(arm.flavour, arm.arch), "kernel-arm64");
        assert_eq!(cache_dir(Flavour::Bench, Arch::X86_64), "kernel-bench");
        assert!(Options::parse(&args(&["--arch"])).is_err());
        assert!(Options::parse(&args(&["--arch", "riscv"])).is_err());
        assert!(Options::parse_bench(&args(&["--arch", "arm64"])).is_err());
        assert_eq!(Arch::Arm64.image(), "arch/arm64/boot/Image");
        assert_eq!(Arch::X86_64.image(), "arch/x86/boot/bzImage");
        assert_eq!(
            Arch::Arm64.qemu(),
            ("qemu-system-aarch64", "qemu-system-arm")
        );
    }

    #[test]
    fn report_suites_of_one_and_of_several_cases() {
        let out = "\
[01:30:56] ============= gpukit_one (1 subtest) =============
[01:31:00] [PASSED] only_case
[01:31:00] ============== [PASSED] gpukit_one ===============
[01:31:00] =============== gpukit_two (2 subtests) ================
[01:31:00] [PASSED] first
[01:31:00] a log line between cases
[01:31:00] [FAILED] second
[01:31:00] ================= [FAILED] gpukit_two ==================
";
        let suites = parse_report(out);
        let seen: Vec<(&str, u64, u64)> = suites
            .iter()
            .map(|s| (s.name.as_str(), s.passed, s.failed))
            .collect();
        assert_eq!(seen, [("gpukit_one", 1, 0), ("gpukit_two", 1, 1)]);
    }
}
