// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `cargo xtask bench [--quick] [--write-docs]`: every crate's peer comparison in one run.
//!
//! Each library crate with a peer benchmark (criterion, `benches/` of the crate) is run once;
//! criterion's estimates (`estimates.json`, median per iteration) are then read back and every
//! comparison is printed as one line on standard output:
//!
//! ```text
//! bench: <crate>/<workload>: ours <value> <unit>, <peer> <value> <unit>, ratio <peer/ours>x
//! ```
//!
//! The ratio is the peer's time over ours, so above 1 means we are faster (for rates, such
//! as jobs per second, it is our rate over the peer's: the same number). Floors, measured in
//! the same run where a crate's benchmark has one (what no implementation can avoid on this
//! machine for that workload), follow as `floor: <crate>/<workload>: <value> <unit> (<what>)`.
//! Criterion's own output goes to standard error.
//!
//! `--quick` shortens warm-up and measurement (0.3 s and 1 s per function, 10 samples) so the
//! whole run fits in a few minutes on a 2-core machine; the figures are then rougher. The
//! command fails only when a benchmark crashes or leaves no estimate, never because of a
//! figure. `--write-docs` also writes the lines, as a table per crate, between the
//! `<!-- bench:begin -->` and `<!-- bench:end -->` markers of each crate's README.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::workspace::Workspace;

/// One benchmark binary of a crate.
struct Suite {
    /// Crate directory (also the `<crate>` of the printed lines).
    krate: &'static str,
    package: &'static str,
    bench: &'static str,
    /// Features the bench needs (empty: none).
    features: &'static str,
}

const SUITES: &[Suite] = &[
    Suite {
        krate: "register",
        package: "gpukit-register",
        bench: "fields",
        features: "bench",
    },
    Suite {
        krate: "gpuvm",
        package: "gpukit-gpuvm",
        bench: "sm",
        features: "",
    },
    Suite {
        krate: "io-pgtable",
        package: "gpukit-io-pgtable",
        bench: "vs_aarch64_paging",
        features: "",
    },
    Suite {
        krate: "jobqueue",
        package: "gpukit-jobqueue",
        bench: "throughput",
        features: "",
    },
];

