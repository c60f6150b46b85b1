// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A region that forwards every access to a device model.
//!
//! Simulators reproduce a device at register level: a read of a status register reports the
//! simulated state, a write to a command register starts simulated work. Such a simulator
//! implements [`DeviceModel`], and a [`ModelRegion`] turns it into an I/O region that drivers use
//! through the same [`Io`] traits, and the same `register!` types, as real hardware.
//!
//! A region can also record every access it forwards, in order, through a [`Trace`]: tests then
//! check not only the device's final state but the exact sequence of register accesses a driver
//! made (`TraceLog`, with the `alloc` feature, keeps them in a vector).

use super::{Io, IoCapable, IoKnownSize};

/// The width of an I/O access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessWidth {
    /// 8 bits.
    U8,
    /// 16 bits.
    U16,
    /// 32 bits.
    U32,
    /// 64 bits.
    U64,
}

impl AccessWidth {
    /// Returns the width in bytes.
    pub const fn bytes(self) -> usize {
        match self {
            AccessWidth::U8 => 1,
            AccessWidth::U16 => 2,
            AccessWidth::U32 => 4,
            AccessWidth::U64 => 8,
        }
    }
}

/// Whether an access reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessKind {
    /// A read; the value is what the model returned.
    Read,
    /// A write; the value is what the driver wrote.
    Write,
}

/// One access forwarded to a model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Access {
    /// Read or write.
    pub kind: AccessKind,
    /// Offset in the region.
    pub offset: usize,
    /// Width of the access.
    pub width: AccessWidth,
    /// Value read or written, zero-extended.
    pub value: u64,
}

/// A device simulated at register level.
///
/// The region calls the model only for accesses that are inside the region and aligned to their
/// width, so a model does not need to check them again. Methods take `&self`, as register
/// accesses do; a model keeps its state in cells or behind a lock.
pub trait DeviceModel {
    /// Returns the value of the `width`-wide register at `offset`, zero-extended. Bits beyond
    /// `width` are ignored.
    fn read(&self, offset: usize, width: AccessWidth) -> u64;

    /// Handles a write of `value` (zero-extended) to the `width`-wide register at `offset`.
    fn write(&self, offset: usize, width: AccessWidth, value: u64);
}

impl<M: DeviceModel + ?Sized> DeviceModel for &M {
    fn read(&self, offset: usize, width: AccessWidth) -> u64 {
        (**self).read(offset, width)
    }

    fn write(&self, offset: usize, width: AccessWidth, value: u64) {
        (**self).write(offset, width, value)
    }
}

/// Receives every access a [`ModelRegion`] forwards.
pub trait Trace {
    /// Records `access`, which has just been performed.
    fn record(&self, access: Access);
}

/// A [`Trace`] that records nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoTrace;

impl Trace for NoTrace {
    #[inline(always)]
    fn record(&self, _access: Access) {}
}

impl<T: Trace + ?Sized> Trace for &T {
    fn record(&self, access: Access) {
        (**self).record(access)
    }
}

/// A [`Trace`] keeping every access in a vector.
#[cfg(feature = "alloc")]
#[derive(Debug, Default)]
pub struct TraceLog {
    accesses: core::cell::RefCell<alloc::vec::Vec<Access>>,
}

#[cfg(feature = "alloc")]
impl TraceLog {
    /// Returns an empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Removes and returns the accesses recorded so far.
    pub fn take(&self) -> alloc::vec::Vec<Access> {
        self.accesses.take()
    }

    /// Returns how many accesses are recorded.
    pub fn len(&self) -> usize {
        self.accesses.try_borrow().map_or(0, |a| a.len())
    }

    /// Returns whether no access is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(feature = "alloc")]
impl Trace for TraceLog {
    fn record(&self, access: Access) {
        // The log is only borrowed here and in `take`/`len`, none of which call back, so the
        // borrow cannot fail; an access is dropped rather than panicking if it ever did.
        if let Ok(mut accesses) = self.accesses.try_borrow_mut() {
            accesses.push(access);
        }
    }
}

/// An I/O region of `SIZE` bytes forwarding each access to the model `M` and reporting it to
/// the trace `T`.
///
/// # Examples
///
/// A device with a counter that increments on every read:
///
/// ```
/// use core::cell::Cell;
/// use register::io::{AccessWidth, DeviceModel, Io, ModelRegion};
///
/// #[derive(Default)]
/// struct Counter(Cell<u64>);
///
/// impl DeviceModel for Counter {
///     fn read(&self, _offset: usize, _width: AccessWidth) -> u64 {
///         self.0.replace(self.0.get() + 1)
///     }
///     fn write(&self, _offset: usize, _width: AccessWidth, value: u64) {
///         self.0.set(value);
///     }
/// }
///
/// let io = ModelRegion::<_, 0x10>::new(Counter::default());
/// io.write32(41, 0x0);
/// assert_eq!(io.read32(0x0), 41);
/// assert_eq!(io.read32(0x0), 42);
/// assert!(io.try_read32(0x10).is_err()); // never reaches the model
/// assert_eq!(io.model().0.get(), 43);
/// ```
pub struct ModelRegion<M, const SIZE: usize, T = NoTrace> {
    model: M,
    trace: T,
}

impl<M: DeviceModel, const SIZE: usize> ModelRegion<M, SIZE, NoTrace> {
    /// Returns a region forwarding to `model`, without a trace.
    pub const fn new(model: M) -> Self {
        Self {
            model,
            trace: NoTrace,
        }
    }
}

impl<M: DeviceModel, const SIZE: usize, T: Trace> ModelRegion<M, SIZE, T> {
    /// Returns a region forwarding to `model` and reporting every access to `trace`.
    pub const fn with_trace(model: M, trace: T) -> Self {
        Self { model, trace }
    }

