; rustc 1.95.0 (59807616e 2026-04-14)
mov w8 #256
cmp x0 #256
csel x0 x0 x8 lo
ret
