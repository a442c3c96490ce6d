/*
 * dequant.cl -- reading weight rows in their GGUF block formats.
 *
 * deq32_<type>(row, u, n_in, out) writes elements 32u .. 32u+31 of a row
 * as floats.  Every format is read in units of 32 elements: a whole block
 * of the legacy formats, one or two sub-blocks of a K-quant super-block.
 * The arithmetic follows the block definitions of src/common/quant.h in the same
 * order ((d * scale) * q - (dmin * min) for the K-quants), without
 * contraction into fused multiply-adds, so a device gives the same floats
 * as the reference dequantizers of src/common/quant.c.  Only the plain float
 * types can have a row length that is not a multiple of 32 (n_in); their
 * missing elements read as 0.
 */

typedef __global const uchar *row_ptr;

float load_half(row_ptr p)
{
    return vload_half(0, (__global const half *)p);
}

void deq32_f32(row_ptr row, uint u, int n_in, float *out)
{
    __global const float *p = (__global const float *)row + 32 * u;
    const int n = min(32, n_in - (int)(32 * u));
    for (int j = 0; j < 32; j++) out[j] = j < n ? p[j] : 0.0f;
}

void deq32_f16(row_ptr row, uint u, int n_in, float *out)
{
    __global const half *p = (__global const half *)row + 32 * u;
    const int n = min(32, n_in - (int)(32 * u));
    for (int j = 0; j < 32; j++) out[j] = j < n ? vload_half(j, p) : 0.0f;
}

/* bfloat16 is the top half of a float. */
void deq32_bf16(row_ptr row, uint u, int n_in, float *out)
{
    __global const ushort *p = (__global const ushort *)row + 32 * u;
    const int n = min(32, n_in - (int)(32 * u));
    for (int j = 0; j < 32; j++) out[j] = j < n ? as_float((uint)p[j] << 16) : 0.0f;
}

/* Q4_0, 18 bytes: half d, 16 bytes of nibbles; x = d * (q - 8), element j
 * in the low nibble of byte j, element j + 16 in its high nibble. */
