// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Waiting for a register to reach a state.
//!
//! Drivers often start an operation and then wait for the device to report its end through a
//! status bit, giving up after a timeout. [`read_poll_timeout`] reads a value repeatedly until a
//! condition holds or the time runs out ([`Error::TimedOut`], `ETIMEDOUT`); between reads it
//! sleeps. Time comes from a [`PollClock`], so the same driver code runs against a kernel clock, a
//! bare-metal timer, the host's clock (`StdPollClock`, with the `std` feature) or a simulated one
//! ([`ManualPollClock`]) that makes timeouts deterministic in tests.

use core::cell::Cell;
use core::time::Duration;

use crate::Error;

/// A monotonic clock that can also wait.
///
/// Named apart from the `jobqueue` crate's `Clock` (an `Instant` for job deadlines, no
/// sleeping), so that a driver can use both; `jobqueue::Instant::from_duration(clock.now())`
/// converts this one's reading.
pub trait PollClock {
    /// Returns the time elapsed since an arbitrary fixed origin. Never goes backwards.
    fn now(&self) -> Duration;

    /// Waits for about `duration`.
    fn sleep(&self, duration: Duration);

    /// Hints that the caller is busy-waiting.
    #[inline]
    fn relax(&self) {
        core::hint::spin_loop();
    }
}

impl<C: PollClock + ?Sized> PollClock for &C {
    fn now(&self) -> Duration {
        (**self).now()
    }

    fn sleep(&self, duration: Duration) {
        (**self).sleep(duration)
    }

    fn relax(&self) {
        (**self).relax()
    }
}

/// Calls `op` until `cond` accepts its result, sleeping `sleep_delta` between calls, and gives up
/// with [`Error::TimedOut`] once more than `timeout` has passed.
///
/// An error from `op` is returned at once. The value is checked once more after the timeout
/// expires, so a condition that became true during the last sleep is not missed. A zero
/// `sleep_delta` busy-waits.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use register::io::poll::{read_poll_timeout, ManualPollClock};
/// use register::Error;
///
/// let clock = ManualPollClock::new();
/// let mut reads = 0;
/// // The "device" becomes ready on the fourth read.
/// let v = read_poll_timeout(
///     &clock,
///     || { reads += 1; Ok::<_, Error>(reads) },
///     |&r| r >= 4,
///     Duration::from_micros(10),
///     Duration::from_millis(1),
/// )?;
/// assert_eq!(v, 4);
///
/// // A condition that never holds times out.
/// let r = read_poll_timeout(&clock, || Ok::<_, Error>(0), |&v| v == 1,
///     Duration::from_micros(10), Duration::from_millis(1));
/// assert_eq!(r, Err(Error::TimedOut));
/// # Ok::<(), Error>(())
/// ```
pub fn read_poll_timeout<C, Op, Cond, T, E>(
    clock: &C,
    mut op: Op,
    mut cond: Cond,
    sleep_delta: Duration,
    timeout: Duration,
) -> Result<T, E>
where
    C: PollClock + ?Sized,
    Op: FnMut() -> Result<T, E>,
    Cond: FnMut(&T) -> bool,
    E: From<Error>,
{
    let start = clock.now();
    loop {
        let value = op()?;
        if cond(&value) {
            return Ok(value);
        }
        if clock.now().saturating_sub(start) > timeout {
            return Err(Error::TimedOut.into());
        }
        if !sleep_delta.is_zero() {
            clock.sleep(sleep_delta);
        }
        clock.relax();
    }
}

/// Calls `op` up to `retry` times until `cond` accepts its result, waiting `delay` between
/// calls, and gives up with [`Error::TimedOut`]. For contexts that must not sleep: the clock
/// should busy-wait in [`PollClock::sleep`].
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use register::io::poll::{read_poll_timeout_atomic, ManualPollClock};
/// use register::Error;
///
/// let clock = ManualPollClock::new();
/// let r = read_poll_timeout_atomic(&clock, || Ok::<_, Error>(1), |&v| v == 2,
///     Duration::from_micros(1), 5);
/// assert_eq!(r, Err(Error::TimedOut));
/// assert_eq!(clock.now_value(), Duration::from_micros(5));
/// ```
pub fn read_poll_timeout_atomic<C, Op, Cond, T, E>(
    clock: &C,
    mut op: Op,
    mut cond: Cond,
    delay: Duration,
    retry: usize,
) -> Result<T, E>
where
    C: PollClock + ?Sized,
    Op: FnMut() -> Result<T, E>,
    Cond: FnMut(&T) -> bool,
    E: From<Error>,
{
    for _ in 0..retry {
        let value = op()?;
        if cond(&value) {
            return Ok(value);
        }
        if !delay.is_zero() {
            clock.sleep(delay);
        }
        clock.relax();
    }
    Err(Error::TimedOut.into())
}

