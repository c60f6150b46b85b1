; rustc 1.95.0 (59807616e 2026-04-14)
movl 256(%rdi) %eax
cmpl $15 %esi
ja .L0
andl $-241 %eax
shll $4 %esi
orl %eax %esi
movl %esi 256(%rdi)
.L0:
retq
