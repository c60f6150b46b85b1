// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A region backed by plain host memory, for unit tests.
//!
//! Driver logic written against [`Io`] can be exercised without hardware: a
//! [`MemRegion`] stores every byte written to it and returns it on the next read, in
//! little-endian order (the byte order of MMIO on the CPUs the Linux GPU drivers target). It has
//! no side effects and no unsafe code; use a [`ModelRegion`](super::ModelRegion) when reads or
//! writes must trigger device behaviour.
//!
//! A `MemRegion` is `Send` and `Sync`, as an [`Mmio`](super::Mmio) mapping is: a driver's data
//! that holds one can be shared between threads (DRM driver data, a `static`). Its bytes are
//! atomics, and every access holds a short spin lock of the region while it copies them, so
//! accesses from several threads are each indivisible (a 64-bit read never returns half of a
//! concurrent 64-bit write) and ordered as if by one lock: a read that returns what another
//! thread wrote happens after that write, as an MMIO read after a `writel` does.
//!
//! The lock needs compare-and-swap on a byte: the module is missing on targets without it
//! (`cfg(target_has_atomic = "8")` false, such as `thumbv6m-none-eabi`).

use core::hint::spin_loop;
use core::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use super::{Io, IoCapable, IoKnownSize};

/// `SIZE` bytes of host memory behaving as an I/O region with base address 0.
///
/// `Send` and `Sync`; see the [module documentation](self) for what concurrent accesses see.
///
/// # Examples
///
/// ```
/// use register::io::{Io, MemRegion};
///
/// let io = MemRegion::<8>::from_bytes([0x78, 0x56, 0x34, 0x12, 0, 0, 0, 0]);
/// assert_eq!(io.read32(0), 0x1234_5678);
/// io.write8(0xff, 7);
/// assert_eq!(io.read64(0), 0xff00_0000_1234_5678);
/// ```
///
/// Shared by several threads, here as a `static`:
///
/// ```
/// use register::io::{Io, MemRegion};
///
/// static REGS: MemRegion<0x40> = MemRegion::new();
///
/// std::thread::scope(|s| {
///     for i in 0..4 {
///         // Each thread owns the 64-bit register at `8 * i`.
///         s.spawn(move || REGS.write64(0x0101_0101_0101_0101 * (i as u64 + 1), 8 * i));
///     }
/// });
/// assert_eq!(REGS.read64(0x18), 0x0404_0404_0404_0404);
/// assert_eq!(REGS.read8(0x8), 2);
/// ```
pub struct MemRegion<const SIZE: usize> {
    /// Held while an access copies bytes in or out of `bytes`.
    lock: AtomicBool,
    /// The contents; only read and written with `lock` held.
    bytes: [AtomicU8; SIZE],
}

/// Holds a region's lock; dropping it releases the lock.
struct Locked<'a>(&'a AtomicBool);

impl Drop for Locked<'_> {
    #[inline]
    fn drop(&mut self) {
        // Release: what was written under the lock is seen by the next holder (its Acquire).
        self.0.store(false, Ordering::Release);
    }
}

impl<const SIZE: usize> MemRegion<SIZE> {
    /// Returns a region filled with zeroes.
    pub const fn new() -> Self {
        Self {
            lock: AtomicBool::new(false),
            bytes: [const { AtomicU8::new(0) }; SIZE],
        }
    }

    /// Returns a region holding `bytes`.
    pub fn from_bytes(bytes: [u8; SIZE]) -> Self {
        Self {
            lock: AtomicBool::new(false),
            bytes: bytes.map(AtomicU8::new),
        }
    }

    /// Returns the byte at `offset`, or `None` past the end.
    pub fn byte(&self, offset: usize) -> Option<u8> {
        self.load::<1>(offset).map(|[b]| b)
    }

    /// Takes the region's lock, spinning while another thread holds it.
    #[inline]
    fn lock(&self) -> Locked<'_> {
        while self
            .lock
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            // Wait without writing until the holder lets go: an access holds it for a few bytes.
            while self.lock.load(Ordering::Relaxed) {
                spin_loop();
            }
        }
        Locked(&self.lock)
    }

    /// Copies `N` bytes starting at `at`, or returns `None` if they are not all inside.
    fn load<const N: usize>(&self, at: usize) -> Option<[u8; N]> {
        let cells = self.bytes.get(at..at.checked_add(N)?)?;
        let mut out = [0; N];
        let _locked = self.lock();
        // Relaxed: the lock orders these accesses with every other one to the region.
        for (o, c) in out.iter_mut().zip(cells) {
            *o = c.load(Ordering::Relaxed);
        }
        Some(out)
    }

    /// Stores `bytes` starting at `at` if they are all inside.
    fn store<const N: usize>(&self, at: usize, bytes: [u8; N]) {
        if let Some(cells) = at.checked_add(N).and_then(|end| self.bytes.get(at..end)) {
            let _locked = self.lock();
            for (c, b) in cells.iter().zip(bytes) {
                c.store(b, Ordering::Relaxed);
            }
        }
    }
}

impl<const SIZE: usize> Default for MemRegion<SIZE> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const SIZE: usize> core::fmt::Debug for MemRegion<SIZE> {
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
        f.debug_struct("MemRegion").field("size", &SIZE).finish()
    }
}

impl<const SIZE: usize> Io for MemRegion<SIZE> {
    #[inline]
    fn addr(&self) -> usize {
        0
    }

    #[inline]
    fn maxsize(&self) -> usize {
        SIZE
    }
}

impl<const SIZE: usize> IoKnownSize for MemRegion<SIZE> {
    const MIN_SIZE: usize = SIZE;
}