/// How a per-iteration time (ns) is shown.
#[derive(Clone, Copy)]
enum Unit {
    /// Nanoseconds per iteration divided by `per` (e.g. per page), shown as `label`.
    NsPer { per: f64, label: &'static str },
    /// Millions of `per` elements per second of iteration time, shown as `label`.
    MegaRate { per: f64, label: &'static str },
}

impl Unit {
    fn show(self, ns: f64) -> (f64, &'static str) {
        match self {
            Unit::NsPer { per, label } => (ns / per, label),
            Unit::MegaRate { per, label } => (per * 1e3 / ns, label),
        }
    }
}

const NS: Unit = Unit::NsPer {
    per: 1.0,
    label: "ns",
};
const NS_OP: Unit = Unit::NsPer {
    per: 1.0,
    label: "ns/op",
};
/// 1 GiB in 4K pages.
const NS_PAGE: Unit = Unit::NsPer {
    per: 262_144.0,
    label: "ns/page",
};
/// 1 GiB in 2M blocks.
const NS_BLOCK: Unit = Unit::NsPer {
    per: 512.0,
    label: "ns/block",
};
/// Batches of 128 jobs.
const JOBS: Unit = Unit::MegaRate {
    per: 128.0,
    label: "M jobs/s",
};

/// One line of output: ours against one peer, or a floor alone.
struct Line {
    krate: &'static str,
    workload: String,
    /// Criterion id (directory under the criterion home) of our side.
    ours: String,
    /// Peer's display name and criterion id; `None` for a floor.
    peer: Option<(&'static str, String)>,
    unit: Unit,
    /// For floors: what the floor is.
    note: &'static str,
}

fn cmp(
    krate: &'static str,
    workload: impl Into<String>,
    ours: impl Into<String>,
    peer: &'static str,
    peer_id: impl Into<String>,
    unit: Unit,
) -> Line {
    Line {
        krate,
        workload: workload.into(),
        ours: ours.into(),
        peer: Some((peer, peer_id.into())),
        unit,
        note: "",
    }
}

fn floor(
    krate: &'static str,
    workload: impl Into<String>,
    id: impl Into<String>,
    unit: Unit,
    note: &'static str,
) -> Line {
    Line {
        krate,
        workload: workload.into(),
        ours: id.into(),
        peer: None,
        unit,
        note,
    }
}

/// Every comparison, in the order printed.
fn lines() -> Vec<Line> {
    let mut v = Vec::new();
    for op in ["get", "set", "debug"] {
        for peer in ["bitbybit", "tock-registers"] {
            v.push(cmp(
                "register",
                op,
                format!("{op}/register"),
                peer,
                format!("{op}/{peer}"),
                NS,
            ));
        }
    }
    for (n, tag) in [(1_000, "1e3"), (100_000, "1e5"), (1_000_000, "1e6")] {
        for op in ["map", "unmap_map", "map_seq"] {
            v.push(cmp(
                "gpuvm",
                format!("{op}_{tag}"),
                format!("sm/gpuvm_{op}/{n}"),
                "rangemap",
                format!("sm/rangemap_{op}/{n}"),
                NS_OP,
            ));
        }
        v.push(floor(
            "gpuvm",
            format!("chain_floor_{tag}"),
            format!("sm/chain_floor/{n}"),
            NS_OP,
            "three dependent cache-line accesses a random request cannot avoid",
        ));
    }
    let pg = "io-pgtable";
    let peer = "aarch64-paging";
    for (size, unit) in [("4k", NS_PAGE), ("2m", NS_BLOCK)] {
        let g = format!("map_1g_{size}");
        v.push(cmp(
            pg,
            &g,
            format!("{g}/{pg}"),
            peer,
            format!("{g}/{peer}"),
            unit,
        ));
        // `unmap_pages` clears every leaf (Linux's semantics), while the peer drops whole
        // level-3 tables for a 4K range: only the range helper does the peer's work.
        let g = format!("unmap_1g_{size}");
        v.push(cmp(
            pg,
            format!("{g}_leaves"),
            format!("{g}/{pg}"),
            peer,
            format!("{g}/{peer}"),
            unit,
        ));
        v.push(cmp(
            pg,
            format!("{g}_range"),
            format!("{g}/{pg}-range"),
            peer,
            format!("{g}/{peer}"),
            unit,
        ));
    }
    v.push(cmp(
        pg,
        "map_unmap_one_4k",
        format!("map_unmap_one_4k/{pg}"),
        peer,
        format!("map_unmap_one_4k/{peer}"),
        NS,
    ));
    v.push(floor(
        pg,
        "map_1g_4k_floor",
        "floor_1g_4k/zero_and_write",
        NS_PAGE,
        "zero 512 recycled tables and write every descriptor once, nothing else",
    ));
    v.push(floor(
        pg,
        "unmap_1g_4k_floor",
        "floor_1g_4k/clear",
        NS_PAGE,
        "clear every descriptor of 512 tables once, nothing else",
    ));
    let jq = "jobqueue";
    let fut = "futures-localpool";
    for deps in [0, 1, 4] {
        v.push(cmp(
            jq,
            format!("jobs_{deps}_deps"),
            format!("jobs/{jq}/{deps}"),
            fut,
            format!("jobs/{fut}/{deps}"),
            JOBS,
        ));
    }
    for deps in [0, 1, 4] {
        v.push(floor(
            jq,
            format!("jobs_{deps}_deps_floor"),
            format!("jobs_floor/{deps}"),
            JOBS,
            "the jobs' allocations and fences alone: prepare, signal, free; no queue",
        ));
    }
    v.push(cmp(
        jq,
        "signal_to_run",
        format!("signal_to_run/{jq}"),
        fut,
        format!("signal_to_run/{fut}"),
        NS,
    ));
    v
}

struct Options {
    quick: bool,
    write_docs: bool,
}

/// `cargo xtask bench [--quick] [--write-docs]`.
pub(crate) fn command(ws: &Workspace, args: &[String]) -> Result<(), String> {
    let mut o = Options {
        quick: false,
        write_docs: false,
    };
    for a in args {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--write-docs" => o.write_docs = true,
            other => return Err(format!("bench: unknown option `{other}`")),
        }
    }
    run(ws, &o)
}

/// Where criterion writes its estimates for this command.
fn criterion_home(ws: &Workspace) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| ws.root.join("target"));
    let target = if target.is_absolute() {
        target
    } else {
        ws.root.join(target)
    };
    target.join("xtask-bench")
}

