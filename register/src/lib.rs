// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Typed hardware registers and the I/O regions they live in.
//!
//! Device drivers describe each register once, with the [`register!`] macro, and get a type per
//! register whose fields are [`Bounded`](::bounded::Bounded) integers: a value too wide for its
//! field does not compile (or, for run-time values, is reported as an error), and every access
//! costs what hand-written shifts and masks cost. Registers are read and written through the
//! [`io`] traits, which model the kernel's `kernel::io`: real memory-mapped I/O ([`io::Mmio`]),
//! host memory for unit tests ([`io::MemRegion`]) or a simulated device ([`io::ModelRegion`]).
//!
//! ```
//! use register::{io::{Io, MemRegion}, register};
//!
//! register! {
//!     /// Chip revision.
//!     pub BOOT_0(u32) @ 0x100 {
//!         7:4 major;
//!         3:0 minor;
//!     }
//! }
//!
//! let io = MemRegion::<0x1000>::new();
//! io.write_reg(BOOT_0::zeroed().with_const_major::<2>().with_const_minor::<5>());
//! let boot0 = io.read(BOOT_0); // Linux 7.2 style
//! assert_eq!((boot0.major().get(), boot0.minor().get()), (2, 5));
//! assert_eq!(io.read32(0x100), 0x25);
//! ```
//!
//! # Cost
//!
//! Field accesses compile to the instructions of hand-written code: the probe pairs in
//! `xtask/codegen-probes/src/register.rs` (field read, constant and run-time read-modify-write,
//! checked setter, array element with a run-time index, relative register, `Mmio` with barriers)
//! give identical assembly on x86_64 and `aarch64-unknown-none`; a setter taking a `Bounded` is a
//! single `bfi` on AArch64.
//!
//! `cargo bench -p gpukit-register --features bench --bench fields -- --warm-up-time 1
//! --measurement-time 3` (criterion, same run, one 4-field `u32` register, loaded 2-core host;
//! the get/set figures are within noise of a loop iteration):
//!
//! | operation | `register!` | `bitbybit` 2.0.1 | `tock-registers` 0.10.1 |
//! | --- | --- | --- | --- |
//! | get 3 fields | 2.77 ns | 2.85 ns | 2.14 ns |
//! | set 3 fields | 3.03 ns | 4.66 ns | 4.08 ns |
//! | `Debug` to a `String` | 413 ns | 319 ns | 406 ns |
//!
//! Compile time is the price of generating both the first-series and the Linux 7.2 accessors
//! (twelve items per field): `register/tools/compile_time.sh 500` (500 registers of 8 fields,
//! `cargo check` of the generated crate alone, rustc 1.95, host shared with other builds at a
//! load average of about 8, so absolute figures are inflated) measured 109 s and 131 s for
//! `register!` against 36 s and 30 s for the same layout with `bitbybit` (which generates no
//! I/O accessors). Type checking, borrow checking of the generated functions and macro
//! expansion dominate (`-Z time-passes`).

#![no_std]

#[cfg(all(feature = "kernel", not(gpukit_kernel)))]
compile_error!(
    "the `kernel` feature only builds inside a Linux tree: use `cargo xtask kernel-build`"
);

#[cfg(all(feature = "kernel", gpukit_kernel))]
pub mod kernel;

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(any(test, feature = "std"))]
extern crate std;

mod error;
pub mod io;

pub use io::register::RegisterBase;

/// The integer type of every field, re-exported so that a register file needs no other
/// dependency (and errors name `register::Bounded`).
pub use ::bounded::{Bounded, Integer, TryIntoBounded};

/// The `bounded` crate, for its other items (`bounded::convert`, ...).
#[doc(no_inline)]
pub use ::bounded;

pub use error::{Error, UnknownValue};

/// The type of every field's `X_RANGE` constant: the field's bit positions, `lo..=hi`.
///
/// # Examples
///
/// ```
/// use register::register;
///
/// register! {
///     /// A status register.
///     pub STATUS(u32) @ 0x0 {
///         /// Error code.
///         11:4 code;
///     }
/// }
///
/// let bits: register::FieldBits = STATUS::CODE_RANGE;
/// assert_eq!((*bits.start(), *bits.end()), (4, 11));
/// ```
pub type FieldBits = ::core::ops::RangeInclusive<u8>;

/// Items used by the code the macros generate. Not part of the API.
#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

/// The example of the README, run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
