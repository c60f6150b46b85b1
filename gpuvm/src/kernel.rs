// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Kernel adapters, compiled only inside a Linux tree (`cargo xtask kernel-build` passes
//! `--cfg gpukit_kernel --extern kernel`).
//!
//! The VA manager takes all of its memory from the caller ([`Storage`](crate::Storage)), so
//! inside the kernel a driver hands it slices of a `KVec` or `KBox` it allocated with the GFP
//! flags of its choice; nothing else is needed but the error conversion. The KUnit suite
//! (`kernel/kunit.rs`) is a crate of its own, built next to this one, because this crate
//! forbids `unsafe` code and the suite registration the kernel's `#[kunit_tests]` generates
//! is `unsafe`.

use crate::Error;

impl From<Error> for ::kernel::error::Error {
    fn from(e: Error) -> Self {
        ::kernel::error::Error::from_errno(e.to_errno())
    }
}
