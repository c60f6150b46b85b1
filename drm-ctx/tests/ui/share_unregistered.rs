// SPDX-License-Identifier: GPL-2.0 OR MIT

// An `UnregisteredDevice` cannot be shared with another thread either.
use drm_ctx::doc_driver::DocDriver;
use drm_ctx::drm;

fn main() {
    let parent = drm_ctx::device::Device::new("gpu").unwrap();
    let unreg = drm::UnregisteredDevice::<DocDriver>::new(&parent, 0).unwrap();
    let shared = &unreg;
    std::thread::scope(|s| {
        s.spawn(move || shared.is_registered());
    });
}
