; rustc 1.95.0 (59807616e 2026-04-14)
movzwl %di %eax
shrl $15 %eax
retq
