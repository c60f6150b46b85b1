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
//! | `Debug` to a `String` | 431 ns | 315 ns | 324 ns |
//!
//! (The `Debug` row comes from a later run of the `debug` group alone, after `Debug` was
//! rewritten to walk a table of fields; the run before gave 413, 319 and 406 ns.)
//!
//! ## Compile time
//!
//! `register/tools/compile_time.sh 500` generates 500 registers of 8 fields for `register!` and
//! the same layout for `bitbybit` (a proc macro, which generates no I/O accessors, no `Debug`
//! and no build-time layout checks, but a builder type per register) and times a clean
//! `cargo check` of each generated crate alone (best of 5, the two crates alternating; rustc
//! 1.95, 2-core host shared with other builds, load average 1.3 to 5.7 during these runs), then
//! the register declarations of Linux 7.2's Tyr and nova-core drivers compiled against this
//! crate:
//!
//! | input | `cargo check` of the crate alone |
//! | --- | --- |
//! | 500 registers, `register!` | 5.37 s |
//! | same layout, `bitbybit` 2.0.1 | 5.90 s |
//! | ratio `register!` / `bitbybit` | 0.91 (all nine runs of this version: 0.88, 0.97, 0.93, 0.89, 0.90, 0.86, 0.92, 0.91, 0.98; the version before: 0.99 to 1.07) |
//! | Linux 7.2 Tyr `regs.rs` (101 registers) | 0.54 s (0.54 to 0.81 s over the runs; version before: 0.64 s) |
//! | Linux 7.2 nova-core `regs.rs` (69 registers) | 0.37 s (0.36 to 0.56 s; version before: 0.39 s) |
//!
//! The ratio stays below 1 in every run, but not reliably below 0.9. Checking Tyr's file executes
//! 1854 M instructions (version before: 1896 M). This crate's own check takes about 0.35 s
//! longer than before (0.42 s to 0.77 s alone), for the table of field types, masks and ranges
//! described below; it is paid once per build.
//!
//! On this loaded host the wall-clock ratio moves by several percent from run to run; the number
//! of instructions rustc executes does not. Measured with `valgrind --tool=cachegrind` on the
//! `rustc` command that `cargo check -v` prints, for each step of the rework:
//!
//! | code | 20 registers | 100 registers | 500 registers |
//! | --- | ---: | ---: | ---: |
//! | previous version | 1494 M | | |
//! | first-series accessors on request, `Debug` from a table, trait impls written out | 1206 M | | |
//! | getter, `with_x`, `try_with_x` bodies: one call of a shared generic function | 1051 M | | |
//! | `Debug` given the converted fields only, field constants inline | 993 M | | |
//! | layout passed by value (no promoted constant per `with_const_x`) | 958 M | | |
//! | bodies pass the shift only, the shared functions build the mask | 919 M | 4521 M | 24169 M |
//! | one macro level fewer per register | 916 M | | 24121 M |
//! | linear matching, field types, masks and ranges from a table (this version) | 891 M | 4213 M | 20931 M |
//! | `bitbybit` 2.0.1 | 978 M | 4795 M | 23926 M |
//!
//! This crate's check now executes 0.91, 0.88 and 0.87 times `bitbybit`'s instructions at 20,
//! 100 and 500 registers (it was 0.94, 0.94 and 1.008).
//!
//! Where the time went: the cost follows the number of bodies rustc type-checks and
//! borrow-checks (functions, constants, anonymous constants) and how much work each needs, which
//! ablations (one kind of generated item removed at a time, instruction counts) priced. The
//! first-series accessors (`set_x`, `try_set_x` per field; `read`, `write`, `update`, `try_*`
//! per register) were about a sixth of the check: they are now generated only on request
//! (`register! { @first_series ... }`). Generic accessors whose bodies resolved traits per field
//! (`try_with_x` alone was about an eighth) now call `__private::get`, `with` and `try_with`,
//! checked once in this crate and inlined to the same instructions (the codegen probes are
//! unchanged). `Debug` walks a per-register layout table, the one the declaration check reads,
//! and receives only the converted fields' values; the declaration checks are one constant per
//! register; passing that table by reference had made a promoted constant in every
//! `with_const_x`.
//!
//! The check of the version before grew faster than linearly with the number of registers. The
//! cause was macro expansion, not type checking: rustc's macro matcher copies every match made
//! so far each time a repetition starts with an optional part (each register's attributes) or
//! an optional part is taken while the next one is entered (`@ 0x..` came before `=> OTHER`),
//! so one invocation of N registers copied O(N²) matches. With `-Z time-passes` (nightly),
//! expansion took 1.18 s for 500 registers in one invocation against 0.97 s for the same
//! registers in one invocation each, and 2.90 s against 2.18 s at 1000, where
//! `Vec<NamedMatch>::clone` was the hottest function under `perf`. The entry rule now takes each
//! register's attributes at the end of the register before it and puts them back in front in a
//! second rule (`@pairs`), and `@ 0x..` is the last optional part: expansion of 500 registers
//! takes 0.80 s. (Trait coherence, the other suspect, grows linearly: its 500
//! `From<REG> for u32` impls share one bucket of rustc's overlap check but are told apart
//! without work; coherence checking takes 0.39 s at 500 registers and 0.77 s at 1000.)
//!
//! What made each field expensive to check: its `Bounded` type was an anonymous constant
//! `{ field_width(hi, lo) }`, and `X_MASK` and `X_RANGE` were constants whose bodies call a
//! function (`field_mask`, `RangeInclusive::new`). Even in `cargo check` rustc type-checks,
//! builds, borrow-checks and prepares each constant's MIR for evaluation by other crates, and a
//! body with a call costs more than one that names a constant. Fields now name a table in
//! `__private`, built once in this crate for every `hi:lo` below 64: `F31_28<S>` (the type,
//! `Bounded<S, 4>`), `M31_28` and `R31_28`. With `-Z time-passes` at 500 registers, the table of
//! types took type checking from 1.77 s to 1.36 s (coherence checking, where the anonymous
//! constants were first evaluated, from 0.71 s to 0.40 s) and the whole check from about 6.6 s
//! to 5.9 s; the table of constants took type and borrow checking from 2.54 s to 2.34 s and the
//! whole check from about 5.5 s to 5.1 s. What each field still costs: three
//! constants (11 % of the check at 100 registers, although their bodies only name a constant or a
//! literal), four functions, and the inline `const` block that checks `with_const_x`'s constant
//! (6 %; one generic constant per register instead was slower). `-Z unpretty=expanded` output
//! for 100 registers: 1.99 MB at the version before (previous version 3.16 MB, `bitbybit`
//! 1.11 MB).

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
