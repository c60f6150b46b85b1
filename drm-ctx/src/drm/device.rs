// SPDX-License-Identifier: GPL-2.0 OR MIT

//! DRM devices and their registration context.
//!
//! Bringing up a DRM device takes several steps. The device is allocated; the driver builds its
//! private data, which often needs the device already (Tyr allocates GEM objects for the firmware
//! before it can describe the GPU); and finally the device is registered, which creates the
//! `/dev/dri` nodes userspace opens. Operations that involve userspace — GEM handles, mmap
//! offsets, opening files — only make sense after that last step.
//!
//! The step a device is known to have reached is its [`DeviceCtx`], a type parameter of
//! [`Device`]:
//!
//! - [`Registered`]: the device has been registered with userspace (it may have been unplugged
//!   since, in which case userspace-facing operations fail with `ENODEV`). The default.
//! - [`AnyCtx`] (Linux 7.2: [`Uninit`]): no guarantee; what can be done with any device.
//!
//! There is deliberately no "unregistered" context: a reference that can be copied around could
//! outlive the registration. The one thing known to be unregistered is the owned, single-threaded
//! [`UnregisteredDevice`] returned at allocation, which [`Registration::new`] consumes.
//!
//! Every context has the same layout, so a reference converts to a weaker context for free
//! ([`AsRef<Device<T, AnyCtx>>`]) and to a stronger one only through checked or `unsafe` means
//! ([`Device::as_registered`], [`Device::assume_registered`]).
//!
//! [`Registration::new`]: super::Registration::new
//!
//! # Examples
//!
//! ```
//! use drm_ctx::drm::{self, AnyCtx, Registered};
//! # use drm_ctx::doc_driver::{DocDriver, Bo};
//!
//! let parent = drm_ctx::device::Device::new("gpu").unwrap();
//! let unreg = drm::UnregisteredDevice::<DocDriver>::new(&parent, 7).unwrap();
//! let any: &drm::Device<DocDriver, AnyCtx> = &unreg;
//! assert!(any.as_registered().is_none());
//! let reg = drm::Registration::new(unreg, 0).unwrap();
//! let dev: &drm::Device<DocDriver, Registered> = reg.device();
//! assert_eq!(**dev, 7);
//! ```

mod private {
    pub trait Sealed {}
}

/// The registration context of a [`Device`]. Sealed: the contexts are [`Registered`] and
/// [`AnyCtx`].
pub trait DeviceCtx: private::Sealed + Send + Sync + 'static {
    /// The same context in the kernel's `kernel::drm`.
    #[cfg(gpukit_kernel)]
    #[doc(hidden)]
    type Kernel: ::kernel::drm::DeviceContext;
}

pub use self::DeviceCtx as DeviceContext;

/// The context of a [`Device`] that has been registered with userspace.
///
/// # Invariants
///
/// A `Device<T, Registered>` has been registered at some point. It may have been unplugged since:
/// then userspace-facing operations fail with [`Error::NoDevice`](crate::Error::NoDevice).
pub struct Registered;

/// The context of a [`Device`] with no registration guarantee (Linux 7.2 calls it [`Uninit`]).
pub struct AnyCtx;

pub use self::AnyCtx as Uninit;

impl private::Sealed for Registered {}
impl private::Sealed for AnyCtx {}
impl DeviceCtx for Registered {
    #[cfg(gpukit_kernel)]
    type Kernel = ::kernel::drm::Registered;
}
impl DeviceCtx for AnyCtx {
    #[cfg(gpukit_kernel)]
    type Kernel = ::kernel::drm::Uninit;
}

#[cfg(not(gpukit_kernel))]
pub(crate) mod core_impl;
#[cfg(not(gpukit_kernel))]
pub(crate) use self::core_impl::RawDevice;
#[cfg(not(gpukit_kernel))]
pub use self::core_impl::{Device, DeviceInit, EntryGuard, UnregisteredDevice};
#[cfg(gpukit_kernel)]
pub use crate::kernel::drm::{Device, DeviceInit, EntryGuard, UnregisteredDevice};
