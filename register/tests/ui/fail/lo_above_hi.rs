// SPDX-License-Identifier: GPL-2.0 OR MIT

use register::register;

register! {
    BOOT_0(u32) @ 0x100 { 3:4 minor; }
}

fn main() {}
