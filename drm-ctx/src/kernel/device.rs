// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Parent devices in the kernel: [`Device`] is the kernel's `struct device`.
//!
//! In the kernel a DRM device's parent is a bus device (platform, PCI, faux) that the driver
//! core created and bound; nothing here creates one. A driver reaches its parent as a
//! `kernel::device::Device<Ctx>` (a `probe` callback's argument, `faux::Registration::as_ref`)
//! and views it as this crate's [`Device`] with [`Device::from_kernel`]: the same
//! `struct device`, so the typestate (`Normal`, `Core`, `Bound`) carries over.

use core::{marker::PhantomData, ops::Deref, ptr::NonNull};

use ::kernel::{bindings, device as kdevice, sync::aref::AlwaysRefCounted as _};

use crate::device::{Bound, Core, DeviceContext, Normal};
use crate::types::AlwaysRefCounted;

/// A parent (bus) device: the kernel's `struct device`.
///
/// # Invariants
///
/// - `self.0` is the `kernel::device::Device` of a live `struct device` (the layout is that of
///   `kernel::device::Device`, itself a transparent `struct device`, whatever `Ctx`).
/// - A `&Device<Bound>` or `&Device<Core>` only exists while a driver is bound to the device.
#[repr(transparent)]
pub struct Device<Ctx: DeviceContext = Normal>(kdevice::Device, PhantomData<Ctx>);

impl<Ctx: DeviceContext> Device<Ctx> {
    /// The kernel's view of the device.
    pub fn as_kernel(&self) -> &kdevice::Device {
        &self.0
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::device {
        // CAST: `kernel::device::Device` is a transparent wrapper of `struct device`.
        core::ptr::from_ref(&self.0).cast_mut().cast()
    }

    /// Returns whether `self` and `other` are the same device.
    pub fn same_device<O: DeviceContext>(&self, other: &Device<O>) -> bool {
        self.as_raw() == other.as_raw()
    }
}

impl Device {
    /// This crate's view of a kernel device.
    pub fn from_kernel<K: kdevice::DeviceContext>(dev: &kdevice::Device<K>) -> &Device {
        // CAST: Every `kernel::device::Device<K>` is a transparent `struct device`, as is
        // `Device<Normal>` (type invariant); `Normal` makes no claim about binding.
        // SAFETY: The pointer comes from a reference, which bounds the lifetime.
        unsafe { &*core::ptr::from_ref(dev).cast::<Device>() }
    }

    /// Assumes the device is bound to a driver.
    ///
    /// # Safety
    ///
    /// The driver must stay bound to the device while the returned reference exists (a faux
    /// device is bound from its creation until its `faux::Registration` is dropped).
    pub unsafe fn assume_bound(&self) -> &Device<Bound> {
        // CAST: Same layout in every context.
        // SAFETY: The caller guarantees the binding for the reference's lifetime.
        unsafe { &*core::ptr::from_ref(self).cast::<Device<Bound>>() }
    }
}

impl Device<Bound> {
    /// The kernel's view of the bound device.
    pub fn as_kernel_bound(&self) -> &kdevice::Device<kdevice::Bound> {
        // CAST: Same `struct device`; the binding is this type's invariant.
        // SAFETY: As for the cast; the lifetime is bounded by `self`.
        unsafe { &*core::ptr::from_ref(self).cast::<kdevice::Device<kdevice::Bound>>() }
    }
}

impl Deref for Device<Core> {
    type Target = Device<Bound>;

    fn deref(&self) -> &Device<Bound> {
        // CAST: Same layout; a device in `Core` is bound.
        // SAFETY: As for the cast.
        unsafe { &*core::ptr::from_ref(self).cast::<Device<Bound>>() }
    }
}

impl Deref for Device<Bound> {
    type Target = Device;

    fn deref(&self) -> &Device {
        // CAST: Same layout; `Normal` claims nothing.
        // SAFETY: As for the cast.
        unsafe { &*core::ptr::from_ref(self).cast::<Device>() }
    }
}

impl<Ctx: DeviceContext> AsRef<Device> for Device<Ctx> {
    fn as_ref(&self) -> &Device {
        // CAST: Same layout; `Normal` claims nothing.
        // SAFETY: As for the cast.
        unsafe { &*core::ptr::from_ref(self).cast::<Device>() }
    }
}

// SAFETY: `get_device`/`put_device` (through the kernel's own implementation) count the
// references of a `struct device`, which lives until the last one is gone.
unsafe impl AlwaysRefCounted for Device {
    fn inc_ref(&self) {
        self.0.inc_ref();
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference; the layouts are the same (transparent).
        unsafe { kdevice::Device::dec_ref(obj.cast()) }
    }
}

// SAFETY: A `struct device` may be used and released from any thread (as `kernel::device::Device`).
unsafe impl<Ctx: DeviceContext> Send for Device<Ctx> {}
// SAFETY: Shared use goes through the synchronisation of `struct device`.
unsafe impl<Ctx: DeviceContext> Sync for Device<Ctx> {}

impl<Ctx: DeviceContext> core::fmt::Debug for Device<Ctx> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::result::Result<(), core::fmt::Error> {
        f.debug_struct("Device")
            .field("raw", &self.as_raw())
            .finish()
    }
}
