// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Kernel adapters, compiled only inside a Linux tree (`cargo xtask kernel-build` passes
//! `--cfg gpukit_kernel --extern kernel`).
//!
//! Linux 7.2 has its own `kernel::num::Bounded`; the two types hold the same invariant (a value
//! that fits in `N` bits), so values move between them without loss. The one kernel mechanism
//! the host has no equivalent for is `build_assert!`: a check the optimiser must prove, or the
//! link fails. [`Bounded::from_expr_build`] offers it next to the host's panicking
//! [`Bounded::from_expr`].

use crate::{raw, Bounded, Integer};

impl<T: Integer, const N: u32> Bounded<T, N> {
    /// Like [`Bounded::from_expr`], but the range check is a kernel `build_assert!`: a value the
    /// compiler cannot prove to fit in `N` bits fails the kernel build instead of panicking.
    #[inline(always)]
    pub fn from_expr_build(expr: T) -> Self {
        ::kernel::build_assert::build_assert!(
            raw::fits(expr, N),
            "Bounded::from_expr_build: value does not fit in N bits"
        );
        // SAFETY: `build_assert!` above only builds if `expr` fits in `N` bits.
        unsafe { Self::new_unchecked(expr) }
    }

    /// The same value as the kernel's `kernel::num::Bounded`.
    ///
    /// Always `Some` (both types hold a value that fits in `N` bits); an `Option` so that no
    /// panic path exists.
    pub fn to_kernel(self) -> Option<::kernel::num::Bounded<T, N>>
    where
        T: ::kernel::num::Integer,
    {
        ::kernel::num::Bounded::try_new(self.get())
    }

    /// The same value as this crate's type; always `Some`, like [`Bounded::to_kernel`].
    pub fn from_kernel(value: ::kernel::num::Bounded<T, N>) -> Option<Self>
    where
        T: ::kernel::num::Integer,
    {
        Self::try_new(value.get())
    }
}

mod kunit;
