// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Power management: the GPU powers down when it has nothing to do and up again when work
//! arrives (panthor's runtime PM, `panthor_device_suspend/resume` without the clocks).
//!
//! # The hardware
//!
//! A Mali GPU's power domains nest: the MCU and the MMU work through the L2 cache, and the
//! shader cores and the tiler sit behind it. Powering down therefore goes from the inside out:
//! the firmware is halted (`GLB_HALT`) and the MCU disabled, the shader cores and the tiler
//! are powered off, and the L2 last. Powering up goes the other way: the L2, then the shader
//! cores and the tiler, then the MCU, which boots afresh (its groups forgotten), and the groups
//! are started on their slots again from where their rings stopped. [`crate::gpu`] has the
//! register sequences and [`crate::fw`] the MCU's; the simulated GPU refuses any other order.
//!
//! # The policy
//!
//! The scheduler reports, after every turn of its work item, whether the GPU has work: a job
//! written to a ring and not complete, or a group waiting for a slot. Once it has had none for
//! the idle timeout ([`DEFAULT_IDLE_TIMEOUT`], [`Pm::set_idle_timeout`]), the scheduler takes
//! every group off its slot and [`Pm::power_down`] halts the MCU and powers the domains off.
//! The next job written to a ring finds its group without a slot and asks for one; before the
//! scheduler gives it one it calls [`Pm::wake`], which powers everything up in order. Jobs
//! waiting for their dependencies do not keep the GPU up: they ask for a slot when they reach
//! the ring. Binds do not need the GPU powered here: the simulated MMU (like the GPU's
//! top-level domain, which stays on) keeps its address spaces and takes commands with the L2
//! off.
//!
//! Power transitions and the ring writes of `run_job` are serialised by a gate (a lock of the
//! environment's [`LockFamily`]: a `parking_lot` mutex on the host, a `kernel::sync::Mutex` in Linux),
//! so a job is never written to the ring of a group the power-down is taking off its slot. The
//! gate is held only for the few register writes of a job and for the power sequences (tens of
//! microseconds on silicon). Nothing here needs `std`: the same file runs in the kernel.
//!
//! # System suspend
//!
//! A system suspend (`suspend` on the device state, `driver::suspend`) preempts, as panthor's
//! does. It first *holds* new jobs: a job that reaches its ring from then on is written there
//! but not published to the firmware (the insert pointer the firmware reads stays where it
//! was), and the scheduler starts no group. Then the device's work item (which owns the
//! slots) suspends every resident group that has published work not done, through the
//! firmware, exactly as a time-slicing rotation does: the streams' state goes into the
//! group's suspend buffer and the group keeps its jobs. Resident groups without such work
//! give their slot up; the MCU halts and the domains power off as above. Nothing is lost: the
//! held jobs and those waiting for their dependencies stay in their rings and queues, and the
//! interrupted ones in the suspend buffers. The resume publishes every ring's insert pointer
//! and lets the scheduler start or resume the groups with work, which wakes the GPU; every
//! group goes on from where it stopped, in submission order. While the device is suspended
//! the system sleeps ([`Backend::system_sleep`]): as the kernel's monotonic clock stops in a
//! system suspend, the driver's timers (job timeouts among them) do not run, so held jobs do
//! not time out.
//!
//! A suspend the firmware does not acknowledge within the scheduler's `SUSPEND_TIMEOUT`
//! escalates to a GPU reset (panthor terminates such groups and resets as well): the suspend
//! still succeeds, and after the resume every group replays from the first job it had not
//! finished. A suspend fails (and the device runs on) only when the work item does not take
//! it up within [`SUSPEND_START_TIMEOUT`] of the system's time or the power-down fails.
//!
//! # Frequency scaling
//!
//! The GPU clock runs at one of a few operating points the environment offers
//! ([`Backend::gpu_clock_rates`]); the SoC's clock controller sets it, not a GPU register. The
//! scheduler measures the GPU's utilisation: at every turn of its work item (and at least every
//! [`GOVERNOR_PERIOD`] while the GPU is powered) it reports whether the GPU has work, and the time
//! since the last report counts as busy or idle according to what the previous report said.
//! Every [`GOVERNOR_PERIOD`] of powered time the governor looks at the window's load, as Linux's
//! `simple_ondemand` does with its own words: above [`UP_THRESHOLD`] % busy it goes to the
//! fastest rate; between `UP_THRESHOLD - DOWN_DIFFERENTIAL` and `UP_THRESHOLD` it keeps the
//! rate; below, it picks the slowest rate that would have run the window's work at
//! `UP_THRESHOLD - DOWN_DIFFERENTIAL / 2` % load (so that the next window lands in the keep band
//! if the work stays the same). Changing the rate changes how fast the cycle counter counts,
//! never the timestamp (which follows the fixed system counter).
//!
//! The module also keeps the driver's own accounting: how long the GPU was powered, at which
//! rates (time per operating point), how many times it went down and came back.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use core::time::Duration;
use register::io::poll::PollClock;

