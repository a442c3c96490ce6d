/*
 * rope.cl -- rotary position embedding (Su et al., RoFormer, eq. 34), in
 * place on the heads of a batch of q or k rows.  Pair i of a head turns by
 * theta_i = pos * freq_scale * base^(-2i / n_dims), divided by the pair's
 * frequency factor when the model has them.  Pairs are adjacent elements
 * (2i, 2i + 1) in the normal style and (i, i + n_dims / 2) in the NeoX
 * style.  The angle is computed in double precision where the device has
 * it, as on the CPU.
 */
__kernel void rope(__global float *x, int width, int n_heads, int head_dim, int n_dims, int neox,
                   float freq_base, float freq_scale, __global const float *factors,
                   int has_factors, __global const int *pos, int n)
{
    /* one item per (pair, head, token); n of them */
    const int item = get_global_id(0);
    if (item >= n) return;
    const int half_dims = n_dims / 2;
    const int i = item % half_dims, h = (item / half_dims) % n_heads;
    const int t = item / half_dims / n_heads;
#ifdef HAVE_FP64
    double theta = (double)pos[t] * (double)freq_scale *
                   pow((double)freq_base, -2.0 * i / n_dims);
    if (has_factors) theta /= (double)factors[i];
    const float cs = (float)cos(theta), sn = (float)sin(theta);
#else
    float theta = (float)pos[t] * freq_scale * pow(freq_base, -2.0f * i / n_dims);
    if (has_factors) theta /= factors[i];
    const float cs = cos(theta), sn = sin(theta);
#endif
    __global float *v = x + (size_t)t * width + (size_t)h * head_dim;
    const int a = neox ? i : 2 * i;
    const int b = neox ? i + half_dims : 2 * i + 1;
    const float x0 = v[a], x1 = v[b];
    v[a] = x0 * cs - x1 * sn;
    v[b] = x0 * sn + x1 * cs;
}
