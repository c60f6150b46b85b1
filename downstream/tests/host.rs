// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The same crate's host tests, with the crates' `std` features on (dev-dependencies).

use gpukit_downstream::*;
use register::io::{Io, MemRegion};

#[test]
fn registers_on_host_memory() {
    let io = MemRegion::<0x1000>::new();
    io.write_reg(UARTDR::zeroed().with_const_data::<0x41>());
    assert_eq!(io.read(UARTDR).data(), 0x41);
    assert_eq!(data_of(0x0842), 0x42);
}

#[test]
fn page_tables_and_jobs_on_the_host() {
    let cfg = page_table_config();
    assert_eq!(cfg.ias, 48);
    let fence = jobqueue::host::HostFence::new();
    assert!(jobqueue::Fence::status(&fence).is_none());
    assert_eq!(QUEUE.capacity(), 16);
    assert_eq!(drm_ctx::drm::ioctl::nr(MY_IOCTL), 0x40);
    assert_eq!(vm_errno(gpuvm::Error::InvalidConfig), -22);
}
