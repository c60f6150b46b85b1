// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Conversions between [`Bounded`] and the primitive types.
//!
//! A `From` conversion exists exactly when it can never lose information, judged from the types
//! alone:
//!
//! - a primitive `P` converts into `Bounded<T, N>` when every value of `P` fits in `N` bits of
//!   `T`'s signedness: an unsigned `P` needs `N >= P::BITS` (`N >= P::BITS + 1` if `T` is
//!   signed), a signed `P` needs a signed `T` and `N >= P::BITS`;
//! - `Bounded<T, N>` converts into a primitive `P` when every `N`-bit value fits in `P`: `P`
//!   unsigned needs `T` unsigned and `N <= P::BITS`, `P` signed needs `N <= P::BITS` (or
//!   `N < P::BITS` if `T` is unsigned);
//! - `bool` is a 1-bit unsigned value: it converts into any `Bounded` that can hold `1`
//!   (unsigned with `N >= 1`, signed with `N >= 2`), and unsigned `Bounded<T, 1>` converts into
//!   `bool`.
//!
//! `usize` and `isize` count with the target's pointer width, as their `BITS` constants do.
//!
//! The matching `TryFrom` implementations come from `core`'s blanket implementation over `From`
//! (with [`core::convert::Infallible`] errors). A generic `TryFrom` for the lossy directions
//! would overlap with that blanket implementation, so fallible conversions are spelt
//! [`TryIntoBounded::try_into_bounded`] and [`Bounded::try_new`] into a `Bounded`, and
//! `value.get().try_into()` out of one.
//!
//! The rules are encoded as marker traits implemented for a type-level description of the
//! `N`-bit range of each signedness; stable Rust cannot compare const generics in bounds, so the
//! widths are listed explicitly.

use crate::{raw, Bounded, Integer, Signed, Unsigned};
use core::marker::PhantomData;

/// The values of an `N`-bit integer of signedness `S` ([`Signed`] or [`Unsigned`]), as a type.
pub struct Bits<S, const N: u32>(PhantomData<S>);

/// Every unsigned `W`-bit value is in the range.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot hold every value of the source type: the conversion would be lossy",
    label = "no lossless conversion into this `Bounded`",
    note = "`From` into `Bounded<T, N>` exists only when every source value fits in `N` bits of `T`'s signedness",
    note = "for a checked conversion use `Bounded::try_new` or `TryIntoBounded::try_into_bounded`"
)]
pub trait HoldsUnsigned<const W: u32> {}

/// Every signed `W`-bit value is in the range.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot hold every value of the source type: the conversion would be lossy",
    label = "no lossless conversion into this `Bounded`",
    note = "`From` into `Bounded<T, N>` exists only when every source value fits in `N` bits of `T`'s signedness",
    note = "for a checked conversion use `Bounded::try_new` or `TryIntoBounded::try_into_bounded`"
)]
pub trait HoldsSigned<const W: u32> {}

/// Every value of the range is an unsigned `W`-bit value.
#[diagnostic::on_unimplemented(
    message = "values of `{Self}` do not all fit in the target type: the conversion would be lossy",
    label = "no lossless conversion out of this `Bounded`",
    note = "`From<Bounded<T, N>>` exists only for primitives that hold every `N`-bit value of `T`'s signedness",
    note = "for a checked conversion use `value.get().try_into()`"
)]
pub trait FitsUnsigned<const W: u32> {}

/// Every value of the range is a signed `W`-bit value.
#[diagnostic::on_unimplemented(
    message = "values of `{Self}` do not all fit in the target type: the conversion would be lossy",
    label = "no lossless conversion out of this `Bounded`",
    note = "`From<Bounded<T, N>>` exists only for primitives that hold every `N`-bit value of `T`'s signedness",
    note = "for a checked conversion use `value.get().try_into()`"
)]
pub trait FitsSigned<const W: u32> {}

/// Implements a marker trait for `Bits<$sign, N>` for each listed `N`.
macro_rules! marks {
    ($($trait:ident<$w:literal> for $sign:ident: $($n:literal)*;)*) => {
        $($(impl $trait<$w> for Bits<$sign, $n> {})*)*
    };
}

