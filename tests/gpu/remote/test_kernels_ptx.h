/* The remote-CUDA tests' kernels as real PTX, for tests and the bench. */
#ifndef YONDER_TESTS_GPU_REMOTE_TEST_KERNELS_PTX_H
#define YONDER_TESTS_GPU_REMOTE_TEST_KERNELS_PTX_H

/* The test kernels as real PTX (ISA 7.0, sm_52, JIT-compiled by the driver
 * for the GPU it runs on), so the same program runs on a real GPU
 * (scripts/gpu-check.sh); the test double runs its host versions of the
 * kernels these entries name. Parameter layouts: add_one (u64 @0, u32 @8),
 * saxpy (f32 @0, u64 @8, u64 @16, u32 @24). A global, `yonder_counter`
 * (u32, zero), for cuModuleGetGlobal. */
static const char kTestKernelsPtx[] =
    ".version 7.0\n"
    ".target sm_52\n"
    ".address_size 64\n"
    ".visible .global .align 4 .u32 yonder_counter;\n"
    ".visible .entry add_one(.param .u64 data, .param .u32 n)\n"
    "{\n"
    "  .reg .pred %p<2>; .reg .b32 %r<6>; .reg .f32 %f<3>; .reg .b64 %rd<5>;\n"
    "  ld.param.u64 %rd1, [data]; ld.param.u32 %r2, [n];\n"
    "  mov.u32 %r3, %ctaid.x; mov.u32 %r4, %ntid.x; mov.u32 %r5, %tid.x;\n"
    "  mad.lo.s32 %r1, %r3, %r4, %r5;\n"
    "  setp.ge.u32 %p1, %r1, %r2; @%p1 bra DONE;\n"
    "  cvta.to.global.u64 %rd2, %rd1; mul.wide.u32 %rd3, %r1, 4; add.s64 %rd4, %rd2, %rd3;\n"
    "  ld.global.f32 %f1, [%rd4]; add.f32 %f2, %f1, 0f3F800000; st.global.f32 [%rd4], %f2;\n"
    "DONE:\n"
    "  ret;\n"
    "}\n"
    ".visible .entry saxpy(.param .f32 a, .param .u64 x, .param .u64 y, .param .u32 n)\n"
    "{\n"
    "  .reg .pred %p<2>; .reg .b32 %r<6>; .reg .f32 %f<5>; .reg .b64 %rd<8>;\n"
    "  ld.param.f32 %f1, [a]; ld.param.u64 %rd1, [x]; ld.param.u64 %rd2, [y]; ld.param.u32 %r2, [n];\n"
    "  mov.u32 %r3, %ctaid.x; mov.u32 %r4, %ntid.x; mov.u32 %r5, %tid.x;\n"
    "  mad.lo.s32 %r1, %r3, %r4, %r5;\n"
    "  setp.ge.u32 %p1, %r1, %r2; @%p1 bra DONE;\n"
    "  cvta.to.global.u64 %rd3, %rd1; cvta.to.global.u64 %rd4, %rd2; mul.wide.u32 %rd5, %r1, 4;\n"
    "  add.s64 %rd6, %rd3, %rd5; add.s64 %rd7, %rd4, %rd5;\n"
    "  ld.global.f32 %f2, [%rd6]; ld.global.f32 %f3, [%rd7]; fma.rn.f32 %f4, %f1, %f2, %f3;\n"
    "  st.global.f32 [%rd7], %f4;\n"
    "DONE:\n"
    "  ret;\n"
    "}\n";

#endif
