; rustc 1.95.0 (59807616e 2026-04-14)
cmpq $64 %rsi
jae .L0
movl %edx 128(%rdi %rsi 4)
.L0:
retq