// Holding a wider range implies holding a narrower one; fitting in a narrower range implies
// fitting in a wider one. Each list below adds the widths that the chained rule does not cover.
impl<X: HoldsUnsigned<8>> HoldsUnsigned<1> for X {}
impl<X: HoldsUnsigned<16>> HoldsUnsigned<8> for X {}
impl<X: HoldsUnsigned<32>> HoldsUnsigned<16> for X {}
impl<X: HoldsUnsigned<64>> HoldsUnsigned<32> for X {}
impl<X: HoldsUnsigned<128>> HoldsUnsigned<64> for X {}
impl<X: HoldsSigned<16>> HoldsSigned<8> for X {}
impl<X: HoldsSigned<32>> HoldsSigned<16> for X {}
impl<X: HoldsSigned<64>> HoldsSigned<32> for X {}
impl<X: HoldsSigned<128>> HoldsSigned<64> for X {}
impl<X: FitsUnsigned<1>> FitsUnsigned<8> for X {}
impl<X: FitsUnsigned<8>> FitsUnsigned<16> for X {}
impl<X: FitsUnsigned<16>> FitsUnsigned<32> for X {}
impl<X: FitsUnsigned<32>> FitsUnsigned<64> for X {}
impl<X: FitsUnsigned<64>> FitsUnsigned<128> for X {}
impl<X: FitsSigned<8>> FitsSigned<16> for X {}
impl<X: FitsSigned<16>> FitsSigned<32> for X {}
impl<X: FitsSigned<32>> FitsSigned<64> for X {}
impl<X: FitsSigned<64>> FitsSigned<128> for X {}

marks! {
    HoldsUnsigned<1> for Unsigned: 1 2 3 4 5 6 7;
    HoldsUnsigned<8> for Unsigned: 8 9 10 11 12 13 14 15;
    HoldsUnsigned<16> for Unsigned: 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31;
    HoldsUnsigned<32> for Unsigned:
        32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47
        48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63;
    HoldsUnsigned<64> for Unsigned:
        64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79
        80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95
        96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111
        112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127;
    HoldsUnsigned<128> for Unsigned: 128;
    HoldsUnsigned<1> for Signed: 2 3 4 5 6 7 8;
    HoldsUnsigned<8> for Signed: 9 10 11 12 13 14 15 16;
    HoldsUnsigned<16> for Signed: 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32;
    HoldsUnsigned<32> for Signed:
        33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48
        49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64;
    HoldsUnsigned<64> for Signed:
        65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80
        81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96
        97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112
        113 114 115 116 117 118 119 120 121 122 123 124 125 126 127 128;
    HoldsSigned<8> for Signed: 8 9 10 11 12 13 14 15;
    HoldsSigned<16> for Signed: 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31;
    HoldsSigned<32> for Signed:
        32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47
        48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63;
    HoldsSigned<64> for Signed:
        64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79
        80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95
        96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111
        112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127;
    HoldsSigned<128> for Signed: 128;
    FitsUnsigned<1> for Unsigned: 1;
    FitsUnsigned<8> for Unsigned: 2 3 4 5 6 7 8;
    FitsUnsigned<16> for Unsigned: 9 10 11 12 13 14 15 16;
    FitsUnsigned<32> for Unsigned: 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32;
    FitsUnsigned<64> for Unsigned:
        33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48
        49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64;
    FitsUnsigned<128> for Unsigned:
        65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80
        81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96
        97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112
        113 114 115 116 117 118 119 120 121 122 123 124 125 126 127 128;
    FitsSigned<8> for Unsigned: 1 2 3 4 5 6 7;
    FitsSigned<16> for Unsigned: 8 9 10 11 12 13 14 15;
    FitsSigned<32> for Unsigned: 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31;
    FitsSigned<64> for Unsigned:
        32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47
        48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63;
    FitsSigned<128> for Unsigned:
        64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79
        80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95
        96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111
        112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127;
    FitsSigned<8> for Signed: 1 2 3 4 5 6 7 8;
    FitsSigned<16> for Signed: 9 10 11 12 13 14 15 16;
    FitsSigned<32> for Signed: 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32;
    FitsSigned<64> for Signed:
        33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48
        49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64;
    FitsSigned<128> for Signed:
        65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80
        81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96
        97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112
        113 114 115 116 117 118 119 120 121 122 123 124 125 126 127 128;
}

