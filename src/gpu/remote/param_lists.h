// Parameter lists for the stand-in's generated exports: YONDER_REMOTE_PARAMS(P0, P1) is
// `ArgOf<P0> a0, ArgOf<P1> a1`, YONDER_REMOTE_ARGS(P0, P1) is `, a0, a1`. Up to 12.
#pragma once

// clang-format off

#define YONDER_REMOTE_CAT_(a, b) a##b
#define YONDER_REMOTE_CAT(a, b) YONDER_REMOTE_CAT_(a, b)
#define YONDER_REMOTE_COUNT_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, N, ...) N
#define YONDER_REMOTE_COUNT(...) YONDER_REMOTE_COUNT_(__VA_ARGS__, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1)
#define YONDER_REMOTE_PARAMS(...) __VA_OPT__(YONDER_REMOTE_CAT(YONDER_REMOTE_PARAMS_, YONDER_REMOTE_COUNT(__VA_ARGS__))(__VA_ARGS__))
#define YONDER_REMOTE_ARGS(...) __VA_OPT__(YONDER_REMOTE_CAT(YONDER_REMOTE_ARGS_, YONDER_REMOTE_COUNT(__VA_ARGS__))(__VA_ARGS__))
#define YONDER_REMOTE_PARAMS_1(p0) ArgOf<p0> a0
#define YONDER_REMOTE_PARAMS_2(p0, p1) ArgOf<p0> a0, ArgOf<p1> a1
#define YONDER_REMOTE_PARAMS_3(p0, p1, p2) ArgOf<p0> a0, ArgOf<p1> a1, ArgOf<p2> a2
#define YONDER_REMOTE_PARAMS_4(p0, p1, p2, p3) ArgOf<p0> a0, ArgOf<p1> a1, ArgOf<p2> a2, ArgOf<p3> a3
#define YONDER_REMOTE_PARAMS_5(p0, p1, p2, p3, p4) ArgOf<p0> a0, ArgOf<p1> a1, ArgOf<p2> a2, ArgOf<p3> a3, ArgOf<p4> a4
#define YONDER_REMOTE_PARAMS_6(p0, p1, p2, p3, p4, p5) ArgOf<p0> a0, ArgOf<p1> a1, ArgOf<p2> a2, ArgOf<p3> a3, ArgOf<p4> a4, ArgOf<p5> a5
#define YONDER_REMOTE_PARAMS_7(p0, p1, p2, p3, p4, p5, p6) ArgOf<p0> a0, ArgOf<p1> a1, ArgOf<p2> a2, ArgOf<p3> a3, ArgOf<p4> a4, ArgOf<p5> a5, ArgOf<p6> a6
#define YONDER_REMOTE_PARAMS_8(p0, p1, p2, p3, p4, p5, p6, p7) ArgOf<p0> a0, ArgOf<p1> a1, ArgOf<p2> a2, ArgOf<p3> a3, ArgOf<p4> a4, ArgOf<p5> a5, ArgOf<p6> a6, ArgOf<p7> a7
#define YONDER_REMOTE_PARAMS_9(p0, p1, p2, p3, p4, p5, p6, p7, p8) ArgOf<p0> a0, ArgOf<p1> a1, ArgOf<p2> a2, ArgOf<p3> a3, ArgOf<p4> a4, ArgOf<p5> a5, ArgOf<p6> a6, ArgOf<p7> a7, ArgOf<p8> a8
#define YONDER_REMOTE_PARAMS_10(p0, p1, p2, p3, p4, p5, p6, p7, p8, p9) ArgOf<p0> a0, ArgOf<p1> a1, ArgOf<p2> a2, ArgOf<p3> a3, ArgOf<p4> a4, ArgOf<p5> a5, ArgOf<p6> a6, ArgOf<p7> a7, ArgOf<p8> a8, ArgOf<p9> a9
#define YONDER_REMOTE_PARAMS_11(p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10) ArgOf<p0> a0, ArgOf<p1> a1, ArgOf<p2> a2, ArgOf<p3> a3, ArgOf<p4> a4, ArgOf<p5> a5, ArgOf<p6> a6, ArgOf<p7> a7, ArgOf<p8> a8, ArgOf<p9> a9, ArgOf<p10> a10
#define YONDER_REMOTE_PARAMS_12(p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11) ArgOf<p0> a0, ArgOf<p1> a1, ArgOf<p2> a2, ArgOf<p3> a3, ArgOf<p4> a4, ArgOf<p5> a5, ArgOf<p6> a6, ArgOf<p7> a7, ArgOf<p8> a8, ArgOf<p9> a9, ArgOf<p10> a10, ArgOf<p11> a11
#define YONDER_REMOTE_ARGS_1(p0) , a0
#define YONDER_REMOTE_ARGS_2(p0, p1) , a0, a1
#define YONDER_REMOTE_ARGS_3(p0, p1, p2) , a0, a1, a2
#define YONDER_REMOTE_ARGS_4(p0, p1, p2, p3) , a0, a1, a2, a3
#define YONDER_REMOTE_ARGS_5(p0, p1, p2, p3, p4) , a0, a1, a2, a3, a4
#define YONDER_REMOTE_ARGS_6(p0, p1, p2, p3, p4, p5) , a0, a1, a2, a3, a4, a5
#define YONDER_REMOTE_ARGS_7(p0, p1, p2, p3, p4, p5, p6) , a0, a1, a2, a3, a4, a5, a6
#define YONDER_REMOTE_ARGS_8(p0, p1, p2, p3, p4, p5, p6, p7) , a0, a1, a2, a3, a4, a5, a6, a7
#define YONDER_REMOTE_ARGS_9(p0, p1, p2, p3, p4, p5, p6, p7, p8) , a0, a1, a2, a3, a4, a5, a6, a7, a8
#define YONDER_REMOTE_ARGS_10(p0, p1, p2, p3, p4, p5, p6, p7, p8, p9) , a0, a1, a2, a3, a4, a5, a6, a7, a8, a9
#define YONDER_REMOTE_ARGS_11(p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10) , a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10
#define YONDER_REMOTE_ARGS_12(p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11) , a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11
// clang-format on