/// A simulated clock: time advances only when someone sleeps, plus an optional `tick` on every
/// reading (so that busy-waits also time out).
#[derive(Debug, Default)]
pub struct ManualPollClock {
    now: Cell<Duration>,
    tick: Duration,
}

impl ManualPollClock {
    /// Returns a clock at time zero that advances only when slept on.
    pub const fn new() -> Self {
        Self::with_tick(Duration::ZERO)
    }

    /// Returns a clock at time zero that also advances by `tick` every time it is read.
    pub const fn with_tick(tick: Duration) -> Self {
        Self {
            now: Cell::new(Duration::ZERO),
            tick,
        }
    }

    /// Returns the current time without advancing it.
    pub fn now_value(&self) -> Duration {
        self.now.get()
    }

    /// Moves time forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.now.set(self.now.get().saturating_add(by));
    }
}

impl PollClock for ManualPollClock {
    fn now(&self) -> Duration {
        let now = self.now.get();
        self.advance(self.tick);
        now
    }

    fn sleep(&self, duration: Duration) {
        self.advance(duration);
    }
}

/// The host's monotonic clock and `std::thread::sleep`.
#[cfg(feature = "std")]
#[derive(Debug, Clone, Copy)]
pub struct StdPollClock {
    origin: std::time::Instant,
}

#[cfg(feature = "std")]
impl StdPollClock {
    /// Returns a clock whose origin is now.
    pub fn new() -> Self {
        Self {
            origin: std::time::Instant::now(),
        }
    }
}

#[cfg(feature = "std")]
impl Default for StdPollClock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "std")]
impl PollClock for StdPollClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    enum DriverError {
        Io(Error),
        Broken,
    }

    impl From<Error> for DriverError {
        fn from(e: Error) -> Self {
            DriverError::Io(e)
        }
    }

    #[test]
    fn op_errors_propagate_immediately() {
        let clock = ManualPollClock::new();
        let mut calls = 0;
        let r: Result<u32, DriverError> = read_poll_timeout(
            &clock,
            || {
                calls += 1;
                Err(DriverError::Broken)
            },
            |_| true,
            Duration::from_millis(1),
            Duration::from_secs(1),
        );
        assert_eq!(r, Err(DriverError::Broken));
        assert_eq!(calls, 1);
    }

    #[test]
    fn timeout_is_checked_after_each_read() {
        let clock = ManualPollClock::new();
        let mut calls = 0u32;
        let r: Result<u32, DriverError> = read_poll_timeout(
            &clock,
            || {
                calls += 1;
                Ok(calls)
            },
            |_| false,
            Duration::from_millis(3),
            Duration::from_millis(10),
        );
        assert_eq!(r, Err(DriverError::Io(Error::TimedOut)));
        // Reads at t = 0, 3, 6, 9, 12: the one at 12 ms is past the timeout.
        assert_eq!(calls, 5);
    }

    #[test]
    fn busy_wait_times_out_with_ticking_clock() {
        let clock = ManualPollClock::with_tick(Duration::from_micros(1));
        let r = read_poll_timeout(
            &clock,
            || Ok::<_, Error>(()),
            |_| false,
            Duration::ZERO,
            Duration::from_micros(100),
        );
        assert_eq!(r, Err(Error::TimedOut));
    }

    #[test]
    fn atomic_variant_succeeds_within_retries() {
        let clock = ManualPollClock::new();
        let mut n = 0;
        let r = read_poll_timeout_atomic(
            &clock,
            || {
                n += 1;
                Ok::<_, Error>(n)
            },
            |&v| v == 3,
            Duration::ZERO,
            3,
        );
        assert_eq!(r, Ok(3));
    }

    #[cfg(feature = "std")]
    #[test]
    #[cfg_attr(miri, ignore)]
    fn std_clock_times_out() {
        let clock = StdPollClock::default();
        let r = read_poll_timeout(
            &clock,
            || Ok::<_, Error>(0u8),
            |_| false,
            Duration::from_micros(200),
            Duration::from_millis(2),
        );
        assert_eq!(r, Err(Error::TimedOut));
        assert!(clock.now() >= Duration::from_millis(2));
    }
}