use crate::backend::{Backend, Lock, LockFamily};
use crate::{fw, gpu, Result};

/// How long the GPU stays powered without work before it powers down (panthor's autosuspend
/// delay is 50 ms).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_millis(50);

/// How often the governor decides, in powered time (panthor's devfreq polls every 50 ms; the
/// simulated GPU's jobs are short).
pub const GOVERNOR_PERIOD: Duration = Duration::from_micros(500);
/// Busy percentage above which the governor goes to the fastest rate.
pub const UP_THRESHOLD: u64 = 90;
/// Width, in percent, of the band below [`UP_THRESHOLD`] in which the rate is kept.
pub const DOWN_DIFFERENTIAL: u64 = 5;
/// Most operating points the governor handles.
pub const MAX_OPPS: usize = 8;

/// The governor's state: the operating points, the current one, the measuring window.
#[derive(Debug, Default)]
struct Dvfs {
    rates: [u64; MAX_OPPS],
    count: usize,
    cur: usize,
    /// When the last report came (ns) and what it said.
    last_ns: u64,
    last_busy: bool,
    window_busy: u64,
    window_total: u64,
    /// Powered time spent at each operating point (ns).
    opp_ns: [u64; MAX_OPPS],
    changes: u32,
}

impl Dvfs {
    /// The operating point the governor wants after a window of `busy` of `total` ns.
    ///
    /// 64-bit arithmetic only (the kernel has no 128-bit division on every architecture): the
    /// load is taken in parts per million, the window first scaled below 2^40 ns so that the
    /// products cannot overflow.
    fn target(&self, busy: u64, total: u64) -> usize {
        const PPM: u64 = 1_000_000;
        let top = self.count.saturating_sub(1);
        let mut total = total.max(1);
        let mut busy = busy.min(total);
        while total >= 1 << 40 {
            busy >>= 1;
            total >>= 1;
        }
        let load = busy * PPM / total;
        if load > UP_THRESHOLD * (PPM / 100) {
            return top;
        }
        if load > (UP_THRESHOLD - DOWN_DIFFERENTIAL) * (PPM / 100) {
            return self.cur;
        }
        // The rate at which the window's work would have kept the GPU at the middle of the
        // keep band: `cur * load / ((2 * UP_THRESHOLD - DOWN_DIFFERENTIAL) / 2 %)`.
        let aim = UP_THRESHOLD * 2 - DOWN_DIFFERENTIAL;
        let cur = self.rates[self.cur];
        let want = cur.saturating_mul(load).saturating_mul(2) / (aim * (PPM / 100));
        (0..self.count)
            .find(|&i| self.rates[i] >= want)
            .unwrap_or(top)
    }
}

/// What the power gate protects.
#[derive(Debug)]
struct PmState {
    /// The GPU is powered and the MCU runs.
    powered: bool,
    /// Since when the GPU has had no work (simulated or real time, in ns), if it has none.
    idle_since: Option<u64>,
    /// When the GPU was last powered up (ns).
    on_since: u64,
    /// Powered time before `on_since` (ns).
    powered_ns: u64,
    power_ups: u32,
    power_downs: u32,
    /// The device is suspended (system suspend): it stays down until resumed.
    suspended: bool,
    dvfs: Dvfs,
}

/// The driver's power accounting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PmStats {
    /// Whether the GPU is powered now.
    pub powered: bool,
    /// How long the GPU has been powered in all, in ns.
    pub powered_ns: u64,
    /// How many times it powered up again after an idle power-down.
    pub power_ups: u32,
    /// How many times it powered down.
    pub power_downs: u32,
    /// The GPU clock rate now, in Hz (0 if the environment has no clock control).
    pub clock_hz: u64,
    /// How many times the governor changed the rate.
    pub clock_changes: u32,
    /// The operating points (Hz) and the powered time spent at each (ns).
    pub opp_ns: [(u64, u64); MAX_OPPS],
    /// How many entries of `opp_ns` are operating points.
    pub opp_count: usize,
}

