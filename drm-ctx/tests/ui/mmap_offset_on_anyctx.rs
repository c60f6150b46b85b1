// SPDX-License-Identifier: GPL-2.0 OR MIT

// mmap offsets are for userspace: not on objects of an `AnyCtx` device.
use drm_ctx::doc_driver::{Bo, DocDriver};
use drm_ctx::drm::{self, gem, AnyCtx};

fn main() {
    let parent = drm_ctx::device::Device::new("gpu").unwrap();
    let unreg = drm::UnregisteredDevice::<DocDriver>::new(&parent, 0).unwrap();
    let any: &drm::Device<DocDriver, AnyCtx> = &unreg;
    let bo = gem::Object::<Bo, AnyCtx>::new(any, 4096, ()).unwrap();
    let _ = bo.create_mmap_offset();
}
