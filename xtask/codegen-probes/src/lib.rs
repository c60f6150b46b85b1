// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Probe functions for the zero-cost claims of the crate family.
//!
//! Every probe comes as a pair of `#[no_mangle]` functions with the same signature:
//! `<crate>_<what>_lib` uses the crate's API, `<crate>_<what>_hand` does the same thing with plain
//! integer code. `cargo xtask codegen` compiles this crate in release mode for x86_64 and
//! `aarch64-unknown-none`, and fails unless both functions of every pair compile to the same
//! instructions. The assembly is also kept under `snapshots/` so that a change in code generation
//! shows up in review.

#![no_std]

pub mod bounded;
pub mod register;
