// SPDX-License-Identifier: GPL-2.0 OR MIT

//! DRM device-context typestate.

#![no_std]

#[cfg(all(feature = "kernel", not(gpukit_kernel)))]
compile_error!(
    "the `kernel` feature only builds inside a Linux tree: use `cargo xtask kernel-build`"
);
