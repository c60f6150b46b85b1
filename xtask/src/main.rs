// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Workspace automation.

fn main() {
    eprintln!("xtask: not written yet");
    std::process::exit(1);
}
