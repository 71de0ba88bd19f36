/* bf16_target_end — ends what bf16_target_begin.h started. No include guard. */
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