fn run(ws: &Workspace, o: &Options) -> Result<(), String> {
    let started = Instant::now();
    let home = criterion_home(ws);
    // Stale estimates of an earlier run must not stand in for a benchmark that did not run.
    if home.exists() {
        std::fs::remove_dir_all(&home)
            .map_err(|e| format!("cannot clear {}: {e}", home.display()))?;
    }
    for s in SUITES {
        let mut cmd = Command::new("cargo");
        cmd.current_dir(&ws.root)
            .args(["bench", "-p", s.package, "--bench", s.bench]);
        if !s.features.is_empty() {
            cmd.args(["--features", s.features]);
        }
        cmd.args(["--", "--noplot"]);
        if o.quick {
            cmd.args([
                "--warm-up-time",
                "0.3",
                "--measurement-time",
                "1",
                "--sample-size",
                "10",
            ]);
        }
        cmd.env("CRITERION_HOME", &home);
        // Criterion's report goes to standard error: standard output carries only the lines.
        cmd.stdout(Stdio::from(std::io::stderr()));
        eprintln!("\n==> bench {}/{}", s.krate, s.bench);
        let t = Instant::now();
        let status = cmd
            .status()
            .map_err(|e| format!("cannot start cargo bench: {e}"))?;
        if !status.success() {
            return Err(format!(
                "`cargo bench -p {} --bench {}` failed ({status})",
                s.package, s.bench
            ));
        }
        eprintln!(
            "    {}/{} took {:.0} s",
            s.krate,
            s.bench,
            t.elapsed().as_secs_f64()
        );
    }

    let mut out = Vec::new();
    for l in lines() {
        let ours = median_ns(&home, &l.ours)?;
        let text = match &l.peer {
            Some((name, id)) => {
                let theirs = median_ns(&home, id)?;
                let (ov, unit) = l.unit.show(ours);
                let (pv, _) = l.unit.show(theirs);
                format!(
                    "bench: {}/{}: ours {} {unit}, {name} {} {unit}, ratio {:.2}x",
                    l.krate,
                    l.workload,
                    fmt_value(ov),
                    fmt_value(pv),
                    theirs / ours
                )
            }
            None => {
                let (v, unit) = l.unit.show(ours);
                format!(
                    "floor: {}/{}: {} {unit} ({})",
                    l.krate,
                    l.workload,
                    fmt_value(v),
                    l.note
                )
            }
        };
        println!("{text}");
        out.push((l, text));
    }
    eprintln!(
        "bench: {} lines in {:.0} s{}",
        out.len(),
        started.elapsed().as_secs_f64(),
        if o.quick { " (--quick)" } else { "" }
    );
    if o.write_docs {
        write_docs(ws, &out, o.quick)?;
    }
    Ok(())
}

