// SPDX-License-Identifier: GPL-2.0 OR MIT

// A `Registered` object cannot be made with an unregistered device.
use drm_ctx::doc_driver::{Bo, DocDriver};
use drm_ctx::drm::{self, gem, Registered};

fn main() {
    let parent = drm_ctx::device::Device::new("gpu").unwrap();
    let unreg = drm::UnregisteredDevice::<DocDriver>::new(&parent, 0).unwrap();
    let _ = gem::Object::<Bo, Registered>::new(&unreg, 4096, ());
}
