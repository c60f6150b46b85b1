// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Time, as far as job timeouts need it.
//!
//! The queue reads a monotonic [`Clock`] when a job starts on the ring and when it checks for
//! timeouts; it never sleeps. Deadlines are handed to the executor
//! ([`Executor::wake_at`](crate::Executor::wake_at)), which runs the queue again when one is due
//! (kernel: the `Runner`'s high-resolution timer on the monotonic clock, armed for the earliest
//! deadline after each run; host: a manual clock in tests).
//!
//! The family has one other clock, the `register` crate's `PollClock` (a `Duration` since its
//! origin, and able to sleep, for poll loops). The names differ so that a driver can use both
//! crates' items side by side; [`Instant::from_duration`] and [`Instant::since_origin`]
//! convert, so one `PollClock` can serve as this crate's [`Clock`] through a one-line adapter.

use core::time::Duration;

/// A point on a monotonic clock, in nanoseconds since an arbitrary origin.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use jobqueue::Instant;
///
/// let t = Instant::from_nanos(1_000);
/// assert_eq!(t.saturating_add(Duration::from_micros(1)).as_nanos(), 2_000);
/// assert!(Instant::from_nanos(u64::MAX).saturating_add(Duration::from_secs(1)) == Instant::MAX);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

/// With its unit: nanoseconds since the clock's origin, printed as a duration from it
/// (`Instant(120ms)`, `Instant(1.5s)`).
///
/// ```
/// use jobqueue::Instant;
/// assert_eq!(format!("{:?}", Instant::from_nanos(120_000_000)), "Instant(120ms)");
/// ```
impl core::fmt::Debug for Instant {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::result::Result<(), core::fmt::Error> {
        write!(f, "Instant({:?})", core::time::Duration::from_nanos(self.0))
    }
}

impl Instant {
    /// The latest representable instant.
    pub const MAX: Instant = Instant(u64::MAX);

    /// Builds an instant from nanoseconds.
    pub const fn from_nanos(ns: u64) -> Self {
        Instant(ns)
    }

    /// Nanoseconds since the clock's origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The instant `d` after the clock's origin (saturating at [`Instant::MAX`]): how a driver
    /// turns a clock that counts a [`Duration`] since its origin (such as the `register`
    /// crate's `PollClock`) into this crate's [`Clock`].
    ///
    /// ```
    /// use core::time::Duration;
    /// use jobqueue::Instant;
    ///
    /// let t = Instant::from_duration(Duration::from_millis(3));
    /// assert_eq!(t.as_nanos(), 3_000_000);
    /// assert_eq!(t.since_origin(), Duration::from_millis(3));
    /// assert_eq!(Instant::from_duration(Duration::MAX), Instant::MAX);
    /// ```
    pub fn from_duration(d: Duration) -> Self {
        Instant(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    /// The time since the clock's origin.
    pub const fn since_origin(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// Adds `d`, saturating at [`Instant::MAX`].
    pub fn saturating_add(self, d: Duration) -> Self {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Instant(self.0.saturating_add(ns))
    }
}

/// A monotonic clock.
pub trait Clock {
    /// The current time; never goes backwards.
    fn now(&self) -> Instant;
}
