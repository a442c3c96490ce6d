# simd/local.mk -- see the top-level Makefile.am.
