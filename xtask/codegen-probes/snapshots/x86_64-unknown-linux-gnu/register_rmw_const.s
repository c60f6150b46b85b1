; rustc 1.95.0 (59807616e 2026-04-14)
movl $-241 %eax
andl 256(%rdi) %eax
orl $48 %eax
movl %eax 256(%rdi)
retq
