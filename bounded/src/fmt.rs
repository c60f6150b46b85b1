// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Formatting: every formatting trait of the backing type, applied to the value.

use crate::{Bounded, Integer};
use core::fmt;

/// Forwards a formatting trait to the wrapped value, flags included.
macro_rules! impl_fmt {
    ($($trait:ident, $spec:literal, $value:literal, $out:literal;)*) => {
        $(
            impl<T: Integer + fmt::$trait, const N: u32> fmt::$trait for Bounded<T, N> {
                #[doc = concat!("Formats the value as `T` does with `{", $spec, "}`.")]
                ///
                /// # Examples
                ///
                /// ```
                /// use bounded::Bounded;
                ///
                #[doc = concat!("let v = Bounded::<u32, 12>::new::<", $value, ">();")]
                #[doc = concat!("assert_eq!(format!(\"{", $spec, "}\", v), \"", $out, "\");")]
                /// ```
                #[inline]
                fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    fmt::$trait::fmt(&self.get(), f)
                }
            }
        )*
    };
}

impl_fmt! {
    Display, "", "1234", "1234";
    LowerHex, ":#x", "0xabc", "0xabc";
    UpperHex, ":X", "0xabc", "ABC";
    Binary, ":08b", "5", "00000101";
    Octal, ":o", "8", "10";
    LowerExp, ":e", "1200", "1.2e3";
    UpperExp, ":E", "1200", "1.2E3";
}

impl<T: Integer + fmt::Debug, const N: u32> fmt::Debug for Bounded<T, N> {
    /// Formats as `Bounded(value)`, honouring the flags (`{:#x?}`, ...) for the value.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// let v = Bounded::<u32, 12>::new::<255>();
    /// assert_eq!(format!("{v:?}"), "Bounded(255)");
    /// assert_eq!(format!("{v:x?}"), "Bounded(ff)");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Bounded").field(&self.get()).finish()
    }
}

#[cfg(test)]
mod tests {
    use crate::Bounded;
    use std::format;

    #[test]
    fn signed_and_padding() {
        let v = Bounded::<i16, 9>::new::<-200>();
        assert_eq!(format!("{v}"), "-200");
        assert_eq!(format!("{v:>6}"), "  -200");
        assert_eq!(format!("{v:x}"), format!("{:x}", -200i16));
        assert_eq!(format!("{v:?}"), "Bounded(-200)");
        assert_eq!(format!("{v:e}"), "-2e2");
    }
}
