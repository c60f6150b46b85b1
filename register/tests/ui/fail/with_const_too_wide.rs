// SPDX-License-Identifier: GPL-2.0 OR MIT

use register::register;

register! {
    BOOT_0(u32) @ 0x100 { 7:4 major; 3:0 minor; }
}

fn main() {
    let _ = BOOT_0::zeroed().with_const_major::<16>();
}
