// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Compile-fail tests: misuse that must not build, each with the expected compiler message.
//!
//! The checks on widths and values are `const` assertions evaluated when the generic code is
//! instantiated, which `cargo check` does not do. trybuild runs `cargo build` instead of
//! `cargo check` as soon as one `pass` case is present, which is why `pass_*.rs` is listed here.

#[test]
#[cfg_attr(miri, ignore)]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass_*.rs");
    t.compile_fail("tests/ui/fail_*.rs");
}
