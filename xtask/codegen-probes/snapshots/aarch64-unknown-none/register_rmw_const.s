; rustc 1.95.0 (59807616e 2026-04-14)
ldr w8 [x0 #256]
and w8 w8 #0xffffff0f
orr w8 w8 #0x30
str w8 [x0 #256]
ret
