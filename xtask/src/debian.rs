// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Packages from Debian's archive, fetched by the project itself.
//!
//! Some of what the checks need is not on a fresh machine and not in the repository: the
//! Linux 7.2 source tree the kernel stages build against, and the Arm firmware image of the
//! Mali-G610 (`arm/mali/arch10.8/mali_csffw.bin`, in `firmware-misc-nonfree`). Both come from
//! Debian's unstable suite, reached through the archive this machine's apt already uses (its
//! address is read from the machine's apt sources, never written here) with a temporary
//! sources list: `apt-get download` fetches the `.deb`, `dpkg -x` unpacks it. Nothing is
//! installed into the system.
//!
//! Every fetch is idempotent: the result is kept in a cache directory with a stamp written
//! last, and a run that finds the stamp uses the cache without touching the network.
//!
//! | what | package (component) | cache |
//! |---|---|---|
//! | Linux source | `linux-source-7.2` (`main`) | `~/.cache/linux-src/linux-source-7.2` |
//! | Mali CSF firmware | `firmware-misc-nonfree` (`non-free-firmware`) | `~/.cache/gpukit/firmware` |

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The firmware file of the simulated GPU's architecture (Mali-G610: arch 10.8), relative to
/// a firmware directory, as the driver requests it.
pub(crate) const G610_FIRMWARE: &str = "arm/mali/arch10.8/mali_csffw.bin";

/// The cache root: `$XDG_CACHE_HOME`, else `~/.cache`.
fn cache_home() -> Result<PathBuf, String> {
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(d));
    }
    let home = std::env::var_os("HOME").ok_or("HOME is not set")?;
    Ok(PathBuf::from(home).join(".cache"))
}

/// The Debian archive this machine's apt uses (deb822 `.sources` files first, then the
/// one-line `sources.list`).
fn archive_uri() -> Result<String, String> {
    let mut candidates = Vec::new();
    if let Ok(dir) = fs::read_dir("/etc/apt/sources.list.d") {
        let mut files: Vec<PathBuf> = dir
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "sources"))
            .collect();
        files.sort();
        for f in files {
            let text = fs::read_to_string(&f).unwrap_or_default();
            for line in text.lines() {
                if let Some(rest) = line.trim().strip_prefix("URIs:") {
                    candidates.extend(rest.split_whitespace().map(str::to_string));
                }
            }
        }
    }
    if let Ok(text) = fs::read_to_string("/etc/apt/sources.list") {
        for line in text.lines() {
            let mut words = line.split_whitespace();
            if words.next() != Some("deb") {
                continue;
            }
            // `deb [options] URI suite ...`: the URI is the first word that is not an option.
            let mut in_opts = false;
            for w in words {
                if w.starts_with('[') {
                    in_opts = !w.ends_with(']');
                    continue;
                }
                if in_opts {
                    in_opts = !w.ends_with(']');
                    continue;
                }
                candidates.push(w.to_string());
                break;
            }
        }
    }
    candidates
        .into_iter()
        .find(|u| u.trim_end_matches('/').ends_with("/debian"))
        .ok_or_else(|| "debian: no Debian archive found in this machine's apt sources".into())
}

