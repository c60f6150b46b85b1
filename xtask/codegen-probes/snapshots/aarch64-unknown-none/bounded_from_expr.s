; rustc 1.95.0 (59807616e 2026-04-14)
and x0 x0 #0x3f
ret
