// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The [`Integer`] trait: what generic code may assume about a primitive integer.
//!
//! Bit fields in device registers are stored in ordinary machine integers (`u8` to `u64`, and
//! their signed counterparts for offsets and deltas). Code that manipulates such fields without
//! caring about the concrete storage type names it through [`Integer`], which every one of the
//! twelve primitive integer types implements and nothing else can.

/// Marker naming the signedness of the unsigned primitive integers (`u8` ... `u128`, `usize`).
///
/// It is only ever used as a type, through [`Integer::Signedness`]; it has no values.
///
/// # Examples
///
/// ```
/// use bounded::{Integer, Unsigned};
///
/// fn only_unsigned<T: Integer<Signedness = Unsigned>>(v: T) -> T {
///     v
/// }
///
/// assert_eq!(only_unsigned(7u16), 7);
/// // `only_unsigned(-7i16)` does not build: `i16` is signed.
/// ```
pub enum Unsigned {}

/// Marker naming the signedness of the signed primitive integers (`i8` ... `i128`, `isize`).
///
/// It is only ever used as a type, through [`Integer::Signedness`]; it has no values.
///
/// # Examples
///
/// ```
/// use bounded::{Integer, Signed};
///
/// fn negate<T: Integer<Signedness = Signed> + core::ops::Neg<Output = T>>(v: T) -> T {
///     -v
/// }
///
/// assert_eq!(negate(5i64), -5);
/// ```
pub enum Signed {}

mod private {
    /// Keeps [`super::Integer`] closed to the primitive integers: the crate's `unsafe` code
    /// relies on knowing every implementor.
    pub trait Sealed {}
}

/// Core properties of a primitive integer type, for use in generic code.
///
/// Implemented for `u8`, `u16`, `u32`, `u64`, `u128`, `usize`, `i8`, `i16`, `i32`, `i64`, `i128`
/// and `isize`, and sealed: no other type can implement it. The supertraits are the arithmetic,
/// bitwise, shift and comparison operators every primitive integer has.
///
/// # Examples
///
/// ```
/// use bounded::{Integer, Signed, Unsigned};
///
/// fn width<T: Integer>(_: T) -> u32 {
///     T::BITS
/// }
///
/// assert_eq!(width(0u8), 8);
/// assert_eq!(width(0i128), 128);
/// assert_eq!(width(0usize), usize::BITS);
///
/// // The signedness is a type, so it can be constrained in bounds.
/// fn same_sign<A, B>(_: A, _: B)
/// where
///     A: Integer,
///     B: Integer<Signedness = A::Signedness>,
/// {
/// }
/// same_sign(1u8, 2u64);
/// // `same_sign(1u8, 2i64)` does not build.
/// # let _: Option<(Signed, Unsigned)> = None;
/// ```
pub trait Integer:
    private::Sealed
    + Sized
    + Copy
    + Clone
    + PartialEq
    + Eq
    + PartialOrd
    + Ord
    + core::ops::Add<Output = Self>
    + core::ops::AddAssign
    + core::ops::Sub<Output = Self>
    + core::ops::SubAssign
    + core::ops::Mul<Output = Self>
    + core::ops::MulAssign
    + core::ops::Div<Output = Self>
    + core::ops::DivAssign
    + core::ops::Rem<Output = Self>
    + core::ops::RemAssign
    + core::ops::BitAnd<Output = Self>
    + core::ops::BitAndAssign
    + core::ops::BitOr<Output = Self>
    + core::ops::BitOrAssign
    + core::ops::BitXor<Output = Self>
    + core::ops::BitXorAssign
    + core::ops::Shl<u32, Output = Self>
    + core::ops::ShlAssign<u32>
    + core::ops::Shr<u32, Output = Self>
    + core::ops::ShrAssign<u32>
    + core::ops::Not
{
    /// [`Signed`] or [`Unsigned`].
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::{Integer, Signed};
    ///
    /// fn is_signed<T: Integer<Signedness = Signed>>() {}
    /// is_signed::<i32>();
    /// ```
    type Signedness;

    /// Width of the type in bits (the same as the inherent `BITS` constant).
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Integer;
    ///
    /// assert_eq!(<u32 as Integer>::BITS, 32);
    /// assert_eq!(<isize as Integer>::BITS, isize::BITS);
    /// ```
    const BITS: u32;

    /// `true` for the signed types. Mirrors [`Integer::Signedness`] as a value, for `const`
    /// code that cannot dispatch on types.
    #[doc(hidden)]
    const SIGNED: bool;
}

macro_rules! impl_integer_for {
    ($($t:ty => $sign:ident),* $(,)?) => {
        $(
            impl private::Sealed for $t {}

            impl Integer for $t {
                type Signedness = $sign;
                const BITS: u32 = <$t>::BITS;
                const SIGNED: bool = <$t>::MIN != 0;
            }
        )*
    };
}

impl_integer_for!(
    u8 => Unsigned,
    u16 => Unsigned,
    u32 => Unsigned,
    u64 => Unsigned,
    u128 => Unsigned,
    usize => Unsigned,
    i8 => Signed,
    i16 => Signed,
    i32 => Signed,
    i64 => Signed,
    i128 => Signed,
    isize => Signed,
);

#[cfg(test)]
mod tests {
    use super::Integer;

    fn signed<T: Integer>() -> bool {
        T::SIGNED
    }

    #[test]
    fn signedness_flags() {
        assert!(!signed::<u8>() && !signed::<u128>() && !signed::<usize>());
        assert!(signed::<i8>() && signed::<i128>() && signed::<isize>());
    }

    #[test]
    fn widths() {
        assert_eq!(<u16 as Integer>::BITS, 16);
        assert_eq!(<i64 as Integer>::BITS, 64);
        assert_eq!(<usize as Integer>::BITS, usize::BITS);
    }
}
