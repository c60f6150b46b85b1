; rustc 1.95.0 (59807616e 2026-04-14)
and w8 w1 #0xffff
add w0 w8 w0 uxtb
ret
