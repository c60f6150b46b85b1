// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Misuse of the typestate must not compile.

#![cfg(feature = "std")]

#[test]
#[cfg_attr(miri, ignore)]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
