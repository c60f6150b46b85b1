// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Parent devices and their contexts.
//!
//! A DRM device always sits on top of a bus device (a platform device for Mali, an auxiliary or
//! PCI device for Nova), its *parent*. The parent goes through its own life: it exists, a driver
//! is bound to it by a successful `probe`, and it is unbound again by `remove` or unplug. While a
//! driver is bound, resources can be tied to the binding ("devres"): they are released when the
//! driver is unbound, whoever still holds references to the device.
//!
//! As in the kernel's `device` module, the context a reference was obtained in is part of its
//! type:
//!
//! - [`Normal`]: nothing is known beyond the device existing; any reference can be this.
//! - [`Bound`]: a driver is bound for as long as the reference lives, so resources may be tied to
//!   the binding ([`Device::<Bound>::register_devres`]).
//! - [`Core`]: the reference was handed to a bus callback (probe); implies [`Bound`].
//!
//! `&Device<Core>` dereferences to `&Device<Bound>`, which dereferences to `&Device`. The contexts
//! are sealed: only this crate hands out `Core` and `Bound` references.
//!
//! On the host (feature `std`) a parent device is created with [`Device::new`] and a driver is
//! bound with [`Device::probe`], which hands the probe function a `&Device<Core>`.
//!
//! # Examples
//!
//! ```
//! use drm_ctx::device::{Core, Device};
//!
//! let pdev = Device::new("mali").unwrap();
//! pdev.probe(|dev: &Device<Core>| {
//!     // Tie something to the binding: it is dropped when the driver is unbound.
//!     dev.register_devres(String::from("irq handler"))?;
//!     Ok(42u32)
//! })
//! .unwrap();
//! assert_eq!(*pdev.driver_data::<u32>().unwrap(), 42);
//! pdev.unbind().unwrap();
//! assert!(!pdev.is_bound());
//! ```
#![cfg_attr(
    not(feature = "std"),
    doc = "",
    doc = "[`Device::<Bound>::register_devres`]: crate#features",
    doc = "[`Device::new`]: crate#features",
    doc = "[`Device::probe`]: crate#features"
)]

mod private {
    pub trait Sealed {}
}

/// The context a parent-device reference was obtained in. Sealed.
pub trait DeviceContext: private::Sealed + Send + Sync + 'static {}

/// The default context: no guarantee beyond the device existing.
pub struct Normal;
/// The context of a bus callback such as probe: a driver is being bound. Implies [`Bound`].
pub struct Core;
/// The context of a device a driver is bound to, for as long as the reference lives.
pub struct Bound;

impl private::Sealed for Normal {}
impl private::Sealed for Core {}
impl private::Sealed for Bound {}
impl DeviceContext for Normal {}
impl DeviceContext for Core {}
impl DeviceContext for Bound {}

#[cfg(not(gpukit_kernel))]
mod core_impl;
#[cfg(not(gpukit_kernel))]
pub use self::core_impl::Device;
#[cfg(gpukit_kernel)]
pub use crate::kernel::device::Device;
