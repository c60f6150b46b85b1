// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The [`Bounded`] type and its constructors, accessors and width changes.

use crate::{raw, Integer, Unsigned};
use core::ops::Deref;

/// A primitive integer `T` whose value is known to fit in its `N` least significant bits.
///
/// For an unsigned `T` the value lies in `0..2^N`; for a signed `T` it lies in
/// `-2^(N-1)..2^(N-1)`, i.e. it is the sign extension of an `N`-bit two's complement number.
/// `N` must be between 1 and `T::BITS`: any use of a `Bounded` with another `N` is rejected when
/// the program is built.
///
/// A register field `hi:lo` has exactly this shape, which is why getters of the `register!`
/// macro return `Bounded` values and setters accept them: a value that was proven to fit once
/// (at build time with [`Bounded::new`], or by a check with [`Bounded::try_new`]) never needs to
/// be masked or checked again.
///
/// `Bounded<T, N>` has the layout of `T` (`#[repr(transparent)]`) and costs nothing over it at
/// run time.
///
/// # Invariants
///
/// The wrapped value fits in `N` bits of `T`'s signedness, as defined above. (The all-zero
/// value fits any `N`.) Every function that constructs or reads a `Bounded` also checks at build
/// time that `1 <= N <= T::BITS`, so code with another `N` does not compile.
///
/// # Examples
///
/// Values known when the program is written are checked at build time:
///
/// ```
/// use bounded::Bounded;
///
/// let v = Bounded::<u8, 5>::new::<31>();
/// assert_eq!(v.get(), 31);
///
/// let v = Bounded::<i8, 5>::new::<-16>();
/// assert_eq!(v.get(), -16);
/// ```
///
/// ```compile_fail,E0080
/// use bounded::Bounded;
///
/// // 16 needs 5 bits.
/// let _ = Bounded::<u8, 4>::new::<16>();
/// ```
///
/// Other values are checked when the program runs:
///
/// ```
/// use bounded::Bounded;
///
/// assert!(Bounded::<u16, 6>::try_new(63).is_some());
/// assert!(Bounded::<u16, 6>::try_new(64).is_none());
/// ```
///
/// Values compare and compute with each other whatever their widths, and with the plain
/// integer; results are plain integers, since a sum may need more bits than either operand:
///
/// ```
/// use bounded::Bounded;
///
/// let a = Bounded::<u32, 8>::new::<200>();
/// let b = Bounded::<u32, 4>::new::<15>();
///
/// assert!(b < a);
/// assert_eq!(a + b, 215u32);
/// assert_eq!(a % b, 5);
/// assert!(a == 200);
/// assert_eq!(a * 2, 400);
/// ```
///
/// Conversions from and into primitives exist exactly where they cannot lose information:
///
/// ```
/// use bounded::Bounded;
///
/// let v = Bounded::<u32, 8>::from(0xabu8);
/// assert_eq!(u8::from(v), 0xab);
/// let flag = Bounded::<u64, 1>::from(true);
/// assert!(bool::from(flag));
/// ```
///
/// ```compile_fail,E0277
/// use bounded::Bounded;
///
/// // A 10-bit value does not always fit in a `u8`.
/// let _ = u8::from(Bounded::<u32, 10>::new::<3>());
/// ```
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct Bounded<T, const N: u32>(T)
where
    T: Integer;

