; rustc 1.95.0 (59807616e 2026-04-14)
andl $15 %edi
leal (%rdi %rdi 2) %eax
retq
