// SPDX-License-Identifier: GPL-2.0 OR MIT

//! I/O regions: the traits a register access goes through, and the backends behind them.
//!
//! A device exposes its registers as a range of bus addresses. The CPU reaches them through a
//! mapping, and every load or store to that mapping is a bus transaction with possible side
//! effects on the device (a read may clear an interrupt status, a write may start a DMA). Such
//! memory must be accessed with exactly the width the device expects, exactly once per access in
//! program order, and never through a Rust reference (the compiler may read through a reference
//! at will, which a device would notice).
//!
//! This module mirrors the shape of the Linux kernel's `kernel::io`:
//!
//! - [`Io`] describes a region (its base address and size) and provides every access in two
//!   flavours: `try_*` methods check offset and alignment at run time and return an [`Error`];
//!   the plain methods are for regions whose size is known at build time ([`IoKnownSize`]) and
//!   check the locations of typed registers at build time.
//! - [`IoCapable<T>`] says that a backend can perform accesses of the width of `T` and performs
//!   them. A PCI configuration space, for instance, has no 64-bit accesses.
//! - [`IoLoc<T>`] is a location: an offset, the width of the access at that offset, and the type
//!   the raw value converts to. Raw `usize` offsets are locations of primitive integers; the
//!   [`register!`](crate::register!) macro generates typed locations.
//!
//! The backends are [`Mmio`] (volatile accesses through a pointer, what a bare-metal or kernel
//! driver uses) and its [`RelaxedMmio`] view, [`MemRegion`] (plain host memory for unit tests,
//! `Send` and `Sync` like `Mmio`) and [`ModelRegion`] (every access forwarded to a
//! [`DeviceModel`], what a simulator implements). [`poll`] has
//! [`read_poll_timeout`](poll::read_poll_timeout), and [`pure`] keeps reads without side
//! effects ([`PureView`]) apart from the others.
//!
//! # Examples
//!
//! ```
//! use register::io::{Io, MemRegion};
//!
//! let region = MemRegion::<0x100>::new();
//! region.write32(0xdead_beef, 0x10);
//! assert_eq!(region.read32(0x10), 0xdead_beef);
//! assert_eq!(region.read16(0x12), 0xdead);
//!
//! // Run-time checked accesses report misuse instead of performing it.
//! assert!(region.try_read32(0x100).is_err());
//! assert!(region.try_read32(0x11).is_err());
//! ```

use crate::io::register::LocatedRegister;
use crate::Error;

// `MemRegion`'s lock needs compare-and-swap on a byte, which a few small targets lack
// (`thumbv6m-none-eabi`); the rest of this crate uses no atomics.
#[cfg(target_has_atomic = "8")]
pub mod mem;
pub mod mmio;
pub mod model;
pub mod poll;
pub mod pure;
pub mod register;

#[cfg(target_has_atomic = "8")]
pub use mem::MemRegion;
pub use mmio::{Mmio, MmioRaw, RelaxedMmio};
pub use model::{Access, AccessKind, AccessWidth, DeviceModel, ModelRegion, NoTrace, Trace};
pub use pure::{PureView, ReadPure};

/// Returns whether an access of the width of `U` at `off` fits in a region of `size` bytes and
/// is aligned to its width.
#[inline]
pub const fn offset_valid<U>(offset: usize, size: usize) -> bool {
    let width = core::mem::size_of::<U>();
    match offset.checked_add(width) {
        Some(end) => end <= size && offset.is_multiple_of(width),
        None => false,
    }
}

/// Checks an access at run time, telling apart the two ways it can be wrong.
#[inline]
const fn check_offset<U>(offset: usize, size: usize) -> Result<(), Error> {
    let width = core::mem::size_of::<U>();
    match offset.checked_add(width) {
        Some(end) if end <= size => {
            if offset.is_multiple_of(width) {
                Ok(())
            } else {
                Err(Error::Misaligned)
            }
        }
        _ => Err(Error::OutOfBounds),
    }
}

/// What is known at build time about every offset a location type can produce.
///
/// A location type that sets [`IoLoc::STATIC_SPAN`] promises that every value it returns from
/// [`IoLoc::offset`] lies in `[0, end)` and, if `aligned` is true, is aligned to the width of the
/// access. The infallible accessors of [`Io`] then check the span against
/// [`IoKnownSize::MIN_SIZE`] at build time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaticSpan {
    /// Name of the register (or other location) for error messages.
    pub name: &'static str,
    /// One past the last byte any access through the location can touch.
    pub end: usize,
    /// Whether every offset is a multiple of the access width.
    pub aligned: bool,
}

