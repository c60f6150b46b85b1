// SPDX-License-Identifier: GPL-2.0 OR MIT

// An `UnregisteredDevice` stays on the thread that created it.
use drm_ctx::doc_driver::DocDriver;
use drm_ctx::drm;

fn main() {
    let parent = drm_ctx::device::Device::new("gpu").unwrap();
    let unreg = drm::UnregisteredDevice::<DocDriver>::new(&parent, 0).unwrap();
    std::thread::spawn(move || {
        let _ = drm::Registration::new(unreg, 0);
    });
}
