// SPDX-License-Identifier: GPL-2.0 OR MIT

use bounded::Bounded;

fn main() {
    // A signed single bit holds 0 and -1, not a boolean.
    let _ = Bounded::<i32, 1>::new::<{ -1 }>().into_bool();
}
