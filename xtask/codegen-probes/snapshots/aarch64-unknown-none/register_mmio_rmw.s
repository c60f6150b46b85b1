; rustc 1.95.0 (59807616e 2026-04-14)
ldr w8 [x0 #256]
ubfiz w9 w1 #4 #4
dmb oshld
dmb oshst
and w8 w8 #0xffffff0f
orr w8 w9 w8
orr w8 w8 #0x1
str w8 [x0 #256]
ret
