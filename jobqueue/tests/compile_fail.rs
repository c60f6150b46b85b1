// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Misuse that must not compile: allocating or adding dependencies from the signalling path,
//! forging an allocation token, and touching a job after it was committed.

#[test]
#[cfg_attr(miri, ignore)]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
