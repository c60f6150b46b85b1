// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The lines a program prints, one per check, then a summary:
//!
//! ```text
//! userspace: <program>: ok <check>
//! userspace: <program>: FAIL <check>: <expected vs got>
//! userspace: <program>: summary: <P> passed, <F> failed
//! ```
//!
//! Every line is flushed at once: the console is the only record, and the VM ends right
//! after the summary.

use std::fmt::Display;
use std::io::Write;

/// Counts checks and prints their lines to `out`.
pub struct Report<W: Write> {
    program: &'static str,
    out: W,
    passed: u32,
    failed: u32,
}

impl<W: Write> Report<W> {
    /// A report for `program` (the name the tool looks for in the lines).
    pub fn new(program: &'static str, out: W) -> Self {
        Report {
            program,
            out,
            passed: 0,
            failed: 0,
        }
    }

    fn line(&mut self, text: std::fmt::Arguments<'_>) {
        // The console is the only place to report to: a failed write cannot be reported.
        let _ = writeln!(self.out, "userspace: {}: {text}", self.program);
        let _ = self.out.flush();
    }

    /// A passed check.
    pub fn ok(&mut self, check: &str) {
        self.passed += 1;
        self.line(format_args!("ok {check}"));
    }

    /// A failed check and why (what was expected, what came).
    pub fn fail(&mut self, check: &str, why: impl Display) {
        self.failed += 1;
        self.line(format_args!("FAIL {check}: {why}"));
    }

    /// Records `result` as the outcome of `check`; returns whether it passed.
    pub fn check(&mut self, check: &str, result: Result<(), String>) -> bool {
        match result {
            Ok(()) => {
                self.ok(check);
                true
            }
            Err(why) => {
                self.fail(check, why);
                false
            }
        }
    }

    /// A line that is not a check (what was opened, a measured value).
    pub fn note(&mut self, text: impl Display) {
        self.line(format_args!("{text}"));
    }

    /// Prints the summary line.
    pub fn summary(&mut self) {
        let (p, f) = (self.passed, self.failed);
        self.line(format_args!("summary: {p} passed, {f} failed"));
    }

    /// Checks passed so far.
    pub fn passed(&self) -> u32 {
        self.passed
    }

    /// Checks failed so far.
    pub fn failed(&self) -> u32 {
        self.failed
    }

    /// The output, for tests.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// `Ok(())` if `got == want`, else a message naming both.
pub fn expect_eq<T: PartialEq + std::fmt::Debug>(
    what: &str,
    got: T,
    want: T,
) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: expected {want:?}, got {got:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_summary() {
        let mut r = Report::new("prog", Vec::new());
        r.ok("first thing works");
        r.fail("second thing", "expected EINVAL (22), got success (0)");
        assert!(r.check("third", Ok(())));
        assert!(!r.check("fourth", Err("got 3".into())));
        r.note("opened /dev/dri/renderD128");
        r.summary();
        assert_eq!((r.passed(), r.failed()), (2, 2));
        let text = String::from_utf8(r.into_inner()).unwrap();
        assert_eq!(
            text,
            "userspace: prog: ok first thing works\n\
             userspace: prog: FAIL second thing: expected EINVAL (22), got success (0)\n\
             userspace: prog: ok third\n\
             userspace: prog: FAIL fourth: got 3\n\
             userspace: prog: opened /dev/dri/renderD128\n\
             userspace: prog: summary: 2 passed, 2 failed\n"
        );
    }

    #[test]
    fn expect_eq_names_both_values() {
        assert_eq!(expect_eq("name", "a", "a"), Ok(()));
        assert_eq!(
            expect_eq("major", 2, 1),
            Err("major: expected 1, got 2".to_string())
        );
    }
}