/// The power state of a device, its gate a lock of the family `L`.
pub struct Pm<L: LockFamily> {
    gate: L::Lock<PmState>,
    idle_timeout_ns: AtomicU64,
    /// Ring writes so far (one per [`hold`](Pm::hold)).
    activity: AtomicU64,
    /// Jobs written to rings are not published to the firmware (a suspend is under way or
    /// done): they wait in their rings until the resume publishes them.
    holding: AtomicBool,
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl<L: LockFamily> Pm<L> {
    /// The state of a GPU the probe left powered, with the operating points of `b`'s clock:
    /// the GPU starts at the fastest (the rate the probe ran at is not known to the driver,
    /// and setting it makes it so).
    ///
    /// # Errors
    ///
    /// [`crate::Error::NoMemory`] if the gate cannot be made.
    pub fn new<B: Backend>(b: &B) -> Result<Self> {
        let now = b.timer_clock().now();
        let mut dvfs = Dvfs {
            last_ns: ns(now),
            ..Dvfs::default()
        };
        for (slot, &hz) in dvfs.rates.iter_mut().zip(b.gpu_clock_rates()) {
            *slot = hz;
            dvfs.count += 1;
        }
        if dvfs.count > 0 {
            dvfs.cur = dvfs.count - 1;
            if b.set_gpu_clock_rate(dvfs.rates[dvfs.cur]).is_err() {
                dvfs.count = 0;
            }
        }
        Ok(Pm {
            gate: L::Lock::new(
                PmState {
                    powered: true,
                    idle_since: None,
                    on_since: ns(now),
                    powered_ns: 0,
                    power_ups: 0,
                    power_downs: 0,
                    suspended: false,
                    dvfs,
                },
                crate::lock_class!(c"tyr_pm_gate"),
            )?,
            idle_timeout_ns: AtomicU64::new(ns(DEFAULT_IDLE_TIMEOUT)),
            activity: AtomicU64::new(0),
            holding: AtomicBool::new(false),
        })
    }

    /// Runs `f` under the gate: no power transition happens meanwhile. A job is written to a
    /// ring under it. `f` must not call into this `Pm` except for its atomic state
    /// ([`activity`](Self::activity), [`is_holding`](Self::is_holding)).
    pub fn hold<R>(&self, f: impl FnOnce() -> R) -> R {
        self.gate.with(|_| {
            self.activity.fetch_add(1, Ordering::AcqRel);
            f()
        })
    }

    /// How many times the gate was held for a ring write: a power-down compares it before and after it
    /// looked for work, under the gate, so that a job that reached a ring in between keeps the
    /// GPU up (the look itself takes queue locks, which a ring write holds while it waits for
    /// the gate).
    pub fn activity(&self) -> u64 {
        self.activity.load(Ordering::Acquire)
    }

    /// Sets how long the GPU stays powered without work.
    pub fn set_idle_timeout(&self, timeout: Duration) {
        self.idle_timeout_ns.store(ns(timeout), Ordering::Relaxed);
    }

    /// The idle timeout.
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_nanos(self.idle_timeout_ns.load(Ordering::Relaxed))
    }

    /// The accounting at time `now`.
    pub fn stats(&self, now: Duration) -> PmStats {
        self.gate.with(|s| Self::stats_of(s, now))
    }

    fn stats_of(s: &PmState, now: Duration) -> PmStats {
        let current = if s.powered {
            ns(now).saturating_sub(s.on_since)
        } else {
            0
        };
        let d = &s.dvfs;
        let mut opp_ns = [(0, 0); MAX_OPPS];
        for (i, o) in opp_ns.iter_mut().enumerate().take(d.count) {
            let extra = if s.powered && i == d.cur {
                ns(now).saturating_sub(d.last_ns)
            } else {
                0
            };
            *o = (d.rates[i], d.opp_ns[i].saturating_add(extra));
        }
        PmStats {
            powered: s.powered,
            powered_ns: s.powered_ns.saturating_add(current),
            power_ups: s.power_ups,
            power_downs: s.power_downs,
            clock_hz: if d.count > 0 { d.rates[d.cur] } else { 0 },
            clock_changes: d.changes,
            opp_ns,
            opp_count: d.count,
        }
    }

    /// Whether the GPU is powered.
    pub fn is_powered(&self) -> bool {
        self.gate.with(|s| s.powered)
    }

