; rustc 1.95.0 (59807616e 2026-04-14)
xorl %eax %eax
cmpl $4096 %edi
cmovbl %edi %eax
retq