/// Fails the build (when evaluated in a constant) if `span` does not fit in `size` bytes.
#[doc(hidden)]
pub const fn assert_span_fits(span: Option<StaticSpan>, size: usize) {
    if let Some(span) = span {
        if !span.aligned {
            let m = crate::__private::Msg::new()
                .s("register `")
                .s(span.name)
                .s("`: location is not aligned to the width of its storage type");
            panic!("{}", m.as_str());
        }
        if span.end > size {
            let m = crate::__private::Msg::new()
                .s("register `")
                .s(span.name)
                .s("` ends at offset ")
                .n(span.end as u64, true)
                .s(", outside of the I/O region's build-time size (")
                .n(size as u64, true)
                .s(" bytes)");
            panic!("{}", m.as_str());
        }
    }
}

/// A backend that can perform I/O accesses of the width of `T`.
///
/// Backends implement this once per width they support; a register of storage type `T` can only
/// be read from or written to a region implementing `IoCapable<T>`.
pub trait IoCapable<T> {
    /// Reads a `T` at absolute `addr`.
    ///
    /// # Safety
    ///
    /// `addr..addr + size_of::<T>()` must be inside the region, that is in
    /// `self.addr()..self.addr() + self.maxsize()` of its [`Io`] implementation, and `addr`
    /// must be aligned to `size_of::<T>()` relative to `self.addr()`.
    unsafe fn io_read(&self, addr: usize) -> T;

    /// Writes `value` at absolute `addr`.
    ///
    /// # Safety
    ///
    /// Same requirements as [`IoCapable::io_read`].
    unsafe fn io_write(&self, value: T, addr: usize);
}

/// A location in an I/O region: an offset, the width of the access there, and the type `T` the
/// raw value is converted to and from.
///
/// `usize` is the location of a primitive integer at that offset. The
/// [`register!`](crate::register!) macro makes locations for typed registers, with `T` the
/// register type and [`IoLoc::IoType`] its storage type.
pub trait IoLoc<T> {
    /// The primitive type of the access, which decides its width.
    type IoType: From<T> + Into<T>;

    /// What is known at build time about the offsets of this location type, if anything.
    const STATIC_SPAN: Option<StaticSpan> = None;

    /// Consumes the location and returns its offset in the region.
    fn offset(self) -> usize;
}

macro_rules! usize_locations {
    ($($ty:ty),*) => {
        $(
            impl IoLoc<$ty> for usize
            {
                type IoType = $ty;

                #[inline(always)]
                fn offset(self) -> usize {
                    self
                }
            }
        )*
    };
}

usize_locations!(u8, u16, u32, u64);

/// An I/O region: a base address, a size, and accessors of every width the backend supports.
///
/// The `try_*` accessors check every access at run time and return [`Error::OutOfBounds`] or
/// [`Error::Misaligned`] instead of performing a bad one. The infallible accessors need
/// [`IoKnownSize`]: for typed register locations their check happens at build time; a raw
/// `usize` offset is checked at run time and an invalid one panics, as an out-of-bounds slice
/// index does (the kernel refuses to build such code; a host compiler cannot prove it).
pub trait Io {
    /// Returns the base address of the region.
    fn addr(&self) -> usize;

    /// Returns the size of the region in bytes.
    fn maxsize(&self) -> usize;

    /// Returns the absolute address of an access of the width of `U` at `off`, after checking
    /// it at run time.
    #[inline]
    fn io_addr<U>(&self, offset: usize) -> Result<usize, Error> {
        check_offset::<U>(offset, self.maxsize())?;
        self.addr().checked_add(offset).ok_or(Error::OutOfBounds)
    }

    /// Reads a `u8` at `off`, checked at run time.
    #[inline(always)]
    fn try_read8(&self, off: usize) -> Result<u8, Error>
    where
        Self: IoCapable<u8>,
    {
        self.try_read(off)
    }

    /// Reads a `u16` at `off`, checked at run time.
    #[inline(always)]
    fn try_read16(&self, off: usize) -> Result<u16, Error>
    where
        Self: IoCapable<u16>,
    {
        self.try_read(off)
    }