    /// Powers the GPU up if it is down: L2, shader cores and tiler, then a cold boot of the
    /// MCU (its requests cleared first, `COUNTER_EN` set by [`fw::boot`]). The groups are the
    /// scheduler's to start again.
    ///
    /// # Errors
    ///
    /// The power sequences' and the MCU's ([`crate::Error::TimedOut`] and the like); the GPU
    /// is then left as the failed step left it and the scheduler resets it.
    ///
    /// Returns whether the GPU is powered: `false` while the device is suspended (nothing is
    /// powered then; the scheduler leaves the groups waiting).
    ///
    /// `reload` runs before the MCU boots: it loads the firmware's writable sections again
    /// ([`fw::Firmware::reload`]).
    pub fn wake<B: Backend>(
        &self,
        b: &B,
        info: &gpu::GpuInfo,
        fw_base: u64,
        reload: impl FnOnce(),
    ) -> Result<bool> {
        self.gate.with(|s| {
            if s.suspended || self.is_holding() {
                return Ok(false);
            }
            if s.powered {
                return Ok(true);
            }
            gpu::power_on(b, &info.raw)?;
            let size = fw::FW_INTERFACE_SIZE as u64;
            reload();
            fw::clear_requests(b.dma(), fw_base, size)?;
            fw::boot(b, fw_base, size)?;
            s.powered = true;
            s.idle_since = None;
            s.on_since = ns(b.timer_clock().now());
            s.dvfs.last_ns = s.on_since;
            s.power_ups = s.power_ups.wrapping_add(1);
            Ok(true)
        })
    }

    /// Whether jobs written to rings are held back from the firmware (see
    /// [`set_holding`](Self::set_holding)).
    pub fn is_holding(&self) -> bool {
        self.holding.load(Ordering::Acquire)
    }

    /// Starts (or ends) holding jobs back: from now on a job written to a ring is not
    /// published to the firmware (its group asks for a slot instead), and the scheduler starts
    /// no group. Taken under the gate, so that no ring write is half done.
    pub fn set_holding(&self, on: bool) {
        self.gate
            .with(|_| self.holding.store(on, Ordering::Release));
    }

    /// Marks the device suspended (it stays down) or resumed; resuming ends the holding too.
    pub fn set_suspended(&self, on: bool) {
        self.gate.with(|s| {
            s.suspended = on;
            if !on {
                self.holding.store(false, Ordering::Release);
            }
        });
    }

    /// Whether the device is suspended.
    pub fn is_suspended(&self) -> bool {
        self.gate.with(|s| s.suspended)
    }

    /// The governor's report (see the module documentation): the GPU has work (`busy`) now.
    /// The time since the last report counts as busy or idle as that report said, and at the
    /// fastest rate or another as it was; once a [`GOVERNOR_PERIOD`] of powered time has gone
    /// by, the governor may change the rate. Returns when it wants the next report (ns), while
    /// the GPU is powered.
    pub fn sample<B: Backend>(&self, b: &B, busy: bool) -> Option<u64> {
        let now = ns(b.timer_clock().now());
        self.gate.with(|s| Self::sample_locked(s, b, now, busy))
    }

    fn sample_locked<B: Backend>(s: &mut PmState, b: &B, now: u64, busy: bool) -> Option<u64> {
        let powered = s.powered;
        let d = &mut s.dvfs;
        let elapsed = now.saturating_sub(d.last_ns);
        if powered {
            if d.count > 0 {
                d.opp_ns[d.cur] = d.opp_ns[d.cur].saturating_add(elapsed);
            }
            d.window_total = d.window_total.saturating_add(elapsed);
            if d.last_busy {
                d.window_busy = d.window_busy.saturating_add(elapsed);
            }
        }
        d.last_ns = now;
        d.last_busy = busy;
        if !powered || d.count == 0 {
            return None;
        }
        let period = ns(GOVERNOR_PERIOD);
        if d.window_total >= period {
            let target = d.target(d.window_busy, d.window_total);
            d.window_busy = 0;
            d.window_total = 0;
            // A rate the clock refuses leaves the current one.
            if target != d.cur && b.set_gpu_clock_rate(d.rates[target]).is_ok() {
                d.cur = target;
                d.changes = d.changes.wrapping_add(1);
            }
        }
        Some(now.saturating_add(period - d.window_total.min(period)))
    }

    /// Records whether the GPU has work now. Returns `true` when it has had none for the idle
    /// timeout and is powered (the scheduler then calls [`power_down`](Self::power_down), which
    /// takes the groups off their slots), and otherwise when the scheduler should look again
    /// (`Some(deadline)` in ns) if the GPU stays idle.
    pub fn note_idle(&self, now: Duration, idle: bool) -> (bool, Option<u64>) {
        let now = ns(now);
        let timeout = self.idle_timeout_ns.load(Ordering::Relaxed);
        self.gate.with(|s| {
            if !idle || !s.powered {
                s.idle_since = None;
                return (false, None);
            }
            let since = *s.idle_since.get_or_insert(now);
            let deadline = since.saturating_add(timeout);
            if now >= deadline {
                (true, None)
            } else {
                (false, Some(deadline))
            }
        })
    }

