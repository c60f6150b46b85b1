// SPDX-License-Identifier: GPL-2.0 OR MIT

//! KUnit suite `gpukit_register`: generated registers on the kernel's own `Mmio`.

use ::kernel::prelude::*;

#[kunit_tests(gpukit_register)]
mod tests {
    use core::time::Duration;

    use crate::io::poll::{read_poll_timeout, PollClock};
    use crate::io::Io;
    use crate::kernel::KernelPollClock;
    use crate::{register, Error, RegisterBase};
    use ::kernel::io::{Mmio, MmioRaw};
    use ::kernel::prelude::*;

    // The suite uses both styles: the Linux 7.2 one and the first series' (`ID::read(&io)`,
    // `write`, `try_read`), which `register!` generates only on request.
    register! {
        @first_series

        /// Identification register of the pretend device.
        ID(u32) @ 0x0 {
            31:16 product;
            15:8 major;
            7:0 minor;
        }

        /// Control register.
        CTRL(u32) @ 0x4 {
            8:8 enable;
            7:4 mode;
            3:0 level;
        }

        /// Doorbells, one per queue.
        DOORBELL(u32)[8] @ 0x40 {
            31:0 value;
        }

        /// Firmware status: element 3 of the doorbells.
        FW_STATUS(u32) => DOORBELL[3] {
            7:0 code;
        }

        /// A 64-bit counter.
        CYCLES(u64) @ 0x20 {
            63:0 count;
        }

        /// Per-slot configuration, relative to the slot's base.
        SLOT_CFG(u32) @ SlotBase + 0x8 {
            15:0 flags;
        }
    }

    /// Family of the relative registers.
    struct SlotBase;

    /// The second slot's block of registers starts at 0x100.
    struct Slot1;

    impl RegisterBase<SlotBase> for Slot1 {
        const BASE: usize = 0x100;
    }

    /// Zeroed kernel memory seen through the kernel's `Mmio`, standing in for a register block.
    struct Scratch {
        mem: *mut [u64; 64],
        raw: MmioRaw<512>,
    }

    impl Scratch {
        fn new() -> Result<Self> {
            let mem = KBox::into_raw(KBox::new([0u64; 64], GFP_KERNEL)?);
            let raw = MmioRaw::new(mem as usize, 512)?;
            Ok(Scratch { mem, raw })
        }

        fn io(&self) -> &Mmio<512> {
            // SAFETY: `raw` covers the 512 bytes of `mem`, which stay allocated and are accessed
            // only through this view until `drop`.
            unsafe { Mmio::from_raw(&self.raw) }
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            // SAFETY: `mem` came from `KBox::into_raw`; no view of it outlives `self`.
            drop(unsafe { KBox::from_raw(self.mem) });
        }
    }

    #[test]
    fn fields_read_through_kernel_mmio() -> Result {
        let s = Scratch::new()?;
        let io = s.io();
        // A raw write with the kernel's accessor, read back through the generated type.
        ::kernel::io::Io::write32(io, 0x1234_0507, 0x0);
        let id = ID::read(&io);
        assert_eq!(id.product().get(), 0x1234);
        assert_eq!(id.major().get(), 5);
        assert_eq!(id.minor().get(), 7);
        assert_eq!(io.read(ID).minor().get(), 7);
        Ok(())
    }

    #[test]
    fn write_and_update_reach_kernel_mmio() -> Result {
        let s = Scratch::new()?;
        let io = s.io();
        io.write_reg(
            CTRL::zeroed()
                .with_const_mode::<0xa>()
                .with_const_level::<3>(),
        );
        assert_eq!(::kernel::io::Io::read32(io, 0x4), 0xa3);
        io.update(CTRL, |c| c.with_const_enable::<1>());
        assert_eq!(::kernel::io::Io::read32(io, 0x4), 0x1a3);
        assert_eq!(io.read32(0x4), 0x1a3);
        Ok(())
    }

    #[test]
    fn arrays_aliases_and_runtime_indices() -> Result {
        let s = Scratch::new()?;
        let io = s.io();
        DOORBELL::from(0x1ee).write(&io, 3);
        assert_eq!(FW_STATUS::read(&io).code().get(), 0xee);
        assert_eq!(::kernel::io::Io::read32(io, 0x40 + 3 * 4), 0x1ee);
        assert_eq!(
            DOORBELL::try_read(&io, 3).map(|d| d.value().get()),
            Ok(0x1ee)
        );
        assert_eq!(DOORBELL::try_read(&io, 8), Err(Error::IndexOutOfRange));
        Ok(())
    }

    #[test]
    fn relative_and_64bit_registers() -> Result {
        let s = Scratch::new()?;
        let io = s.io();
        SLOT_CFG::zeroed()
            .with_const_flags::<0xbeef>()
            .write(&io, &Slot1);
        assert_eq!(::kernel::io::Io::read32(io, 0x108), 0xbeef);
        ::kernel::io::Io::write64(io, 0x0123_4567_89ab_cdef, 0x20);
        assert_eq!(CYCLES::read(&io).count().get(), 0x0123_4567_89ab_cdef);
        Ok(())
    }

    #[test]
    fn checked_accessors_refuse_out_of_range() -> Result {
        let s = Scratch::new()?;
        let io = s.io();
        assert!(io.try_read32(512).is_err());
        assert!(io.try_read32(510).is_err());
        assert!(io.try_read16(2).is_ok());
        assert_eq!(io.try_write8(1, 511), Ok(()));
        // The crate's error becomes the kernel's `EINVAL` in a driver's `?`.
        let e: ::kernel::error::Error = Error::IndexOutOfRange.into();
        assert_eq!(e.to_errno(), EINVAL.to_errno());
        Ok(())
    }

    #[test]
    fn poll_with_kernel_clock() -> Result {
        let s = Scratch::new()?;
        let io = s.io();
        let clock = KernelPollClock::new();
        // Never becomes ready: gives up after the timeout with ETIMEDOUT.
        let r: core::result::Result<u32, Error> = read_poll_timeout(
            &clock,
            || Ok(io.read32(0x4)),
            |v| *v == 1,
            Duration::from_micros(50),
            Duration::from_micros(500),
        );
        assert_eq!(r, Err(Error::TimedOut));
        assert!(clock.now() >= Duration::from_micros(500));
        // Already ready: returns at once.
        io.write32(1, 0x4);
        let r: core::result::Result<u32, Error> = read_poll_timeout(
            &clock,
            || Ok(io.read32(0x4)),
            |v| *v == 1,
            Duration::from_micros(50),
            Duration::from_millis(1),
        );
        assert_eq!(r, Ok(1));
        Ok(())
    }
}