    /// Reads a `u32` at `off`, checked at run time.
    #[inline(always)]
    fn try_read32(&self, off: usize) -> Result<u32, Error>
    where
        Self: IoCapable<u32>,
    {
        self.try_read(off)
    }

    /// Reads a `u64` at `off`, checked at run time.
    #[inline(always)]
    fn try_read64(&self, off: usize) -> Result<u64, Error>
    where
        Self: IoCapable<u64>,
    {
        self.try_read(off)
    }

    /// Writes a `u8` at `off`, checked at run time.
    #[inline(always)]
    fn try_write8(&self, val: u8, off: usize) -> Result<(), Error>
    where
        Self: IoCapable<u8>,
    {
        self.try_write(off, val)
    }

    /// Writes a `u16` at `off`, checked at run time.
    #[inline(always)]
    fn try_write16(&self, val: u16, off: usize) -> Result<(), Error>
    where
        Self: IoCapable<u16>,
    {
        self.try_write(off, val)
    }

    /// Writes a `u32` at `off`, checked at run time.
    #[inline(always)]
    fn try_write32(&self, val: u32, off: usize) -> Result<(), Error>
    where
        Self: IoCapable<u32>,
    {
        self.try_write(off, val)
    }

    /// Writes a `u64` at `off`, checked at run time.
    #[inline(always)]
    fn try_write64(&self, val: u64, off: usize) -> Result<(), Error>
    where
        Self: IoCapable<u64>,
    {
        self.try_write(off, val)
    }

    /// Reads a `u8` at `off` of a region of known size.
    ///
    /// # Panics
    ///
    /// If the access is out of bounds or misaligned.
    #[inline(always)]
    fn read8(&self, off: usize) -> u8
    where
        Self: IoCapable<u8> + IoKnownSize,
    {
        self.read(off)
    }

    /// Reads a `u16` at `off` of a region of known size.
    ///
    /// # Panics
    ///
    /// If the access is out of bounds or misaligned.
    #[inline(always)]
    fn read16(&self, off: usize) -> u16
    where
        Self: IoCapable<u16> + IoKnownSize,
    {
        self.read(off)
    }

    /// Reads a `u32` at `off` of a region of known size.
    ///
    /// # Panics
    ///
    /// If the access is out of bounds or misaligned.
    #[inline(always)]
    fn read32(&self, off: usize) -> u32
    where
        Self: IoCapable<u32> + IoKnownSize,
    {
        self.read(off)
    }

    /// Reads a `u64` at `off` of a region of known size.
    ///
    /// # Panics
    ///
    /// If the access is out of bounds or misaligned.
    #[inline(always)]
    fn read64(&self, off: usize) -> u64
    where
        Self: IoCapable<u64> + IoKnownSize,
    {
        self.read(off)
    }

    /// Writes a `u8` at `off` of a region of known size.
    ///
    /// # Panics
    ///
    /// If the access is out of bounds or misaligned.
    #[inline(always)]
    fn write8(&self, val: u8, off: usize)
    where
        Self: IoCapable<u8> + IoKnownSize,
    {
        self.write(off, val)
    }

    /// Writes a `u16` at `off` of a region of known size.
    ///
    /// # Panics
    ///
    /// If the access is out of bounds or misaligned.
    #[inline(always)]
    fn write16(&self, val: u16, off: usize)
    where
        Self: IoCapable<u16> + IoKnownSize,
    {
        self.write(off, val)
    }

    /// Writes a `u32` at `off` of a region of known size.
    ///
    /// # Panics
    ///
    /// If the access is out of bounds or misaligned.
    #[inline(always)]
    fn write32(&self, val: u32, off: usize)
    where
        Self: IoCapable<u32> + IoKnownSize,
    {
        self.write(off, val)
    }

    /// Writes a `u64` at `off` of a region of known size.
    ///
    /// # Panics
    ///
    /// If the access is out of bounds or misaligned.
    #[inline(always)]
    fn write64(&self, val: u64, off: usize)
    where
        Self: IoCapable<u64> + IoKnownSize,
    {
        self.write(off, val)
    }

