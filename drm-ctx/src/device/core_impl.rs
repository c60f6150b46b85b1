// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Parent devices of the crate's own core (not built in the kernel, where
//! `crate::kernel::device` wraps `struct device`).

use super::{Bound, Core, DeviceContext, Normal};
use crate::{
    mem::{Allocator, MemOps},
    types::{ARef, AlwaysRefCounted},
    Result,
};
use core::{
    alloc::Layout,
    marker::PhantomData,
    ops::Deref,
    ptr::NonNull,
    sync::atomic::{fence, AtomicUsize, Ordering},
};

/// A parent (bus) device of a DRM device.
///
/// # Invariants
///
/// - The layout is the same for every `Ctx` (`repr(C)`, the context is a zero-sized marker).
/// - A `&Device<Bound>` or `&Device<Core>` only exists while a driver is bound (or being bound)
///   to the device, and unbinding is impossible while such a reference can exist.
#[repr(C)]
pub struct Device<Ctx: DeviceContext = Normal> {
    raw: RawParent,
    _ctx: PhantomData<Ctx>,
}

/// # Invariants
///
/// `root` is the pointer the device was allocated at (used to release it).
struct RawParent {
    root: NonNull<Device>,
    refs: AtomicUsize,
    name: &'static str,
    mem: MemOps,
    #[cfg(feature = "std")]
    host: host::Binding,
}

// SAFETY: All fields but `root` are `Send` and `Sync` (atomics, a `&'static str`, fn pointers,
// the host binding behind a mutex); `root` is only used to release the device; the context is a
// zero-sized marker.
unsafe impl<Ctx: DeviceContext> Send for Device<Ctx> {}
// SAFETY: See the `Send` implementation; every shared operation is atomic or locked.
unsafe impl<Ctx: DeviceContext> Sync for Device<Ctx> {}

impl Device {
    /// Creates a parent device in memory from the allocator `A`.
    pub fn new_in<A: Allocator>(name: &'static str) -> Result<ARef<Device>> {
        let layout = Layout::new::<Device>();
        let mem = MemOps::of::<A>();
        let ptr = (mem.alloc)(layout)?.cast::<Device>();
        // SAFETY: `ptr` is a fresh block sized and aligned for `Device`.
        unsafe {
            ptr.as_ptr().write(Device {
                raw: RawParent {
                    root: ptr,
                    refs: AtomicUsize::new(1),
                    name,
                    mem,
                    #[cfg(feature = "std")]
                    host: host::Binding::new(),
                },
                _ctx: PhantomData,
            })
        };
        // SAFETY: The block is initialised with one reference, which we hand over.
        Ok(unsafe { ARef::from_raw(ptr) })
    }

    /// Creates a parent device on the host heap.
    #[cfg(feature = "std")]
    pub fn new(name: &'static str) -> Result<ARef<Device>> {
        Self::new_in::<crate::mem::Global>(name)
    }

    /// Reinterprets this reference as one in the [`Bound`] context.
    ///
    /// This is the seam for environments that bind drivers themselves (a kernel backend).
    ///
    /// # Safety
    ///
    /// A driver must stay bound to the device for the whole lifetime of the returned reference,
    /// and resources registered with [`Device::<Bound>::register_devres`] through it must be
    /// released by the environment when the binding ends.
    #[cfg_attr(
        not(feature = "std"),
        doc = "",
        doc = "[`Device::<Bound>::register_devres`]: crate#features"
    )]
    pub unsafe fn assume_bound(&self) -> &Device<Bound> {
        // SAFETY: Same layout in every context (type invariant); the caller guarantees the binding.
        unsafe { self.cast_ctx() }
    }
}

impl<Ctx: DeviceContext> Device<Ctx> {
    /// The device's name.
    pub fn name(&self) -> &'static str {
        self.raw.name
    }

    /// # Safety
    ///
    /// The device must satisfy the guarantees of `New` for the lifetime of the reference.
    unsafe fn cast_ctx<New: DeviceContext>(&self) -> &Device<New> {
        // SAFETY: `Device<_>` is `repr(C)` with a zero-sized context marker, so every context has
        // the same layout and `self` is a valid `Device<New>`; the caller vouches for `New`.
        unsafe { &*(self as *const Self).cast::<Device<New>>() }
    }

    /// Returns whether `self` and `other` are the same device, whatever their contexts.
    pub fn same_device<O: DeviceContext>(&self, other: &Device<O>) -> bool {
        core::ptr::eq(&self.raw, &other.raw)
    }
}

