// SPDX-License-Identifier: GPL-2.0 OR MIT

use register::io::{Io, IoCapable, IoKnownSize, MemRegion};
use register::register;

/// A PCI-like configuration space: 8-, 16- and 32-bit accesses only.
struct ConfigSpace(MemRegion<0x100>);

impl Io for ConfigSpace {
    fn addr(&self) -> usize {
        0
    }
    fn maxsize(&self) -> usize {
        0x100
    }
}

impl IoKnownSize for ConfigSpace {
    const MIN_SIZE: usize = 0x100;
}

impl IoCapable<u32> for ConfigSpace {
    unsafe fn io_read(&self, address: usize) -> u32 {
        unsafe { self.0.io_read(address) }
    }
    unsafe fn io_write(&self, value: u32, address: usize) {
        unsafe { self.0.io_write(value, address) }
    }
}

register! {
    WIDE(u64) @ 0x10 { 63:0 value; }
}

fn main() {
    let config = ConfigSpace(MemRegion::new());
    let _ = config.read(WIDE);
}