/// `From` in both directions between `Bounded` and the unsigned primitives.
macro_rules! impl_from_unsigned {
    ($($p:ty: $ex:ident, $n_ok:literal, $n_into:literal;)*) => {
        $(
            impl<T: Integer, const N: u32> From<$p> for Bounded<T, N>
            where
                Bits<T::Signedness, N>: HoldsUnsigned<{ <$p>::BITS }>,
            {
                #[doc = concat!("Wraps any `", stringify!($p), "`: `N` bits are enough for all of them.")]
                ///
                #[doc = example!($ex, "# Examples\n\n```\nuse bounded::Bounded;\n\n",
                    "let v = Bounded::<u128, ", $n_ok, ">::from(", stringify!($p), "::MAX);\n",
                    "assert_eq!(v.get(), ", stringify!($p), "::MAX as u128);\n```")]
                #[inline(always)]
                fn from(value: $p) -> Self {
                    // SAFETY: the bound says that `N` bits of `T`'s signedness hold every
                    // unsigned value of `$p`'s width, so `value` is representable in `T`,
                    // `convert` reproduces it exactly and it fits in `N` bits.
                    unsafe { Self::new_unchecked(raw::convert::<$p, T>(value)) }
                }
            }

            impl<T: Integer, const N: u32> From<Bounded<T, N>> for $p
            where
                Bits<T::Signedness, N>: FitsUnsigned<{ <$p>::BITS }>,
            {
                #[doc = concat!("Unwraps into a `", stringify!($p), "`, which holds every `N`-bit value.")]
                ///
                #[doc = example!($ex, "# Examples\n\n```\nuse bounded::Bounded;\n\n",
                    "let v = Bounded::<u128, ", $n_into, ">::try_new(3).unwrap();\n",
                    "assert_eq!(", stringify!($p), "::from(v), 3);\n```")]
                #[inline(always)]
                fn from(value: Bounded<T, N>) -> $p {
                    // The bound says that every `N`-bit value of `T`'s signedness is a
                    // non-negative value of at most `$p`'s width: the conversion is exact.
                    raw::convert::<T, $p>(value.get())
                }
            }
        )*
    };
}

/// `From` in both directions between `Bounded` and the signed primitives.
macro_rules! impl_from_signed {
    ($($p:ty: $ex:ident, $n_ok:literal, $n_into:literal;)*) => {
        $(
            impl<T: Integer, const N: u32> From<$p> for Bounded<T, N>
            where
                Bits<T::Signedness, N>: HoldsSigned<{ <$p>::BITS }>,
            {
                #[doc = concat!("Wraps any `", stringify!($p), "`: `N` signed bits are enough for all of them.")]
                ///
                #[doc = example!($ex, "# Examples\n\n```\nuse bounded::Bounded;\n\n",
                    "let v = Bounded::<i128, ", $n_ok, ">::from(", stringify!($p), "::MIN);\n",
                    "assert_eq!(v.get(), ", stringify!($p), "::MIN as i128);\n```")]
                #[inline(always)]
                fn from(value: $p) -> Self {
                    // SAFETY: the bound says that `N` bits of `T`'s signedness (signed) hold
                    // every signed value of `$p`'s width, so `value` is representable in `T`,
                    // `convert` reproduces it exactly and it fits in `N` bits.
                    unsafe { Self::new_unchecked(raw::convert::<$p, T>(value)) }
                }
            }

            impl<T: Integer, const N: u32> From<Bounded<T, N>> for $p
            where
                Bits<T::Signedness, N>: FitsSigned<{ <$p>::BITS }>,
            {
                #[doc = concat!("Unwraps into an `", stringify!($p), "`, which holds every `N`-bit value.")]
                ///
                #[doc = example!($ex, "# Examples\n\n```\nuse bounded::Bounded;\n\n",
                    "let v = Bounded::<i128, ", $n_into, ">::try_new(-3).unwrap();\n",
                    "assert_eq!(", stringify!($p), "::from(v), -3);\n",
                    "// Unsigned values convert too, given one spare bit for the sign.\n",
                    "let u = Bounded::<u32, 7>::new::<127>();\n",
                    "assert_eq!(", stringify!($p), "::from(u), 127);\n```")]
                #[inline(always)]
                fn from(value: Bounded<T, N>) -> $p {
                    // The bound says that every `N`-bit value of `T`'s signedness is a signed
                    // value of at most `$p`'s width: the conversion is exact.
                    raw::convert::<T, $p>(value.get())
                }
            }
        )*
    };
}

