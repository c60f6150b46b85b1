// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Memory-mapped I/O through a raw pointer.
//!
//! [`MmioRaw`] records where a mapping is and how large it is; whoever created the mapping (a bus
//! driver, firmware tables, a hypervisor's device tree) vouches for it once, by turning it into
//! an [`Mmio`] with the unsafe [`Mmio::from_raw`]. From then on every access is a volatile load or
//! store of exactly the requested width through a raw pointer: device memory is never behind a
//! Rust reference, so the compiler cannot invent, merge, split or drop accesses.
//!
//! [`Mmio`] orders its accesses against the CPU's other memory accesses the way the kernel's
//! `readl`/`writel` do on the architectures they matter for: on AArch64 a read is followed by a
//! `dmb oshld` (later loads of DMA buffers see data at least as new as the device's status) and a
//! write is preceded by a `dmb oshst` (the device sees buffer writes made before it is told to
//! look). Elsewhere a compiler fence plus the matching atomic fence is used. [`RelaxedMmio`],
//! obtained with [`Mmio::relaxed`], performs the same accesses without any barrier, like the
//! kernel's `_relaxed` accessors.

use core::marker::PhantomData;
use core::ptr::NonNull;

use super::{Io, IoCapable, IoKnownSize};
use crate::Error;

/// The location and size of a mapped I/O region, not yet vouched for.
///
/// On its own it grants nothing: [`Mmio::from_raw`] turns it into accessors.
///
/// # Invariants
///
/// `maxsize >= SIZE`.
#[derive(Debug)]
pub struct MmioRaw<const SIZE: usize = 0> {
    base: NonNull<u8>,
    maxsize: usize,
}

// SAFETY: `MmioRaw` is a plain address and size; sending it to another thread accesses nothing.
unsafe impl<const SIZE: usize> Send for MmioRaw<SIZE> {}
// SAFETY: Sharing `MmioRaw` only shares the address and size. Accesses happen through `Mmio`,
// whose creator promised (in `Mmio::from_raw`) that they are sound from any thread.
unsafe impl<const SIZE: usize> Sync for MmioRaw<SIZE> {}

impl<const SIZE: usize> MmioRaw<SIZE> {
    /// Describes the `maxsize` bytes starting at `base`.
    ///
    /// Returns [`Error::OutOfBounds`] if `maxsize` is smaller than the build-time size `SIZE`.
    pub fn new(base: NonNull<u8>, maxsize: usize) -> Result<Self, Error> {
        if maxsize < SIZE {
            return Err(Error::OutOfBounds);
        }
        // INVARIANT: Checked above.
        Ok(Self { base, maxsize })
    }

    /// Describes the `maxsize` bytes at the integer address `addr`, as bare-metal code gets it
    /// from a device tree or a fixed memory map.
    ///
    /// The pointer gets the provenance exposed earlier for that address, if any (see
    /// [`core::ptr::with_exposed_provenance_mut`]). Returns [`Error::OutOfBounds`] if `addr` is 0
    /// or `maxsize` is smaller than `SIZE`.
    pub fn from_addr(addr: usize, maxsize: usize) -> Result<Self, Error> {
        // Refuse bad arguments before making a pointer out of the integer.
        if addr == 0 || maxsize < SIZE {
            return Err(Error::OutOfBounds);
        }
        let base = NonNull::new(core::ptr::with_exposed_provenance_mut::<u8>(addr))
            .ok_or(Error::OutOfBounds)?;
        Self::new(base, maxsize)
    }

    /// Returns the base address of the region.
    #[inline]
    pub fn addr(&self) -> usize {
        self.base.as_ptr().addr()
    }

    /// Returns the size of the region.
    #[inline]
    pub fn maxsize(&self) -> usize {
        self.maxsize
    }
}

/// A mapped I/O region of at least `SIZE` bytes, accessed with volatile loads and stores and the
/// barriers of the kernel's `readX`/`writeX`.
///
/// # Examples
///
/// Any memory can stand in for a device in a test:
///
/// ```
/// use core::ptr::NonNull;
/// use register::io::{Io, Mmio, MmioRaw};
///
/// let mut backing = [0u32; 4];
/// let raw = MmioRaw::<16>::new(NonNull::from(&mut backing).cast(), 16)?;
/// // SAFETY: `backing` is 16 bytes of memory used by nothing else while `io` lives.
/// let io = unsafe { Mmio::from_raw(&raw) };
/// io.write32(0x1234, 0x8);
/// assert_eq!(io.read32(0x8), 0x1234);
/// assert_eq!(io.relaxed().read16(0x8), 0x1234);
/// assert!(io.try_read32(0x10).is_err());
/// # Ok::<(), register::Error>(())
/// ```
///
/// # Invariants
///
/// The `maxsize` bytes at the base of the inner [`MmioRaw`] are valid for volatile reads and
/// writes of 1, 2, 4 and 8 bytes at any naturally aligned offset, from any thread, for as long as
/// the `Mmio` is reachable.
#[repr(transparent)]
pub struct Mmio<const SIZE: usize = 0>(MmioRaw<SIZE>);