/// Downloads `package` (from the unstable suite's `component`) into `dir` and returns the
/// `.deb`'s path.
fn download(package: &str, component: &str, dir: &Path) -> Result<PathBuf, String> {
    let uri = archive_uri()?;
    let lists = dir.join("lists");
    fs::create_dir_all(lists.join("partial")).map_err(|e| format!("debian: {e}"))?;
    let list = dir.join("sid.list");
    fs::write(
        &list,
        format!(
            "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] {uri} sid {component}\n"
        ),
    )
    .map_err(|e| format!("debian: {e}"))?;
    let opts = [
        format!("-o=Dir::Etc::sourcelist={}", list.display()),
        "-o=Dir::Etc::sourceparts=-".to_string(),
        format!("-o=Dir::State::Lists={}", lists.display()),
    ];
    eprintln!("debian: fetching the package index of sid/{component}");
    run(Command::new("apt-get").args(&opts).args(["-qq", "update"]))?;
    eprintln!("debian: downloading {package}");
    run(Command::new("apt-get")
        .args(&opts)
        .args(["-qq", "download", package])
        .current_dir(dir))?;
    let deb = fs::read_dir(dir)
        .map_err(|e| format!("debian: {e}"))?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{package}_")) && n.ends_with(".deb"))
        })
        .ok_or_else(|| format!("debian: apt-get download left no {package} package"))?;
    Ok(deb)
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    let status = cmd
        .status()
        .map_err(|e| format!("debian: cannot run {shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("debian: {shown} failed ({status})"))
    }
}

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(parent: &Path, tag: &str) -> Result<Self, String> {
        let dir = parent.join(format!(".{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).map_err(|e| format!("debian: {}: {e}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The unpacked Linux source tree of series `ver` (`linux-source-<ver>`), fetched once.
pub(crate) fn linux_source(ver: &str) -> Result<PathBuf, String> {
    let cache = std::env::var_os("LINUX_SRC_CACHE")
        .map(PathBuf::from)
        .map_or_else(|| cache_home().map(|c| c.join("linux-src")), Ok)?;
    let tree = cache.join(format!("linux-source-{ver}"));
    if tree.join("Makefile").is_file() && tree.join(".unpacked").is_file() {
        return Ok(tree);
    }
    fs::create_dir_all(&cache).map_err(|e| format!("debian: {}: {e}", cache.display()))?;
    let scratch = Scratch::new(&cache, "fetch")?;
    let deb = download(&format!("linux-source-{ver}"), "main", &scratch.0)?;
    let x = scratch.0.join("x");
    run(Command::new("dpkg").arg("-x").arg(&deb).arg(&x))?;
    eprintln!(
        "debian: unpacking linux-source-{ver} into {}",
        cache.display()
    );
    let _ = fs::remove_dir_all(&tree);
    let tarball = x.join(format!("usr/src/linux-source-{ver}.tar.xz"));
    run(Command::new("tar")
        .arg("-xf")
        .arg(&tarball)
        .arg("-C")
        .arg(&cache))?;
    fs::write(tree.join(".unpacked"), b"").map_err(|e| format!("debian: {e}"))?;
    Ok(tree)
}

/// A firmware directory holding Debian's Mali CSF images (`arm/mali/...`, links resolved),
/// fetched once. The returned directory is what the driver's firmware lookup takes
/// (`TYR_FIRMWARE_DIR` on the host, `/lib/firmware` in the test kernel's initramfs).
pub(crate) fn firmware_dir() -> Result<PathBuf, String> {
    let dir = cache_home()?.join("gpukit").join("firmware");
    let stamp = dir.join(".fetched");
    if stamp.is_file() && dir.join(G610_FIRMWARE).is_file() {
        return Ok(dir);
    }
    let parent = dir.parent().ok_or("debian: firmware cache has no parent")?;
    fs::create_dir_all(parent).map_err(|e| format!("debian: {}: {e}", parent.display()))?;
    let scratch = Scratch::new(parent, "firmware-fetch")?;
    let deb = download("firmware-misc-nonfree", "non-free-firmware", &scratch.0)?;
    let x = scratch.0.join("x");
    run(Command::new("dpkg").arg("-x").arg(&deb).arg(&x))?;
    let mali = x.join("usr/lib/firmware/arm/mali");
    if !mali.is_dir() {
        return Err(format!(
            "debian: {} carries no arm/mali directory",
            deb.display()
        ));
    }
    // Copy the Mali images only, with their links resolved: a cache that does not depend on
    // the package's layout of links (arch10.8 is a link to arch10.10 in 20260916-1).
    let staged = scratch.0.join("firmware");
    let _ = fs::remove_dir_all(&staged);
    for arch in fs::read_dir(&mali)
        .map_err(|e| format!("debian: {e}"))?
        .flatten()
    {
        let src = arch.path().join("mali_csffw.bin");
        if !src.exists() {
            continue;
        }
        let to = staged
            .join("arm/mali")
            .join(arch.file_name())
            .join("mali_csffw.bin");
        fs::create_dir_all(to.parent().expect("a file in a directory"))
            .map_err(|e| format!("debian: {e}"))?;
        fs::copy(&src, &to).map_err(|e| format!("debian: {}: {e}", src.display()))?;
    }
    if !staged.join(G610_FIRMWARE).is_file() {
        return Err(format!(
            "debian: {} carries no {G610_FIRMWARE}",
            deb.display()
        ));
    }
    let name = deb.file_name().map(|n| n.to_string_lossy().into_owned());
    fs::write(staged.join(".fetched"), name.unwrap_or_default())
        .map_err(|e| format!("debian: {e}"))?;
    let _ = fs::remove_dir_all(&dir);
    fs::rename(&staged, &dir).map_err(|e| format!("debian: {}: {e}", dir.display()))?;
    Ok(dir)
}