impl Deref for Device<Core> {
    type Target = Device<Bound>;

    fn deref(&self) -> &Device<Bound> {
        // SAFETY: A `Core` reference implies the driver is being bound (type invariant).
        unsafe { self.cast_ctx() }
    }
}

impl Deref for Device<Bound> {
    type Target = Device;

    fn deref(&self) -> &Device {
        // SAFETY: `Normal` carries no guarantee.
        unsafe { self.cast_ctx() }
    }
}

impl<Ctx: DeviceContext> AsRef<Device> for Device<Ctx> {
    fn as_ref(&self) -> &Device {
        // SAFETY: `Normal` carries no guarantee.
        unsafe { self.cast_ctx() }
    }
}

// SAFETY: `refs` counts the references; the block is freed only when it drops to zero.
unsafe impl AlwaysRefCounted for Device {
    fn inc_ref(&self) {
        self.raw.refs.fetch_add(1, Ordering::Relaxed);
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference, so `obj` is valid.
        let refs = unsafe { &obj.as_ref().raw.refs };
        if refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        // SAFETY: That was the last reference: nobody else can reach the device.
        let raw = unsafe { &obj.as_ref().raw };
        let (mem, root) = (raw.mem, raw.root);
        // SAFETY: The device is valid and unreachable; drop its fields in place through the
        // allocation pointer.
        unsafe { core::ptr::drop_in_place(root.as_ptr()) };
        // SAFETY: The block came from this allocator with this layout.
        unsafe { (mem.free)(root.cast(), Layout::new::<Device>()) };
    }
}

impl<Ctx: DeviceContext> core::fmt::Debug for Device<Ctx> {
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
        f.debug_struct("Device")
            .field("name", &self.raw.name)
            .finish()
    }
}

#[cfg(feature = "std")]
mod host {
    use super::{Bound, Core, Device};
    use crate::{Error, Result};
    use std::{
        any::Any,
        boxed::Box,
        sync::{Arc, Mutex, MutexGuard},
        vec::Vec,
    };

    #[derive(Clone, Copy, PartialEq, Eq)]
    enum State {
        Unbound,
        Probing,
        Bound,
    }

    struct Inner {
        state: State,
        driver: Option<Arc<dyn Any + Send + Sync>>,
        devres: Vec<Box<dyn Send>>,
    }

    pub(super) struct Binding(Mutex<Inner>);

    impl Binding {
        pub(super) fn new() -> Self {
            Binding(Mutex::new(Inner {
                state: State::Unbound,
                driver: None,
                devres: Vec::new(),
            }))
        }