impl<const SIZE: usize> Mmio<SIZE> {
    /// Gives access to the region described by `raw`.
    ///
    /// # Safety
    ///
    /// For the lifetime of the returned reference, the `raw.maxsize()` bytes at `raw.addr()`
    /// must be valid for volatile reads and writes of 1, 2, 4 and 8 bytes at any naturally
    /// aligned offset, and must not be accessed in any way that conflicts with those accesses
    /// (for ordinary memory standing in for a device: no other access at all, and no access from
    /// several threads at once).
    pub unsafe fn from_raw(raw: &MmioRaw<SIZE>) -> &Self {
        // SAFETY: `Mmio` is `repr(transparent)` over `MmioRaw`, so the cast preserves layout and
        // validity. INVARIANT: Guaranteed by the caller.
        unsafe { &*core::ptr::from_ref(raw).cast::<Self>() }
    }

    /// Returns a view of the region whose accesses have no barriers, like the kernel's
    /// `readl_relaxed`/`writel_relaxed`.
    #[inline]
    pub fn relaxed(&self) -> &RelaxedMmio<SIZE> {
        // SAFETY: `RelaxedMmio` is `repr(transparent)` over `Mmio`, and the view keeps the same
        // invariant.
        unsafe { &*core::ptr::from_ref(self).cast::<RelaxedMmio<SIZE>>() }
    }

    /// Returns the pointer for an access at absolute `address`.
    #[inline(always)]
    fn ptr<T>(&self, at: usize) -> *mut T {
        self.0.base.as_ptr().with_addr(at).cast::<T>()
    }
}

/// A view of an [`Mmio`] region whose accesses are not ordered against other memory accesses.
///
/// Obtained with [`Mmio::relaxed`]; use it for registers whose accesses need no ordering with
/// DMA buffers, such as when polling a status bit.
#[repr(transparent)]
pub struct RelaxedMmio<const SIZE: usize = 0>(Mmio<SIZE>);

/// Orders a completed device read before later memory reads.
#[inline(always)]
fn barrier_after_read() {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `dmb` only orders memory accesses; it has no other effect on the program.
    unsafe {
        core::arch::asm!("dmb oshld", options(nostack, preserves_flags))
    };
    #[cfg(not(target_arch = "aarch64"))]
    core::sync::atomic::fence(core::sync::atomic::Ordering::Acquire);
}

/// Orders earlier memory writes before a following device write.
#[inline(always)]
fn barrier_before_write() {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `dmb` only orders memory accesses; it has no other effect on the program.
    unsafe {
        core::arch::asm!("dmb oshst", options(nostack, preserves_flags))
    };
    #[cfg(not(target_arch = "aarch64"))]
    core::sync::atomic::fence(core::sync::atomic::Ordering::Release);
}

macro_rules! impl_mmio {
    ($($ty:ty),*) => {
        $(
            impl<const SIZE: usize> IoCapable<$ty> for Mmio<SIZE> {
                #[inline(always)]
                unsafe fn io_read(&self, at: usize) -> $ty {
                    // SAFETY: The caller guarantees that the access is inside the region and
                    // aligned; the type invariant makes such accesses valid.
                    let value = unsafe { self.ptr::<$ty>(at).read_volatile() };
                    barrier_after_read();
                    value
                }

                #[inline(always)]
                unsafe fn io_write(&self, value: $ty, at: usize) {
                    barrier_before_write();
                    // SAFETY: The caller guarantees that the access is inside the region and
                    // aligned; the type invariant makes such accesses valid.
                    unsafe { self.ptr::<$ty>(at).write_volatile(value) }
                }
            }

            impl<const SIZE: usize> IoCapable<$ty> for RelaxedMmio<SIZE> {
                #[inline(always)]
                unsafe fn io_read(&self, at: usize) -> $ty {
                    // SAFETY: As for `Mmio`, whose invariant this view shares.
                    unsafe { self.0.ptr::<$ty>(at).read_volatile() }
                }

                #[inline(always)]
                unsafe fn io_write(&self, value: $ty, at: usize) {
                    // SAFETY: As for `Mmio`, whose invariant this view shares.
                    unsafe { self.0.ptr::<$ty>(at).write_volatile(value) }
                }
            }
        )*
    };
}

