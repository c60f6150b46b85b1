// SPDX-License-Identifier: GPL-2.0 OR MIT

// Formats are sealed: a new one cannot be made up outside the crate.
use io_pgtable::{Config, Error, Format, Geometry};

enum Mine {}

impl Format for Mine {
    const MALI: bool = false;
    const NAME: &'static str = "mine";
    fn prepare(_cfg: &mut Config) -> Result<Geometry, Error> {
        Err(Error::InvalidConfig)
    }
}

fn main() {}
