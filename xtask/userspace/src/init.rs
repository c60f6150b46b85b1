// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The frame every program runs in.
//!
//! As PID 1 of the test VM a program must never exit or let a panic unwind out of `main`: the
//! kernel panics when init dies ("Attempted to kill init"). [`run`] mounts devtmpfs on `/dev`,
//! runs the checks with panics caught (a panic is one more failed check), prints the summary,
//! flushes, syncs and ends the VM (see [`sys::shut_down`]). A fatal signal (`SIGBUS` or
//! `SIGSEGV` from a mapping a driver cannot back, for instance) would kill init too: as PID 1
//! the program catches them, prints a `FAIL` line with the signal and the address, and ends
//! the VM. Run by hand on a host (not PID 1) it mounts nothing, catches no signal and exits
//! with status 0 only if every check passed.

use std::any::Any;
use std::io::Stdout;
use std::panic::{self, AssertUnwindSafe};
use std::sync::OnceLock;

use crate::report::Report;
use crate::sys;

/// Runs `checks` as program `program` and ends the process (the VM, as PID 1).
pub fn run(program: &'static str, checks: impl FnOnce(&mut Report<Stdout>)) -> ! {
    let init = sys::is_init();
    let mut report = Report::new(program, std::io::stdout());
    if init {
        report.note("started as PID 1");
        let caught = catch_fatal_signals(program);
        report.check(
            "catch fatal signals (SIGBUS, SIGSEGV, SIGILL, SIGFPE)",
            caught,
        );
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

/// The program's name, for the signal handler (set once, before the handler is installed).
static PROGRAM: OnceLock<&'static str> = OnceLock::new();

/// The signals that would end the process, and so the VM with a kernel panic.
const FATAL_SIGNALS: [(libc::c_int, &str); 4] = [
    (libc::SIGBUS, "SIGBUS"),
    (libc::SIGSEGV, "SIGSEGV"),
    (libc::SIGILL, "SIGILL"),
    (libc::SIGFPE, "SIGFPE"),
];

/// Installs [`on_fatal_signal`] for [`FATAL_SIGNALS`].
fn catch_fatal_signals(program: &'static str) -> Result<(), String> {
    let _ = PROGRAM.set(program);
    for (sig, name) in FATAL_SIGNALS {
        // SAFETY: an all-zero `sigaction` is a valid value (empty mask, no flags) to fill in.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            on_fatal_signal;
        action.sa_sigaction = handler as usize;
        action.sa_flags = libc::SA_SIGINFO;
        // SAFETY: `action` is a valid `sigaction` whose handler only makes async-signal-safe
        // calls (`write`, `sync`, `reboot`, `pause`); no old action is asked for.
        let ret = unsafe { libc::sigaction(sig, &action, std::ptr::null_mut()) };
        if ret != 0 {
            return Err(format!("sigaction({name}): {}", sys::Errno::last()));
        }
    }
    Ok(())
}

/// The handler of a fatal signal in PID 1: a `FAIL` line naming the signal and the address,
/// then the VM ends (the tool reports the missing summary). Async-signal-safe: no allocation,
/// no lock, only system calls.
extern "C" fn on_fatal_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let addr = if info.is_null() {
        0
    } else {
        // SAFETY: with `SA_SIGINFO` the kernel passes a valid `siginfo_t`, alive and not
        // written while the handler runs.
        let info = unsafe { &*info };
        // SAFETY: for these signals the kernel fills `si_addr` (the faulting address).
        unsafe { info.si_addr() as usize }
    };
    let name = FATAL_SIGNALS
        .iter()
        .find(|(s, _)| *s == sig)
        .map_or("a fatal signal", |(_, n)| *n);
    let program = PROGRAM.get().copied().unwrap_or("?");
    let mut buf = [0u8; 256];
    let line = fatal_line(&mut buf, program, name, addr);
    // SAFETY: `line` is valid for reads of its length; `write` is async-signal-safe.
    unsafe { libc::write(1, line.as_ptr().cast(), line.len()) };
    sys::shut_down()
}

/// `userspace: <program>: FAIL the program ran without a fatal signal: <name> at <addr>\n`
/// written into `buf` (cut at its end) without allocating; the part written.
fn fatal_line<'a>(buf: &'a mut [u8], program: &str, name: &str, addr: usize) -> &'a [u8] {
    let mut hex = [0u8; 18];
    hex[0] = b'0';
    hex[1] = b'x';
    for (i, d) in hex[2..].iter_mut().enumerate() {
        let nibble = (addr >> (60 - 4 * i)) & 0xf;
        *d = b"0123456789abcdef"[nibble];
    }
    let parts: [&[u8]; 7] = [
        b"userspace: ",
        program.as_bytes(),
        b": FAIL the program ran without a fatal signal: ",
        name.as_bytes(),
        b" at ",
        &hex,
        b"\n",
    ];
    let mut len = 0;
    for part in parts {
        let n = part.len().min(buf.len() - len);
        buf[len..len + n].copy_from_slice(&part[..n]);
        len += n;
    }
    &buf[..len]
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
    use super::{fatal_line, panic_message};

    #[test]
    fn the_fatal_signal_line() {
        let mut buf = [0u8; 256];
        let line = fatal_line(&mut buf, "tyr_demo", "SIGBUS", 0x7f12_3456_7000);
        assert_eq!(
            std::str::from_utf8(line).unwrap(),
            "userspace: tyr_demo: FAIL the program ran without a fatal signal: SIGBUS at \
             0x00007f1234567000\n"
        );
        let mut short = [0u8; 16];
        assert_eq!(
            fatal_line(&mut short, "p", "SIGSEGV", 0),
            b"userspace: p: FA"
        );
    }

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