impl_mmio!(u8, u16, u32);
#[cfg(target_has_atomic = "64")]
impl_mmio!(u64);

impl<const SIZE: usize> Io for Mmio<SIZE> {
    #[inline]
    fn addr(&self) -> usize {
        self.0.addr()
    }

    #[inline]
    fn maxsize(&self) -> usize {
        self.0.maxsize()
    }
}

impl<const SIZE: usize> IoKnownSize for Mmio<SIZE> {
    const MIN_SIZE: usize = SIZE;
}

impl<const SIZE: usize> Io for RelaxedMmio<SIZE> {
    #[inline]
    fn addr(&self) -> usize {
        self.0.addr()
    }

    #[inline]
    fn maxsize(&self) -> usize {
        self.0.maxsize()
    }
}

impl<const SIZE: usize> IoKnownSize for RelaxedMmio<SIZE> {
    const MIN_SIZE: usize = SIZE;
}

/// Accessors that must stay on the thread that created them: `T` (an [`Mmio`] or a
/// [`RelaxedMmio`]) without its `Send` and `Sync`.
///
/// [`MmioOwner::io`] returns one: its memory is ordinary memory, on which volatile accesses from
/// two threads at once would race. A plain `&Mmio` is `Send` (`Mmio` is `Sync`), so handing one
/// out would let safe code share the accessors with another thread.
///
/// ```compile_fail
/// use register::io::mmio::MmioOwner;
///
/// let mut words = [0u64; 2];
/// let owner = MmioOwner::<16>::new(&mut words);
/// let io = owner.io();
/// std::thread::scope(|s| {
///     s.spawn(|| io.write32(1, 0)); // `io` is not `Send`
/// });
/// ```
#[repr(transparent)]
pub struct Unshared<T>(T, PhantomData<*mut u8>);

impl<T: Io> Io for Unshared<T> {
    #[inline]
    fn addr(&self) -> usize {
        self.0.addr()
    }

    #[inline]
    fn maxsize(&self) -> usize {
        self.0.maxsize()
    }
}

impl<T: IoKnownSize> IoKnownSize for Unshared<T> {
    const MIN_SIZE: usize = T::MIN_SIZE;
}

impl<U, T: IoCapable<U>> IoCapable<U> for Unshared<T> {
    #[inline(always)]
    unsafe fn io_read(&self, addr: usize) -> U {
        // SAFETY: Same contract, forwarded.
        unsafe { self.0.io_read(addr) }
    }

    #[inline(always)]
    unsafe fn io_write(&self, value: U, addr: usize) {
        // SAFETY: Same contract, forwarded.
        unsafe { self.0.io_write(value, addr) }
    }
}

impl<const SIZE: usize> Unshared<Mmio<SIZE>> {
    /// Returns a view of the region whose accesses have no barriers (see [`Mmio::relaxed`]).
    #[inline]
    pub fn relaxed(&self) -> &Unshared<RelaxedMmio<SIZE>> {
        // SAFETY: Both are `repr(transparent)` over `Mmio<SIZE>` (a zero-sized marker aside),
        // and the view stays on this thread like `self`.
        unsafe { &*core::ptr::from_ref(self).cast::<Unshared<RelaxedMmio<SIZE>>>() }
    }
}

/// Owns memory standing in for a device, and gives [`Mmio`]-like access to it; for tests and
/// examples.
///
/// It holds the memory mutably borrowed for its whole life, so nothing else can touch it, and
/// neither it nor the accessors it hands out ([`Unshared`]) can be shared with another thread,
/// so its accesses cannot race each other.
///
/// # Examples
///
/// ```
/// use register::io::{mmio::MmioOwner, Io};
///
/// let mut words = [0u64; 2];
/// let owner = MmioOwner::<16>::new(&mut words);
/// owner.io().write64(u64::MAX, 8);
/// assert_eq!(owner.io().read8(15), 0xff);
/// ```
pub struct MmioOwner<'a, const SIZE: usize> {
    raw: MmioRaw<SIZE>,
    _memory: PhantomData<&'a mut [u64]>,
    _not_sync: PhantomData<core::cell::Cell<u8>>,
}

