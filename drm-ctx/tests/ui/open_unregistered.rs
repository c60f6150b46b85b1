// SPDX-License-Identifier: GPL-2.0 OR MIT

// Userspace cannot open a device that was never registered.
use drm_ctx::doc_driver::DocDriver;
use drm_ctx::drm::{self, OpenOptions};
use drm_ctx::host::UserSpace;

fn main() {
    let parent = drm_ctx::device::Device::new("gpu").unwrap();
    let unreg = drm::UnregisteredDevice::<DocDriver>::new(&parent, 0).unwrap();
    let _ = unreg.open(OpenOptions::render(), UserSpace::new());
}
