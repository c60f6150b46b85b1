// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Exhaustive checks over every width `N` and every value of `u8` and `i8`, against a reference
//! model written with plain `i32` arithmetic.

use bounded::{Bounded, TryIntoBounded};

/// The reference: does `v` fit in `n` bits of the given signedness?
fn model_fits(v: i32, n: u32, signed: bool) -> bool {
    if signed {
        let half = 1i32 << (n - 1);
        (-half..half).contains(&v)
    } else {
        (0..(1i32 << n)).contains(&v)
    }
}

/// Under Miri, which is several thousand times slower, visit a sample of the values and pairs only
/// (every 17th value, then every 37th pair); natively, everything.
const VALUE_STEP: usize = if cfg!(miri) { 17 } else { 1 };
const PAIR_STEP: usize = if cfg!(miri) { 37 } else { 1 };

/// Checks `shr` and `shl` of `$b` (holding `$v`) for each listed shift, with the narrowest
/// result type the rules allow.
macro_rules! shifts {
    ($b:ident, $v:ident, $t:ty, $wide:ty, $n:literal; $($s:literal)*) => {$(
        let r: Bounded<$t, { if $n > $s { $n - $s } else { 1 } }> = $b.shr::<$s, _>();
        assert_eq!(r.get(), $v >> $s);
        let r: Bounded<$wide, { $n + $s }> = $b.cast::<$wide>().shl::<$s, _>();
        assert_eq!(r.get(), <$wide>::from($v) << $s);
    )*};
}

/// Expands the checks for backing type `$t` (with the wider same-signedness type `$wide` used
/// for `shl`) at width `$n`.
macro_rules! exhaustive {
    ($name:ident, $t:ty, $wide:ty, $signed:expr, $n:literal) => {
        #[test]
        fn $name() {
            type B = Bounded<$t, $n>;
            let mut count = 0u32;
            for v in (<$t>::MIN..=<$t>::MAX).step_by(VALUE_STEP) {
                let fits = model_fits(i32::from(v), $n, $signed);
                let b = B::try_new(v);
                assert_eq!(b.is_some(), fits, "try_new({v}) at N = {}", $n);
                let via_trait: Option<B> = i32::from(v).try_into_bounded();
                assert_eq!(via_trait, b);
                let Some(b) = b else { continue };
                count += 1;

                // Accessors.
                assert_eq!(b.get(), v);
                assert_eq!(*b, v);
                assert_eq!(B::from_expr(v), b);

                // Width changes.
                assert_eq!(b.extend::<8>().get(), v);
                assert_eq!(b.try_shrink::<1>().is_some(), model_fits(i32::from(v), 1, $signed));
                assert_eq!(b.try_shrink::<3>().is_some(), model_fits(i32::from(v), 3, $signed));
                assert_eq!(b.try_shrink::<7>().is_some(), model_fits(i32::from(v), 7, $signed));
                assert_eq!(b.try_shrink::<7>().map(Bounded::get).unwrap_or(v), v);
                assert_eq!(b.cast::<$wide>().get(), <$wide>::from(v));
                assert_eq!(b.cast::<$wide>().cast::<$t>(), b);

                // Shifts, with the narrowest result type the rules allow.
                shifts!(b, v, $t, $wide, $n; 0 1 2 3 4 5 6 7);
                let top: Bounded<$t, 8> = b.shl::<{ 8 - $n }, 8>();
                assert_eq!(top.get(), v << (8 - $n));

                // Operators and comparisons with plain values.
                assert_eq!(!b, !v);
                assert!(b == v && v == b);
                assert_eq!(b.cmp(&B::try_new(0).unwrap()), v.cmp(&0));

                // Formatting.
                assert_eq!(format!("{b}"), format!("{v}"));
                assert_eq!(format!("{b:#x}|{b:X}|{b:b}|{b:o}"), format!("{v:#x}|{v:X}|{v:b}|{v:o}"));
                assert_eq!(format!("{b:e}|{b:E}"), format!("{v:e}|{v:E}"));
                assert_eq!(format!("{b:?}"), format!("Bounded({v:?})"));
            }
            // `N` bits of either signedness hold exactly `2^N` values.
            if VALUE_STEP == 1 {
                assert_eq!(count, 1u32 << $n, "number of {}-bit values", $n);
            }

            // Binary operators between every pair of values of this width and of width 3.
            let all: std::vec::Vec<B> = (<$t>::MIN..=<$t>::MAX).filter_map(B::try_new).collect();
            let small: std::vec::Vec<Bounded<$t, 3>> =
                (<$t>::MIN..=<$t>::MAX).filter_map(Bounded::try_new).collect();
            for a in all.iter().step_by(PAIR_STEP) {
                for c in &small {
                    let (x, y) = (a.get(), c.get());
                    assert_eq!(*a & *c, x & y);
                    assert_eq!(*a | *c, x | y);
                    assert_eq!(*a ^ *c, x ^ y);
                    assert_eq!(a.partial_cmp(c), x.partial_cmp(&y));
                    assert_eq!(*a == *c, x == y);
                    if let Some(s) = x.checked_add(y) {
                        assert_eq!(*a + *c, s);
                        assert_eq!(*a + y, s);
                    }
                    if let Some(s) = x.checked_sub(y) {
                        assert_eq!(*a - *c, s);
                    }
                    if let Some(s) = x.checked_mul(y) {
                        assert_eq!(*a * *c, s);
                    }
                    if let (Some(q), Some(r)) = (x.checked_div(y), x.checked_rem(y)) {
                        assert_eq!(*a / *c, q);
                        assert_eq!(*a % *c, r);
                        assert_eq!(*a / y, q);
                        assert_eq!(*a % y, r);
                    }
                }
            }
        }
    };
}

