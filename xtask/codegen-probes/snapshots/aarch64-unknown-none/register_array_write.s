; rustc 1.95.0 (59807616e 2026-04-14)
cmp x1 #64
b.hs .L0
add x8 x0 x1 lsl #2
str w2 [x8 #128]
.L0:
ret
