; rustc 1.95.0 (59807616e 2026-04-14)
cmp w0 #1 lsl #12
csel w0 w0 wzr lo
ret
