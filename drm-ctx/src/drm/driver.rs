// SPDX-License-Identifier: GPL-2.0 OR MIT

//! DRM drivers and device registration.
//!
//! A driver describes itself with the [`Driver`] trait: the type of its per-device data, of its
//! GEM objects and of its per-file data, its name and version, and its ioctl table. A device is
//! made visible to userspace by a [`Registration`], which consumes the
//! [`UnregisteredDevice`] and hands back the device in the
//! [`Registered`](super::Registered) context. Dropping the registration unplugs the device.

use super::{device::UnregisteredDevice, file::DriverFile, gem::DriverObject, ioctl, Device};
use crate::{types::ARef, Error, Result};

/// Name and version a driver reports to userspace (`DRM_IOCTL_VERSION`).
#[derive(Clone, Copy, Debug)]
pub struct DriverInfo {
    /// Major version.
    pub major: i32,
    /// Minor version.
    pub minor: i32,
    /// Patch level.
    pub patchlevel: i32,
    /// Driver name (for example `"panthor"`).
    pub name: &'static str,
    /// Human-readable description.
    pub desc: &'static str,
}

/// A DRM driver.
pub trait Driver: Sized + 'static {
    /// Per-device driver data; [`Device`] dereferences to it.
    type Data: Send + Sync;

    /// The driver's GEM object data.
    type Object: DriverObject<Driver = Self>;

    /// The driver's per-file data.
    type File: DriverFile<Driver = Self>;

    /// Name and version.
    const INFO: DriverInfo;

    /// The driver ioctls, numbered from [`ioctl::COMMAND_BASE`] without gaps (see
    /// [`declare_drm_ioctls!`](crate::declare_drm_ioctls)). Checked at compile time when a device
    /// of the driver is registered.
    const IOCTLS: &'static [ioctl::Descriptor<Self>];

    /// Whether the driver offers a render node; a render-node file may only issue ioctls flagged
    /// [`ioctl::RENDER_ALLOW`].
    const FEAT_RENDER: bool = false;
}

/// The registration of a device with userspace.
///
/// Dropping it unplugs the device (see [`Device::unplug`]).
///
/// # Invariants
///
/// The device has been registered by [`Registration::new`].
pub struct Registration<T: Driver>(ARef<Device<T>>);

impl<T: Driver> Registration<T> {
    /// Registers `drm` with userspace.
    ///
    /// `flags` is reserved and must be zero ([`Error::Invalid`] otherwise; the device is then
    /// released).
    ///
    /// # Examples
    ///
    /// ```
    /// use drm_ctx::drm;
    /// # use drm_ctx::doc_driver::DocDriver;
    ///
    /// let parent = drm_ctx::device::Device::new("gpu").unwrap();
    /// let unreg = drm::UnregisteredDevice::<DocDriver>::new(&parent, 1).unwrap();
    /// let reg = drm::Registration::new(unreg, 0).unwrap();
    /// assert!(reg.device().is_registered());
    /// drop(reg);
    /// ```
    pub fn new(drm: UnregisteredDevice<T>, flags: usize) -> Result<Self> {
        const { ioctl::validate_table(T::IOCTLS) };
        if flags != 0 {
            return Err(Error::Invalid);
        }
        // INVARIANT: `register` registers the device.
        Ok(Registration(drm.register()))
    }

    /// Registers `drm` and ties the registration to the binding of the parent device `dev`: it
    /// is dropped (and the device unplugged) when the driver is unbound from `dev`.
    ///
    /// Returns the registered device, borrowed for as long as `dev` is known to be bound.
    /// Fails with [`Error::Invalid`] if `dev` is not the parent `drm` was created for.
    ///
    /// # Examples
    ///
    /// ```
    /// use drm_ctx::{device, drm, types::ARef};
    /// # use drm_ctx::doc_driver::DocDriver;
    ///
    /// let pdev = device::Device::new("gpu").unwrap();
    /// pdev.probe(|dev: &device::Device<device::Core>| {
    ///     let unreg = drm::UnregisteredDevice::<DocDriver>::new(dev, 3)?;
    ///     let drm: &drm::Device<DocDriver> = drm::Registration::new_foreign_owned(unreg, dev, 0)?;
    ///     let keep: ARef<drm::Device<DocDriver>> = drm.into();
    ///     Ok(keep)
    /// })
    /// .unwrap();
    /// let drm = pdev.driver_data::<ARef<drm::Device<DocDriver>>>().unwrap();
    /// assert!(drm.is_registered());
    /// pdev.unbind().unwrap();
    /// assert!(drm.is_unplugged());
    /// ```
    #[cfg(feature = "std")]
    pub fn new_foreign_owned<'a>(
        drm: UnregisteredDevice<T>,
        dev: &'a crate::device::Device<crate::device::Bound>,
        flags: usize,
    ) -> Result<&'a Device<T>>
    where
        T::Data: 'static,
    {
        if !drm.parent().same_device(dev) {
            return Err(Error::Invalid);
        }
        let reg = Registration::new(drm, flags)?;
        let ptr = core::ptr::NonNull::from(reg.device());
        dev.register_devres(reg)?;
        // SAFETY: The registration owns a reference on the device (moving it does not move the
        // device) and now lives in the devres of `dev`, which is only released when the driver
        // is unbound; that cannot happen while `&'a Device<Bound>` exists.
        let r: &'a Device<T> = unsafe { ptr.as_ref() };
        Ok(r)
    }

    /// The registered device.
    pub fn device(&self) -> &Device<T> {
        &self.0
    }
}

impl<T: Driver> Drop for Registration<T> {
    fn drop(&mut self) {
        self.0.unplug();
    }
}
