#include "textflag.h"

// Weights of the bytes of a 32-byte step in the weighted sum: 32 for
// the first byte down to 1 for the last.
DATA adlerWeights<>+0(SB)/8, $0x191a1b1c1d1e1f20
DATA adlerWeights<>+8(SB)/8, $0x1112131415161718
DATA adlerWeights<>+16(SB)/8, $0x090a0b0c0d0e0f10
DATA adlerWeights<>+24(SB)/8, $0x0102030405060708
GLOBL adlerWeights<>(SB), RODATA|NOPTR, $32

DATA adlerOnes<>+0(SB)/8, $0x0001000100010001
DATA adlerOnes<>+8(SB)/8, $0x0001000100010001
DATA adlerOnes<>+16(SB)/8, $0x0001000100010001
DATA adlerOnes<>+24(SB)/8, $0x0001000100010001
GLOBL adlerOnes<>(SB), RODATA|NOPTR, $32

// func adler32Chunk(p []byte) (sum1, sum2 uint32)
//
// Per 32-byte step: Y0 += the step's byte sums (4 quadwords, VPSADBW),
// after Y2 += Y0 (the sums of the steps before it, each counted once per
// step after it: ×32 at the end); Y1 += the weighted sums (VPMADDUBSW by
// the weights, 16 words of at most 255·63, then VPMADDWD by ones to 8
// doublewords). sum2 = Σ Y1 + 32·Σ Y2. Every lane stays below 2^32 for
// 5536 bytes (zlib's NMAX bound).
TEXT ·adler32Chunk(SB), NOSPLIT, $0-32
	MOVQ p_base+0(FP), SI
	MOVQ p_len+8(FP), CX
	VMOVDQU adlerWeights<>(SB), Y5
	VMOVDQU adlerOnes<>(SB), Y6
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y7, Y7, Y7

loop:
	CMPQ CX, $32
	JB   done
	VMOVDQU (SI), Y3
	VPADDQ  Y0, Y2, Y2
	VPSADBW Y7, Y3, Y4
	VPADDQ  Y4, Y0, Y0
	VPMADDUBSW Y5, Y3, Y4
	VPMADDWD   Y6, Y4, Y4
	VPADDD     Y4, Y1, Y1
	ADDQ $32, SI
	SUBQ $32, CX
	JMP  loop

done:
	// The quadword lanes of Y0 and Y2 hold values below 2^32: summed
	// as doublewords, their upper halves add nothing.
	VPSLLQ $5, Y2, Y2
	VPADDD Y2, Y1, Y1

	VEXTRACTI128 $1, Y0, X3
	VPADDD       X3, X0, X0
	VPSHUFD      $0x4e, X0, X3
	VPADDD       X3, X0, X0
	VPSHUFD      $0xb1, X0, X3
	VPADDD       X3, X0, X0
	VMOVD        X0, AX

	VEXTRACTI128 $1, Y1, X3
	VPADDD       X3, X1, X1
	VPSHUFD      $0x4e, X1, X3
	VPADDD       X3, X1, X1
	VPSHUFD      $0xb1, X1, X3
	VPADDD       X3, X1, X1
	VMOVD        X1, DX

	VZEROUPPER
	MOVL AX, sum1+24(FP)
	MOVL DX, sum2+28(FP)
	RET
