// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Property tests: generated field accessors against plain shift-and-mask arithmetic, and the
//! memory-backed region against a byte-array model over random access sequences.

use proptest::prelude::*;
use register::io::{Io, MemRegion};
use register::{register, Error};

register! {
    @first_series
    R8(u8) @ 0x0 { 7:6 a; 5:5 b; 3:0 c; }
    R16(u16) @ 0x2 { 15:9 a; 8:8 b; 7:0 c; }
    R32(u32) @ 0x4 { 31:31 a; 30:12 b; 11:4 c; 2:0 d; }
    R64(u64) @ 0x8 { 63:40 a; 39:39 b; 38:0 c; }
}

/// Reference getter.
fn get(raw: u64, hi: u32, lo: u32) -> u64 {
    (raw >> lo) & (u64::MAX >> (63 - (hi - lo)))
}

/// Reference setter.
fn set(raw: u64, hi: u32, lo: u32, v: u64) -> u64 {
    let mask = (u64::MAX >> (63 - (hi - lo))) << lo;
    (raw & !mask) | ((v << lo) & mask)
}

fn cases() -> ProptestConfig {
    let config = ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 });
    if cfg!(miri) {
        // Miri's isolation forbids the file system access of failure persistence.
        ProptestConfig {
            failure_persistence: None,
            ..config
        }
    } else {
        config
    }
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn fields_u8(raw: u8, v: u8) {
        let r = R8::from(raw);
        let raw64 = u64::from(raw);
        prop_assert_eq!(u64::from(r.a().get()), get(raw64, 7, 6));
        prop_assert_eq!(u64::from(r.b().get()), get(raw64, 5, 5));
        prop_assert_eq!(u64::from(r.c().get()), get(raw64, 3, 0));
        match r.try_with_c(v) {
            Ok(n) => {
                prop_assert!(v < 16);
                prop_assert_eq!(u64::from(n.as_raw()), set(raw64, 3, 0, u64::from(v)));
            }
            Err(e) => {
                prop_assert!(v >= 16);
                prop_assert_eq!(e, Error::ValueTooWide);
            }
        }
    }

    #[test]
    fn fields_u16(raw: u16, v: u16) {
        let r = R16::from(raw);
        let raw64 = u64::from(raw);
        prop_assert_eq!(u64::from(r.a().get()), get(raw64, 15, 9));
        prop_assert_eq!(u64::from(r.c().get()), get(raw64, 7, 0));
        let n = r.with_c((v & 0xff) as u8).with_b(v & 1 == 1);
        let expect = set(set(raw64, 7, 0, u64::from(v & 0xff)), 8, 8, u64::from(v & 1));
        prop_assert_eq!(u64::from(n.as_raw()), expect);
        prop_assert_eq!(r.try_with_a(v).is_ok(), v < 128);
    }

    #[test]
    fn fields_u32(raw: u32, v: u32) {
        let r = R32::from(raw);
        let raw64 = u64::from(raw);
        prop_assert_eq!(r.a().into_bool(), get(raw64, 31, 31) == 1);
        prop_assert_eq!(u64::from(r.b().get()), get(raw64, 30, 12));
        prop_assert_eq!(u64::from(r.c().get()), get(raw64, 11, 4));
        prop_assert_eq!(u64::from(r.d().get()), get(raw64, 2, 0));
        if let Ok(n) = r.try_set_b(v) {
            prop_assert_eq!(u64::from(n.as_raw()), set(raw64, 30, 12, u64::from(v)));
            // Bit 3, in no field, is kept.
            prop_assert_eq!(n.as_raw() & 0x8, raw & 0x8);
        } else {
            prop_assert!(v >= 1 << 19);
        }
    }

    #[test]
    fn fields_u64(raw: u64, v: u64) {
        let r = R64::from(raw);
        prop_assert_eq!(r.a().get(), get(raw, 63, 40));
        prop_assert_eq!(r.c().get(), get(raw, 38, 0));
        match r.try_with_a(v) {
            Ok(n) => prop_assert_eq!(n.as_raw(), set(raw, 63, 40, v)),
            Err(_) => prop_assert!(v >= 1 << 24),
        }
    }

    /// Random accesses of random widths at random offsets, some out of bounds or misaligned,
    /// against a byte array.
    #[test]
    fn mem_region_matches_model(
        ops in proptest::collection::vec((any::<bool>(), 0u8..4, 0usize..40, any::<u64>()), 0..64)
    ) {
        const SIZE: usize = 32;
        let io = MemRegion::<SIZE>::new();
        let mut model = [0u8; SIZE];
        for (write, w, offset, value) in ops {
            let width = 1usize << w;
            let expect_err = if offset + width > SIZE {
                Some(Error::OutOfBounds)
            } else if offset % width != 0 {
                Some(Error::Misaligned)
            } else {
                None
            };
            if write {
                let r = match width {
                    1 => io.try_write8(value as u8, offset),
                    2 => io.try_write16(value as u16, offset),
                    4 => io.try_write32(value as u32, offset),
                    _ => io.try_write64(value, offset),
                };
                prop_assert_eq!(r.err(), expect_err);
                if expect_err.is_none() {
                    model[offset..offset + width].copy_from_slice(&value.to_le_bytes()[..width]);
                }
            } else {
                let r = match width {
                    1 => io.try_read8(offset).map(u64::from),
                    2 => io.try_read16(offset).map(u64::from),
                    4 => io.try_read32(offset).map(u64::from),
                    _ => io.try_read64(offset),
                };
                match expect_err {
                    Some(e) => prop_assert_eq!(r, Err(e)),
                    None => {
                        let mut bytes = [0u8; 8];
                        bytes[..width].copy_from_slice(&model[offset..offset + width]);
                        prop_assert_eq!(r, Ok(u64::from_le_bytes(bytes)));
                    }
                }
            }
        }
        for (i, b) in model.iter().enumerate() {
            prop_assert_eq!(io.byte(i), Some(*b));
        }
    }
}