    /// Powers the GPU down if it is powered: under the gate, runs `prepare` (which takes every
    /// group off its slot, or returns `false` to call the power-down off, for instance because
    /// a job reached a ring meanwhile), then halts and disables the MCU and powers the shader
    /// cores, the tiler and the L2 off. `prepare` must not call into this `Pm` except for its
    /// atomic state. Returns whether the GPU went down.
    ///
    /// # Errors
    ///
    /// The MCU's or the power sequences' [`crate::Error::TimedOut`]: the GPU is then left
    /// powered (as far as the failed step left it) and counted as such.
    pub fn power_down<B: Backend>(
        &self,
        b: &B,
        info: &gpu::GpuInfo,
        fw_base: u64,
        prepare: impl FnOnce() -> bool,
    ) -> Result<bool> {
        self.gate.with(|s| {
            if !s.powered || !prepare() {
                return Ok(false);
            }
            fw::halt(b, fw_base, fw::FW_INTERFACE_SIZE as u64)?;
            gpu::power_off(b, &info.raw)?;
            let now = ns(b.timer_clock().now());
            // The powered time up to here counts at the current rate; a new window starts at
            // the next power-up.
            let d = &mut s.dvfs;
            if d.count > 0 {
                d.opp_ns[d.cur] = d.opp_ns[d.cur].saturating_add(now.saturating_sub(d.last_ns));
            }
            d.last_ns = now;
            d.window_busy = 0;
            d.window_total = 0;
            s.powered_ns = s.powered_ns.saturating_add(now.saturating_sub(s.on_since));
            s.powered = false;
            s.idle_since = None;
            s.power_downs = s.power_downs.wrapping_add(1);
            Ok(true)
        })
    }
}

/// How long a system suspend waits for the device's work item to take it up, on the system's
/// clock ([`Backend::sys_clock`]), not the GPU's: it waits for a thread of the CPU.
pub const SUSPEND_START_TIMEOUT: Duration = Duration::from_secs(1);
/// How often it looks (sleeping on the system's clock in between).
pub const SUSPEND_POLL_INTERVAL: Duration = Duration::from_micros(10);

#[cfg(test)]
mod tests {
    use super::*;

    /// A governor at operating point `cur` of 200, 400, 600 and 800 MHz.
    fn dvfs(cur: usize) -> Dvfs {
        let mut d = Dvfs {
            count: 4,
            cur,
            ..Dvfs::default()
        };
        d.rates[..4].copy_from_slice(&[200_000_000, 400_000_000, 600_000_000, 800_000_000]);
        d
    }

    #[test]
    fn the_governor_goes_up_keeps_and_goes_down_by_the_bands() {
        let d = dvfs(1);
        // Above 90 % busy: the fastest rate.
        assert_eq!(d.target(901, 1000), 3);
        assert_eq!(d.target(1000, 1000), 3);
        // 85 % to 90 %: kept.
        assert_eq!(d.target(900, 1000), 1);
        assert_eq!(d.target(851, 1000), 1);
        // Below: the slowest rate that would run the work at 87.5 %: 400 MHz at 85 % wants
        // 388.6 MHz (400), at 40 % 182.9 MHz (200).
        assert_eq!(d.target(850, 1000), 1);
        assert_eq!(d.target(400, 1000), 0);
        // From the top, half busy wants 457 MHz: 600 MHz.
        assert_eq!(dvfs(3).target(500, 1000), 2);
        // Idle: the slowest.
        assert_eq!(dvfs(3).target(0, 1000), 0);
    }

    #[test]
    fn the_governor_handles_any_window_without_overflow() {
        let d = dvfs(3);
        // Windows of any length, even beyond what can happen, and busy time beyond the window.
        assert_eq!(d.target(u64::MAX, u64::MAX), 3);
        assert_eq!(d.target(u64::MAX / 2, u64::MAX), 2);
        assert_eq!(d.target(u64::MAX, 1000), 3);
        assert_eq!(d.target(0, 0), 0);
        assert_eq!(d.target(5, 0), 3);
        // More busy time never asks for a slower rate.
        let mut last = 0;
        for busy in (0..=1_000_000u64).step_by(997) {
            let t = d.target(busy, 1_000_000);
            assert!(t >= last || t == d.cur, "{busy}");
            if t != d.cur {
                last = t;
            }
        }
    }
}
