// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Arithmetic, bitwise and comparison operators.
//!
//! Operations between two [`Bounded`] values (of the same backing type, any widths) or between a
//! [`Bounded`] and its backing type return the backing type: the result of `a + b` may need more
//! bits than either operand, and deciding how many is the caller's business (wrap it again with
//! [`Bounded::try_new`] if needed). Overflow behaves as on the backing type (a panic in debug
//! builds, wrapping in release builds, unless the profile says otherwise).

use crate::{Bounded, Integer};
use core::cmp::Ordering;
use core::ops;

/// Implements a binary operator for `Bounded op Bounded` and `Bounded op T`.
macro_rules! impl_binop {
    ($($trait:ident :: $method:ident, $sym:tt, $doc_a:literal, $doc_b:literal, $doc_r:literal;)*) => {
        $(
            impl<T: Integer, const N: u32, const M: u32> ops::$trait<Bounded<T, M>>
                for Bounded<T, N>
            {
                type Output = T;

                #[doc = concat!("Applies `", stringify!($sym), "` to both values.")]
                ///
                /// # Examples
                ///
                /// ```
                /// use bounded::Bounded;
                ///
                #[doc = concat!("let a = Bounded::<u32, 8>::new::<", $doc_a, ">();")]
                #[doc = concat!("let b = Bounded::<u32, 4>::new::<", $doc_b, ">();")]
                #[doc = concat!("assert_eq!(a ", stringify!($sym), " b, ", $doc_r, ");")]
                /// ```
                #[inline(always)]
                fn $method(self, rhs: Bounded<T, M>) -> T {
                    self.get() $sym rhs.get()
                }
            }

            impl<T: Integer, const N: u32> ops::$trait<T> for Bounded<T, N> {
                type Output = T;

                #[doc = concat!("Applies `", stringify!($sym), "` to the value and `rhs`.")]
                ///
                /// # Examples
                ///
                /// ```
                /// use bounded::Bounded;
                ///
                #[doc = concat!("let a = Bounded::<u32, 8>::new::<", $doc_a, ">();")]
                #[doc = concat!("assert_eq!(a ", stringify!($sym), " ", $doc_b, ", ", $doc_r, ");")]
                /// ```
                #[inline(always)]
                fn $method(self, rhs: T) -> T {
                    self.get() $sym rhs
                }
            }
        )*
    };
}

impl_binop! {
    Add::add, +, "200", "12", "212";
    Sub::sub, -, "200", "12", "188";
    Mul::mul, *, "200", "12", "2400";
    Div::div, /, "200", "12", "16";
    Rem::rem, %, "200", "12", "8";
    BitAnd::bitand, &, "0xcc", "0xa", "0x8";
    BitOr::bitor, |, "0xcc", "0xa", "0xce";
    BitXor::bitxor, ^, "0xcc", "0xa", "0xc6";
}

impl<T: Integer + ops::Not<Output = T>, const N: u32> ops::Not for Bounded<T, N> {
    type Output = T;

    /// Complements all bits of the backing type (not only the `N` low ones).
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// let v = Bounded::<u8, 4>::new::<0b0101>();
    /// assert_eq!(!v, 0b1111_1010);
    /// ```
    #[inline(always)]
    fn not(self) -> T {
        !self.get()
    }
}

impl<T: Integer + ops::Neg<Output = T>, const N: u32> ops::Neg for Bounded<T, N> {
    type Output = T;

    /// Negates the value. Only signed backing types implement negation.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// let v = Bounded::<i8, 4>::new::<-7>();
    /// assert_eq!(-v, 7);
    /// ```
    ///
    /// ```compile_fail,E0600
    /// use bounded::Bounded;
    ///
    /// let _ = -Bounded::<u8, 4>::new::<1>();
    /// ```
    #[inline(always)]
    fn neg(self) -> T {
        -self.get()
    }
}

impl<T: Integer, const N: u32, const M: u32> PartialEq<Bounded<T, M>> for Bounded<T, N> {
    /// Compares the values, whatever the widths.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// assert_eq!(Bounded::<u16, 4>::new::<9>(), Bounded::<u16, 12>::new::<9>());
    /// assert_ne!(Bounded::<u16, 4>::new::<9>(), Bounded::<u16, 12>::new::<10>());
    /// ```
    #[inline(always)]
    fn eq(&self, other: &Bounded<T, M>) -> bool {
        self.get() == other.get()
    }
}

