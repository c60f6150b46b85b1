// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Typed hardware registers and the I/O regions they live in.
//!
//! Device drivers describe each register once, with the [`register!`] macro, and get a type per
//! register whose fields are [`Bounded`] integers: a value too wide for its
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
//! ## Compile time
//!
//! `register/tools/compile_time.sh 500` generates 500 registers of 8 fields for `register!` and
//! the same layout for `bitbybit` (a proc macro, which generates no I/O accessors, no `Debug`
//! and no build-time layout checks) and times a clean `cargo check` of each generated crate alone
//! (best of 3; rustc 1.95, 2-core host shared with other builds), then the register declarations
//! of Linux 7.2's Tyr and nova-core drivers compiled against this crate:
//!
//! | input | `cargo check` of the crate alone |
//! | --- | --- |
//! | 500 registers, `register!` | 12.98 s |
//! | same layout, `bitbybit` 2.0.1 | 7.38 s |
//! | ratio `register!` / `bitbybit` | 1.76 (an earlier run of the same code: 1.63, 11.87 s against 7.28 s; before this version: 4.08, 25.56 s against 6.27 s) |
//! | Linux 7.2 Tyr `regs.rs` (101 registers) | 1.15 s |
//! | Linux 7.2 nova-core `regs.rs` (69 registers) | 0.75 s |
//!
//! `register!` is still slower to check than `bitbybit` on the synthetic file. Where the time
//! goes, from `cargo +nightly rustc -- -Z time-passes` on the same layout with 100 registers
//! (one run each, seconds):
//!
//! | pass | before this version | now | `bitbybit` |
//! | --- | --- | --- | --- |
//! | total | 4.88 | 2.56 | 1.19 |
//! | macro expansion | 0.86 | 0.37 | 0.25 |
//! | type checking | 1.74 | 0.72 | 0.29 |
//! | borrow checking (with MIR building) | 0.95 | 0.57 | 0.29 |
//! | coherence | 0.59 | 0.29 | 0.13 |
//!
//! The cost follows the number of generated items: ablations (each kind of item removed in
//! turn, `cargo check` CPU time) put it near 140 µs per function, 40 µs per constant and
//! 250 µs per anonymous constant. Per field this version generates three constants, the type of
//! the field (one anonymous constant: its width) and six functions (`x`, `with_x`, `set_x`,
//! `with_const_x` with its build-time check, `try_with_x`, `try_set_x`), where `bitbybit`
//! generates four functions; per register, the trait implementations and the first-series I/O
//! functions come on top. What changed: `paste!` sees only the generated names instead of every
//! accessor's body (`-Z unpretty=expanded` output for 100 registers: 3.16 MB, was 3.88 MB;
//! `bitbybit`: 1.11 MB), the per-field helper functions and nested constants of the previous
//! version are gone, `Debug` is one call of a shared function, and the layout checks are two
//! constant function calls per register instead of three panicking branches per field. The
//! figures "before this version" in the first table come from the previous version of
//! `compile_time.sh`, which timed one run instead of the best of three.

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
///     @first_series
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
