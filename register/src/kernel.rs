// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Kernel adapters, compiled only inside a Linux tree (`cargo xtask kernel-build` passes
//! `--cfg gpukit_kernel --extern kernel`).
//!
//! A kernel driver gets its register block as a `kernel::io::Mmio` (through `IoMem`/`Devres`
//! from a PCI BAR or a platform resource). The crate's [`Io`] traits are implemented directly
//! on that type and on its relaxed view, forwarding every access to the kernel's own
//! accessors (`readl`/`writel` and friends), so everything [`register!`](crate::register!)
//! generates works on the kernel's MMIO unchanged: `BOOT_0::read(&*iomem)`,
//! `iomem.write_reg(v)`, arrays, relative registers.
//!
//! [`KernelPollClock`] lets [`read_poll_timeout`](crate::io::poll::read_poll_timeout) use the
//! kernel's monotonic clock and `fsleep`, and errors convert to `kernel::error::Error`.

use core::time::Duration;

use ::kernel::io::{Mmio, RelaxedMmio};
use ::kernel::time::{delay::fsleep, Delta, Instant, Monotonic};

use crate::io::poll::PollClock;
use crate::io::{Io, IoCapable, IoKnownSize};
use crate::Error;

impl From<Error> for ::kernel::error::Error {
    fn from(e: Error) -> Self {
        ::kernel::error::Error::from_errno(e.to_errno())
    }
}

macro_rules! forward_io {
    ($region:ident: $($width:ty),*) => {
        $(
            impl<const SIZE: usize> IoCapable<$width> for $region<SIZE> {
                #[inline(always)]
                unsafe fn io_read(&self, addr: usize) -> $width {
                    // SAFETY: The caller guarantees that `addr` is an aligned access inside
                    // `self.addr()..self.addr() + self.maxsize()`, which are the kernel region's
                    // own bounds; that is what the kernel accessor requires.
                    unsafe { <$region<SIZE> as ::kernel::io::IoCapable<$width>>::io_read(self, addr) }
                }

                #[inline(always)]
                unsafe fn io_write(&self, value: $width, addr: usize) {
                    // SAFETY: As for `io_read`.
                    unsafe {
                        <$region<SIZE> as ::kernel::io::IoCapable<$width>>::io_write(self, value, addr)
                    }
                }
            }
        )*

        impl<const SIZE: usize> Io for $region<SIZE> {
            #[inline(always)]
            fn addr(&self) -> usize {
                <$region<SIZE> as ::kernel::io::Io>::addr(self)
            }

            #[inline(always)]
            fn maxsize(&self) -> usize {
                <$region<SIZE> as ::kernel::io::Io>::maxsize(self)
            }
        }

        impl<const SIZE: usize> IoKnownSize for $region<SIZE> {
            const MIN_SIZE: usize = SIZE;
        }
    };
}

forward_io!(Mmio: u8, u16, u32);
forward_io!(RelaxedMmio: u8, u16, u32);

#[cfg(CONFIG_64BIT)]
macro_rules! forward_io64 {
    ($($region:ident),*) => {
        $(
            impl<const SIZE: usize> IoCapable<u64> for $region<SIZE> {
                #[inline(always)]
                unsafe fn io_read(&self, addr: usize) -> u64 {
                    // SAFETY: As for the narrower accesses above.
                    unsafe { <$region<SIZE> as ::kernel::io::IoCapable<u64>>::io_read(self, addr) }
                }

                #[inline(always)]
                unsafe fn io_write(&self, value: u64, addr: usize) {
                    // SAFETY: As for the narrower accesses above.
                    unsafe {
                        <$region<SIZE> as ::kernel::io::IoCapable<u64>>::io_write(self, value, addr)
                    }
                }
            }
        )*
    };
}

#[cfg(CONFIG_64BIT)]
forward_io64!(Mmio, RelaxedMmio);

/// The kernel's monotonic clock, sleeping with `fsleep` (so only usable where sleeping is
/// allowed; use [`read_poll_timeout_atomic`](crate::io::poll::read_poll_timeout_atomic) with a
/// zero delay elsewhere).
pub struct KernelPollClock {
    origin: Instant<Monotonic>,
}

impl KernelPollClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        KernelPollClock {
            origin: Instant::now(),
        }
    }
}

impl Default for KernelPollClock {
    fn default() -> Self {
        Self::new()
    }
}

impl PollClock for KernelPollClock {
    fn now(&self) -> Duration {
        let ns = self.origin.elapsed().as_nanos();
        Duration::from_nanos(u64::try_from(ns).unwrap_or(0))
    }

    fn sleep(&self, duration: Duration) {
        let ns = i64::try_from(duration.as_nanos()).unwrap_or(i64::MAX);
        fsleep(Delta::from_nanos(ns));
    }
}

mod kunit;
