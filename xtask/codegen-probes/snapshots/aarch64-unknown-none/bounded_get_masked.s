; rustc 1.95.0 (59807616e 2026-04-14)
and w8 w0 #0xf
add w0 w8 w8 lsl #1
ret