/// Generates the `const` constructor [`Bounded::new`] for one backing type.
///
/// The value is a const generic parameter, whose type cannot be the generic `T`: so there is one
/// `impl` per primitive type.
macro_rules! impl_new {
    ($($t:ty),* $(,)?) => {
        $(
            impl<const N: u32> Bounded<$t, N> {
                /// Wraps the constant `VALUE`, checking at build time that it fits in `N` bits.
                ///
                /// Prefer this over [`Bounded::from_expr`] and [`Bounded::try_new`] whenever
                /// the value is a constant: an out-of-range `VALUE` (or an invalid `N`) is a
                /// build error, in debug and release builds alike.
                ///
                /// # Examples
                ///
                /// ```
                /// use bounded::Bounded;
                ///
                #[doc = concat!("let v = Bounded::<", stringify!($t), ", 5>::new::<9>();")]
                /// assert_eq!(v.get(), 9);
                ///
                /// // Usable in constants.
                #[doc = concat!("const V: Bounded<", stringify!($t), ", 4> = Bounded::<", stringify!($t), ", 4>::new::<7>();")]
                /// assert_eq!(V.get(), 7);
                /// ```
                ///
                /// An out-of-range constant such as `new::<32>()` with `N == 5` does not build:
                /// see the example on [`Bounded`] and `tests/ui/fail_new_out_of_range.rs`.
                #[inline(always)]
                pub const fn new<const VALUE: $t>() -> Self {
                    const {
                        assert!(
                            raw::fits(VALUE, N),
                            "Bounded::new: VALUE does not fit in N bits"
                        )
                    };
                    // SAFETY: just checked (at build time) that `VALUE` fits in `N` bits.
                    unsafe { Self::new_unchecked(VALUE) }
                }
            }
        )*
    };
}

impl_new!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize);

impl<T: Integer, const N: u32> Bounded<T, N> {
    /// Build-time check that `N` is a valid width for `T`. Mentioned by every function that
    /// creates or reads a value, so that an invalid `Bounded` type cannot be used.
    const VALID_WIDTH: () = assert!(
        N >= 1 && N <= T::BITS,
        "Bounded<T, N>: N must be between 1 and T::BITS"
    );

    /// Wraps `value` without checking it.
    ///
    /// # Safety
    ///
    /// `value` must fit in `N` bits of `T`'s signedness (see the [`Bounded`] invariants).
    #[inline(always)]
    pub(crate) const unsafe fn new_unchecked(value: T) -> Self {
        let () = Self::VALID_WIDTH;
        // INVARIANT: the caller guarantees that `value` fits in `N` bits.
        Self(value)
    }

    /// Wraps `value` if it fits in `N` bits, and returns [`None`] otherwise.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// assert_eq!(Bounded::<u32, 8>::try_new(0xff).map(Bounded::get), Some(0xff));
    /// assert_eq!(Bounded::<u32, 8>::try_new(0x100), None);
    ///
    /// // Four signed bits hold -8 to 7.
    /// assert!(Bounded::<i16, 4>::try_new(-8).is_some());
    /// assert!(Bounded::<i16, 4>::try_new(7).is_some());
    /// assert!(Bounded::<i16, 4>::try_new(-9).is_none());
    /// assert!(Bounded::<i16, 4>::try_new(8).is_none());
    /// ```
    #[inline(always)]
    pub const fn try_new(value: T) -> Option<Self> {
        if raw::fits(value, N) {
            // SAFETY: just checked that `value` fits in `N` bits.
            Some(unsafe { Self::new_unchecked(value) })
        } else {
            None
        }
    }

    /// Wraps the result of an expression the optimiser can prove to be in range, such as
    /// `x & 0xf` for `N == 4`.
    ///
    /// In the Linux kernel this function rejects, at build time, any `expr` that the compiler
    /// cannot prove to fit (through `build_assert!`, which relies on optimisation). A host build
    /// cannot do that without making unoptimised builds fail on correct code, so here the check is
    /// an ordinary comparison, with this contract:
    ///
    /// - in a `const` context an out-of-range `expr` is a **build error**, in every profile;
    /// - at run time an out-of-range `expr` **panics** (this is what the kernel itself does when
    ///   built with `CONFIG_RUST_BUILD_ASSERT_ALLOW=y`);
    /// - when the optimiser can prove `expr` in range, as the kernel requires, the check is
    ///   removed and the function costs nothing.
    ///
    /// Code that is correct for the kernel therefore behaves identically here. Prefer
    /// [`Bounded::new`] for constants and [`Bounded::try_new`] for values not provably in range.
    ///
    /// # Panics
    ///
    /// If `expr` does not fit in `N` bits (which the kernel would refuse to build).
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    /// # fn some_number() -> u32 { 0xdead_beef }
    ///
    /// let low_nibble = Bounded::<u32, 4>::from_expr(some_number() & 0xf);
    /// assert_eq!(low_nibble.get(), 0xf);
    ///
    /// const ONE: Bounded<u8, 1> = Bounded::from_expr(1);
    /// assert_eq!(ONE.get(), 1);
    /// ```
    ///
    /// Out of range in a constant: a build error.
    ///
    /// ```compile_fail,E0080
    /// use bounded::Bounded;
    ///
    /// const BAD: Bounded<u8, 4> = Bounded::from_expr(16);
    /// ```
    ///
    /// Out of range at run time: a panic.
    ///
    /// ```should_panic
    /// use bounded::Bounded;
    /// # fn some_number() -> u32 { 0xdead_beef }
    ///
    /// let _ = Bounded::<u32, 4>::from_expr(some_number());
    /// ```
    #[inline(always)]
    #[track_caller]
    pub const fn from_expr(expr: T) -> Self {
        assert!(
            raw::fits(expr, N),
            "Bounded::from_expr: value does not fit in N bits"
        );
        // SAFETY: just checked that `expr` fits in `N` bits.
        unsafe { Self::new_unchecked(expr) }
    }

