// SPDX-License-Identifier: GPL-2.0 OR MIT

use bounded::Bounded;

fn main() {
    // Ten bits do not always fit a `u8`.
    let _ = u8::from(Bounded::<u32, 10>::new::<3>());
}
