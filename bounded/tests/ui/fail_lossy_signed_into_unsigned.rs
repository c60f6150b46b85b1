// SPDX-License-Identifier: GPL-2.0 OR MIT

use bounded::Bounded;

fn main() {
    // No unsigned `Bounded` holds negative values.
    let _ = Bounded::<u64, 64>::from(1i8);
}
