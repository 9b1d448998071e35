/*
 * A program whose speed depends on code layout by construction, for `latscope bench --layouts`:
 *   align N     runs N iterations of a hot loop and exits 0.
 * The loop (63 bytes: six 9-byte NOPs, an add, a decrement and a branch) starts PAD bytes past
 * a 64-byte boundary, PAD set at build time (cc -DPAD=56). The bytes before it are jumped over,
 * so every PAD executes exactly the same instructions (callgrind counts them equal); only where
 * the loop sits differs. On the AMD Zen 2 development VM the loop takes about 0.57 ns per
 * iteration at PAD 0-48 and 0.9 ns at PAD 56 or 60, where it spans two 64-byte lines badly.
 * Build: cc -O2 -DPAD=56 -o align align.c (x86-64, GNU as)
 */
#include <stdint.h>
#include <stdlib.h>

#ifndef PAD
#define PAD 0
#endif
#define STR(x) #x
#define XSTR(x) STR(x)
#define NOP9 ".byte 0x66,0x0f,0x1f,0x84,0x00,0x00,0x00,0x00,0x00\n"

int main(int argc, char **argv)
{
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 100000000;
    uint64_t a = 0;
    if (n == 0)
        return 0;
    __asm__ volatile("jmp 2f\n"
                     ".p2align 6\n"
                     ".fill " XSTR(PAD) ", 1, 0x90\n"
                     "2:\n" NOP9 NOP9 NOP9 NOP9 NOP9 NOP9 "add $1, %0\n"
                     "dec %1\n"
                     "jnz 2b\n"
                     : "+r"(a), "+r"(n));
    return (int)(a & 0);
}
