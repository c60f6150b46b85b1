; rustc 1.95.0 (59807616e 2026-04-14)
movl $-241 %eax
andl 256(%rdi) %eax
shll $4 %esi
movzbl %sil %ecx
orl %eax %ecx
movl %ecx 256(%rdi)
retq