    /// Reads the value at `location`, checked at run time.
    ///
    /// # Examples
    ///
    /// ```
    /// use register::io::{Io, MemRegion};
    ///
    /// let io = MemRegion::<0x10>::new();
    /// io.write32(7, 0x4);
    /// let v: u32 = io.try_read(0x4)?;
    /// assert_eq!(v, 7);
    /// assert!(io.try_read::<u64, _>(0xc).is_err());
    /// # Ok::<(), register::Error>(())
    /// ```
    #[inline(always)]
    fn try_read<T, L>(&self, loc: L) -> Result<T, Error>
    where
        L: IoLoc<T>,
        Self: IoCapable<<L as IoLoc<T>>::IoType>,
    {
        let addr = self.io_addr::<L::IoType>(loc.offset())?;
        // SAFETY: `io_addr` checked that the access is inside the region and aligned.
        let raw: L::IoType = unsafe { self.io_read(addr) };
        Ok(raw.into())
    }

    /// Writes `value` at `location`, checked at run time.
    #[inline(always)]
    fn try_write<T, L>(&self, loc: L, value: T) -> Result<(), Error>
    where
        L: IoLoc<T>,
        Self: IoCapable<<L as IoLoc<T>>::IoType>,
    {
        let addr = self.io_addr::<L::IoType>(loc.offset())?;
        // SAFETY: `io_addr` checked that the access is inside the region and aligned.
        unsafe { self.io_write(value.into(), addr) };
        Ok(())
    }

    /// Writes a register value that knows its own location, checked at run time.
    #[inline(always)]
    fn try_write_reg<T, L, V>(&self, reg: V) -> Result<(), Error>
    where
        L: IoLoc<T>,
        V: LocatedRegister<Value = T, Location = L>,
        Self: IoCapable<<L as IoLoc<T>>::IoType>,
    {
        let (loc, val) = reg.into_io_op();
        self.try_write(loc, val)
    }

    /// Reads the value at `location`, passes it to `f` and writes the result back, checked at
    /// run time.
    ///
    /// The read and the write are two separate accesses: nothing stops the device or another
    /// CPU from changing the register in between.
    #[inline(always)]
    fn try_update<T, L, F>(&self, loc: L, f: F) -> Result<(), Error>
    where
        L: IoLoc<T>,
        Self: IoCapable<<L as IoLoc<T>>::IoType>,
        F: FnOnce(T) -> T,
    {
        let addr = self.io_addr::<L::IoType>(loc.offset())?;
        // SAFETY: `io_addr` checked that the access is inside the region and aligned.
        let raw: L::IoType = unsafe { self.io_read(addr) };
        let current: T = raw.into();
        let value = f(current).into();
        // SAFETY: Same address as the read above.
        unsafe { self.io_write(value, addr) };
        Ok(())
    }

    /// Reads the value at `location` of a region of known size.
    ///
    /// # Panics
    ///
    /// If `location` is a raw offset that is out of bounds or misaligned. The locations of typed
    /// registers are checked at build time instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use register::io::{Io, MemRegion};
    ///
    /// let io = MemRegion::<0x1000>::new();
    /// let v: u32 = io.read(0x10);
    /// let b: u8 = io.read(0xfff);
    /// assert_eq!((v, b), (0, 0));
    /// ```
    #[inline(always)]
    fn read<T, L>(&self, loc: L) -> T
    where
        L: IoLoc<T>,
        Self: IoCapable<L::IoType> + IoKnownSize,
    {
        let addr = self.io_addr_located::<T, L>(loc);
        // SAFETY: `io_addr_located` checked that the access is inside the region and aligned.
        let raw: L::IoType = unsafe { self.io_read(addr) };
        raw.into()
    }

    /// Writes `value` at `location` of a region of known size.
    ///
    /// # Panics
    ///
    /// If `location` is a raw offset that is out of bounds or misaligned. The locations of typed
    /// registers are checked at build time instead.
    #[inline(always)]
    fn write<T, L>(&self, loc: L, value: T)
    where
        L: IoLoc<T>,
        Self: IoCapable<L::IoType> + IoKnownSize,
    {
        let addr = self.io_addr_located::<T, L>(loc);
        // SAFETY: `io_addr_located` checked that the access is inside the region and aligned.
        unsafe { self.io_write(value.into(), addr) }
    }

    /// Writes a register value that knows its own location, in a region of known size.
    #[inline(always)]
    fn write_reg<T, L, V>(&self, reg: V)
    where
        L: IoLoc<T>,
        V: LocatedRegister<Value = T, Location = L>,
        Self: IoCapable<L::IoType> + IoKnownSize,
    {
        let (loc, val) = reg.into_io_op();
        self.write(loc, val)
    }

