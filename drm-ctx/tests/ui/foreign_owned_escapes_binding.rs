// SPDX-License-Identifier: GPL-2.0 OR MIT

// The device returned by `new_foreign_owned` is borrowed for the binding only.
use drm_ctx::doc_driver::DocDriver;
use drm_ctx::drm;

fn main() {
    let parent = drm_ctx::device::Device::new("gpu").unwrap();
    let mut escaped: Option<&drm::Device<DocDriver>> = None;
    parent
        .probe(|dev| {
            let unreg = drm::UnregisteredDevice::<DocDriver>::new(dev, 0)?;
            escaped = Some(drm::Registration::new_foreign_owned(unreg, dev, 0)?);
            Ok(())
        })
        .unwrap();
    parent.unbind().unwrap();
    let _ = escaped.unwrap().is_registered();
}
