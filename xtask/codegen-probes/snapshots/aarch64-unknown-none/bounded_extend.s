; rustc 1.95.0 (59807616e 2026-04-14)
and w8 w0 #0xfffc
orr w8 w1 w8
lsr w0 w8 #2
ret