void deq32_q4_0(row_ptr row, uint u, int n_in, float *out)
{
    row_ptr b = row + 18 * u;
    const float d = load_half(b);
    for (int j = 0; j < 16; j++) {
        out[j] = (float)((b[2 + j] & 15) - 8) * d;
        out[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
    }
}

/* Q4_1, 20 bytes: half d, half m, nibbles as Q4_0; x = d * q + m. */
void deq32_q4_1(row_ptr row, uint u, int n_in, float *out)
{
    row_ptr b = row + 20 * u;
    const float d = load_half(b), m = load_half(b + 2);
    for (int j = 0; j < 16; j++) {
        out[j] = (float)(b[4 + j] & 15) * d + m;
        out[j + 16] = (float)(b[4 + j] >> 4) * d + m;
    }
}

/* The fifth bits of Q5_0 and Q5_1: bit j of a little-endian 32-bit word
 * belongs to element j. */
uint load_qh32(row_ptr p)
{
    return (uint)p[0] | (uint)p[1] << 8 | (uint)p[2] << 16 | (uint)p[3] << 24;
}

/* Q5_0, 22 bytes: half d, 4 bytes of fifth bits, nibbles; x = d * (q - 16). */
void deq32_q5_0(row_ptr row, uint u, int n_in, float *out)
{
    row_ptr b = row + 22 * u;
    const float d = load_half(b);
    const uint qh = load_qh32(b + 2);
    for (int j = 0; j < 16; j++) {
        const int lo = (b[6 + j] & 15) | (int)((qh >> j) & 1) << 4;
        const int hi = (b[6 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        out[j] = (float)(lo - 16) * d;
        out[j + 16] = (float)(hi - 16) * d;
    }
}

/* Q5_1, 24 bytes: half d, half m, fifth bits, nibbles; x = d * q + m. */
void deq32_q5_1(row_ptr row, uint u, int n_in, float *out)
{
    row_ptr b = row + 24 * u;
    const float d = load_half(b), m = load_half(b + 2);
    const uint qh = load_qh32(b + 4);
    for (int j = 0; j < 16; j++) {
        const int lo = (b[8 + j] & 15) | (int)((qh >> j) & 1) << 4;
        const int hi = (b[8 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        out[j] = (float)lo * d + m;
        out[j + 16] = (float)hi * d + m;
    }
}

/* Q8_0, 34 bytes: half d, 32 signed bytes; x = d * q. */
void deq32_q8_0(row_ptr row, uint u, int n_in, float *out)
{
    row_ptr b = row + 34 * u;
    const float d = load_half(b);
    __global const char *q = (__global const char *)(b + 2);
    for (int j = 0; j < 32; j++) out[j] = (float)q[j] * d;
}

/* Q2_K, 84 bytes per 256: scales[16] (low nibble scale, high nibble min),
 * qs[64], half d, half dmin.  Element e: 2-bit field (e % 128) / 32 of
 * qs[32 * (e / 128) + e % 32], sub-block e / 16. */
void deq32_q2_k(row_ptr row, uint u, int n_in, float *out)
{
    row_ptr b = row + 84 * (u / 8);
    const uint v = u % 8, c = v / 4, k = v % 4;
    const float d = load_half(b + 80), dmin = load_half(b + 82);
    for (int h = 0; h < 2; h++) {
        const uint sub = 8 * c + 2 * k + h;
        const float dl = d * (float)(b[sub] & 15);
        const float ml = dmin * (float)(b[sub] >> 4);
        row_ptr q = b + 16 + 32 * c + 16 * h;
        for (int l = 0; l < 16; l++) out[16 * h + l] = dl * (float)((q[l] >> (2 * k)) & 3) - ml;
    }
}

/* Q3_K, 110 bytes per 256: hmask[32], qs[64], 12 bytes of 6-bit scales
 * (biased by 32), half d.  Element e: 2 low bits as Q2_K, high bit
 * e / 32 of hmask[e % 32]; x = d * scale * (q - 4 * !high). */
void deq32_q3_k(row_ptr row, uint u, int n_in, float *out)
{
    row_ptr b = row + 110 * (u / 8);
    const uint v = u % 8, c = v / 4, k = v % 4;
    const float d = load_half(b + 108);
    row_ptr sc = b + 96;
    for (int h = 0; h < 2; h++) {
        const uint sub = 8 * c + 2 * k + h, bit = 4 * c + k;
        const int low = sub < 8 ? sc[sub] & 15 : sc[sub - 8] >> 4;
        const int high = (sc[8 + sub % 4] >> (2 * (sub / 4))) & 3;
        const float dl = d * (float)((low | high << 4) - 32);
        row_ptr q = b + 32 + 32 * c + 16 * h;
        row_ptr hm = b + 16 * h;
        for (int l = 0; l < 16; l++)
            out[16 * h + l] = dl * (float)(((q[l] >> (2 * k)) & 3) - 4 + 4 * ((hm[l] >> bit) & 1));
    }
}

/* The 6-bit scale and min of sub-block j of Q4_K and Q5_K (12 bytes at p). */
void q4k_scale_min(row_ptr p, uint j, int *scale, int *min)
{
    if (j < 4) {
        *scale = p[j] & 63;
        *min = p[j + 4] & 63;
    } else {
        *scale = (p[j + 4] & 15) | (p[j - 4] >> 6) << 4;
        *min = (p[j + 4] >> 4) | (p[j] >> 6) << 4;
    }
}

/* Q4_K, 144 bytes per 256: half d, half dmin, scales[12], qs[128];
 * sub-block j of 32 in the low (j even) or high (j odd) nibbles of
 * qs[32 * (j / 2) ..]; x = (d * scale) * q - (dmin * min). */
void deq32_q4_k(row_ptr row, uint u, int n_in, float *out)
{
    row_ptr b = row + 144 * (u / 8);
    const uint j = u % 8;
    int sc, mn;
    q4k_scale_min(b + 4, j, &sc, &mn);
    const float d1 = load_half(b) * (float)sc, m1 = load_half(b + 2) * (float)mn;
    row_ptr q = b + 16 + 32 * (j / 2);
    const uint shift = 4 * (j % 2);
    for (int l = 0; l < 32; l++) out[l] = d1 * (float)((q[l] >> shift) & 15) - m1;
}

/* Q5_K, 176 bytes per 256: as Q4_K with qh[32] before qs, the fifth bit
 * of sub-block j's element l in bit j of qh[l]. */
void deq32_q5_k(row_ptr row, uint u, int n_in, float *out)
{
    row_ptr b = row + 176 * (u / 8);
    const uint j = u % 8;
    int sc, mn;
    q4k_scale_min(b + 4, j, &sc, &mn);
    const float d1 = load_half(b) * (float)sc, m1 = load_half(b + 2) * (float)mn;
    row_ptr qh = b + 16;
    row_ptr q = b + 48 + 32 * (j / 2);
    const uint shift = 4 * (j % 2);
    for (int l = 0; l < 32; l++)
        out[l] = d1 * (float)(((q[l] >> shift) & 15) | ((qh[l] >> j) & 1) << 4) - m1;
}

/* Q6_K, 210 bytes per 256: ql[128], qh[64], int8 scales[16], half d.
 * Element e, k = (e % 128) / 32: nibble k / 2 of
 * ql[64 * (e / 128) + 32 * (k % 2) + e % 32], high 2 bits in field k of
 * qh[32 * (e / 128) + e % 32]; x = (d * scale) * (q - 32). */
void deq32_q6_k(row_ptr row, uint u, int n_in, float *out)
{
    row_ptr b = row + 210 * (u / 8);
    const uint v = u % 8, c = v / 4, k = v % 4;
    const float d = load_half(b + 208);
    __global const char *scales = (__global const char *)(b + 192);
    for (int h = 0; h < 2; h++) {
        const uint sub = 8 * c + 2 * k + h;
        const float dl = d * (float)scales[sub];
        row_ptr ql = b + 64 * c + 32 * (k % 2) + 16 * h;
        row_ptr qh = b + 128 + 32 * c + 16 * h;
        for (int l = 0; l < 16; l++) {
            const int q = ((ql[l] >> (4 * (k / 2))) & 15) | ((qh[l] >> (2 * k)) & 3) << 4;
            out[16 * h + l] = dl * (float)(q - 32);
        }
    }
}
