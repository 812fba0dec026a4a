// Closes what isa_begin.h opened: code after this is compiled for the baseline again.
#if defined(LINEA_ISA_AVX512) || defined(LINEA_ISA_AVX2)
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
