// SPDX-License-Identifier: GPL-2.0 OR MIT

// Registration consumes the device: it cannot be registered twice.
use drm_ctx::doc_driver::DocDriver;
use drm_ctx::drm;

fn main() {
    let parent = drm_ctx::device::Device::new("gpu").unwrap();
    let unreg = drm::UnregisteredDevice::<DocDriver>::new(&parent, 0).unwrap();
    let _first = drm::Registration::new(unreg, 0);
    let _second = drm::Registration::new(unreg, 0);
}
