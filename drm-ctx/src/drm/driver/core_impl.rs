// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Registration on the crate's own DRM core (not built in the kernel, where
//! `crate::kernel::drm` registers a `struct drm_device`).

use super::Driver;
use crate::drm::{device::UnregisteredDevice, ioctl, Device};
use crate::{types::ARef, Error, Result};

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
