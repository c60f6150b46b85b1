; rustc 1.95.0 (59807616e 2026-04-14)
ubfx w0 w0 #8 #8
ret
