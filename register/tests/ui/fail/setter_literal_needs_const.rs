// SPDX-License-Identifier: GPL-2.0 OR MIT

// A literal cannot be proven to fit a 4-bit field by its type: the error names the spellings
// that check it (`with_const_x::<V>()`, `try_with_x(v)`).

use register::register;

register! {
    CTRL(u32) @ 0x100 { 7:4 mode; }
}

fn main() {
    let _ = CTRL::zeroed().with_mode(3);
}
