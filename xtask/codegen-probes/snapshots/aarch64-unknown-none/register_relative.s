; rustc 1.95.0 (59807616e 2026-04-14)
ldr w8 [x0 #528]
orr w8 w8 #0x1
str w8 [x0 #528]
ret
