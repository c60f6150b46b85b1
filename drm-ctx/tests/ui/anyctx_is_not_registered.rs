// SPDX-License-Identifier: GPL-2.0 OR MIT

// An `AnyCtx` device does not coerce to a `Registered` one.
use drm_ctx::doc_driver::DocDriver;
use drm_ctx::drm;

fn main() {
    let parent = drm_ctx::device::Device::new("gpu").unwrap();
    let unreg = drm::UnregisteredDevice::<DocDriver>::new(&parent, 0).unwrap();
    let _registered: &drm::Device<DocDriver> = &unreg;
}
