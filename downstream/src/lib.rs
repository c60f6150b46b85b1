// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A user's driver crate in miniature: every gpukit library crate with its default features,
//! built for `aarch64-unknown-none` by `cargo xtask ci` (step "downstream").

#![no_std]

use bounded::Bounded;
use io_pgtable::{Config, SZ_2M, SZ_4K};
use jobqueue::QueueConfig;
use register::register;

register! {
    /// A PL011-style data register.
    pub UARTDR(u32) @ 0x000 {
        /// Receive/transmit data.
        7:0 data;
        /// Overrun error.
        11:11 oe => bool;
    }
}

/// A driver ioctl of this user's uAPI.
pub const MY_IOCTL: u32 = drm_ctx::drm::ioctl::IOWR::<[u64; 2]>(drm_ctx::drm::ioctl::COMMAND_BASE);

/// The data byte a register value carries.
pub fn data_of(raw: u32) -> Bounded<u32, 8> {
    UARTDR::from(raw).data()
}

/// The page-table configuration of this user's GPU.
pub fn page_table_config() -> Config {
    Config::new(SZ_4K | SZ_2M, 48, 40)
}

/// The job queue configuration of this user's ring.
pub const QUEUE: QueueConfig = QueueConfig::new(16);

/// The errno a VA-space error gives userspace.
pub fn vm_errno(e: gpuvm::Error) -> i32 {
    e.to_errno()
}