impl_from_unsigned! {
    u8: plain, 8, 8;
    u16: plain, 16, 16;
    u32: example, 32, 32;
    u64: plain, 64, 64;
    u128: plain, 128, 128;
    usize: plain, 64, 32;
}

impl_from_signed! {
    i8: plain, 8, 8;
    i16: plain, 16, 16;
    i32: example, 32, 32;
    i64: plain, 64, 64;
    i128: plain, 128, 128;
    isize: plain, 64, 32;
}

impl<T: Integer, const N: u32> From<bool> for Bounded<T, N>
where
    Bits<T::Signedness, N>: HoldsUnsigned<1>,
{
    /// `false` becomes 0 and `true` becomes 1. Exists when `N` bits hold `1`: unsigned `T`, or
    /// signed `T` with `N >= 2`.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// assert_eq!(Bounded::<u8, 1>::from(true).get(), 1);
    /// assert_eq!(Bounded::<i32, 2>::from(true).get(), 1);
    /// assert_eq!(Bounded::<u64, 30>::from(false).get(), 0);
    /// ```
    ///
    /// ```compile_fail,E0277
    /// use bounded::Bounded;
    ///
    /// // One signed bit holds -1 and 0, not 1.
    /// let _: Bounded<i8, 1> = true.into();
    /// ```
    #[inline(always)]
    fn from(bit: bool) -> Self {
        // SAFETY: the value is 0 or 1, and the bound says that `N` bits hold every unsigned 1-bit
        // value.
        unsafe { Self::new_unchecked(raw::from_bits::<T>(u128::from(bit))) }
    }
}

impl<T: Integer, const N: u32> From<Bounded<T, N>> for bool
where
    Bits<T::Signedness, N>: FitsUnsigned<1>,
{
    /// 1 becomes `true`, 0 becomes `false`. Exists for unsigned single-bit values only.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// assert!(bool::from(Bounded::<u32, 1>::new::<1>()));
    /// assert!(!bool::from(Bounded::<u32, 1>::new::<0>()));
    /// ```
    #[inline(always)]
    fn from(value: Bounded<T, N>) -> bool {
        raw::to_bits(value.get()) != 0
    }
}

/// Fallible conversion of any primitive into any [`Bounded`], by value.
///
/// This plays the role `TryInto` would play, which cannot be implemented generically without
/// overlapping `core`'s blanket implementation.
///
/// # Examples
///
/// ```
/// use bounded::{Bounded, TryIntoBounded};
///
/// let v: Option<Bounded<u16, 8>> = 200u64.try_into_bounded();
/// assert_eq!(v.map(Bounded::get), Some(200));
///
/// // Does not fit in 6 bits.
/// let v: Option<Bounded<u16, 6>> = 200u64.try_into_bounded();
/// assert_eq!(v, None);
///
/// // Negative values never fit an unsigned type.
/// let v: Option<Bounded<u8, 8>> = (-1i32).try_into_bounded();
/// assert_eq!(v, None);
/// ```
pub trait TryIntoBounded<T, const N: u32>
where
    T: Integer,
{
    /// Returns `self` as a `Bounded<T, N>`, or [`None`] if it does not fit in `T` or in `N` bits.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::{Bounded, TryIntoBounded};
    ///
    /// assert_eq!(5u8.try_into_bounded(), Bounded::<i64, 4>::try_new(5));
    /// assert_eq!(TryIntoBounded::<i64, 4>::try_into_bounded(8u8), None);
    /// ```
    fn try_into_bounded(self) -> Option<crate::Bounded<T, N>>;
}

impl<T: Integer, U: TryInto<T>, const N: u32> TryIntoBounded<T, N> for U {
    #[inline(always)]
    fn try_into_bounded(self) -> Option<crate::Bounded<T, N>> {
        Bounded::try_new(self.try_into().ok()?)
    }
}
