// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Misuse that must not compile: forged or reused proof tokens, touching the VM while a batch
//! is open.

#[test]
#[cfg_attr(miri, ignore)]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
