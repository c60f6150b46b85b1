// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Property tests for the wider backing types, against a reference model computed in 128 bits.

// The macro below also covers `usize` and `isize`, which have no `From` into the 128-bit types,
// so the reference model widens with `as`.
#![allow(clippy::cast_lossless)]

use bounded::{Bounded, TryIntoBounded};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 256 },
        // Miri's isolation forbids the file access that failure persistence needs.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Checks every operation of `Bounded<$t, $n>` on values derived from `raw` and `other`.
macro_rules! props {
    ($m:ident, $t:ty, $big:ty, $signed:expr, $bits:literal; $($name:ident = $n:literal),*) => {
        mod $m {
            use super::*;

            /// Reference model: does `v` fit in `n` bits of `$t`'s signedness?
            fn model(v: $t, n: u32) -> bool {
                if n >= $bits {
                    true
                } else if $signed {
                    let half = 1i128 << (n - 1);
                    (-half..half).contains(&(v as i128))
                } else {
                    (v as u128) >> n == 0
                }
            }

            /// Values of every magnitude: a random value shifted right by a random amount.
            fn value() -> impl Strategy<Value = $t> {
                (any::<$t>(), 0u32..$bits).prop_map(|(v, k)| v >> k)
            }

            $(
                proptest! {
                    #![proptest_config(config())]

                    #[test]
                    fn $name(raw in value(), other in value()) {
                        type B = Bounded<$t, $n>;

                        // Construction agrees with the model, whichever path is taken.
                        let checked = B::try_new(raw);
                        prop_assert_eq!(checked.is_some(), model(raw, $n));
                        let via_big: Option<B> = (raw as $big).try_into_bounded();
                        prop_assert_eq!(via_big, checked);

                        // The low `N` bits, sign-extended for signed types, always fit.
                        let fitted: $t = (raw << ($bits - $n)) >> ($bits - $n);
                        let b = B::try_new(fitted).unwrap();
                        prop_assert_eq!(b.get(), fitted);
                        prop_assert_eq!(*b, fitted);
                        prop_assert_eq!(B::from_expr(fitted), b);
                        prop_assert_eq!(b, fitted);
                        prop_assert!(fitted == b);

                        // Width and backing-type changes keep the value.
                        prop_assert_eq!(b.extend::<$bits>().get(), fitted);
                        prop_assert_eq!(b.try_shrink::<1>().is_some(), model(fitted, 1));
                        const HALF: u32 = if $n > 1 { $n / 2 } else { 1 };
                        let shrunk = b.try_shrink::<HALF>();
                        prop_assert_eq!(shrunk.is_some(), model(fitted, HALF));
                        if let Some(s) = shrunk {
                            prop_assert_eq!(s, b);
                        }
                        let wide = b.cast::<$big>();
                        prop_assert_eq!(wide.get(), fitted as $big);
                        prop_assert_eq!(wide.cast::<$t>(), b);
                        prop_assert_eq!(<$big>::from(b), fitted as $big);
                        prop_assert_eq!(Bounded::<$big, 128>::from(fitted).get(), fitted as $big);
                        prop_assert_eq!(Bounded::<$t, $bits>::from(fitted).get(), fitted);

                        // Shifts.
                        let r: Bounded<$t, { $n - $n / 2 }> = b.shr::<{ $n / 2 }, _>();
                        prop_assert_eq!(r.get(), fitted >> ($n / 2));
                        let l: Bounded<$t, $bits> = b.shl::<{ $bits - $n }, _>();
                        prop_assert_eq!(l.get(), fitted << ($bits - $n));

                        // Operators against a 5-bit value and against the plain value.
                        let w: $t = (other << ($bits - 5)) >> ($bits - 5);
                        let c = Bounded::<$t, 5>::try_new(w).unwrap();
                        prop_assert_eq!(b & c, fitted & w);
                        prop_assert_eq!(b | c, fitted | w);
                        prop_assert_eq!(b ^ c, fitted ^ w);
                        prop_assert_eq!(!b, !fitted);
                        prop_assert_eq!(b.partial_cmp(&c), fitted.partial_cmp(&w));
                        prop_assert_eq!(b < w, fitted < w);
                        if let Some(x) = fitted.checked_add(w) {
                            prop_assert_eq!(b + c, x);
                            prop_assert_eq!(b + w, x);
                        }
                        if let Some(x) = fitted.checked_sub(w) {
                            prop_assert_eq!(b - c, x);
                            prop_assert_eq!(b - w, x);
                        }
                        if let Some(x) = fitted.checked_mul(w) {
                            prop_assert_eq!(b * c, x);
                            prop_assert_eq!(b * w, x);
                        }
                        if let (Some(q), Some(r)) = (fitted.checked_div(w), fitted.checked_rem(w)) {
                            prop_assert_eq!(b / c, q);
                            prop_assert_eq!(b % c, r);
                        }

                        // Formatting matches the plain value.
                        prop_assert_eq!(format!("{b} {b:x} {b:#X} {b:o} {b:b} {b:e}"),
                            format!("{fitted} {fitted:x} {fitted:#X} {fitted:o} {fitted:b} {fitted:e}"));
                    }
                }
            )*
        }
    };
}

