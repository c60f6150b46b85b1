; rustc 1.95.0 (59807616e 2026-04-14)
orl $1 528(%rdi)
retq
