; rustc 1.95.0 (59807616e 2026-04-14)
shll $8 %esi
andl $-65281 %edi
leal (%rdi %rsi) %eax
retq
