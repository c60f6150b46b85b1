// SPDX-License-Identifier: GPL-2.0 OR MIT

//! DRM device-context typestate, GEM objects per context, and a host DRM core.
//!
//! A DRM driver allocates its device, builds its private data (Tyr loads its firmware into GEM
//! objects for that), and only then registers the device with userspace. This crate makes the
//! steps types: the owned [`drm::UnregisteredDevice`] can create GEM objects but not hand them
//! to userspace; [`drm::Registration::new`] consumes it and yields a [`drm::Device`] in the
//! [`drm::Registered`] context, where GEM handles, mmap offsets and files exist.
//!
//! A whole driver and its bring-up, against the host core (feature `std`):
//!
//! ```
//! use drm_ctx::{device, drm::{self, gem, AnyCtx, OpenOptions}, host::Client, Result};
//!
//! /// The driver; its device data is the size of its firmware object.
//! struct MyDriver;
//! /// Its GEM objects' data, and its files' data.
//! struct MyBo;
//! struct MyFile;
//!
//! impl drm::Driver for MyDriver {
//!     type Data = usize;
//!     type Object = MyBo;
//!     type File = MyFile;
//!     const INFO: drm::DriverInfo = drm::DriverInfo {
//!         major: 1, minor: 0, patchlevel: 0, name: c"mine", desc: c"an example driver",
//!     };
//!     const IOCTLS: &'static [drm::ioctl::Descriptor<Self>] = &[];
//!     const FEAT_RENDER: bool = true;
//! }
//! impl gem::DriverObject for MyBo {
//!     type Driver = MyDriver;
//!     type Args = ();
//!     fn new(_size: usize, _args: ()) -> Result<Self> { Ok(MyBo) }
//! }
//! impl drm::DriverFile for MyFile {
//!     type Driver = MyDriver;
//!     fn open(_dev: &drm::Device<MyDriver>) -> Result<Self> { Ok(MyFile) }
//! }
//!
//! fn main() -> Result {
//!     let parent = device::Device::new("mali")?;
//!     let unreg = drm::UnregisteredDevice::<MyDriver>::new_with(&parent, |init| {
//!         let fw = gem::Object::<MyBo, AnyCtx>::new_for_init(init, 4096, ())?; // before registration
//!         Ok(fw.size())
//!     })?;
//!     let reg = drm::Registration::new(unreg, 0)?;
//!     let client = Client::open(reg.device(), OpenOptions::render())?;
//!     let bo = gem::Object::<MyBo>::new(reg.device(), 4096, ())?;
//!     let handle = bo.create_handle(client.file())?; // only on `Registered`
//!     assert_eq!(handle, 1);
//!     Ok(())
//! }
//! ```
//!
//! Modules: [`device`] (parent devices: `Normal`, `Core`, `Bound`), [`drm`] (the typestate,
//! drivers, files with their GEM handle tables, GEM, ioctls, binary and timeline syncobjs in
//! [`drm::syncobj`]), [`types`] (`ARef`), [`mem`] (the allocator seam), [`uaccess`] (the
//! user-memory seam) and, with the `std` feature, [`host`]: a DRM core for tests and simulators
//! (ioctl dispatch like `drm_ioctl`, the syncobj ioctls and the waits that sleep in
//! [`host::syncobj`], unplug). Without `std` the crate is `no_std` and uses no `alloc`: all of
//! it but [`host`] builds, its memory coming from [`mem::Allocator`].

//! # Backends
//!
//! The typestate, the driver traits and the ioctl tables do not depend on who runs the DRM core.
//! Two backends implement the types behind them ([`drm::Device`], [`drm::UnregisteredDevice`],
//! [`drm::Registration`], [`drm::File`], [`drm::gem::Object`], [`device::Device`]):
//!
//! - the crate's own core (here, `core_impl` modules, with or without `std`): reference counts,
//!   registration state, mmap offsets, files with their GEM handle tables, and syncobjs with
//!   their fences and timeline points, in memory from [`mem::Allocator`], with [`host`] (feature
//!   `std`) as the DRM core a test talks to;
//! - the kernel backend (feature `kernel`, built only inside a Linux tree by
//!   `cargo xtask kernel-build`): the same items on Linux 7.2's `kernel::drm` —
//!   `struct drm_device`, `struct drm_file`, shmem GEM objects, `drm_ioctl` dispatching the
//!   driver's table, the kernel's own syncobjs (its module documentation maps every item).
//!
//! Where the two behave differently, the kernel is right and the crate's core follows it.
//!
//! # Features
//!
//! The default features are empty. `std` adds the host DRM core, `host`, and to the crate's own
//! core what needs the host's heap and locks: the allocator `mem::Global` with the constructors
//! that use it (such as `device::Device::new` and `drm::UnregisteredDevice::new_with`), and the
//! binding of drivers to parent devices (`device::Device::probe`, `register_devres`). `kernel`
//! selects the kernel backend described above.
#![cfg_attr(
    not(feature = "std"),
    doc = "",
    doc = "This documentation was built without `std`, so the items `std` adds are missing from it;",
    doc = "links to them lead here.",
    doc = "",
    doc = "[`host`]: crate#features",
    doc = "[`host::syncobj`]: crate#features"
)]
#![no_std]

#[cfg(all(feature = "kernel", not(gpukit_kernel)))]
compile_error!(
    "the `kernel` feature only builds inside a Linux tree: use `cargo xtask kernel-build`"
);

#[cfg(all(feature = "kernel", gpukit_kernel))]
pub mod kernel;

#[cfg(feature = "std")]
extern crate std;

pub mod device;
pub mod drm;
mod error;
#[cfg(not(gpukit_kernel))]
mod idr;
pub mod mem;
#[cfg(not(gpukit_kernel))]
mod sync;
pub mod types;
pub mod uaccess;
#[cfg(not(gpukit_kernel))]
mod vec;

#[cfg(feature = "std")]
pub mod host;

#[cfg(feature = "std")]
#[doc(hidden)]
pub mod doc_driver;

pub use error::{Error, Result};

/// The README's examples, run as doctests.
#[cfg(all(doctest, feature = "std"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
