; rustc 1.95.0 (59807616e 2026-04-14)
ldr w8 [x0 #256]
cmp w1 #15
b.hi .L0
and w8 w8 #0xffffff0f
orr w8 w8 w1 lsl #4
str w8 [x0 #256]
.L0:
ret
