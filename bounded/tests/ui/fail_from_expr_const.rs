// SPDX-License-Identifier: GPL-2.0 OR MIT

use bounded::Bounded;

// In a constant, `from_expr` is checked at build time.
const BAD: Bounded<u8, 4> = Bounded::from_expr(16);

fn main() {
    let _ = BAD;
}