        fn lock(&self) -> MutexGuard<'_, Inner> {
            self.0.lock().unwrap_or_else(|e| e.into_inner())
        }
    }

    /// Drops resources in reverse order of registration, outside of the lock.
    fn release(mut devres: Vec<Box<dyn Send>>) {
        while let Some(r) = devres.pop() {
            drop(r);
        }
    }

    impl Device {
        /// Binds a driver: runs `probe` with the device in the [`Core`] context and keeps the
        /// driver data it returns until [`unbind`](Self::unbind).
        ///
        /// If `probe` fails, whatever it tied to the binding is released and the error returned.
        /// Binding an already bound device fails with [`Error::Busy`].
        pub fn probe<D: Send + Sync + 'static>(
            &self,
            probe: impl FnOnce(&Device<Core>) -> Result<D>,
        ) -> Result {
            {
                let mut g = self.raw.host.lock();
                if g.state != State::Unbound {
                    return Err(Error::Busy);
                }
                g.state = State::Probing;
            }
            // SAFETY: The state is `Probing`, which makes `unbind` refuse, so the binding outlives
            // the reference handed to `probe` (it cannot escape the closure).
            let core: &Device<Core> = unsafe { self.cast_ctx() };
            let res = probe(core);
            let mut g = self.raw.host.lock();
            match res {
                Ok(d) => {
                    g.driver = Some(Arc::new(d));
                    g.state = State::Bound;
                    Ok(())
                }
                Err(e) => {
                    let devres = core::mem::take(&mut g.devres);
                    g.state = State::Unbound;
                    drop(g);
                    release(devres);
                    Err(e)
                }
            }
        }

        /// Unbinds the driver: drops its driver data, then everything tied to the binding, in
        /// reverse order.
        ///
        /// Fails with [`Error::Busy`] while a probe runs and [`Error::Invalid`] if no driver is
        /// bound.
        pub fn unbind(&self) -> Result {
            let (driver, devres) = {
                let mut g = self.raw.host.lock();
                match g.state {
                    State::Probing => return Err(Error::Busy),
                    State::Unbound => return Err(Error::Invalid),
                    State::Bound => {}
                }
                g.state = State::Unbound;
                (g.driver.take(), core::mem::take(&mut g.devres))
            };
            drop(driver);
            release(devres);
            Ok(())
        }

        /// Returns whether a driver is bound.
        pub fn is_bound(&self) -> bool {
            self.raw.host.lock().state == State::Bound
        }

        /// Returns the bound driver's data, if a driver is bound and its data is a `D`.
        pub fn driver_data<D: Send + Sync + 'static>(&self) -> Option<Arc<D>> {
            let d = self.raw.host.lock().driver.clone()?;
            d.downcast::<D>().ok()
        }
    }

    impl Device<Bound> {
        /// Ties `resource` to the current binding: it is dropped when the driver is unbound (or
        /// when the probe in progress fails).
        pub fn register_devres<R: Send + 'static>(&self, resource: R) -> Result {
            let mut g = self.raw.host.lock();
            g.devres.try_reserve(1).map_err(|_| Error::NoMemory)?;
            g.devres.push(Box::new(resource));
            Ok(())
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use crate::Error;
    use std::sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    };

    struct Count(Arc<AtomicUsize>);
    impl Drop for Count {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn probe_failure_releases_devres() {
        let drops = Arc::new(AtomicUsize::new(0));
        let pdev = Device::new("p").unwrap();
        let r = pdev.probe(|d| -> Result<()> {
            d.register_devres(Count(drops.clone()))?;
            Err(Error::NoDevice)
        });
        assert_eq!(r, Err(Error::NoDevice));
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert!(!pdev.is_bound());
        assert_eq!(pdev.unbind(), Err(Error::Invalid));
    }

    #[test]
    fn nested_probe_and_unbind_are_refused() {
        let pdev = Device::new("p").unwrap();
        pdev.probe(|d| {
            assert_eq!(d.probe(|_| Ok(())), Err(Error::Busy));
            assert_eq!(d.unbind(), Err(Error::Busy));
            Ok(())
        })
        .unwrap();
        assert_eq!(pdev.probe(|_| Ok(())), Err(Error::Busy));
        pdev.unbind().unwrap();
        pdev.probe(|_| Ok(1u8)).unwrap();
        assert!(pdev.driver_data::<u16>().is_none());
        assert_eq!(*pdev.driver_data::<u8>().unwrap(), 1);
    }

    #[test]
    fn devres_released_at_unbind_in_reverse_order() {
        let order = Arc::new(std::sync::Mutex::new(std::vec::Vec::new()));
        struct Rec(u32, Arc<std::sync::Mutex<std::vec::Vec<u32>>>);
        impl Drop for Rec {
            fn drop(&mut self) {
                self.1.lock().unwrap().push(self.0);
            }
        }
        let pdev = Device::new("p").unwrap();
        pdev.probe(|d| {
            d.register_devres(Rec(1, order.clone()))?;
            d.register_devres(Rec(2, order.clone()))?;
            Ok(())
        })
        .unwrap();
        assert!(order.lock().unwrap().is_empty());
        pdev.unbind().unwrap();
        assert_eq!(*order.lock().unwrap(), [2, 1]);
    }

    #[test]
    fn same_device_across_contexts() {
        let a = Device::new("a").unwrap();
        let b = Device::new("b").unwrap();
        a.probe(|core| {
            let bound: &Device<Bound> = core;
            assert!(bound.same_device(&*a));
            assert!(!bound.same_device(&*b));
            Ok(())
        })
        .unwrap();
    }
}