exhaustive!(u8_n1, u8, u16, false, 1);
exhaustive!(u8_n2, u8, u16, false, 2);
exhaustive!(u8_n3, u8, u16, false, 3);
exhaustive!(u8_n4, u8, u16, false, 4);
exhaustive!(u8_n5, u8, u16, false, 5);
exhaustive!(u8_n6, u8, u16, false, 6);
exhaustive!(u8_n7, u8, u16, false, 7);
exhaustive!(u8_n8, u8, u16, false, 8);
exhaustive!(i8_n1, i8, i16, true, 1);
exhaustive!(i8_n2, i8, i16, true, 2);
exhaustive!(i8_n3, i8, i16, true, 3);
exhaustive!(i8_n4, i8, i16, true, 4);
exhaustive!(i8_n5, i8, i16, true, 5);
exhaustive!(i8_n6, i8, i16, true, 6);
exhaustive!(i8_n7, i8, i16, true, 7);
exhaustive!(i8_n8, i8, i16, true, 8);

/// Every lossless conversion of the 8-bit types, for every width and value.
macro_rules! conversions {
    ($($n:literal)*) => {$(
        for v in u8::MIN..=u8::MAX {
            let Some(b) = Bounded::<u8, $n>::try_new(v) else { continue };
            // Into unsigned primitives of any width, and into signed ones with a spare bit.
            assert_eq!(u8::from(b), v);
            assert_eq!(u16::from(b), u16::from(v));
            assert_eq!(u64::from(b), u64::from(v));
            assert_eq!(i16::from(b), i16::from(v));
            assert_eq!(usize::from(b), usize::from(v));
            // And back from `u8` into every 8-bit-wide-or-more unsigned `Bounded`.
            assert_eq!(Bounded::<u8, 8>::from(v).get(), v);
            assert_eq!(Bounded::<u32, 8>::from(v).get(), u32::from(v));
            assert_eq!(Bounded::<i16, 9>::from(v).get(), i16::from(v));
        }
        for v in i8::MIN..=i8::MAX {
            let Some(b) = Bounded::<i8, $n>::try_new(v) else { continue };
            assert_eq!(i8::from(b), v);
            assert_eq!(i32::from(b), i32::from(v));
            assert_eq!(i128::from(b), i128::from(v));
            assert_eq!(isize::from(b), isize::from(v));
            assert_eq!(Bounded::<i64, 8>::from(v).get(), i64::from(v));
        }
    )*};
}

#[test]
fn lossless_conversions() {
    conversions!(1 2 3 4 5 6 7 8);
    // Seven unsigned bits fit an `i8`.
    for v in 0..=127u8 {
        let b = Bounded::<u8, 7>::try_new(v).unwrap();
        assert_eq!(i8::from(b), v as i8);
    }
}

#[test]
fn booleans() {
    assert!(!bool::from(Bounded::<u8, 1>::from(false)));
    assert!(bool::from(Bounded::<u8, 1>::from(true)));
    for v in 0..=1u8 {
        let b = Bounded::<u8, 1>::try_new(v).unwrap();
        assert_eq!(b.as_bool(), v == 1);
        assert_eq!(b.into_bool(), v == 1);
        assert_eq!(bool::from(b), v == 1);
    }
    assert_eq!(Bounded::<i8, 2>::from(true).get(), 1);
    assert_eq!(Bounded::<i8, 8>::from(false).get(), 0);
    assert_eq!(Bounded::<u8, 8>::from(true).get(), 1);
}

#[test]
fn from_expr_panics_for_every_out_of_range_value() {
    // Checked on a sample so that the test stays quick (each panic unwinds).
    let previous = std::panic::take_hook();
    std::panic::set_hook(std::boxed::Box::new(|_| {}));
    for v in [16u8, 17, 100, 255] {
        let r = std::panic::catch_unwind(|| Bounded::<u8, 4>::from_expr(v));
        assert!(r.is_err(), "{v} must not fit in 4 bits");
    }
    for v in [-9i8, 8, i8::MIN, i8::MAX] {
        let r = std::panic::catch_unwind(|| Bounded::<i8, 4>::from_expr(v));
        assert!(r.is_err(), "{v} must not fit in 4 signed bits");
    }
    std::panic::set_hook(previous);
}
