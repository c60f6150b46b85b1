// SPDX-License-Identifier: GPL-2.0 OR MIT

use register::register;

register! {
    /// Status.
    STATUS(u32) @ 0x10 { 3:0 state; }
    /// Documents no register.
}

fn main() {}
