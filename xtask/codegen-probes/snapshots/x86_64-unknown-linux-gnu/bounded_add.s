; rustc 1.95.0 (59807616e 2026-04-14)
leal (%rdi %rsi) %eax
retq
