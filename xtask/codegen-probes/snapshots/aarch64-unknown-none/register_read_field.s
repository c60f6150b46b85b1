; rustc 1.95.0 (59807616e 2026-04-14)
ldr w8 [x0 #256]
ubfx w0 w8 #4 #4
ret
