// SPDX-License-Identifier: GPL-2.0 OR MIT

//! KUnit suite `gpukit_bounded`: the crate running inside the kernel.

use ::kernel::prelude::*;

#[kunit_tests(gpukit_bounded)]
mod tests {
    use crate::Bounded;
    use ::kernel::io::{Io, Mmio, MmioRaw};
    use ::kernel::prelude::*;

    #[test]
    fn try_new_limits() {
        assert_eq!(Bounded::<u8, 4>::try_new(15).map(Bounded::get), Some(15));
        assert!(Bounded::<u8, 4>::try_new(16).is_none());
        assert_eq!(Bounded::<i8, 4>::try_new(-8).map(Bounded::get), Some(-8));
        assert!(Bounded::<i8, 4>::try_new(-9).is_none());
        assert!(Bounded::<i8, 4>::try_new(8).is_none());
        assert_eq!(
            Bounded::<u64, 64>::try_new(u64::MAX).map(Bounded::get),
            Some(u64::MAX)
        );
    }

    #[test]
    fn const_new_shifts_and_widths() {
        let v = Bounded::<u32, 12>::new::<0xabc>();
        assert_eq!(v.shr::<4, 8>().get(), 0xab);
        assert_eq!(v.shl::<4, 16>().get(), 0xabc0);
        assert_eq!(v.extend::<20>().get(), 0xabc);
        assert!(v.try_shrink::<11>().is_none());
        assert_eq!(v.try_shrink::<12>().map(Bounded::get), Some(0xabc));
        assert_eq!(v.cast::<u64>().get(), 0xabc_u64);
        assert!(Bounded::<u8, 1>::new::<1>().as_bool());
    }

    #[test]
    fn agrees_with_kernel_num_bounded() {
        for raw in 0u16..1024 {
            let ours = Bounded::<u16, 8>::try_new(raw);
            let theirs = ::kernel::num::Bounded::<u16, 8>::try_new(raw);
            assert_eq!(ours.is_some(), theirs.is_some());
            if let Some(b) = ours {
                let k = b.to_kernel();
                assert_eq!(k.map(|k| k.get()), Some(raw));
                assert_eq!(k.and_then(Bounded::from_kernel), Some(b));
            }
        }
        for raw in -300i16..300 {
            let ours = Bounded::<i16, 9>::try_new(raw).is_some();
            let theirs = ::kernel::num::Bounded::<i16, 9>::try_new(raw).is_some();
            assert_eq!(ours, theirs);
        }
    }

    #[test]
    fn from_expr_build_is_proven_at_build_time() {
        // The constant fits, so the optimiser proves the `build_assert!` and the kernel links.
        assert_eq!(Bounded::<u8, 3>::from_expr_build(5).get(), 5);
        assert_eq!(Bounded::<i32, 6>::from_expr_build(-32).get(), -32);
    }

    #[test]
    fn narrows_values_read_through_kernel_mmio() -> Result {
        // Real memory behind the kernel's own `Mmio`, as a device register block would be.
        let mem = KBox::into_raw(KBox::new([0u64; 4], GFP_KERNEL)?);
        let raw = MmioRaw::<32>::new(mem as usize, 32)?;
        // SAFETY: `raw` covers the 32 bytes of `mem`, which stay allocated (and are accessed
        // only through `io`) until `KBox::from_raw` below.
        let io: &Mmio<32> = unsafe { Mmio::from_raw(&raw) };
        io.write32(0x8765_4321, 4);
        let word = io.read32(4);
        assert_eq!(word, 0x8765_4321);
        let low = Bounded::<u32, 12>::try_new(word & 0xfff);
        assert_eq!(low.map(Bounded::get), Some(0x321));
        assert!(Bounded::<u32, 12>::try_new(word >> 16).is_none());
        assert_eq!(
            Bounded::<u32, 16>::try_new(word >> 16).map(Bounded::get),
            Some(0x8765)
        );
        // SAFETY: `mem` came from `KBox::into_raw` and `io` is no longer used.
        drop(unsafe { KBox::from_raw(mem) });
        Ok(())
    }
}
