"""Classic BPF programs for tc's ``bpf`` classifier, the one programmable classifier this
kernel has (DESIGN.md): the opcodes the fabric's programs use, and tc's ``bytecode`` syntax.

A program runs at an interface's egress on the frame from its Ethernet header; cls_bpf takes
its return value as the class id (major:minor as one integer), and 0 as "no match" (the next
filter, or the qdisc's default class). Programs: the ACK classifier
(:func:`testbed.emulator.shaping.ack_program`) and the fair queues' bucket hash
(:func:`testbed.emulator.fair_queue.classifier_program`).
"""

from __future__ import annotations

Insn = tuple[int, int, int, int]  # code, jump if true, jump if false, k

# Opcodes (linux/filter.h): loads, stores, arithmetic, jumps and returns
LDW_ABS, LDH_ABS, LDB_ABS = 0x20, 0x28, 0x30  # A = the word, half word, byte at k
LDW_IND, LDB_IND = 0x40, 0x50  # A = the word, byte at X + k
LD_MEM, LDX_MEM, LDX_MSH = 0x60, 0x61, 0xB1  # A = M[k]; X = M[k]; X = 4 * (byte at k & 0xF)
ST = 0x02  # M[k] = A
TAX = 0x07  # X = A
ADD_K, ADD_X, MUL_K, LSH_K, RSH_K, MOD_K, XOR_X = 0x04, 0x0C, 0x24, 0x64, 0x74, 0x94, 0xAC
JEQ_K, JGE_K, JGT_X = 0x15, 0x35, 0x2D
RET_A, RET_K = 0x16, 0x06

ETH_LEN = 14  # the Ethernet header: the IP header starts here
ETH_IPV4 = 0x0800
IP_TCP = 6


def bytecode(program: list[Insn]) -> str:
    """``program`` in tc's ``bytecode`` syntax: the count, then ``code jt jf k`` each."""
    return ",".join([str(len(program)), *(f"{c} {t} {f} {k}" for c, t, f, k in program)])


def classid(major: int, minor: int) -> int:
    """A class id as cls_bpf returns it: major:minor as one integer."""
    return (major << 16) | minor


def run(program: list[Insn], frame: bytes) -> int:
    """What the kernel returns for ``frame`` (from its Ethernet header): an interpreter of the
    opcodes above, so a program can be checked without a kernel. ValueError for any other
    opcode, or a load past the frame's end (the kernel returns 0 there: no match)."""
    a = x = 0
    mem = [0] * 16
    pc = 0

    def load(off: int, size: int) -> int:
        if off + size > len(frame):
            raise ValueError(f"a load of {size} bytes at {off} is past the frame's end")
        return int.from_bytes(frame[off:off + size], "big")

    while True:
        code, jt, jf, k = program[pc]
        pc += 1
        if code in (LDW_ABS, LDH_ABS, LDB_ABS):
            a = load(k, {LDW_ABS: 4, LDH_ABS: 2, LDB_ABS: 1}[code])
        elif code in (LDW_IND, LDB_IND):
            a = load(x + k, 4 if code == LDW_IND else 1)
        elif code == LD_MEM:
            a = mem[k]
        elif code == LDX_MEM:
            x = mem[k]
        elif code == LDX_MSH:
            x = 4 * (load(k, 1) & 0xF)
        elif code == ST:
            mem[k] = a
        elif code == TAX:
            x = a
        elif code in _ALU:
            a = _ALU[code](a, x, k) & 0xFFFFFFFF
        elif code in (JEQ_K, JGE_K, JGT_X):
            taken = {JEQ_K: a == k, JGE_K: a >= k, JGT_X: a > x}[code]
            pc += jt if taken else jf
        elif code in (RET_A, RET_K):
            return a if code == RET_A else k
        else:
            raise ValueError(f"opcode {code:#x} is not one the interpreter knows")


_ALU = {
    ADD_K: lambda a, x, k: a + k, ADD_X: lambda a, x, k: a + x,
    MUL_K: lambda a, x, k: a * k, LSH_K: lambda a, x, k: a << k,
    RSH_K: lambda a, x, k: a >> k, MOD_K: lambda a, x, k: a % k,
    XOR_X: lambda a, x, k: a ^ x,
}
