// SPDX-License-Identifier: GPL-2.0 OR MIT

use bounded::Bounded;

fn main() {
    // 16 needs five unsigned bits.
    let _ = Bounded::<u8, 4>::new::<16>();
}
