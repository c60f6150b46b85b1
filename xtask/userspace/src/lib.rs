// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Helpers for the userspace test programs of the test kernel.
//!
//! Each binary of this crate (`src/bin/<program>.rs`) is the `/init` of an initramfs booted
//! under QEMU by `cargo xtask kernel-test`. It opens a DRM render node, checks a driver through
//! raw ioctls and prints one line per check on the console, in a format the tool parses:
//!
//! ```text
//! userspace: <program>: ok <check>
//! userspace: <program>: FAIL <check>: <expected vs got>
//! userspace: <program>: summary: <P> passed, <F> failed
//! ```
//!
//! - [`ioc`]: the Linux `_IOC` ioctl number encoding;
//! - [`sys`]: raw ioctls returning the errno, `mmap`, `CLOCK_MONOTONIC`, and what PID 1 needs
//!   (mounting devtmpfs and sysfs, ending the VM);
//! - [`drm`]: the DRM core ioctls every driver has (version, GEM close, syncobjs);
//! - [`sync_file`]: a fence's status through its sync file;
//! - [`panthor`]: the panthor uAPI calls (Tyr's structs) and Tyr's leak counters;
//! - [`report`]: the check and summary lines;
//! - [`init`]: the frame of a program: PID 1 set-up, panics caught and reported, the VM
//!   ended.

pub mod drm;
pub mod init;
pub mod ioc;
pub mod panthor;
pub mod report;
pub mod sync_file;
pub mod sys;
