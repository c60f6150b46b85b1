// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Misuse that must not compile.

#[test]
#[cfg_attr(miri, ignore)]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
