// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Installs, once, the toolchain pieces the checks need.
//!
//! Every step first asks rustup what is there, so a second run does nothing and needs no network.

use std::process::Command;

use crate::workspace::Cmd;
use crate::{MIRI_TOOLCHAIN, MSRV_TOOLCHAIN, NO_STD_TARGET};

/// What rustup prints for a query, or an empty string if it cannot answer.
fn rustup_query(args: &[&str]) -> String {
    Command::new("rustup")
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

fn has_line_starting(list: &str, prefix: &str) -> bool {
    list.lines().any(|l| l.trim_start().starts_with(prefix))
}

/// Makes sure rustfmt, clippy, rust-src, the no_std target, the Miri nightly and the MSRV
/// toolchain are installed.
pub(crate) fn run() -> Result<(), String> {
    if Command::new("rustup").arg("--version").output().is_err() {
        return Err("rustup is not installed: the checks need it to add components".into());
    }

    let components = rustup_query(&["component", "list", "--installed"]);
    for c in ["rustfmt", "clippy", "rust-src"] {
        if !has_line_starting(&components, c) {
            Cmd::new("rustup").args(["component", "add", c]).status()?;
        }
    }

    let targets = rustup_query(&["target", "list", "--installed"]);
    if !has_line_starting(&targets, NO_STD_TARGET) {
        Cmd::new("rustup")
            .args(["target", "add", NO_STD_TARGET])
            .status()?;
    }

    let toolchains = rustup_query(&["toolchain", "list"]);
    let miri_ready = has_line_starting(&toolchains, MIRI_TOOLCHAIN)
        && has_line_starting(
            &rustup_query(&[
                "component",
                "list",
                "--installed",
                "--toolchain",
                MIRI_TOOLCHAIN,
            ]),
            "miri",
        );
    if !miri_ready {
        Cmd::new("rustup")
            .args([
                "toolchain",
                "install",
                MIRI_TOOLCHAIN,
                "--profile",
                "minimal",
                "--component",
                "miri,rust-src",
            ])
            .status()?;
    }

    if !has_line_starting(&toolchains, MSRV_TOOLCHAIN) {
        Cmd::new("rustup")
            .args([
                "toolchain",
                "install",
                MSRV_TOOLCHAIN,
                "--profile",
                "minimal",
            ])
            .status()?;
    }
    Ok(())
}
