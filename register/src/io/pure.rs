// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Keeping reads without side effects apart from reads with them.
//!
//! Reading a device register is not always harmless: reading an interrupt status register may
//! acknowledge the interrupts, reading a FIFO pops an entry. The kernel's `Io` trait allows any
//! read through a shared reference, like the C `readl`; code that only wants to look (a debug
//! dump, a monitoring task, a fault report) would then be free to disturb the device.
//!
//! As the `safe-mmio` crate does with its `ReadPure` fields and shared pointers, this module
//! splits the two: a register type opts in with the [`ReadPure`] marker when its reads have no
//! side effects, and a [`PureView`] of a region, which code that only observes receives instead
//! of the region, reads those registers and nothing else. It cannot write, cannot read raw
//! offsets, and cannot read a register that is not marked.

use super::{Io, IoCapable, IoKnownSize, IoLoc};
use crate::Error;

/// Marks a register type whose reads have no side effect on the device, so that it can be read
/// through a [`PureView`].
///
/// Implement it next to the `register!` declaration: `impl ReadPure for GPU_ID {}`. Marking a
/// register whose reads do have side effects is not unsafe, only wrong.
pub trait ReadPure {}

/// A region that can only be used to read registers marked [`ReadPure`].
///
/// # Examples
///
/// ```
/// use register::io::{pure::{PureView, ReadPure}, Io, MemRegion};
/// use register::register;
///
/// register! {
///     /// Identification; reading it changes nothing.
///     pub GPU_ID(u32) @ 0x0 { 31:16 arch; 15:0 rev; }
///     /// Interrupt status; reading it acknowledges the interrupts.
///     pub IRQ_STATUS(u32) @ 0x4 { 31:0 pending; }
/// }
/// impl ReadPure for GPU_ID {}
///
/// fn dump(view: PureView<'_, MemRegion<0x10>>) -> u32 {
///     // `view.read(IRQ_STATUS)` would not compile, nor would any write.
///     view.read(GPU_ID).arch().get()
/// }
///
/// let io = MemRegion::<0x10>::new();
/// io.write32(0xa867_0000, 0x0);
/// assert_eq!(dump(PureView::new(&io)), 0xa867);
/// ```
#[derive(Debug)]
pub struct PureView<'a, I: ?Sized> {
    io: &'a I,
}

impl<I: ?Sized> Clone for PureView<'_, I> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<I: ?Sized> Copy for PureView<'_, I> {}

impl<'a, I: Io + ?Sized> PureView<'a, I> {
    /// Returns a view of `io` limited to side-effect-free reads.
    pub fn new(io: &'a I) -> Self {
        Self { io }
    }

    /// Reads the register at `location`, checked at run time.
    #[inline(always)]
    pub fn try_read<T, L>(&self, location: L) -> Result<T, Error>
    where
        T: ReadPure,
        L: IoLoc<T>,
        I: IoCapable<L::IoType>,
    {
        self.io.try_read(location)
    }

    /// Reads the register at `location` of a region of known size.
    ///
    /// # Panics
    ///
    /// As [`Io::read`]: never for register locations, which are checked at build time.
    #[inline(always)]
    pub fn read<T, L>(&self, location: L) -> T
    where
        T: ReadPure,
        L: IoLoc<T>,
        I: IoKnownSize + IoCapable<L::IoType>,
    {
        self.io.read(location)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{AccessWidth, DeviceModel, ModelRegion};
    use core::cell::Cell;

    crate::register! {
        ID(u32) @ 0x0 { 31:0 value; }
        STATUS(u32) @ 0x4 { 31:0 pending; }
    }
    impl ReadPure for ID {}

    /// Status is cleared by reading it.
    struct Device {
        status: Cell<u32>,
    }

    impl DeviceModel for Device {
        fn read(&self, offset: usize, _: AccessWidth) -> u64 {
            match offset {
                0 => 0x1234,
                4 => u64::from(self.status.replace(0)),
                _ => 0,
            }
        }

        fn write(&self, _: usize, _: AccessWidth, _: u64) {}
    }

    #[test]
    fn view_reads_only_pure_registers() {
        let io = ModelRegion::<_, 8>::new(Device {
            status: Cell::new(5),
        });
        let view = PureView::new(&io);
        assert_eq!(view.read(ID).value(), 0x1234);
        assert_eq!(view.try_read(ID).map(ID::as_raw), Ok(0x1234));
        // The status is still pending: the view could not have read it.
        assert_eq!(io.read(STATUS).pending(), 5);
        assert_eq!(io.read(STATUS).pending(), 0);
    }
}