    /// Returns the model.
    pub fn model(&self) -> &M {
        &self.model
    }

    /// Returns the trace.
    pub fn trace(&self) -> &T {
        &self.trace
    }

    /// Returns the model and the trace.
    pub fn into_parts(self) -> (M, T) {
        (self.model, self.trace)
    }
}

impl<M, const SIZE: usize, T> Io for ModelRegion<M, SIZE, T> {
    #[inline]
    fn addr(&self) -> usize {
        0
    }

    #[inline]
    fn maxsize(&self) -> usize {
        SIZE
    }
}

impl<M, const SIZE: usize, T> IoKnownSize for ModelRegion<M, SIZE, T> {
    const MIN_SIZE: usize = SIZE;
}

macro_rules! impl_model_io_capable {
    ($($ty:ty => $width:ident),*) => {
        $(
            impl<M: DeviceModel, const SIZE: usize, T: Trace> IoCapable<$ty>
                for ModelRegion<M, SIZE, T>
            {
                #[inline]
                unsafe fn io_read(&self, at: usize) -> $ty {
                    let raw = self.model.read(at, AccessWidth::$width);
                    // Truncation keeps the bits of the access width, as documented on the trait.
                    let value = raw as $ty;
                    self.trace.record(Access {
                        kind: AccessKind::Read,
                        offset: at,
                        width: AccessWidth::$width,
                        value: u64::from(value),
                    });
                    value
                }

                #[inline]
                unsafe fn io_write(&self, value: $ty, at: usize) {
                    self.model.write(at, AccessWidth::$width, u64::from(value));
                    self.trace.record(Access {
                        kind: AccessKind::Write,
                        offset: at,
                        width: AccessWidth::$width,
                        value: u64::from(value),
                    });
                }
            }
        )*
    };
}

impl_model_io_capable!(u8 => U8, u16 => U16, u32 => U32, u64 => U64);

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use super::*;
    use core::cell::RefCell;
    extern crate std;
    use std::collections::BTreeMap;

    /// A sparse byte-addressed memory.
    #[derive(Default)]
    struct Sparse(RefCell<BTreeMap<usize, u8>>);

    impl DeviceModel for Sparse {
        fn read(&self, offset: usize, width: AccessWidth) -> u64 {
            let map = self.0.borrow();
            (0..width.bytes()).rev().fold(0, |acc, i| {
                (acc << 8) | u64::from(*map.get(&(offset + i)).unwrap_or(&0))
            })
        }

        fn write(&self, offset: usize, width: AccessWidth, value: u64) {
            let mut map = self.0.borrow_mut();
            for i in 0..width.bytes() {
                map.insert(offset + i, (value >> (8 * i)) as u8);
            }
        }
    }

    #[test]
    fn forwards_and_traces() {
        let io = ModelRegion::<_, 0x100, _>::with_trace(Sparse::default(), TraceLog::new());
        io.write16(0xabcd, 0x10);
        assert_eq!(io.read8(0x11), 0xab);
        assert_eq!(io.try_read32(0x11), Err(crate::Error::Misaligned));
        assert_eq!(io.trace().len(), 2);
        assert_eq!(
            io.trace().take(),
            [
                Access {
                    kind: AccessKind::Write,
                    offset: 0x10,
                    width: AccessWidth::U16,
                    value: 0xabcd
                },
                Access {
                    kind: AccessKind::Read,
                    offset: 0x11,
                    width: AccessWidth::U8,
                    value: 0xab
                },
            ]
        );
        assert!(io.trace().is_empty());
        let (model, _) = io.into_parts();
        assert_eq!(model.0.borrow().len(), 2);
    }

    #[test]
    fn reads_are_truncated_to_width() {
        struct AllOnes;
        impl DeviceModel for AllOnes {
            fn read(&self, _: usize, _: AccessWidth) -> u64 {
                u64::MAX
            }
            fn write(&self, _: usize, _: AccessWidth, _: u64) {}
        }
        let io = ModelRegion::<_, 8>::new(&AllOnes);
        assert_eq!(io.read8(0), 0xff);
        assert_eq!(io.read16(2), 0xffff);
        assert_eq!(io.read64(0), u64::MAX);
        let log = TraceLog::new();
        let traced = ModelRegion::<_, 8, _>::with_trace(AllOnes, &log);
        traced.write32(1, 4);
        assert_eq!(log.take()[0].kind, AccessKind::Write);
    }
}
