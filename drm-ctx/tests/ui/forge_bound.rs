// SPDX-License-Identifier: GPL-2.0 OR MIT

// A plain parent device is not `Bound`: devres needs the binding.
fn main() {
    let parent = drm_ctx::device::Device::new("gpu").unwrap();
    let _ = parent.register_devres(1u32);
    let _bound: &drm_ctx::device::Device<drm_ctx::device::Bound> = &parent;
}