    /// Returns the value, telling the optimiser that it fits in `N` bits.
    ///
    /// The range hint lets the compiler drop masks and checks that the invariant makes redundant:
    /// for instance inserting a `Bounded<u32, 8>` into a register with `(reg & !0xff00) | (v << 8)`
    /// needs no `& 0xff` on `v`.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// let v = Bounded::<u32, 6>::new::<42>();
    /// assert_eq!(v.get(), 42u32);
    ///
    /// const SEVEN: u32 = Bounded::<u32, 4>::new::<7>().get();
    /// assert_eq!(SEVEN, 7);
    /// ```
    #[inline(always)]
    pub const fn get(self) -> T {
        let () = Self::VALID_WIDTH;
        // SAFETY: by the type invariant the value fits in `N` bits, so the condition holds.
        unsafe { core::hint::assert_unchecked(raw::fits(self.0, N)) };
        self.0
    }

    /// Widens to `M >= N` bits. Always succeeds; `M < N` (or `M > T::BITS`) does not build.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// let v = Bounded::<u32, 6>::new::<42>();
    /// let wide: Bounded<u32, 12> = v.extend();
    /// assert_eq!(wide, v);
    /// ```
    ///
    /// ```compile_fail,E0080
    /// use bounded::Bounded;
    ///
    /// let _ = Bounded::<u32, 4>::new::<7>().extend::<3>();
    /// ```
    #[inline(always)]
    pub const fn extend<const M: u32>(self) -> Bounded<T, M> {
        const { assert!(M >= N, "Bounded::extend: M must be at least N") };
        // SAFETY: the value fits in `N` bits, hence in the `M >= N` bits.
        unsafe { Bounded::new_unchecked(self.get()) }
    }

    /// Narrows to `M` bits if the value fits, and returns [`None`] otherwise.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// let v = Bounded::<u32, 12>::new::<100>();
    /// assert_eq!(v.try_shrink::<7>().map(Bounded::get), Some(100));
    /// assert_eq!(v.try_shrink::<6>(), None);
    /// ```
    #[inline(always)]
    pub const fn try_shrink<const M: u32>(self) -> Option<Bounded<T, M>> {
        Bounded::try_new(self.get())
    }

    /// Moves the value to the backing type `U`, of the same signedness, keeping `N`.
    ///
    /// Cannot fail: a `U` narrower than `N` bits does not build.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// let v = Bounded::<u64, 12>::new::<0xabc>();
    /// let narrow: Bounded<u16, 12> = v.cast();
    /// assert_eq!(narrow.get(), 0xabc);
    ///
    /// let s = Bounded::<i8, 3>::new::<-4>();
    /// assert_eq!(s.cast::<i64>().get(), -4);
    /// ```
    ///
    /// ```compile_fail,E0080
    /// use bounded::Bounded;
    ///
    /// // A `u8` cannot hold 12 bits.
    /// let _: Bounded<u8, 12> = Bounded::<u64, 12>::new::<1>().cast();
    /// ```
    #[inline(always)]
    pub const fn cast<U>(self) -> Bounded<U, N>
    where
        U: Integer<Signedness = <T as Integer>::Signedness>,
    {
        // SAFETY: the value fits in `N` bits of this signedness, `U` has the same signedness,
        // and `Bounded<U, N>` checks at build time that `U` has at least `N` bits. So the value is
        // representable in `U`, `convert` reproduces it exactly, and it still fits in `N` bits.
        unsafe { Bounded::new_unchecked(raw::convert::<T, U>(self.get())) }
    }

