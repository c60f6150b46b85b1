; rustc 1.95.0 (59807616e 2026-04-14)
movl 256(%rdi) %eax
shrl $4 %eax
andl $15 %eax
retq