impl<'a, const SIZE: usize> MmioOwner<'a, SIZE> {
    /// Uses `memory` as the region. Only its first `SIZE` bytes are reachable, and `SIZE` must
    /// not exceed the size of `memory` (checked at build time).
    pub fn new<const N: usize>(memory: &'a mut [u64; N]) -> Self {
        const { assert!(SIZE <= N * 8, "`SIZE` is larger than the memory") };
        Self {
            // INVARIANT: `maxsize == SIZE`.
            raw: MmioRaw {
                base: NonNull::from(memory).cast(),
                maxsize: SIZE,
            },
            _memory: PhantomData,
            _not_sync: PhantomData,
        }
    }

    /// Returns the accessors of the region, which cannot leave this thread.
    pub fn io(&self) -> &Unshared<Mmio<SIZE>> {
        // SAFETY: `raw` points to at least `SIZE` bytes of 8-byte aligned memory that `self`
        // borrows mutably for `'a`, so nothing else accesses it. The `Mmio` is only reachable
        // through `Unshared`, which is neither `Send` nor `Sync`, and `Self` is not `Sync`: all
        // accesses happen on one thread.
        let io = unsafe { Mmio::from_raw(&self.raw) };
        // SAFETY: `Unshared` is `repr(transparent)` over `Mmio<SIZE>` (plus a zero-sized marker).
        unsafe { &*core::ptr::from_ref(io).cast::<Unshared<Mmio<SIZE>>>() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tells, for a concrete type, whether it is `Sync` (inherent methods win over trait ones).
    struct Probe<T: ?Sized>(PhantomData<T>);

    trait NotSync {
        fn is_sync(&self) -> bool {
            false
        }
    }

    impl<T: ?Sized> NotSync for Probe<T> {}

    impl<T: ?Sized + Sync> Probe<T> {
        fn is_sync(&self) -> bool {
            true
        }
    }

    fn probe<T: ?Sized>(_: &T) -> Probe<T> {
        Probe(PhantomData)
    }

    /// Issue 20, defect 7: the accessors of an `MmioOwner` (ordinary memory) must not be
    /// shareable with another thread, or safe code races non-atomic accesses.
    #[test]
    fn owner_accessors_stay_on_their_thread() {
        let mut mem = [0u64; 1];
        let owner = MmioOwner::<8>::new(&mut mem);
        assert!(!probe(owner.io()).is_sync());
        assert!(!probe(owner.io().relaxed()).is_sync());
        // Real MMIO stays shareable.
        assert!(probe(owner.io().0.relaxed()).is_sync());
    }

    #[test]
    fn raw_checks_size() {
        let mut word = 0u32;
        let base = NonNull::from(&mut word).cast::<u8>();
        assert_eq!(MmioRaw::<8>::new(base, 4).err(), Some(Error::OutOfBounds));
        let raw = MmioRaw::<4>::new(base, 4).unwrap();
        assert_eq!(raw.maxsize(), 4);
        assert_eq!(raw.addr(), base.as_ptr().addr());
        assert_eq!(
            MmioRaw::<4>::from_addr(0, 4).err(),
            Some(Error::OutOfBounds)
        );
    }

    #[test]
    fn volatile_accesses_of_every_width() {
        let mut mem = [0u64; 4];
        {
            let owner = MmioOwner::<32>::new(&mut mem);
            let io = owner.io();
            io.write8(0x11, 0);
            io.write16(0x2233, 2);
            io.write32(0x4455_6677, 4);
            io.write64(0x8899_aabb_ccdd_eeff, 8);
            assert_eq!(io.read64(0), 0x4455_6677_2233_0011);
            assert_eq!(io.read32(8), 0xccdd_eeff);
            let relaxed = io.relaxed();
            relaxed.write32(0xfeed, 16);
            assert_eq!(relaxed.read16(16), 0xfeed);
            assert_eq!(relaxed.read8(17), 0xfe);
            assert_eq!(io.try_read64(32), Err(Error::OutOfBounds));
            assert_eq!(io.try_read32(2), Err(Error::Misaligned));
            assert_eq!(relaxed.try_write16(1, 29), Err(Error::Misaligned));
            io.update(16usize, |v: u32| v | 0x1_0000);
            assert_eq!(relaxed.maxsize(), 32);
            assert_eq!(relaxed.addr(), io.addr());
        }
        assert_eq!(mem[0], 0x4455_6677_2233_0011);
        assert_eq!(mem[1], 0x8899_aabb_ccdd_eeff);
        assert_eq!(mem[2], 0x1_feed);
    }
}
