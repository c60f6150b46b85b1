// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The DRM side: devices with a registration typestate, drivers, files, GEM objects, ioctls.
//!
//! The paths mirror the kernel's `kernel::drm`, so driver code can be written once:
//! `drm::Device<MyDriver, Ctx>`, `drm::UnregisteredDevice`, `drm::Registration`,
//! `drm::gem::Object`, `drm::File`, `drm::ioctl`, and [`syncobj`] for a submit ioctl's
//! syncobjs.

pub mod device;
pub mod driver;
pub mod file;
pub mod gem;
pub mod ioctl;
pub mod syncobj;

pub use self::device::{
    AnyCtx, Device, DeviceContext, DeviceCtx, DeviceInit, Registered, Uninit, UnregisteredDevice,
};
pub use self::driver::{Driver, DriverInfo, MmapRequest, Registration};
pub use self::file::SyncobjFence;
pub use self::file::{DriverFile, File, Node, OpenOptions};