    /// Shifts right by `BY` bits, giving a `Bounded` of `W` bits. `W` must be at least
    /// `N - BY` (and `BY` less than `T::BITS`), or the program does not build.
    ///
    /// Signed values are shifted arithmetically (the sign is kept), like `>>` on `T`.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// let v = Bounded::<u32, 16>::new::<0xab00>();
    /// let high: Bounded<u32, 8> = v.shr::<8, _>();
    /// assert_eq!(high.get(), 0xab);
    /// ```
    ///
    /// ```compile_fail,E0080
    /// use bounded::Bounded;
    ///
    /// // 16 - 8 bits are left, 7 are not enough.
    /// let _ = Bounded::<u32, 16>::new::<0xab00>().shr::<8, 7>();
    /// ```
    #[inline(always)]
    pub fn shr<const BY: u32, const W: u32>(self) -> Bounded<T, W> {
        const {
            assert!(
                BY < T::BITS,
                "Bounded::shr: the shift amount must be smaller than the width of T"
            );
            assert!(
                W.saturating_add(BY) >= N,
                "Bounded::shr: the result needs at least N - BY bits"
            );
        };
        // SAFETY: an `N`-bit value shifted right by `BY` (arithmetically for signed types)
        // fits in `N - BY` bits, at most `W` as checked above (and in 1 bit if
        // `BY >= N`, while `W >= 1` is checked by `Bounded<T, W>`).
        unsafe { Bounded::new_unchecked(self.get() >> BY) }
    }

    /// Shifts left by `BY` bits, giving a `Bounded` of `W` bits. `W` must be at least
    /// `N + BY` (and at most `T::BITS`), so no bit is ever lost, or the program does not
    /// build.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// let v = Bounded::<u32, 8>::new::<0xab>();
    /// let placed: Bounded<u32, 16> = v.shl::<8, _>();
    /// assert_eq!(placed.get(), 0xab00);
    /// ```
    ///
    /// ```compile_fail,E0080
    /// use bounded::Bounded;
    ///
    /// let _ = Bounded::<u32, 8>::new::<0xab>().shl::<8, 15>();
    /// ```
    #[inline(always)]
    pub fn shl<const BY: u32, const W: u32>(self) -> Bounded<T, W> {
        const {
            assert!(
                W >= N.saturating_add(BY),
                "Bounded::shl: the result needs at least N + BY bits"
            )
        };
        // SAFETY: an `N`-bit value shifted left by `BY` fits in `N + BY` bits, at most
        // `W` as checked above. `Bounded<T, W>` checks `W <= T::BITS`, so `BY < T::BITS`
        // and no bit is shifted out (for signed types the sign bit is preserved as well).
        unsafe { Bounded::new_unchecked(self.get() << BY) }
    }
}

impl<T: Integer<Signedness = Unsigned>> Bounded<T, 1> {
    /// Returns `true` if the bit is set (the form used by seed patches; same as
    /// [`Bounded::into_bool`]).
    ///
    /// Only exists for unsigned single-bit values.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// assert!(Bounded::<u32, 1>::new::<1>().as_bool());
    /// assert!(!Bounded::<u8, 1>::new::<0>().as_bool());
    /// ```
    ///
    /// ```compile_fail,E0599
    /// use bounded::Bounded;
    ///
    /// let _ = Bounded::<u32, 2>::new::<1>().as_bool();
    /// ```
    #[inline(always)]
    pub const fn as_bool(self) -> bool {
        self.into_bool()
    }

    /// Returns `true` if the bit is set, like `bool::from(self)`.
    ///
    /// Only exists for unsigned single-bit values.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// assert!(Bounded::<u16, 1>::new::<1>().into_bool());
    /// assert!(!Bounded::<u64, 1>::new::<0>().into_bool());
    /// ```
    #[inline(always)]
    pub const fn into_bool(self) -> bool {
        raw::to_bits(self.get()) != 0
    }
}

