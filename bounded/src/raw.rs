// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `const` helpers that work on any [`Integer`] without calling trait methods.
//!
//! Stable Rust cannot call trait methods (and so cannot use `<<`, `==`, ... on a generic `T`) in
//! a `const fn`. These helpers side-step that: since [`Integer`] is sealed, `T` is one of the
//! twelve primitive integers, so its size tells which unsigned type has the same layout. The value
//! is reinterpreted as that type, widened to `u128` (sign-extended for signed types) and handled
//! with concrete arithmetic. After optimisation nothing of the reinterpretation remains.

use crate::Integer;
use core::mem::size_of;

/// Reinterprets `v` as the unsigned primitive `$u` of the same size.
macro_rules! read_as {
    ($v:expr, $u:ty) => {{
        let ptr = core::ptr::from_ref(&$v).cast::<$u>();
        // SAFETY: the caller checked `size_of::<T>() == size_of::<$u>()`. `T` is a primitive
        // integer (the trait is sealed), so its bytes are all initialised and every bit pattern is
        // a valid `$u`; `read_unaligned` makes no alignment demand.
        unsafe { ptr.read_unaligned() }
    }};
}

/// Reinterprets the unsigned primitive `x` as the same-sized `T`.
macro_rules! write_as {
    ($x:expr, $t:ty) => {{
        let x = $x;
        let ptr = core::ptr::from_ref(&x).cast::<$t>();
        // SAFETY: the caller checked that `x` has the size of `T`. `T` is a primitive integer (the
        // trait is sealed), for which every bit pattern is valid; `read_unaligned` makes no
        // alignment demand.
        unsafe { ptr.read_unaligned() }
    }};
}

/// Returns the value of `v` widened to 128 bits: zero-extended if `T` is unsigned,
/// sign-extended if it is signed.
#[inline(always)]
pub(crate) const fn to_bits<T: Integer>(v: T) -> u128 {
    match size_of::<T>() {
        1 => {
            let x: u8 = read_as!(v, u8);
            if T::SIGNED {
                x as i8 as i128 as u128
            } else {
                x as u128
            }
        }
        2 => {
            let x: u16 = read_as!(v, u16);
            if T::SIGNED {
                x as i16 as i128 as u128
            } else {
                x as u128
            }
        }
        4 => {
            let x: u32 = read_as!(v, u32);
            if T::SIGNED {
                x as i32 as i128 as u128
            } else {
                x as u128
            }
        }
        8 => {
            let x: u64 = read_as!(v, u64);
            if T::SIGNED {
                x as i64 as i128 as u128
            } else {
                x as u128
            }
        }
        _ => read_as!(v, u128),
    }
}

/// Returns the low `T::BITS` bits of `bits` as a `T` (a truncating conversion, like `as`).
#[inline(always)]
pub(crate) const fn from_bits<T: Integer>(bits: u128) -> T {
    match size_of::<T>() {
        1 => write_as!(bits as u8, T),
        2 => write_as!(bits as u16, T),
        4 => write_as!(bits as u32, T),
        8 => write_as!(bits as u64, T),
        _ => write_as!(bits, T),
    }
}

/// Converts `v` to `U` like an `as` cast: exact whenever the value is representable in `U`.
#[inline(always)]
pub(crate) const fn convert<T: Integer, U: Integer>(v: T) -> U {
    from_bits::<U>(to_bits(v))
}

/// Whether the `w`-bit pattern `x` (held in the low bits) represents a value that fits in `n`
/// bits of the given signedness.
macro_rules! fits_width {
    ($x:expr, $u:ty, $i:ty, $n:expr, $signed:expr) => {{
        let x: $u = $x;
        let n: u32 = $n;
        let w = <$u>::BITS;
        if n >= w {
            true
        } else if n == 0 {
            x == 0
        } else if $signed {
            // Sign-extending from bit `n - 1` must give back the value.
            let s = w - n;
            (((x << s) as $i) >> s) as $u == x
        } else {
            x >> n == 0
        }
    }};
}

/// Returns `true` if `v` can be represented with `n` bits of `T`'s signedness: `0..2^n` for
/// unsigned types, `-2^(n-1)..2^(n-1)` for signed ones. Only `0` fits in `0` bits; every value
/// fits in `n >= T::BITS` bits.
#[inline(always)]
pub(crate) const fn fits<T: Integer>(v: T, n: u32) -> bool {
    // Work at the native width so that the optimiser sees a plain comparison on the value.
    match size_of::<T>() {
        1 => fits_width!(read_as!(v, u8), u8, i8, n, T::SIGNED),
        2 => fits_width!(read_as!(v, u16), u16, i16, n, T::SIGNED),
        4 => fits_width!(read_as!(v, u32), u32, i32, n, T::SIGNED),
        8 => fits_width!(read_as!(v, u64), u64, i64, n, T::SIGNED),
        _ => fits_width!(read_as!(v, u128), u128, i128, n, T::SIGNED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_round_trip() {
        assert_eq!(to_bits(-1i8), u128::MAX);
        assert_eq!(to_bits(0xffu8), 0xff);
        assert_eq!(to_bits(-2i64), u128::MAX - 1);
        assert_eq!(to_bits(usize::MAX), usize::MAX as u128);
        assert_eq!(from_bits::<i16>(u128::MAX), -1);
        assert_eq!(from_bits::<u16>(0x1_2345), 0x2345);
        assert_eq!(convert::<i32, i8>(-128), -128i8);
        assert_eq!(convert::<u8, u128>(200), 200u128);
        assert_eq!(convert::<isize, i64>(-5), -5i64);
    }

    #[test]
    fn fits_reference() {
        for v in i8::MIN..=i8::MAX {
            for n in 0..=9u32 {
                let signed_ok = if n == 0 {
                    v == 0
                } else if n >= 8 {
                    true
                } else {
                    (-(1i16 << (n - 1))..(1i16 << (n - 1))).contains(&i16::from(v))
                };
                assert_eq!(fits(v, n), signed_ok, "{v} in {n} signed bits");
                let u = v as u8;
                let unsigned_ok = n >= 8 || u16::from(u) < (1u16 << n);
                assert_eq!(fits(u, n), unsigned_ok, "{u} in {n} unsigned bits");
            }
        }
        assert!(fits(u128::MAX, 128));
        assert!(!fits(u128::MAX, 127));
        assert!(fits(i128::MIN, 128));
        assert!(!fits(i128::MIN, 127));
        assert!(fits(-(1i128 << 126), 127));
    }

    #[test]
    fn usable_in_const() {
        const { assert!(fits(15u32, 4)) };
        const { assert!(!fits(-9i64, 4)) };
        const C: u128 = to_bits(-1i32);
        assert_eq!(C, u128::MAX);
    }
}
