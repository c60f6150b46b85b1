// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The frame every program runs in.
//!
//! As PID 1 of the test VM a program must never exit or let a panic unwind out of `main`: the
//! kernel panics when init dies ("Attempted to kill init"). [`run`] mounts devtmpfs on `/dev`,
//! runs the checks with panics caught (a panic is one more failed check), prints the summary,
//! flushes, syncs and ends the VM (see [`sys::shut_down`]). Run by hand on a host (not PID 1)
//! it mounts nothing and exits with status 0 only if every check passed.

use std::any::Any;
use std::io::Stdout;
use std::panic::{self, AssertUnwindSafe};

use crate::report::Report;
use crate::sys;

/// Runs `checks` as program `program` and ends the process (the VM, as PID 1).
pub fn run(program: &'static str, checks: impl FnOnce(&mut Report<Stdout>)) -> ! {
    let init = sys::is_init();
    let mut report = Report::new(program, std::io::stdout());
    if init {
        report.note("started as PID 1");
        let mounted = sys::mount_devtmpfs("/dev").map(|_| ());
        report.check("mount devtmpfs on /dev", mounted);
    }
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| checks(&mut report)));
    if let Err(payload) = outcome {
        report.fail(
            "the checks ran to their end",
            format!("panicked: {}", panic_message(payload.as_ref())),
        );
    }
    report.summary();
    if init {
        sys::shut_down();
    }
    let success = report.failed() == 0 && report.passed() > 0;
    std::process::exit(if success { 0 } else { 1 })
}

/// The message of a panic payload (`panic!` with a literal gives `&str`, with arguments
/// `String`).
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a payload that is not a string)".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    #[test]
    fn panic_messages_are_recovered() {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let literal = std::panic::catch_unwind(|| panic!("plain")).unwrap_err();
        let formatted = std::panic::catch_unwind(|| panic!("value {}", 7)).unwrap_err();
        let other = std::panic::catch_unwind(|| std::panic::panic_any(5u8)).unwrap_err();
        std::panic::set_hook(hook);
        assert_eq!(panic_message(literal.as_ref()), "plain");
        assert_eq!(panic_message(formatted.as_ref()), "value 7");
        assert!(panic_message(other.as_ref()).contains("not a string"));
    }
}