impl<T: Integer, const N: u32> Eq for Bounded<T, N> {}

impl<T: Integer, const N: u32, const M: u32> PartialOrd<Bounded<T, M>> for Bounded<T, N> {
    /// Orders by value, whatever the widths.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// assert!(Bounded::<i32, 4>::new::<-3>() < Bounded::<i32, 20>::new::<1000>());
    /// ```
    #[inline(always)]
    fn partial_cmp(&self, other: &Bounded<T, M>) -> Option<Ordering> {
        Some(self.get().cmp(&other.get()))
    }
}

impl<T: Integer, const N: u32> Ord for Bounded<T, N> {
    /// Orders by value.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// let mut v = [Bounded::<u8, 3>::new::<5>(), Bounded::<u8, 3>::new::<2>()];
    /// v.sort();
    /// assert_eq!(v[0], 2);
    /// ```
    #[inline(always)]
    fn cmp(&self, other: &Self) -> Ordering {
        Ord::cmp(&self.get(), &other.get())
    }
}

impl<T: Integer, const N: u32> PartialEq<T> for Bounded<T, N> {
    /// Compares with a plain value.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// assert!(Bounded::<u64, 40>::new::<12>() == 12);
    /// ```
    #[inline(always)]
    fn eq(&self, rhs: &T) -> bool {
        self.get() == *rhs
    }
}

impl<T: Integer, const N: u32> PartialOrd<T> for Bounded<T, N> {
    /// Orders against a plain value.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// assert!(Bounded::<u64, 40>::new::<12>() > 11);
    /// ```
    #[inline(always)]
    fn partial_cmp(&self, other: &T) -> Option<Ordering> {
        Some(self.get().cmp(other))
    }
}

/// Comparisons with the plain value on the left (`5 == b`), one `impl` per primitive.
macro_rules! impl_reverse_cmp {
    ($($t:ty: $ex:ident),* $(,)?) => {
        $(
            impl<const N: u32> PartialEq<Bounded<$t, N>> for $t {
                /// Compares a plain value with a `Bounded`.
                ///
                #[doc = example!($ex, "# Examples\n\n```\nuse bounded::Bounded;\n\n",
                    "assert!(3 == Bounded::<", stringify!($t), ", 3>::new::<3>());\n```")]
                #[inline(always)]
                fn eq(&self, other: &Bounded<$t, N>) -> bool {
                    *self == other.get()
                }
            }

            impl<const N: u32> PartialOrd<Bounded<$t, N>> for $t {
                /// Orders a plain value against a `Bounded`.
                ///
                #[doc = example!($ex, "# Examples\n\n```\nuse bounded::Bounded;\n\n",
                    "assert!(2 < Bounded::<", stringify!($t), ", 3>::new::<3>());\n```")]
                #[inline(always)]
                fn partial_cmp(&self, other: &Bounded<$t, N>) -> Option<Ordering> {
                    Some(self.cmp(&other.get()))
                }
            }
        )*
    };
}

impl_reverse_cmp!(
    u8: plain,
    u16: plain,
    u32: example,
    u64: plain,
    u128: plain,
    usize: plain,
    i8: plain,
    i16: plain,
    i32: example,
    i64: plain,
    i128: plain,
    isize: plain,
);

#[cfg(test)]
mod tests {
    use crate::Bounded;

    #[test]
    fn mixed_widths() {
        let a = Bounded::<i32, 8>::new::<-100>();
        let b = Bounded::<i32, 3>::new::<3>();
        assert_eq!(a + b, -97);
        assert_eq!(a - b, -103);
        assert_eq!(a * b, -300);
        assert_eq!(a / b, -33);
        assert_eq!(a % b, -1);
        assert_eq!(a & b, -100 & 3);
        assert_eq!(a | b, -100 | 3);
        assert_eq!(a ^ b, -100 ^ 3);
        assert_eq!(-a, 100);
        assert_eq!(!b, !3);
        assert!(a < b);
        assert!(b > a);
        assert!(a != b);
        assert!(-100 == a && 3 >= b);
    }
}
