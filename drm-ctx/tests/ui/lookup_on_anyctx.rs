// SPDX-License-Identifier: GPL-2.0 OR MIT

// Handle lookup yields `Registered` objects only; there is none for `AnyCtx`.
use drm_ctx::doc_driver::{Bo, DocDriver};
use drm_ctx::drm::{self, gem, AnyCtx, OpenOptions};
use drm_ctx::host::Client;

fn main() {
    let parent = drm_ctx::device::Device::new("gpu").unwrap();
    let unreg = drm::UnregisteredDevice::<DocDriver>::new(&parent, 0).unwrap();
    let reg = drm::Registration::new(unreg, 0).unwrap();
    let client = Client::open(reg.device(), OpenOptions::render()).unwrap();
    let _ = gem::Object::<Bo, AnyCtx>::lookup_handle(client.file(), 1);
}
