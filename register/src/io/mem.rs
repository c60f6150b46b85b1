// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A region backed by plain host memory, for unit tests.
//!
//! Driver logic written against [`Io`] can be exercised without hardware: a
//! [`MemRegion`] stores every byte written to it and returns it on the next read, in
//! little-endian order (the byte order of MMIO on the CPUs the Linux GPU drivers target). It has
//! no side effects and no unsafe code; use a [`ModelRegion`](super::ModelRegion) when reads or
//! writes must trigger device behaviour.

use core::cell::Cell;

use super::{Io, IoCapable, IoKnownSize};

/// `SIZE` bytes of host memory behaving as an I/O region with base address 0.
///
/// # Examples
///
/// ```
/// use register::io::{Io, MemRegion};
///
/// let io = MemRegion::<8>::from_bytes([0x78, 0x56, 0x34, 0x12, 0, 0, 0, 0]);
/// assert_eq!(io.read32(0), 0x1234_5678);
/// io.write8(0xff, 7);
/// assert_eq!(io.read64(0), 0xff00_0000_1234_5678);
/// ```
pub struct MemRegion<const SIZE: usize> {
    bytes: [Cell<u8>; SIZE],
}

impl<const SIZE: usize> MemRegion<SIZE> {
    /// Returns a region filled with zeroes.
    pub const fn new() -> Self {
        Self {
            bytes: [const { Cell::new(0) }; SIZE],
        }
    }

    /// Returns a region holding `bytes`.
    pub fn from_bytes(bytes: [u8; SIZE]) -> Self {
        Self {
            bytes: bytes.map(Cell::new),
        }
    }

    /// Returns the byte at `offset`, or `None` past the end.
    pub fn byte(&self, offset: usize) -> Option<u8> {
        self.bytes.get(offset).map(Cell::get)
    }

    /// Copies `N` bytes starting at `address`, or returns `None` if they are not all inside.
    fn load<const N: usize>(&self, at: usize) -> Option<[u8; N]> {
        let cells = self.bytes.get(at..at.checked_add(N)?)?;
        let mut out = [0; N];
        for (o, c) in out.iter_mut().zip(cells) {
            *o = c.get();
        }
        Some(out)
    }

    /// Stores `bytes` starting at `address` if they are all inside.
    fn store<const N: usize>(&self, at: usize, bytes: [u8; N]) {
        if let Some(cells) = at.checked_add(N).and_then(|end| self.bytes.get(at..end)) {
            for (c, b) in cells.iter().zip(bytes) {
                c.set(b);
            }
        }
    }
}

impl<const SIZE: usize> Default for MemRegion<SIZE> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const SIZE: usize> core::fmt::Debug for MemRegion<SIZE> {
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
        f.debug_struct("MemRegion").field("size", &SIZE).finish()
    }
}

impl<const SIZE: usize> Io for MemRegion<SIZE> {
    #[inline]
    fn addr(&self) -> usize {
        0
    }

    #[inline]
    fn maxsize(&self) -> usize {
        SIZE
    }
}

impl<const SIZE: usize> IoKnownSize for MemRegion<SIZE> {
    const MIN_SIZE: usize = SIZE;
}

macro_rules! impl_mem_io_capable {
    ($($ty:ty),*) => {
        $(
            impl<const SIZE: usize> IoCapable<$ty> for MemRegion<SIZE> {
                #[inline]
                unsafe fn io_read(&self, at: usize) -> $ty {
                    // Out-of-range addresses break the caller's contract; they read as zero
                    // rather than panicking.
                    self.load(at).map_or(0, <$ty>::from_le_bytes)
                }

                #[inline]
                unsafe fn io_write(&self, value: $ty, at: usize) {
                    self.store(at, value.to_le_bytes());
                }
            }
        )*
    };
}

impl_mem_io_capable!(u8, u16, u32, u64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn little_endian_round_trips() {
        let io = MemRegion::<16>::default();
        io.write64(0x8877_6655_4433_2211, 8);
        assert_eq!(io.byte(8), Some(0x11));
        assert_eq!(io.byte(15), Some(0x88));
        assert_eq!(io.byte(16), None);
        assert_eq!(io.read16(10), 0x4433);
        assert_eq!(io.read32(12), 0x8877_6655);
        io.write16(0xbeef, 0);
        assert_eq!(io.read8(0), 0xef);
        assert_eq!(io.read8(1), 0xbe);
    }

    #[test]
    fn contract_violations_do_not_panic() {
        let io = MemRegion::<4>::new();
        // SAFETY: `MemRegion` tolerates out-of-range addresses; this checks that it does.
        let v: u32 = unsafe { io.io_read(2) };
        assert_eq!(v, 0);
        // SAFETY: As above.
        unsafe { IoCapable::<u32>::io_write(&io, 5, usize::MAX - 1) };
        assert_eq!(io.read32(0), 0);
    }
}