    /// Reads the value at `location`, passes it to `f` and writes the result back.
    ///
    /// The read and the write are two separate accesses: nothing stops the device or another
    /// CPU from changing the register in between.
    ///
    /// # Panics
    ///
    /// If `location` is a raw offset that is out of bounds or misaligned. The locations of typed
    /// registers are checked at build time instead.
    #[inline(always)]
    fn update<T, L, F>(&self, loc: L, f: F)
    where
        L: IoLoc<T>,
        Self: IoCapable<L::IoType> + IoKnownSize + Sized,
        F: FnOnce(T) -> T,
    {
        let addr = self.io_addr_located::<T, L>(loc);
        // SAFETY: `io_addr_located` checked that the access is inside the region and aligned.
        let raw: L::IoType = unsafe { self.io_read(addr) };
        let current: T = raw.into();
        let value = f(current).into();
        // SAFETY: Same address as the read above.
        unsafe { self.io_write(value, addr) }
    }
}

/// A region whose size is known at build time, at least [`IoKnownSize::MIN_SIZE`] bytes.
pub trait IoKnownSize: Io {
    /// The size of the region the type guarantees.
    const MIN_SIZE: usize;

    /// Returns the absolute address of an access of the width of `U` at `off`.
    ///
    /// # Panics
    ///
    /// If the access does not fit in [`IoKnownSize::MIN_SIZE`] bytes or is misaligned.
    #[inline(always)]
    fn io_addr_assert<U>(&self, off: usize) -> usize {
        match check_offset::<U>(off, Self::MIN_SIZE) {
            // `addr + MIN_SIZE` is the end of a valid region, so this does not wrap.
            Ok(()) => self.addr().wrapping_add(off),
            Err(_) => panic!("I/O access out of bounds or misaligned"),
        }
    }

    /// Returns the absolute address of `location`, checking its [`IoLoc::STATIC_SPAN`] against
    /// [`IoKnownSize::MIN_SIZE`] at build time when it has one.
    ///
    /// # Panics
    ///
    /// If the location has no static span and its offset is invalid, or if a location type
    /// breaks the promise of its static span.
    #[inline(always)]
    fn io_addr_located<T, L: IoLoc<T>>(&self, loc: L) -> usize {
        const { assert_span_fits(L::STATIC_SPAN, Self::MIN_SIZE) };
        // For locations with a static span, this check is folded away by the optimizer.
        self.io_addr_assert::<L::IoType>(loc.offset())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_validation() {
        assert!(offset_valid::<u32>(0, 4));
        assert!(!offset_valid::<u32>(1, 8));
        assert!(!offset_valid::<u32>(4, 7));
        assert!(!offset_valid::<u64>(usize::MAX - 3, usize::MAX));
        assert_eq!(check_offset::<u16>(3, 8), Err(Error::Misaligned));
        assert_eq!(check_offset::<u16>(8, 8), Err(Error::OutOfBounds));
        assert_eq!(check_offset::<u8>(7, 8), Ok(()));
    }

    #[test]
    fn runtime_checked_accessors() {
        let io = MemRegion::<16>::new();
        assert_eq!(io.try_write32(1, 16), Err(Error::OutOfBounds));
        assert_eq!(io.try_write16(1, 1), Err(Error::Misaligned));
        assert_eq!(io.try_read64(8), Ok(0));
        io.try_write64(0x0102_0304_0506_0708, 8).unwrap();
        assert_eq!(io.try_read8(8), Ok(0x08));
        assert_eq!(io.try_read16(14), Ok(0x0102));
        assert_eq!(io.try_read32(12), Ok(0x0102_0304));
        io.try_update(8usize, |v: u8| v + 1).unwrap();
        assert_eq!(io.read8(8), 9);
        assert_eq!(io.try_update(9usize, |v: u16| v), Err(Error::Misaligned));
        io.write8(0xaa, 0);
        io.write16(0xbbcc, 2);
        io.write32(0x1122_3344, 4);
        io.update(4usize, |v: u32| v ^ 0xffff_ffff);
        assert_eq!(io.read32(4), !0x1122_3344);
        assert_eq!(io.read64(0), 0xeedd_ccbb_bbcc_00aa);
    }

    #[test]
    #[should_panic(expected = "out of bounds")]
    fn infallible_raw_offset_out_of_bounds_panics() {
        let io = MemRegion::<16>::new();
        io.read32(16);
    }
}