props!(p_u16, u16, u128, false, 16; n1 = 1, n7 = 7, n9 = 9, n15 = 15, n16 = 16);
props!(p_u32, u32, u128, false, 32; n1 = 1, n12 = 12, n17 = 17, n31 = 31, n32 = 32);
props!(p_u64, u64, u128, false, 64; n1 = 1, n20 = 20, n33 = 33, n63 = 63, n64 = 64);
props!(p_u128, u128, u128, false, 128; n1 = 1, n40 = 40, n65 = 65, n127 = 127, n128 = 128);
props!(p_usize, usize, u128, false, 64; n1 = 1, n30 = 30, n63 = 63, n64 = 64);
props!(p_i16, i16, i128, true, 16; n1 = 1, n7 = 7, n9 = 9, n15 = 15, n16 = 16);
props!(p_i32, i32, i128, true, 32; n1 = 1, n12 = 12, n17 = 17, n31 = 31, n32 = 32);
props!(p_i64, i64, i128, true, 64; n1 = 1, n20 = 20, n33 = 33, n63 = 63, n64 = 64);
props!(p_i128, i128, i128, true, 128; n1 = 1, n40 = 40, n65 = 65, n127 = 127, n128 = 128);
props!(p_isize, isize, i128, true, 64; n1 = 1, n30 = 30, n63 = 63, n64 = 64);

/// Conversions between primitives of different widths and signedness, at the boundaries of the
/// lossless rules.
mod cross {
    use super::*;

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn unsigned_into_signed_bounded(v: u32) {
            let b = Bounded::<i64, 33>::from(v);
            prop_assert_eq!(b.get(), i64::from(v));
            prop_assert_eq!(u64::try_from(b.get()).unwrap(), u64::from(v));
        }

        #[test]
        fn signed_primitives_into_bounded(v: i16) {
            prop_assert_eq!(Bounded::<i32, 16>::from(v).get(), i32::from(v));
            prop_assert_eq!(Bounded::<i128, 100>::from(v).get(), i128::from(v));
            prop_assert_eq!(i16::from(Bounded::<i64, 16>::from(v)), v);
        }

        #[test]
        fn unsigned_bounded_into_signed(v: u64) {
            let b = Bounded::<u64, 63>::try_new(v >> 1).unwrap();
            prop_assert_eq!(i64::from(b), (v >> 1) as i64);
            prop_assert_eq!(i128::from(b), i128::from(v >> 1));
        }

        #[test]
        fn try_into_bounded_across_types(v: i64) {
            let b: Option<Bounded<u16, 12>> = v.try_into_bounded();
            let expected = (0..4096).contains(&v);
            prop_assert_eq!(b.is_some(), expected);
            if let Some(b) = b {
                prop_assert_eq!(i64::from(b.get()), v);
            }
        }
    }
}
