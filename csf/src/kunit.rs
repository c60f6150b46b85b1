// SPDX-License-Identifier: GPL-2.0 OR MIT

//! KUnit suite `gpukit_csf`: the instruction set inside the kernel, as Tyr's ring job and the
//! simulated GPU built into it use it.

use ::kernel::prelude::*;

#[kunit_tests(gpukit_csf)]
mod tests {
    use crate::{
        Disasm, FlushMode, Imm48, Instr, OtherFlushMode, Reg, Reg64, Slot, SlotMask, SyncOp,
        WaitMask,
    };
    use core::fmt::Write;

    /// A fixed buffer the listing is written into (no allocation).
    struct Buf {
        bytes: [u8; 256],
        len: usize,
    }

    impl Write for Buf {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            let end = self.len.checked_add(s.len()).ok_or(core::fmt::Error)?;
            let dst = self.bytes.get_mut(self.len..end).ok_or(core::fmt::Error)?;
            dst.copy_from_slice(s.as_bytes());
            self.len = end;
            Ok(())
        }
    }

    #[test]
    fn panthors_ring_job_round_trips() {
        let (addr, val) = (Reg64(92), Reg(94));
        let job = [
            Instr::move32(val, 7),
            Instr::flush_cache2(
                FlushMode::CleanInvalidate,
                FlushMode::CleanInvalidate,
                OtherFlushMode::Invalidate,
                val,
                SlotMask::NONE,
                Slot::of::<0>(),
            ),
            Instr::move48(addr, Imm48::of::<0x10_0000>()),
            Instr::wait(WaitMask::from_bits(1)),
            Instr::call(addr, val),
            Instr::wait(WaitMask::ALL),
            Instr::sync_add64(SyncOp::new(addr, Reg64(94)).propagate_error()),
            Instr::error_barrier(),
        ];
        let words = [
            0x025e_0000_0000_0007,
            0x2400_5e00_0000_0233,
            0x015c_0000_0010_0000,
            0x0300_0000_0001_0000,
            0x2000_5c5e_0000_0000,
            0x0300_0000_00ff_0000,
            0x3300_5c5e_0000_0001,
            0x2f00_0000_0000_0000,
        ];
        for (i, w) in job.iter().zip(words) {
            assert_eq!(i.encode(), w);
            assert_eq!(Instr::decode(w), Ok(*i));
        }
    }

    #[test]
    fn undefined_words_are_refused() {
        for opcode in [10u64, 19, 26, 35, 45, 54, 255] {
            assert!(Instr::decode(opcode << 56).is_err());
        }
        // A sync wait on "equal", which the hardware does not define.
        assert!(Instr::decode(53 << 56 | 2 << 28).is_err());
    }

    #[test]
    fn the_listing_needs_no_allocation() {
        let words = [Instr::move32(Reg(4), 1).encode(), 10 << 56];
        let mut buf = Buf {
            bytes: [0; 256],
            len: 0,
        };
        assert!(write!(buf, "{}", Disasm::new(&words, 0x1000)).is_ok());
        let text = core::str::from_utf8(&buf.bytes[..buf.len]).unwrap_or("");
        assert!(text.contains("MOVE32 r4, #0x1"));
        assert!(text.contains(".word 0x0a00000000000000"));
    }
}
