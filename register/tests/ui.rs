// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Misuse of `register!` and of the I/O traits that must not build.

#[test]
#[cfg_attr(miri, ignore)]
fn ui() {
    let t = trybuild::TestCases::new();
    // The pass case makes trybuild run `cargo build` rather than `cargo check`, so that errors
    // found while instantiating generic code (constant setters, region sizes) are reported too.
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