/// Three significant digits, without an exponent.
fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The median time per iteration, in ns, of criterion benchmark `id` (`group/function[/value]`).
fn median_ns(home: &Path, id: &str) -> Result<f64, String> {
    let path = home.join(id).join("new").join("estimates.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("no estimate for `{id}` ({}: {e})", path.display()))?;
    parse_median(&text).ok_or_else(|| format!("cannot read the median of {}", path.display()))
}

/// The median's point estimate from criterion's `estimates.json`.
fn parse_median(json: &str) -> Option<f64> {
    let at = json.find("\"median\"")?;
    let rest = &json[at..];
    let p = rest.find("\"point_estimate\"")?;
    let rest = rest[p + "\"point_estimate\"".len()..].trim_start();
    let rest = rest.strip_prefix(':')?.trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E')))
        .unwrap_or(rest.len());
    rest[..end].parse().ok().filter(|v: &f64| *v > 0.0)
}

const BEGIN: &str = "<!-- bench:begin -->";
const END: &str = "<!-- bench:end -->";

/// Replaces the marked block of each crate's README with a table of its lines.
fn write_docs(ws: &Workspace, out: &[(Line, String)], quick: bool) -> Result<(), String> {
    for s in SUITES {
        let path = ws.root.join(s.krate).join("README.md");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let (Some(b), Some(e)) = (text.find(BEGIN), text.find(END)) else {
            eprintln!("bench: {} has no bench markers, left alone", path.display());
            continue;
        };
        if e < b {
            return Err(format!("{}: bench markers out of order", path.display()));
        }
        let mut table = String::new();
        let _ = writeln!(
            table,
            "\n`cargo xtask bench{}` (median per iteration, same run; ratio = peer time / \
             our time, above 1 we are faster):\n",
            if quick { " --quick" } else { "" }
        );
        table.push_str("| workload | ours | peer | ratio |\n| --- | ---: | ---: | ---: |\n");
        let mut floors = String::new();
        for (l, text) in out.iter().filter(|(l, _)| l.krate == s.krate) {
            let Some((_, rest)) = text.split_once(": ") else {
                continue;
            };
            let Some((_, rest)) = rest.split_once(": ") else {
                continue;
            };
            match &l.peer {
                Some(_) => {
                    // "ours A u, peer B u, ratio Rx"
                    let parts: Vec<&str> = rest.split(", ").collect();
                    if let [o, p, r] = parts.as_slice() {
                        let _ = writeln!(
                            table,
                            "| {} | {} | {} | {} |",
                            l.workload,
                            o.trim_start_matches("ours "),
                            p,
                            r.trim_start_matches("ratio ")
                        );
                    }
                }
                None => {
                    let _ = writeln!(floors, "- floor `{}`: {rest}", l.workload);
                }
            }
        }
        if !floors.is_empty() {
            table.push('\n');
            table.push_str(&floors);
        }
        let new = format!("{}{BEGIN}\n{table}\n{}", &text[..b], &text[e..]);
        if new != text {
            std::fs::write(&path, new)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            eprintln!("bench: wrote the figures into {}", path.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_is_read_from_criterion_estimates() {
        let json = r#"{"mean":{"confidence_interval":{"confidence_level":0.95,"lower_bound":1.0,"upper_bound":3.0},"point_estimate":2.0,"standard_error":0.1},"median":{"confidence_interval":{"confidence_level":0.95,"lower_bound":1.0,"upper_bound":2.0},"point_estimate":1.5e3,"standard_error":0.1}}"#;
        assert_eq!(parse_median(json), Some(1500.0));
        assert_eq!(parse_median("{}"), None);
    }

    #[test]
    fn units_and_ratio_direction() {
        // 128 jobs in 16 µs: 8 M jobs/s.
        let (v, u) = JOBS.show(16_000.0);
        assert!((v - 8.0).abs() < 1e-9 && u == "M jobs/s");
        let (v, _) = NS_PAGE.show(262_144.0 * 1.5);
        assert!((v - 1.5).abs() < 1e-9);
        assert_eq!(fmt_value(1234.4), "1234");
        assert_eq!(fmt_value(0.1234), "0.123");
    }

    #[test]
    fn every_line_names_a_suite() {
        for l in lines() {
            assert!(SUITES.iter().any(|s| s.krate == l.krate), "{}", l.workload);
        }
    }
}