impl<T: Integer, const N: u32> Deref for Bounded<T, N> {
    type Target = T;

    /// Borrows the value; the optimiser is told its range as with [`Bounded::get`].
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// let v = Bounded::<u16, 9>::new::<300>();
    /// assert_eq!(*v, 300);
    /// assert_eq!(v.count_ones(), 4);
    /// ```
    #[inline(always)]
    fn deref(&self) -> &T {
        let () = Self::VALID_WIDTH;
        // SAFETY: by the type invariant the value fits in `N` bits, so the condition holds.
        unsafe { core::hint::assert_unchecked(raw::fits(self.0, N)) };
        &self.0
    }
}

impl<T: Integer + Default, const N: u32> Default for Bounded<T, N> {
    /// Zero, which fits in every width.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    ///
    /// assert_eq!(Bounded::<i32, 3>::default().get(), 0);
    /// ```
    #[inline(always)]
    fn default() -> Self {
        // SAFETY: `T::default()` is zero for every primitive integer, and zero fits in any width.
        unsafe { Self::new_unchecked(T::default()) }
    }
}

impl<T: Integer + core::hash::Hash, const N: u32> core::hash::Hash for Bounded<T, N> {
    /// Hashes exactly like the wrapped value.
    ///
    /// # Examples
    ///
    /// ```
    /// use bounded::Bounded;
    /// use core::hash::{BuildHasher, BuildHasherDefault};
    /// use std::collections::hash_map::DefaultHasher;
    ///
    /// let h = BuildHasherDefault::<DefaultHasher>::default();
    /// assert_eq!(h.hash_one(Bounded::<u8, 4>::new::<9>()), h.hash_one(9u8));
    /// ```
    #[inline]
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.get().hash(state);
    }
}

// SAFETY: `Bounded<T, N>` is `#[repr(transparent)]` over `T`, for which all-zero bytes are a valid
// value (`T: Zeroable`). That value is zero, which fits in any number of bits, so the type
// invariant holds. (A zeroed `Bounded` with an invalid `N` can be created, but none of its
// methods or trait implementations builds for such an `N`.)
unsafe impl<T: Integer + pin_init::Zeroable, const N: u32> pin_init::Zeroable for Bounded<T, N> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_and_get() {
        const V: Bounded<u8, 4> = Bounded::<u8, 4>::new::<15>();
        assert_eq!(V.get(), 15);
        assert_eq!(Bounded::<i8, 4>::new::<-8>().get(), -8);
        assert_eq!(
            Bounded::<i128, 128>::new::<{ i128::MIN }>().get(),
            i128::MIN
        );
        assert_eq!(
            Bounded::<u128, 128>::new::<{ u128::MAX }>().get(),
            u128::MAX
        );
    }

    #[test]
    fn shifts_signed() {
        let v = Bounded::<i16, 6>::new::<-32>();
        assert_eq!(v.shr::<2, 4>().get(), -8);
        assert_eq!(v.shr::<5, 1>().get(), -1);
        assert_eq!(v.shl::<10, 16>().get(), i16::MIN);
        let w = Bounded::<i16, 6>::new::<31>();
        assert_eq!(w.shl::<10, 16>().get(), 31 << 10);
    }

    #[test]
    fn zeroed() {
        let z: Bounded<u32, 7> = pin_init::Zeroable::zeroed();
        assert_eq!(z.get(), 0);
        let z: Bounded<i64, 1> = pin_init::zeroed();
        assert_eq!(z.get(), 0);
    }

    #[test]
    fn from_expr_const_and_runtime() {
        const C: Bounded<i8, 3> = Bounded::from_expr(-4);
        assert_eq!(C.get(), -4);
        let x = core::hint::black_box(0x1234_5678u32);
        assert_eq!(Bounded::<u32, 8>::from_expr(x & 0xff).get(), 0x78);
    }

    #[test]
    #[should_panic(expected = "does not fit")]
    fn from_expr_out_of_range_panics() {
        let x = core::hint::black_box(16u8);
        let _ = Bounded::<u8, 4>::from_expr(x);
    }
}
