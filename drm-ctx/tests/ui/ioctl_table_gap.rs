// SPDX-License-Identifier: GPL-2.0 OR MIT

// A table with a gap in its numbering is a build error. (`cargo check`, which trybuild runs, only
// evaluates constants used outside generic code, hence the constant below; `cargo build` also
// fails in `Registration::new` and in the dispatcher.)
use drm_ctx::drm::{self, ioctl};
use drm_ctx::Result;

pub struct Drv;
pub struct F;
pub struct Bo;

fn handler(_: &drm::Device<Drv>, _: &mut u32, _: &drm::File<F>) -> Result<u32> {
    Ok(0)
}

impl drm::Driver for Drv {
    type Data = ();
    type Object = Bo;
    type File = F;
    const INFO: drm::DriverInfo =
        drm::DriverInfo { major: 1, minor: 0, patchlevel: 0, name: c"x", desc: c"x" };
    drm_ctx::declare_drm_ioctls! {
        (ioctl::IOW::<u32>(0x40), u32, 0, handler),
        (ioctl::IOW::<u32>(0x42), u32, 0, handler),
    }
}
impl drm::DriverFile for F {
    type Driver = Drv;
    fn open(_: &drm::Device<Drv>) -> Result<Self> {
        Ok(F)
    }
}
impl drm::gem::DriverObject for Bo {
    type Driver = Drv;
    type Args = ();
    fn new(_: usize, _: ()) -> Result<Self> {
        Ok(Bo)
    }
}

const _: usize = <Drv as drm::Driver>::IOCTLS.len();

fn main() {
    let parent = drm_ctx::device::Device::new("gpu").unwrap();
    let unreg = drm::UnregisteredDevice::<Drv>::new(&parent, ()).unwrap();
    let _ = drm::Registration::new(unreg, 0);
}
