; rustc 1.95.0 (59807616e 2026-04-14)
ldr w8 [x0 #256]
bfi w8 w1 #4 #4
str w8 [x0 #256]
ret
