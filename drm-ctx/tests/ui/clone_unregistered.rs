// SPDX-License-Identifier: GPL-2.0 OR MIT

// No second owner of an unregistered device can exist.
use drm_ctx::doc_driver::DocDriver;
use drm_ctx::drm;

fn main() {
    let parent = drm_ctx::device::Device::new("gpu").unwrap();
    let unreg = drm::UnregisteredDevice::<DocDriver>::new(&parent, 0).unwrap();
    let _copy = <drm::UnregisteredDevice<DocDriver> as Clone>::clone(&unreg);
}
