// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Declares the `loom` cfg used by the concurrency model tests.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(loom)");
}
