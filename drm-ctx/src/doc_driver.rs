// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A minimal driver for the documentation examples.

use crate::{
    drm::{self, gem},
    Result,
};

/// The example driver; its device data is a `u32`.
pub struct DocDriver;

/// The example driver's GEM object data.
pub struct Bo;

/// The example driver's file data.
pub struct DocFile;

impl drm::Driver for DocDriver {
    type Data = u32;
    type Object = Bo;
    type File = DocFile;
    const INFO: drm::DriverInfo = drm::DriverInfo {
        major: 1,
        minor: 2,
        patchlevel: 3,
        name: c"doc",
        desc: c"documentation driver",
    };
    const IOCTLS: &'static [drm::ioctl::Descriptor<Self>] = &[];
    const FEAT_RENDER: bool = true;
}

impl gem::DriverObject for Bo {
    type Driver = DocDriver;
    type Args = ();

    fn new(_size: usize, _args: ()) -> Result<Self> {
        Ok(Bo)
    }
}

impl drm::DriverFile for DocFile {
    type Driver = DocDriver;

    fn open(_device: &drm::Device<DocDriver>) -> Result<Self> {
        Ok(DocFile)
    }
}