macro_rules! impl_mem_io_capable {
    ($($ty:ty),*) => {
        $(
            impl<const SIZE: usize> IoCapable<$ty> for MemRegion<SIZE> {
                #[inline]
                unsafe fn io_read(&self, at: usize) -> $ty {
                    // Out-of-range addresses break the caller's contract; they read as zero
                    // rather than panicking.
                    self.load(at).map_or(0, <$ty>::from_le_bytes)
                }

                #[inline]
                unsafe fn io_write(&self, value: $ty, at: usize) {
                    self.store(at, value.to_le_bytes());
                }
            }
        )*
    };
}

impl_mem_io_capable!(u8, u16, u32, u64);

// A region can be shared between threads, whatever its size (checked at build time).
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<MemRegion<0>>();
    send_sync::<MemRegion<0x1000>>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn little_endian_round_trips() {
        let io = MemRegion::<16>::default();
        io.write64(0x8877_6655_4433_2211, 8);
        assert_eq!(io.byte(8), Some(0x11));
        assert_eq!(io.byte(15), Some(0x88));
        assert_eq!(io.byte(16), None);
        assert_eq!(io.read16(10), 0x4433);
        assert_eq!(io.read32(12), 0x8877_6655);
        io.write16(0xbeef, 0);
        assert_eq!(io.read8(0), 0xef);
        assert_eq!(io.read8(1), 0xbe);
    }

    #[test]
    fn contract_violations_do_not_panic() {
        let io = MemRegion::<4>::new();
        // SAFETY: `MemRegion` tolerates out-of-range addresses; this checks that it does.
        let v: u32 = unsafe { io.io_read(2) };
        assert_eq!(v, 0);
        // SAFETY: As above.
        unsafe { IoCapable::<u32>::io_write(&io, 5, usize::MAX - 1) };
        assert_eq!(io.read32(0), 0);
    }

    /// Iterations of the threaded tests: fewer under Miri, which runs them far slower.
    const ROUNDS: u32 = if cfg!(miri) { 40 } else { 20_000 };

    #[test]
    fn is_send_and_sync() {
        fn send_sync<T: Send + Sync>(_: &T) {}
        send_sync(&MemRegion::<16>::new());
    }

    #[test]
    fn threads_read_and_write_their_own_registers() {
        let io = MemRegion::<0x48>::new();
        io.write64(0x5a5a_5a5a_5a5a_5a5a, 0x40);
        std::thread::scope(|s| {
            let io = &io;
            // Four threads, each with registers of every width in its own 16-byte block:
            // a u64 at +0, a u32 at +8, a u16 at +12, a u8 at +14 and at +15.
            for t in 0..4usize {
                s.spawn(move || {
                    let base = 0x10 * t;
                    for i in 0..ROUNDS {
                        let v = u64::from(i) << 8 | t as u64;
                        io.write64(v, base);
                        io.write32(i ^ 0xffff_0000, base + 8);
                        io.write16(i as u16, base + 12);
                        io.write8(t as u8, base + 14);
                        io.write8(i as u8, base + 15);
                        assert_eq!(io.read64(base), v);
                        assert_eq!(io.read32(base + 8), i ^ 0xffff_0000);
                        assert_eq!(io.read16(base + 12), i as u16);
                        assert_eq!(io.read8(base + 14), t as u8);
                        assert_eq!(io.read8(base + 15), i as u8);
                        // Another thread's block is only ever read.
                        let other = 0x10 * ((t + 1) % 4);
                        let seen = io.read64(other);
                        assert_eq!(
                            seen & 0xff,
                            if seen == 0 { 0 } else { ((t + 1) % 4) as u64 }
                        );
                    }
                });
            }
        });
        let last = ROUNDS - 1;
        for t in 0..4usize {
            let base = 0x10 * t;
            assert_eq!(io.read64(base), u64::from(last) << 8 | t as u64);
            assert_eq!(io.read32(base + 8), last ^ 0xffff_0000);
            assert_eq!(io.read16(base + 12), last as u16);
            assert_eq!(io.byte(base + 14), Some(t as u8));
            assert_eq!(io.byte(base + 15), Some(last as u8));
        }
        // Untouched by any thread.
        assert_eq!(io.read64(0x40), 0x5a5a_5a5a_5a5a_5a5a);
    }

    #[test]
    fn concurrent_accesses_to_one_register_do_not_tear() {
        let io = MemRegion::<8>::new();
        std::thread::scope(|s| {
            let io = &io;
            s.spawn(move || {
                for i in 0..ROUNDS {
                    io.write64(if i % 2 == 0 { u64::MAX } else { 0 }, 0);
                }
            });
            s.spawn(move || {
                for i in 0..ROUNDS {
                    io.write32(if i % 2 == 0 { 0 } else { u32::MAX }, 4);
                }
            });
            for _ in 0..2 {
                s.spawn(move || {
                    for _ in 0..ROUNDS {
                        let lo = io.read32(0);
                        assert!(lo == 0 || lo == u32::MAX, "torn read {lo:#x}");
                        let hi = io.read32(4);
                        assert!(hi == 0 || hi == u32::MAX, "torn read {hi:#x}");
                    }
                });
            }
        });
    }

    #[test]
    fn a_read_after_another_threads_write_sees_what_came_before_it() {
        // A "doorbell" written after a "data" register: a thread that sees the doorbell sees
        // the data, as it would on MMIO.
        let io = MemRegion::<0x10>::new();
        std::thread::scope(|s| {
            let io = &io;
            s.spawn(move || {
                io.write64(0xdead_beef_0000_0001, 0);
                io.write32(1, 8);
            });
            s.spawn(move || {
                while io.read32(8) == 0 {
                    std::thread::yield_now();
                }
                assert_eq!(io.read64(0), 0xdead_beef_0000_0001);
            });
        });
    }
}
