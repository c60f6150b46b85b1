; rustc 1.95.0 (59807616e 2026-04-14)
cmpq $256 %rdi
movl $256 %eax
cmovbq %rdi %rax
retq
