/* mc2fmu_native.h: the reduced dynamics and the FMU runtime of an mc2fmu model, in C99.

   Shared by every model and both FMI versions; never edited per model (the model's data is
   in the generated mc2fmu_model.h).  It is included by exactly one translation unit
   (mc2fmu_fmi2.c or mc2fmu_fmi3.c), so everything here has internal linkage: two mc2fmu
   FMUs loaded in one process share no symbol but the FMI functions, which the importer
   resolves per library.

   The numerics replicate mc2fmu's Python side (mc2fmu/network.py, mc2fmu/dynamics.py and
   templates/pythonfmu_slave.py.in) operation by operation where practical, in double
   precision:
   - decoder: z-scored inputs (cos/sin for angle coordinates), value, Jacobian and Hessian
     propagated through the layers: a = W z + b, Ja = W Jz, Ha = W Hz; then
     Hz = s''(a) Ja Ja^T + s'(a) Ha, Jz = s'(a) Ja, z = s(a); output de-normalised;
   - M_m = J^T M J, G_m = J^T M (H : v v), f_m = J^T f, f = f_g + f_B u + sum_i u_i f_C[i] x,
     plus the spring-dampers J^T f_spring(x, J v) with the velocity v of each acceleration
     and the identified terms Xi^T lambda(q, v, u) (train --identify; mc2fmu/reduced/terms.py),
     with the decoder's output layer folded into M, f_g, f_B, f_C and the springs at export
     (exact algebra, different rounding; see mc2fmu_terms): the step propagates the last
     hidden layer only;
     the M_m solve by the same unrolled Cholesky factorisation;
   - the step maps `paper` and `centred`;
   - co-simulation on the fixed internal grid t_k = t0 + k dt with the quadratic
     interpolation of the last three grid states at communication points;
   - poses from the decoded points: the polar factor of [(r1-r0),(r2-r0),(r3-r0)]/L by
     Newton's iteration R <- (R + R^-T)/2, the quaternion by Shepperd's method (w >= 0);
   - the envelope distance of mc2fmu/envelope.py. */
#ifndef MC2FMU_NATIVE_H
#define MC2FMU_NATIVE_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MC2FMU_ROLE_INPUT, MC2FMU_ROLE_POSE, MC2FMU_ROLE_Q, MC2FMU_ROLE_QD, MC2FMU_ROLE_ENVELOPE,
       MC2FMU_ROLE_Q_START, MC2FMU_ROLE_QD_START, MC2FMU_ROLE_DER_Q, MC2FMU_ROLE_DER_QD, MC2FMU_ROLE_TIME };

typedef struct {
    const char *name;
    int role;
    int index;
    double start;
} mc2fmu_variable;

#include "mc2fmu_model.h"

#if defined(__GNUC__) || defined(__clang__) || defined(_MSC_VER)
#define MC2FMU_RESTRICT __restrict
#else
#define MC2FMU_RESTRICT
#endif

#define MC2FMU_NQ2 (MC2FMU_NQ * MC2FMU_NQ)
#define MC2FMU_P (1 + MC2FMU_NQ + MC2FMU_NQ2) /* packed value, Jacobian row, Hessian block */
#define MC2FMU_NE (2 * MC2FMU_NQ + MC2FMU_NU) /* envelope channels: q, qd, u */
#define MC2FMU_NU1 (MC2FMU_NU > 0 ? MC2FMU_NU : 1)
#define MC2FMU_GRID_TOL 1e-6 /* a communication point within 1e-6 dt of a grid point is that point */
/* the most grid steps one doStep may take (about 15 s of CPU at 1.5 us a step): a larger
   communication step is an error that says so, never a hang */
#define MC2FMU_MAX_GRID_STEPS 10000000.0

/* statuses, numerically equal in FMI 2 and FMI 3 */
enum { MC2FMU_OK = 0, MC2FMU_WARNING = 1, MC2FMU_DISCARD = 2, MC2FMU_ERROR = 3, MC2FMU_FATAL = 4 };
enum { MC2FMU_CS = 0, MC2FMU_ME = 1 };
enum { MC2FMU_INSTANTIATED = 0, MC2FMU_INITIALIZATION = 1, MC2FMU_RUNNING = 2, MC2FMU_TERMINATED = 3 };

/* ------------------------------------------------------------------ the decoder */

typedef double mc2fmu_layer_buf[MC2FMU_P][MC2FMU_WMAX];
typedef double (*mc2fmu_rows)[MC2FMU_WMAX];

static void mc2fmu_features(const double *q, mc2fmu_rows Z, int np) {
    int f = 0, i, p, k;
    for (p = 0; p < np; p++)
        for (k = 0; k < MC2FMU_NF; k++) Z[p][k] = 0.0;
    for (i = 0; i < MC2FMU_NQ; i++) {
        if (mc2fmu_angle[i]) {
            const double c = cos(q[i]), s = sin(q[i]);
            Z[0][f] = c;
            Z[0][f + 1] = s;
            if (np > 1) {
                Z[1 + i][f] = -s;
                Z[1 + i][f + 1] = c;
                Z[1 + MC2FMU_NQ + i * MC2FMU_NQ + i][f] = -c;
                Z[1 + MC2FMU_NQ + i * MC2FMU_NQ + i][f + 1] = -s;
            }
            f += 2;
        } else {
            Z[0][f] = (q[i] - mc2fmu_q_mean[i]) / mc2fmu_q_scale[i];
            if (np > 1) Z[1 + i][f] = 1.0 / mc2fmu_q_scale[i];
            f += 1;
        }
    }
}

/* out[p] = W in[p] (+ b for the value row), for the packed rows p < np.  W is stored
   transposed (n_in x n_out); a tile of 4 outputs x np rows is accumulated in registers
   over the inputs (independent sums, vectorisable; each sum runs over i in order). */
#if defined(__GNUC__) || defined(__clang__)
#define MC2FMU_INLINE static inline __attribute__((always_inline))
#else
#define MC2FMU_INLINE static inline
#endif

MC2FMU_INLINE void mc2fmu_affine_np(int l, mc2fmu_rows in, mc2fmu_rows out, int np) {
    const int ni = mc2fmu_layer_in[l], no = mc2fmu_layer_out[l];
    const double *MC2FMU_RESTRICT WT = mc2fmu_WT[l], *MC2FMU_RESTRICT b = mc2fmu_b[l];
    int p, i, o, r;
    for (o = 0; o + 4 <= no; o += 4) {
        double acc[MC2FMU_P][4];
        for (p = 0; p < np; p++)
            for (r = 0; r < 4; r++) acc[p][r] = 0.0;
        for (i = 0; i < ni; i++) {
            const double *MC2FMU_RESTRICT w = WT + (size_t)i * no + o;
            for (p = 0; p < np; p++) {
                const double z = in[p][i];
                for (r = 0; r < 4; r++) acc[p][r] += w[r] * z;
            }
        }
        for (p = 0; p < np; p++)
            for (r = 0; r < 4; r++) out[p][o + r] = acc[p][r];
        for (r = 0; r < 4; r++) out[0][o + r] += b[o + r];
    }
    for (; o < no; o++) {
        for (p = 0; p < np; p++) {
            double s = 0.0;
            for (i = 0; i < ni; i++) s += WT[(size_t)i * no + o] * in[p][i];
            out[p][o] = s;
        }
        out[0][o] += b[o];
    }
}

/* np a compile-time constant in each branch: the tile's loops unroll at -O2 as at -O3 */
static void mc2fmu_affine(int l, mc2fmu_rows in, mc2fmu_rows out, int np) {
    if (np == MC2FMU_P) mc2fmu_affine_np(l, in, out, MC2FMU_P);
    else if (np == 1) mc2fmu_affine_np(l, in, out, 1);
    else mc2fmu_affine_np(l, in, out, np);
}

static void mc2fmu_activate(int l, mc2fmu_rows Z, int np) {
    const int no = mc2fmu_layer_out[l];
    int o, j, k;
    for (o = 0; o < no; o++) {
        const double a = Z[0][o];
        double f, d1, d2;
#if MC2FMU_ACTIVATION == 0 /* tanh */
        const double t = tanh(a);
        f = t;
        d1 = 1.0 - t * t;
        d2 = -2.0 * t * (1.0 - t * t);
#elif MC2FMU_ACTIVATION == 1 /* sigmoid */
        const double s = 1.0 / (1.0 + exp(-a));
        f = s;
        d1 = s * (1.0 - s);
        d2 = s * (1.0 - s) * (1.0 - 2.0 * s);
#else /* softplus (torch: beta 1, threshold 20) */
        const double s = 1.0 / (1.0 + exp(-a));
        f = a > 20.0 ? a : log1p(exp(a));
        d1 = s;
        d2 = s * (1.0 - s);
#endif
        if (np > 1) {
            for (j = 0; j < MC2FMU_NQ; j++)
                for (k = 0; k < MC2FMU_NQ; k++) {
                    double *h = &Z[1 + MC2FMU_NQ + j * MC2FMU_NQ + k][o];
                    *h = d2 * Z[1 + j][o] * Z[1 + k][o] + d1 * *h;
                }
            for (j = 0; j < MC2FMU_NQ; j++) Z[1 + j][o] = d1 * Z[1 + j][o];
        }
        Z[0][o] = f;
    }
}

/* the decoder's hidden layers, packed rows: np = 1 value only, np = MC2FMU_P with J and H;
   returns the buffer (A or B) that holds the last hidden activation h (the features if the
   network has one layer) */
static mc2fmu_rows mc2fmu_hidden(const double *q, mc2fmu_rows A, mc2fmu_rows B, int np) {
    mc2fmu_rows cur = A, nxt = B, tmp;
    int l;
    mc2fmu_features(q, cur, np);
    for (l = 0; l < MC2FMU_NL - 1; l++) {
        mc2fmu_affine(l, cur, nxt, np);
        mc2fmu_activate(l, nxt, np);
        tmp = cur; cur = nxt; nxt = tmp;
    }
    return cur;
}

/* the decoder's network, packed rows; returns the buffer (A or B) that holds the output layer */
static mc2fmu_rows mc2fmu_network(const double *q, mc2fmu_rows A, mc2fmu_rows B, int np) {
    mc2fmu_rows cur = mc2fmu_hidden(q, A, B, np);
    mc2fmu_rows nxt = cur == A ? B : A;
    mc2fmu_affine(MC2FMU_NL - 1, cur, nxt, np);
    return nxt;
}

/* x = h_d(q), the value alone (the poses' decoder) */
static void mc2fmu_decode(const double *q, double *x) {
    double A[1][MC2FMU_WMAX], B[1][MC2FMU_WMAX];
    mc2fmu_rows y = mc2fmu_network(q, A, B, 1);
    int n;
    for (n = 0; n < MC2FMU_NX; n++) x[n] = mc2fmu_x_mean[n] + mc2fmu_x_scale[n] * y[0][n];
}

/* ------------------------------------------------------------------ the reduced dynamics

   The output layer is folded into the dynamics (exact algebra, different rounding): with
   x = x_mean + S (W_L h + b_L), J = S W_L Jh, H = S W_L Hh and the export's float64
   A = W_L^T S M S W_L, g = W_L^T S f_g, B = W_L^T S f_B, C_i = W_L^T S f_C[i] S W_L,
   c_i = W_L^T S f_C[i] (x_mean + S b_L):
     M_m = Jh^T A Jh,  f_m = Jh^T (g + B u + sum_i u_i (C_i h + c_i)),  J^T M (H : v v) = (A Jh)^T (Hh : v v),
   so a step never forms the NX-dimensional output; x (value only) is formed for the poses.
   Spring s (if MC2FMU_NS > 0) spans d_s = D_s x + e_s = P_s h + p_s with P_s = D_s S W_L and
   p_s = D_s (x_mean + S b_L) + e_s; with l = |d_s|, n = d_s / l and sg_s = Jh^T P_s^T n:
     ldot = sg_s . v,  T = k (l - L0) + c ldot,  J^T f_spring = -sum_s sg_s T. */

typedef struct {
    double AJ[MC2FMU_NQ][MC2FMU_NH];            /* A Jh, by column of Jh */
    double Mm[MC2FMU_NQ2];                      /* Jh^T A Jh */
    double fm[MC2FMU_NQ];                       /* J^T f */
#if MC2FMU_NS > 0
    double sg[MC2FMU_NS][MC2FMU_NQ];            /* spring s: Jh^T P_s^T n_s, so ldot_s = sg_s . v */
    double sk[MC2FMU_NS];                       /* spring s: k_s (l_s - L0_s), the elastic tension */
#endif
#if MC2FMU_NLAW > 0
    double sl[MC2FMU_NS];                       /* spring s: its length l_s */
    double sgl[MC2FMU_NS];                      /* spring s: its learned elastic tension g(l_s) (law springs) */
#endif
#if MC2FMU_NT > 0
    double u[MC2FMU_NU1];                       /* the input the identified terms see */
#endif
    double x[MC2FMU_NX];                        /* the decoded point, if x_valid */
    double q[MC2FMU_NQ];                        /* where h, Jh, Hh, AJ, Mm (sg, sk) were evaluated */
    int valid;                                  /* ... if set */
    int x_valid;
    int zb;                                     /* h, Jh, Hh (packed rows) are in bufB if set, else bufA */
    mc2fmu_layer_buf bufA, bufB;                /* scratch of the network */
} mc2fmu_terms;

static mc2fmu_rows mc2fmu_terms_rows(mc2fmu_terms *T) {
    return T->zb ? T->bufB : T->bufA;
}

#if MC2FMU_NLAW > 0
/* a recorded spring's learned law (mc2fmu/reduced/spring_laws.py): an MLP n_in -> H1 -> H2 -> 1
   with tanh, its parameters packed W0 (H1 x n_in), b0, W1 (H2 x H1), b1, W2 (1 x H2), b2 */
static double mc2fmu_law_net(const double *p, int n_in, const double *in) {
    double h1[MC2FMU_LAW_H1], h2[MC2FMU_LAW_H2], acc;
    const double *W0 = p, *b0 = W0 + MC2FMU_LAW_H1 * n_in, *W1 = b0 + MC2FMU_LAW_H1;
    const double *b1 = W1 + MC2FMU_LAW_H2 * MC2FMU_LAW_H1, *W2 = b1 + MC2FMU_LAW_H2, *b2 = W2 + MC2FMU_LAW_H2;
    int i, j;
    for (i = 0; i < MC2FMU_LAW_H1; i++) {
        acc = 0.0;
        for (j = 0; j < n_in; j++) acc += in[j] * W0[i * n_in + j];
        h1[i] = tanh(acc + b0[i]);
    }
    for (i = 0; i < MC2FMU_LAW_H2; i++) {
        acc = 0.0;
        for (j = 0; j < MC2FMU_LAW_H1; j++) acc += h1[j] * W1[i * MC2FMU_LAW_H1 + j];
        h2[i] = tanh(acc + b1[i]);
    }
    acc = 0.0;
    for (j = 0; j < MC2FMU_LAW_H2; j++) acc += h2[j] * W2[j];
    return acc + b2[0];
}

/* law k's elastic tension g(l) and learned damping coefficient h(l, ldot) - c, h >= 0 (softplus,
   torch's threshold 20; c the mechanism file's damping) */
static double mc2fmu_law_elastic(int k, double l) {
    const double *nm = mc2fmu_law_norm + 5 * k;
    const double z = (l - nm[0]) / nm[1];
    return mc2fmu_law_net(mc2fmu_law_g + (size_t)k * MC2FMU_LAW_G_SIZE, 1, &z) * nm[3];
}

static double mc2fmu_law_damping(int k, double l, double ldot) {
    const double *nm = mc2fmu_law_norm + 5 * k;
    double in[3], a;
    in[0] = (l - nm[0]) / nm[1];
    in[1] = ldot / nm[2];
    in[2] = fabs(in[1]);
    a = mc2fmu_law_net(mc2fmu_law_h + (size_t)k * MC2FMU_LAW_H_SIZE, 3, in);
    return (a > 20.0 ? a : log1p(exp(a))) * (nm[3] / nm[2]) - nm[4]; /* the learned part: h - c */
}
#endif

#if MC2FMU_NS > 0
/* the springs' velocity-independent part at h, Jh (the packed rows Z): sg_s and k_s (l_s - L0_s) */
static void mc2fmu_eval_springs(mc2fmu_rows Z, mc2fmu_terms *T) {
    double d[3], w[MC2FMU_NH], l;
    int s, i, n, j;
    for (s = 0; s < MC2FMU_NS; s++) {
        const double *MC2FMU_RESTRICT P = mc2fmu_P_h + (size_t)s * 3 * MC2FMU_NH;
        for (i = 0; i < 3; i++) {
            double acc = 0.0;
            for (n = 0; n < MC2FMU_NH; n++) acc += P[i * MC2FMU_NH + n] * Z[0][n];
            d[i] = acc + mc2fmu_p_h[3 * s + i];
        }
        l = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
        for (i = 0; i < 3; i++) d[i] /= l; /* now n */
        for (n = 0; n < MC2FMU_NH; n++) w[n] = P[n] * d[0] + P[MC2FMU_NH + n] * d[1] + P[2 * MC2FMU_NH + n] * d[2];
        for (j = 0; j < MC2FMU_NQ; j++) {
            double acc = 0.0;
            for (n = 0; n < MC2FMU_NH; n++) acc += Z[1 + j][n] * w[n];
            T->sg[s][j] = acc;
        }
        T->sk[s] = mc2fmu_spring_k[s] * (l - mc2fmu_spring_L0[s]);
#if MC2FMU_NLAW > 0
        T->sl[s] = l;
        T->sgl[s] = mc2fmu_law_of_spring[s] >= 0 ? mc2fmu_law_elastic(mc2fmu_law_of_spring[s], l) : 0.0;
#endif
    }
}
#endif

/* h, Jh, Hh, A Jh and M_m (and the springs' geometry) at q: the decoder's geometry, cached by
   the value of q (the output poses at a grid point and the next step's terms share one decoder
   evaluation) */
static void mc2fmu_eval_geometry(const double *q, mc2fmu_terms *T) {
    int n, m, j, k;
    mc2fmu_rows Z;
    if (T->valid && memcmp(T->q, q, sizeof T->q) == 0) return;
    Z = mc2fmu_hidden(q, T->bufA, T->bufB, MC2FMU_P);
    T->zb = Z == T->bufB;
    /* A Jh: the rows of A (symmetric) accumulated over m in order */
    for (j = 0; j < MC2FMU_NQ; j++) {
        double *MC2FMU_RESTRICT aj = T->AJ[j];
        for (n = 0; n < MC2FMU_NH; n++) aj[n] = 0.0;
        for (m = 0; m < MC2FMU_NH; m++) {
            const double z = Z[1 + j][m];
            const double *MC2FMU_RESTRICT a = mc2fmu_A_h + (size_t)m * MC2FMU_NH;
            for (n = 0; n < MC2FMU_NH; n++) aj[n] += a[n] * z;
        }
    }
    /* M_m = Jh^T (A Jh): the lower triangle, mirrored (exactly symmetric) */
    for (j = 0; j < MC2FMU_NQ; j++)
        for (k = 0; k <= j; k++) {
            double s = 0.0;
            for (n = 0; n < MC2FMU_NH; n++) s += Z[1 + j][n] * T->AJ[k][n];
            T->Mm[j * MC2FMU_NQ + k] = s;
            T->Mm[k * MC2FMU_NQ + j] = s;
        }
#if MC2FMU_NS > 0
    mc2fmu_eval_springs(Z, T);
#endif
    memcpy(T->q, q, sizeof T->q);
    T->valid = 1;
    T->x_valid = 0;
}

/* x at the cached geometry's q (value only): the output layer applied to h */
static const double *mc2fmu_terms_x(mc2fmu_terms *T) {
    if (!T->x_valid) {
        double y[1][MC2FMU_WMAX];
        int n;
        mc2fmu_affine(MC2FMU_NL - 1, mc2fmu_terms_rows(T), y, 1);
        for (n = 0; n < MC2FMU_NX; n++) T->x[n] = mc2fmu_x_mean[n] + mc2fmu_x_scale[n] * y[0][n];
        T->x_valid = 1;
    }
    return T->x;
}

/* everything at q and u that does not depend on the velocity */
static void mc2fmu_eval_terms(const double *q, const double *u, mc2fmu_terms *T) {
    double y[MC2FMU_NH], t[MC2FMU_NH];
    int n, m, j, k;
    mc2fmu_rows Z;
    mc2fmu_eval_geometry(q, T);
    Z = mc2fmu_terms_rows(T);
    /* y = g + B u + sum_i u_i (C_i h + c_i), i.e. W_L^T S f */
    for (n = 0; n < MC2FMU_NH; n++) {
        double s = 0.0;
        for (k = 0; k < MC2FMU_NU; k++) s += u[k] * mc2fmu_B_h[n * MC2FMU_NU1 + k];
        y[n] = mc2fmu_g_h[n] + s;
    }
    for (k = 0; k < MC2FMU_NU; k++) {
        const double *MC2FMU_RESTRICT CT = mc2fmu_CT_h + (size_t)k * MC2FMU_NH * MC2FMU_NH;
        const double *MC2FMU_RESTRICT c = mc2fmu_c_h + (size_t)k * MC2FMU_NH;
        if (!mc2fmu_C_used[k]) continue;
        for (n = 0; n < MC2FMU_NH; n++) t[n] = 0.0;
        for (m = 0; m < MC2FMU_NH; m++) {
            const double hm = Z[0][m];
            const double *MC2FMU_RESTRICT r = CT + (size_t)m * MC2FMU_NH;
            for (n = 0; n < MC2FMU_NH; n++) t[n] += r[n] * hm;
        }
        for (n = 0; n < MC2FMU_NH; n++) y[n] += u[k] * (t[n] + c[n]);
    }
    for (j = 0; j < MC2FMU_NQ; j++) {
        double s = 0.0;
        for (n = 0; n < MC2FMU_NH; n++) s += Z[1 + j][n] * y[n];
        T->fm[j] = s;
    }
#if MC2FMU_NT > 0
    for (k = 0; k < MC2FMU_NU; k++) T->u[k] = u[k];
#endif
}

/* y = A^-1 b, A small SPD: the unrolled Cholesky of mc2fmu.reduced.manifold.cholesky_solve */
static void mc2fmu_cholesky_solve(const double *A, const double *b, double *y) {
    double L[MC2FMU_NQ2], z[MC2FMU_NQ];
    int i, j, k;
    for (j = 0; j < MC2FMU_NQ; j++) {
        double s = A[j * MC2FMU_NQ + j];
        for (k = 0; k < j; k++) s = s - L[j * MC2FMU_NQ + k] * L[j * MC2FMU_NQ + k];
        L[j * MC2FMU_NQ + j] = sqrt(s);
        for (i = j + 1; i < MC2FMU_NQ; i++) {
            s = A[i * MC2FMU_NQ + j];
            for (k = 0; k < j; k++) s = s - L[i * MC2FMU_NQ + k] * L[j * MC2FMU_NQ + k];
            L[i * MC2FMU_NQ + j] = s / L[j * MC2FMU_NQ + j];
        }
    }
    for (i = 0; i < MC2FMU_NQ; i++) {
        double s = b[i];
        for (k = 0; k < i; k++) s = s - L[i * MC2FMU_NQ + k] * z[k];
        z[i] = s / L[i * MC2FMU_NQ + i];
    }
    for (i = MC2FMU_NQ - 1; i >= 0; i--) {
        double s = z[i];
        for (k = i + 1; k < MC2FMU_NQ; k++) s = s - L[k * MC2FMU_NQ + i] * y[k];
        y[i] = s / L[i * MC2FMU_NQ + i];
    }
}

#if MC2FMU_NS > 0
/* fs = J^T f_spring(x, J v) = -sum_s sg_s (k_s (l_s - L0_s) + c_s sg_s . v) */
static void mc2fmu_spring_force(const mc2fmu_terms *T, const double *v, double *fs) {
    int s, j;
    for (j = 0; j < MC2FMU_NQ; j++) fs[j] = 0.0;
    for (s = 0; s < MC2FMU_NS; s++) {
        double ldot = 0.0, tension;
        for (j = 0; j < MC2FMU_NQ; j++) ldot += T->sg[s][j] * v[j];
        tension = T->sk[s] + mc2fmu_spring_c[s] * ldot;
#if MC2FMU_NLAW > 0
        if (mc2fmu_law_of_spring[s] >= 0) /* the learned law, added as numpy adds it */
            tension = tension + (T->sgl[s] + ldot * mc2fmu_law_damping(mc2fmu_law_of_spring[s], T->sl[s], ldot));
#endif
        for (j = 0; j < MC2FMU_NQ; j++) fs[j] -= T->sg[s][j] * tension;
    }
}
#endif

#if MC2FMU_NT > 0
/* rhs += Xi^T lambda(q, v, u): term t is the product of its factors (codes of
   mc2fmu/reduced/terms.py: 0 one, 1 q_i, 2 sin q_i, 3 cos q_i, 4 v_i, 5 tanh(v_i / p), 6 u_i),
   multiplied in the order numpy multiplies them */
static void mc2fmu_identified(const double *q, const double *v, const double *u, double *rhs) {
    double f[MC2FMU_NQ];
    int t, s, j;
    for (j = 0; j < MC2FMU_NQ; j++) f[j] = 0.0;
    for (t = 0; t < MC2FMU_NT; t++) {
        double lam = 1.0;
        for (s = 0; s < 3; s++) {
            const int i = mc2fmu_lib_index[3 * t + s];
            switch (mc2fmu_lib_kind[3 * t + s]) {
            case 1: lam *= q[i]; break;
            case 2: lam *= sin(q[i]); break;
            case 3: lam *= cos(q[i]); break;
            case 4: lam *= v[i]; break;
            case 5: lam *= tanh(v[i] / mc2fmu_lib_param[3 * t + s]); break;
            case 6: lam *= u[i]; break;
            default: break;
            }
        }
        for (j = 0; j < MC2FMU_NQ; j++) f[j] += lam * mc2fmu_lib_xi[t * MC2FMU_NQ + j];
    }
    for (j = 0; j < MC2FMU_NQ; j++) rhs[j] += f[j];
}
#endif

/* qdd = M_m^-1 (f_m - J^T M (H : v v) + J^T f_spring(x, J v) + Xi^T lambda), J^T M (H : v v) = (A Jh)^T (Hh : v v) */
static void mc2fmu_acceleration(mc2fmu_terms *T, const double *v, double *a) {
    double vv[MC2FMU_NQ2], hv[MC2FMU_NH], rhs[MC2FMU_NQ];
    mc2fmu_rows Z = mc2fmu_terms_rows(T);
    int n, j, k;
    for (j = 0; j < MC2FMU_NQ; j++)
        for (k = 0; k < MC2FMU_NQ; k++) vv[j * MC2FMU_NQ + k] = v[j] * v[k];
    for (n = 0; n < MC2FMU_NH; n++) hv[n] = 0.0;
    for (k = 0; k < MC2FMU_NQ2; k++) {
        const double w = vv[k];
        const double *MC2FMU_RESTRICT hk = Z[1 + MC2FMU_NQ + k];
        for (n = 0; n < MC2FMU_NH; n++) hv[n] += hk[n] * w;
    }
    for (j = 0; j < MC2FMU_NQ; j++) {
        double s = 0.0;
        for (n = 0; n < MC2FMU_NH; n++) s += T->AJ[j][n] * hv[n];
        rhs[j] = T->fm[j] - s;
    }
#if MC2FMU_NS > 0
    {
        double fs[MC2FMU_NQ];
        mc2fmu_spring_force(T, v, fs);
        for (j = 0; j < MC2FMU_NQ; j++) rhs[j] += fs[j];
    }
#endif
#if MC2FMU_NT > 0
    mc2fmu_identified(T->q, v, T->u, rhs);
#endif
    mc2fmu_cholesky_solve(T->Mm, rhs, a);
}

/* the one-step map: q_{i+1} from q_{i-1}, q_i (T evaluated at q_i, u_i) */
static void mc2fmu_step_map(mc2fmu_terms *T, const double *q_prev, const double *q, double dt, double *q_next) {
    double base[MC2FMU_NQ], v[MC2FMU_NQ], a[MC2FMU_NQ];
    int i;
    for (i = 0; i < MC2FMU_NQ; i++) {
        base[i] = 2.0 * q[i] - q_prev[i];
        v[i] = (q[i] - q_prev[i]) / dt;
    }
    mc2fmu_acceleration(T, v, a);
    if (MC2FMU_STEP_CENTRED) {
        for (i = 0; i < MC2FMU_NQ; i++) {
            const double q_pred = base[i] + dt * dt * a[i];
            v[i] = (q_pred - q_prev[i]) / (2.0 * dt);
        }
        mc2fmu_acceleration(T, v, a);
    }
    for (i = 0; i < MC2FMU_NQ; i++) q_next[i] = base[i] + dt * dt * a[i];
}

/* ------------------------------------------------------------------ poses and envelope */

/* the orthogonal polar factor of D (row-major 3x3, det > 0): Newton's iteration
   R <- (R + R^-T) / 2, quadratically convergent; near a rotation 3-4 iterations reach
   machine precision */
static void mc2fmu_polar(const double *D, double *R) {
    double X[9], C[9];
    int it, i;
    memcpy(X, D, sizeof X);
    for (it = 0; it < 60; it++) {
        double det, diff = 0.0;
        /* cofactor matrix: X^-T = C / det */
        C[0] = X[4] * X[8] - X[5] * X[7];
        C[1] = X[5] * X[6] - X[3] * X[8];
        C[2] = X[3] * X[7] - X[4] * X[6];
        C[3] = X[2] * X[7] - X[1] * X[8];
        C[4] = X[0] * X[8] - X[2] * X[6];
        C[5] = X[1] * X[6] - X[0] * X[7];
        C[6] = X[1] * X[5] - X[2] * X[4];
        C[7] = X[2] * X[3] - X[0] * X[5];
        C[8] = X[0] * X[4] - X[1] * X[3];
        det = X[0] * C[0] + X[1] * C[1] + X[2] * C[2];
        if (!(det != 0.0) || !isfinite(det)) break;
        for (i = 0; i < 9; i++) {
            const double y = 0.5 * (X[i] + C[i] / det);
            diff = fmax(diff, fabs(y - X[i]));
            X[i] = y;
        }
        if (diff <= 1e-15) break; /* the last update was at rounding level: converged */
    }
    memcpy(R, X, sizeof X);
}

/* unit quaternion (w, x, y, z), w >= 0, of a rotation matrix (Shepperd's method) */
static void mc2fmu_quaternion(const double *R, double *qt) {
    const double tr = R[0] + R[4] + R[8];
    double c[4], s, nrm;
    int k = 0, i;
    c[0] = tr; c[1] = R[0]; c[2] = R[4]; c[3] = R[8];
    for (i = 1; i < 4; i++)
        if (c[i] > c[k]) k = i; /* first maximum, as numpy's argmax */
    if (k == 0) {
        s = 2.0 * sqrt(1.0 + tr);
        qt[0] = 0.25 * s; qt[1] = (R[7] - R[5]) / s; qt[2] = (R[2] - R[6]) / s; qt[3] = (R[3] - R[1]) / s;
    } else if (k == 1) {
        s = 2.0 * sqrt(1.0 + R[0] - R[4] - R[8]);
        qt[0] = (R[7] - R[5]) / s; qt[1] = 0.25 * s; qt[2] = (R[1] + R[3]) / s; qt[3] = (R[2] + R[6]) / s;
    } else if (k == 2) {
        s = 2.0 * sqrt(1.0 + R[4] - R[0] - R[8]);
        qt[0] = (R[2] - R[6]) / s; qt[1] = (R[1] + R[3]) / s; qt[2] = 0.25 * s; qt[3] = (R[5] + R[7]) / s;
    } else {
        s = 2.0 * sqrt(1.0 + R[8] - R[0] - R[4]);
        qt[0] = (R[3] - R[1]) / s; qt[1] = (R[2] + R[6]) / s; qt[2] = (R[5] + R[7]) / s; qt[3] = 0.25 * s;
    }
    nrm = sqrt(qt[0] * qt[0] + qt[1] * qt[1] + qt[2] * qt[2] + qt[3] * qt[3]);
    for (i = 0; i < 4; i++) qt[i] /= nrm;
    if (qt[0] < 0)
        for (i = 0; i < 4; i++) qt[i] = -qt[i];
}

/* body poses (origin x y z, quaternion w x y z per body) from decoded natural coordinates */
static void mc2fmu_poses(const double *x, double *pose) {
    int b, i, k;
    for (b = 0; b < MC2FMU_NB; b++) {
        const double *p = x + mc2fmu_body_offset[b];
        const double L = mc2fmu_body_length[b], *com = mc2fmu_body_com + 3 * b;
        double D[9], R[9];
        for (i = 0; i < 3; i++)     /* row i: component i */
            for (k = 0; k < 3; k++) /* column k: point k+1 */
                D[3 * i + k] = (p[3 * (k + 1) + i] - p[i]) / L;
        mc2fmu_polar(D, R);
        for (i = 0; i < 3; i++)
            pose[7 * b + i] = p[i] - (R[3 * i] * com[0] + R[3 * i + 1] * com[1] + R[3 * i + 2] * com[2]);
        mc2fmu_quaternion(R, pose + 7 * b + 3);
    }
}

/* normalised distance outside the training envelope (0 inside; inf for a non-finite value) */
static double mc2fmu_envelope_distance(const double *q, const double *qd, const double *u) {
    double v[MC2FMU_NE], out = 0.0;
    int c;
    for (c = 0; c < MC2FMU_NQ; c++) { v[c] = q[c]; v[MC2FMU_NQ + c] = qd[c]; }
    for (c = 0; c < MC2FMU_NU; c++) v[2 * MC2FMU_NQ + c] = u[c];
    for (c = 0; c < MC2FMU_NE; c++)
        if (!isfinite(v[c])) return INFINITY;
    for (c = 0; c < MC2FMU_NE; c++) {
        const double lo = mc2fmu_env_lo[c], hi = mc2fmu_env_hi[c];
        double span, ex;
        if (!(isfinite(lo) && isfinite(hi))) continue;
        span = fmax(hi - lo, 1e-12 * fmax(fabs(hi), 1.0));
        ex = fmax(fmax(lo - v[c], v[c] - hi), 0.0) / span;
        if (ex > out) out = ex;
    }
    return out;
}

/* ------------------------------------------------------------------ the runtime */

#define MC2FMU_MESSAGE 240

/* everything an FMU state holds: plain old data, copied and serialised as bytes */
typedef struct {
    double t0, time;
    int64_t k;                          /* grid index of the newest state (co-simulation) */
    double hist[3][MC2FMU_NQ];          /* q_{k-2}, q_{k-1}, q_k */
    double u[MC2FMU_NU1];
    double q_start[MC2FMU_NQ], qd_start[MC2FMU_NQ];
    double q_out[MC2FMU_NQ], qd_out[MC2FMU_NQ]; /* co-simulation outputs at the communication time */
    double xs[2 * MC2FMU_NQ];           /* model exchange: the continuous states q, qd */
    double envelope;
    int32_t phase, warned, failed, pad;
    char failure[MC2FMU_MESSAGE];
} mc2fmu_state;

typedef struct mc2fmu_core mc2fmu_core;
typedef void (*mc2fmu_log_fn)(mc2fmu_core *c, int status, const char *category, const char *message);

struct mc2fmu_core {
    mc2fmu_state s;
    int interface;
    mc2fmu_log_fn log;
    void *glue;                         /* the FMI glue's instance data (callbacks, name) */
    int pose_valid;
    double pose[7 * MC2FMU_NB];
    mc2fmu_terms T;
};

static void mc2fmu_logf(mc2fmu_core *c, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void mc2fmu_logf(mc2fmu_core *c, int status, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    const char *cat = status == MC2FMU_WARNING ? "logStatusWarning"
                      : status == MC2FMU_ERROR ? "logStatusError"
                      : status == MC2FMU_FATAL ? "logStatusFatal" : "logAll";
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (c->log) c->log(c, status, cat, buf);
}

/* log an error and remember it: an FMU that failed refuses to step on */
static int mc2fmu_fail(mc2fmu_core *c, const char *message) {
    c->s.failed = 1;
    snprintf(c->s.failure, sizeof c->s.failure, "%s", message);
    mc2fmu_logf(c, MC2FMU_ERROR, "mc2fmu: %s", message);
    return MC2FMU_ERROR;
}

static const char *mc2fmu_repr(double v, char *buf, size_t n) {
    if (isnan(v)) snprintf(buf, n, "nan");
    else if (isinf(v)) snprintf(buf, n, v > 0 ? "inf" : "-inf");
    else snprintf(buf, n, "%.17g", v);
    return buf;
}

static void mc2fmu_reset(mc2fmu_core *c) {
    int i, v;
    memset(&c->s, 0, sizeof c->s);
    for (i = 0; i < 3; i++)
        for (v = 0; v < MC2FMU_NQ; v++) c->s.hist[i][v] = NAN;
    for (v = 0; v < MC2FMU_NV; v++) {
        const mc2fmu_variable *var = &mc2fmu_variables[v];
        if (var->role == MC2FMU_ROLE_INPUT) c->s.u[var->index] = var->start;
        else if (var->role == MC2FMU_ROLE_Q_START) c->s.q_start[var->index] = var->start;
        else if (var->role == MC2FMU_ROLE_QD_START) c->s.qd_start[var->index] = var->start;
    }
    c->s.phase = MC2FMU_INSTANTIATED;
    c->pose_valid = 0;
}

static int mc2fmu_running(const mc2fmu_core *c) {
    return c->s.phase == MC2FMU_RUNNING || c->s.phase == MC2FMU_TERMINATED;
}

/* the current q and qd: the start values before initialisation is over, then the
   co-simulation outputs or the model-exchange states */
static const double *mc2fmu_cur_q(const mc2fmu_core *c) {
    if (!mc2fmu_running(c)) return c->s.q_start;
    return c->interface == MC2FMU_ME ? c->s.xs : c->s.q_out;
}

static const double *mc2fmu_cur_qd(const mc2fmu_core *c) {
    if (!mc2fmu_running(c)) return c->s.qd_start;
    return c->interface == MC2FMU_ME ? c->s.xs + MC2FMU_NQ : c->s.qd_out;
}

static void mc2fmu_check_envelope(mc2fmu_core *c, double t) {
    if (c->s.envelope > MC2FMU_LEAVE_THRESHOLD && !c->s.warned) {
        c->s.warned = 1;
        mc2fmu_logf(c, MC2FMU_WARNING,
                    "mc2fmu: the model left its training envelope at t = %.6g s (distance %.3g); "
                    "results beyond this point are extrapolation", t, c->s.envelope);
    }
}

/* co-simulation: q and qd at time t in (t_{k-1}, t_k], the quadratic through the last three
   grid states; then the envelope (poses are decoded lazily, when an output asks for them) */
static void mc2fmu_outputs(mc2fmu_core *c, double t) {
    const double dt = MC2FMU_DT;
    double s = (t - (c->s.t0 + (double)c->s.k * dt)) / dt;
    int i;
    if (fabs(s) < MC2FMU_GRID_TOL) s = 0.0;
    for (i = 0; i < MC2FMU_NQ; i++) {
        if (c->s.k == 0) {
            c->s.q_out[i] = c->s.hist[2][i];
            c->s.qd_out[i] = c->s.qd_start[i];
        } else {
            const double q0 = c->s.hist[2][i], q1 = c->s.hist[1][i], q2 = c->s.hist[0][i];
            c->s.q_out[i] = q0 * (s + 1.0) * (s + 2.0) / 2.0 - q1 * s * (s + 2.0) + q2 * s * (s + 1.0) / 2.0;
            c->s.qd_out[i] = (q0 * (2.0 * s + 3.0) / 2.0 - q1 * (2.0 * s + 2.0) + q2 * (2.0 * s + 1.0) / 2.0) / dt;
        }
    }
    c->pose_valid = 0;
    c->s.envelope = mc2fmu_envelope_distance(c->s.q_out, c->s.qd_out, c->s.u);
    mc2fmu_check_envelope(c, t);
}

static void mc2fmu_rhs(mc2fmu_core *c, const double *q, const double *qd, double *qdd) {
    mc2fmu_eval_terms(q, c->s.u, &c->T);
    mc2fmu_acceleration(&c->T, qd, qdd);
}

/* the start time, set by FMI 2 setupExperiment or FMI 3 enterInitializationMode: only on a
   fresh (or reset) instance, and finite; ``refusal`` is the caller's message for a wrong phase */
static int mc2fmu_set_start(mc2fmu_core *c, double start_time, const char *refusal) {
    char msg[MC2FMU_MESSAGE], b[40];
    if (c->s.phase != MC2FMU_INSTANTIATED) return mc2fmu_fail(c, refusal);
    if (!isfinite(start_time)) {
        snprintf(msg, sizeof msg, "start time %s refused: it must be finite", mc2fmu_repr(start_time, b, sizeof b));
        return mc2fmu_fail(c, msg);
    }
    c->s.t0 = start_time;
    c->s.time = start_time;
    return MC2FMU_OK;
}

static int mc2fmu_enter_initialization(mc2fmu_core *c, double start_time) {
    if (mc2fmu_set_start(c, start_time,
                         "enterInitializationMode refused: the FMU is not freshly instantiated (reset it first)"))
        return MC2FMU_ERROR;
    c->s.phase = MC2FMU_INITIALIZATION;
    c->pose_valid = 0;
    return MC2FMU_OK;
}

/* the grid history at k = 0: q_{-1} by a Taylor step backwards from (q_start, qd_start) with
   the current input.  Set at initialisation and again right before the first grid step, so
   the first step uses the input set before it is taken, whether the host set it before or
   after initialisation (as `mc2fmu simulate`: u_0 for both) */
static void mc2fmu_prime(mc2fmu_core *c) {
    const double dt = MC2FMU_DT;
    double a[MC2FMU_NQ];
    int i;
    mc2fmu_rhs(c, c->s.q_start, c->s.qd_start, a);
    for (i = 0; i < MC2FMU_NQ; i++) {
        const double q0 = c->s.q_start[i], qd0 = c->s.qd_start[i];
        c->s.hist[0][i] = NAN;
        c->s.hist[1][i] = q0 - dt * qd0 + 0.5 * dt * dt * a[i];
        c->s.hist[2][i] = q0;
    }
}

static int mc2fmu_exit_initialization(mc2fmu_core *c) {
    int i;
    if (c->s.failed) return mc2fmu_fail(c, "initialisation refused: the FMU failed earlier; re-instantiate it");
    if (c->s.phase != MC2FMU_INITIALIZATION)
        return mc2fmu_fail(c, "exitInitializationMode refused: enterInitializationMode was not called");
    c->s.phase = MC2FMU_RUNNING;
    c->s.time = c->s.t0;
    c->pose_valid = 0;
    if (c->interface == MC2FMU_ME) {
        for (i = 0; i < MC2FMU_NQ; i++) {
            c->s.xs[i] = c->s.q_start[i];
            c->s.xs[MC2FMU_NQ + i] = c->s.qd_start[i];
        }
        c->s.envelope = mc2fmu_envelope_distance(c->s.xs, c->s.xs + MC2FMU_NQ, c->s.u);
        mc2fmu_check_envelope(c, c->s.t0);
        return MC2FMU_OK;
    }
    mc2fmu_prime(c);
    c->s.k = 0;
    mc2fmu_outputs(c, c->s.t0);
    return MC2FMU_OK;
}

static int mc2fmu_do_step(mc2fmu_core *c, double current_time, double step_size) {
    char msg[MC2FMU_MESSAGE];
    double target, n, r;
    int64_t k_target;
    int i;
    if (c->s.failed) {
        snprintf(msg, sizeof msg, "the FMU failed earlier (%.150s); re-instantiate it", c->s.failure);
        return mc2fmu_fail(c, msg);
    }
    if (c->s.phase != MC2FMU_RUNNING) return mc2fmu_fail(c, "doStep called outside step mode (initialise the FMU first)");
    if (c->interface != MC2FMU_CS) return mc2fmu_fail(c, "doStep refused: this instance is a model-exchange one");
    if (!(step_size >= 0 && isfinite(step_size))) {
        char b[40];
        snprintf(msg, sizeof msg, "invalid communication step size %s", mc2fmu_repr(step_size, b, sizeof b));
        return mc2fmu_fail(c, msg);
    }
    if (!(fabs(current_time - c->s.time) <= 1e-9 * fmax(1.0, fabs(c->s.time)) + 1e-6 * MC2FMU_DT)) {
        char b[40];
        snprintf(msg, sizeof msg, "doStep from t = %s refused: the FMU is at t = %.17g (a communication step starts "
                 "where the previous one ended)", mc2fmu_repr(current_time, b, sizeof b), c->s.time);
        return mc2fmu_fail(c, msg);
    }
    target = current_time + step_size;
    n = (target - c->s.t0) / MC2FMU_DT;
    r = nearbyint(n);
    if (!(n - (double)c->s.k <= MC2FMU_MAX_GRID_STEPS)) {
        snprintf(msg, sizeof msg, "a communication step of %.6g s would take %.3g internal steps of %g s (at most %.0f "
                 "per doStep); use smaller communication steps", step_size, n - (double)c->s.k, MC2FMU_DT,
                 MC2FMU_MAX_GRID_STEPS);
        return mc2fmu_fail(c, msg);
    }
    k_target = (int64_t)(fabs(n - r) < MC2FMU_GRID_TOL ? r : ceil(n));
    while (c->s.k < k_target) {
        double q_next[MC2FMU_NQ];
        int finite = 1;
        if (c->s.k == 0) mc2fmu_prime(c);
        mc2fmu_eval_terms(c->s.hist[2], c->s.u, &c->T);
        mc2fmu_step_map(&c->T, c->s.hist[1], c->s.hist[2], MC2FMU_DT, q_next);
        for (i = 0; i < MC2FMU_NQ; i++) finite = finite && isfinite(q_next[i]);
        if (!finite) {
            snprintf(msg, sizeof msg,
                     "the reduced model produced a non-finite state at t = %.6g s (envelope distance %.3g); "
                     "the model has left the range it was trained on",
                     c->s.t0 + (double)(c->s.k + 1) * MC2FMU_DT, c->s.envelope);
            return mc2fmu_fail(c, msg);
        }
        for (i = 0; i < MC2FMU_NQ; i++) {
            c->s.hist[0][i] = c->s.hist[1][i];
            c->s.hist[1][i] = c->s.hist[2][i];
            c->s.hist[2][i] = q_next[i];
        }
        c->s.k++;
    }
    c->s.time = target;
    mc2fmu_outputs(c, target);
    return c->s.failed ? MC2FMU_ERROR : MC2FMU_OK;
}

/* model exchange */
static int mc2fmu_set_states(mc2fmu_core *c, const double *x, size_t nx) {
    size_t i;
    char msg[MC2FMU_MESSAGE], b[40];
    if (nx != 2 * MC2FMU_NQ) {
        snprintf(msg, sizeof msg, "%lu continuous states passed, the model has %d", (unsigned long)nx, 2 * MC2FMU_NQ);
        return mc2fmu_fail(c, msg);
    }
    for (i = 0; i < nx; i++)
        if (!isfinite(x[i])) {
            snprintf(msg, sizeof msg, "non-finite continuous state %s = %s at t = %.6g s; the model has left the range "
                     "it was trained on", i < MC2FMU_NQ ? "q" : "qd", mc2fmu_repr(x[i], b, sizeof b), c->s.time);
            return mc2fmu_fail(c, msg);
        }
    memcpy(c->s.xs, x, sizeof c->s.xs);
    c->pose_valid = 0;
    return MC2FMU_OK;
}

static int mc2fmu_derivatives(mc2fmu_core *c, double *dx, size_t nx) {
    double qdd[MC2FMU_NQ];
    char msg[MC2FMU_MESSAGE];
    int i;
    if (nx != 2 * MC2FMU_NQ) {
        snprintf(msg, sizeof msg, "%lu derivatives asked for, the model has %d states", (unsigned long)nx, 2 * MC2FMU_NQ);
        return mc2fmu_fail(c, msg);
    }
    mc2fmu_rhs(c, mc2fmu_cur_q(c), mc2fmu_cur_qd(c), qdd);
    for (i = 0; i < MC2FMU_NQ; i++) {
        if (!isfinite(qdd[i])) {
            snprintf(msg, sizeof msg, "the reduced model produced a non-finite acceleration at t = %.6g s (envelope "
                     "distance %.3g); the model has left the range it was trained on", c->s.time,
                     mc2fmu_envelope_distance(mc2fmu_cur_q(c), mc2fmu_cur_qd(c), c->s.u));
            return mc2fmu_fail(c, msg);
        }
        dx[i] = mc2fmu_cur_qd(c)[i];
        dx[MC2FMU_NQ + i] = qdd[i];
    }
    return MC2FMU_OK;
}

static int mc2fmu_completed_integrator_step(mc2fmu_core *c) {
    c->s.envelope = mc2fmu_envelope_distance(c->s.xs, c->s.xs + MC2FMU_NQ, c->s.u);
    mc2fmu_check_envelope(c, c->s.time);
    return MC2FMU_OK;
}

/* variables */
static int mc2fmu_check_vr(mc2fmu_core *c, unsigned vr) {
    if (vr >= MC2FMU_NV) {
        char msg[MC2FMU_MESSAGE];
        snprintf(msg, sizeof msg, "unknown value reference %u (the model has %d variables)", vr, MC2FMU_NV);
        return mc2fmu_fail(c, msg);
    }
    return MC2FMU_OK;
}

static int mc2fmu_get_real(mc2fmu_core *c, unsigned vr, double *value) {
    const mc2fmu_variable *var;
    if (mc2fmu_check_vr(c, vr)) return MC2FMU_ERROR;
    var = &mc2fmu_variables[vr];
    switch (var->role) {
    case MC2FMU_ROLE_INPUT: *value = c->s.u[var->index]; break;
    case MC2FMU_ROLE_Q_START: *value = c->s.q_start[var->index]; break;
    case MC2FMU_ROLE_QD_START: *value = c->s.qd_start[var->index]; break;
    case MC2FMU_ROLE_Q: *value = mc2fmu_cur_q(c)[var->index]; break;
    case MC2FMU_ROLE_QD: case MC2FMU_ROLE_DER_Q: *value = mc2fmu_cur_qd(c)[var->index]; break;
    case MC2FMU_ROLE_TIME: *value = c->s.time; break;
    case MC2FMU_ROLE_ENVELOPE:
        *value = (c->interface == MC2FMU_CS && mc2fmu_running(c))
                     ? c->s.envelope : mc2fmu_envelope_distance(mc2fmu_cur_q(c), mc2fmu_cur_qd(c), c->s.u);
        break;
    case MC2FMU_ROLE_POSE:
        if (!c->pose_valid) {
            const double *q = mc2fmu_cur_q(c);
            if (c->interface == MC2FMU_CS && mc2fmu_running(c) && memcmp(q, c->s.hist[2], sizeof c->s.hist[2]) == 0) {
                /* at a grid point: the next step evaluates its terms here anyway */
                mc2fmu_eval_geometry(q, &c->T);
                mc2fmu_poses(mc2fmu_terms_x(&c->T), c->pose);
            } else {
                double x[MC2FMU_NX];
                mc2fmu_decode(q, x);
                mc2fmu_poses(x, c->pose);
            }
            c->pose_valid = 1;
        }
        *value = c->pose[var->index];
        break;
    case MC2FMU_ROLE_DER_QD: {
        double qdd[MC2FMU_NQ];
        mc2fmu_rhs(c, mc2fmu_cur_q(c), mc2fmu_cur_qd(c), qdd);
        *value = qdd[var->index];
        break;
    }
    default: *value = NAN;
    }
    return MC2FMU_OK;
}

static int mc2fmu_set_real(mc2fmu_core *c, unsigned vr, double value) {
    const mc2fmu_variable *var;
    char msg[MC2FMU_MESSAGE], b[40];
    if (mc2fmu_check_vr(c, vr)) return MC2FMU_ERROR;
    var = &mc2fmu_variables[vr];
    if (var->role != MC2FMU_ROLE_INPUT && var->role != MC2FMU_ROLE_Q_START && var->role != MC2FMU_ROLE_QD_START) {
        snprintf(msg, sizeof msg, "%s cannot be set: only inputs and parameters can", var->name);
        return mc2fmu_fail(c, msg);
    }
    if (!isfinite(value)) {
        snprintf(msg, sizeof msg, "%s = %s refused: inputs and parameters must be finite", var->name,
                 mc2fmu_repr(value, b, sizeof b));
        return mc2fmu_fail(c, msg);
    }
    if (var->role != MC2FMU_ROLE_INPUT && mc2fmu_running(c)) {
        snprintf(msg, sizeof msg, "%s cannot be changed after initialisation: it is a fixed parameter (set it before "
                 "exitInitializationMode, or reset the FMU)", var->name);
        return mc2fmu_fail(c, msg);
    }
    if (var->role == MC2FMU_ROLE_INPUT) c->s.u[var->index] = value;
    else if (var->role == MC2FMU_ROLE_Q_START) c->s.q_start[var->index] = value;
    else c->s.qd_start[var->index] = value;
    if (!mc2fmu_running(c)) c->pose_valid = 0;
    return MC2FMU_OK;
}

/* FMU state: a copy of mc2fmu_state; serialised as a header and its bytes (same build only).
   The header carries the model's token, the interface and a checksum of the state's bytes;
   on load every field is checked too, so a corrupted or forged blob is refused instead of
   crashing, hanging or stepping on NaN. */
typedef struct {
    char magic[8];
    uint32_t format, size;
    uint64_t token;
    uint32_t interface, pad;
    uint64_t checksum;
} mc2fmu_blob_header;

static uint64_t mc2fmu_fnv(uint64_t h, const unsigned char *p, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) { h ^= p[i]; h *= 1099511628211ULL; }
    return h;
}

static uint64_t mc2fmu_token_hash(void) {
    const char *p = MC2FMU_INSTANTIATION_TOKEN;
    return mc2fmu_fnv(1469598103934665603ULL, (const unsigned char *)p, strlen(p));
}

static int mc2fmu_all_finite(const double *v, int n) {
    int i;
    for (i = 0; i < n; i++)
        if (!isfinite(v[i])) return 0;
    return 1;
}

/* what must hold of a state for this build to run on it; NULL if it does */
static const char *mc2fmu_state_problem(const mc2fmu_core *c, const mc2fmu_state *s) {
    const int running = s->phase == MC2FMU_RUNNING || s->phase == MC2FMU_TERMINATED;
    if (s->phase < MC2FMU_INSTANTIATED || s->phase > MC2FMU_TERMINATED) return "an unknown phase";
    if (!isfinite(s->t0) || !isfinite(s->time)) return "a non-finite time";
    if ((s->warned != 0 && s->warned != 1) || (s->failed != 0 && s->failed != 1)) return "corrupt flags";
    if (memchr(s->failure, 0, sizeof s->failure) == NULL) return "an unterminated message";
    if (!mc2fmu_all_finite(s->u, MC2FMU_NU1) || !mc2fmu_all_finite(s->q_start, MC2FMU_NQ) ||
        !mc2fmu_all_finite(s->qd_start, MC2FMU_NQ))
        return "non-finite inputs or parameters";
    if (!(s->envelope >= 0.0)) return "a negative or NaN envelope distance";
    if (running && c->interface == MC2FMU_ME && !mc2fmu_all_finite(s->xs, 2 * MC2FMU_NQ)) return "non-finite states";
    if (running && c->interface == MC2FMU_CS) {
        const double n = (s->time - s->t0) / MC2FMU_DT;
        if (s->k < 0 || !(fabs((double)s->k - n) <= 1.0 + MC2FMU_GRID_TOL)) return "a grid index that does not match its time";
        if (!mc2fmu_all_finite(s->hist[1], MC2FMU_NQ) || !mc2fmu_all_finite(s->hist[2], MC2FMU_NQ) ||
            (s->k > 0 && !mc2fmu_all_finite(s->hist[0], MC2FMU_NQ)))
            return "a non-finite history";
        if (!mc2fmu_all_finite(s->q_out, MC2FMU_NQ) || !mc2fmu_all_finite(s->qd_out, MC2FMU_NQ))
            return "non-finite outputs";
    }
    return NULL;
}

#define MC2FMU_BLOB_SIZE (sizeof(mc2fmu_blob_header) + sizeof(mc2fmu_state))

static void mc2fmu_serialize(const mc2fmu_core *c, const mc2fmu_state *s, unsigned char *out) {
    mc2fmu_blob_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, "mc2fmu\x01", 8);
    h.format = 2;
    h.size = (uint32_t)sizeof(mc2fmu_state);
    h.token = mc2fmu_token_hash();
    h.interface = (uint32_t)c->interface;
    h.checksum = mc2fmu_fnv(h.token ^ h.interface, (const unsigned char *)s, sizeof *s);
    memcpy(out, &h, sizeof h);
    memcpy(out + sizeof h, s, sizeof *s);
}

static int mc2fmu_deserialize(mc2fmu_core *c, const unsigned char *in, size_t size, mc2fmu_state *s) {
    mc2fmu_blob_header h;
    if (size != MC2FMU_BLOB_SIZE) {
        char msg[MC2FMU_MESSAGE];
        snprintf(msg, sizeof msg, "serialized FMU state of %lu bytes refused: this FMU writes %lu", (unsigned long)size,
                 (unsigned long)MC2FMU_BLOB_SIZE);
        return mc2fmu_fail(c, msg);
    }
    memcpy(&h, in, sizeof h);
    if (memcmp(h.magic, "mc2fmu\x01", 8) || h.format != 2 || h.size != sizeof(mc2fmu_state) || h.token != mc2fmu_token_hash())
        return mc2fmu_fail(c, "serialized FMU state refused: it was written by another model or build");
    if (h.interface != (uint32_t)c->interface)
        return mc2fmu_fail(c, "serialized FMU state refused: it was taken from the other interface (co-simulation / "
                              "model exchange)");
    {
        mc2fmu_state tmp;
        const char *problem;
        char msg[MC2FMU_MESSAGE];
        memcpy(&tmp, in + sizeof h, sizeof tmp);
        if (mc2fmu_fnv(h.token ^ h.interface, (const unsigned char *)&tmp, sizeof tmp) != h.checksum)
            return mc2fmu_fail(c, "serialized FMU state refused: its checksum does not match (the bytes were changed)");
        problem = mc2fmu_state_problem(c, &tmp);
        if (problem) {
            snprintf(msg, sizeof msg, "serialized FMU state refused: it holds %s", problem);
            return mc2fmu_fail(c, msg);
        }
        memcpy(s, &tmp, sizeof tmp);
    }
    return MC2FMU_OK;
}

#ifdef MC2FMU_SELFTEST
/* the export's self-check (never in an FMU binary): decoder, rhs (and its spring part J^T f_spring
   at qd, NQ values, untouched without springs) and step map at one point */
#if defined(__GNUC__)
__attribute__((visibility("default")))
#endif
int mc2fmu_selftest(const double *q, const double *qd, const double *u, const double *q_prev, double *x, double *J,
                    double *H, double *x_value, double *qdd, double *q_next, double *pose, double *spring) {
    static mc2fmu_terms T;
    static mc2fmu_layer_buf A, B;
    mc2fmu_rows Z;
    int i, n, j;
    /* the decoder's full output (x, J, H), which the dynamics never form */
    Z = mc2fmu_network(q, A, B, MC2FMU_P);
    for (n = 0; n < MC2FMU_NX; n++) {
        const double s = mc2fmu_x_scale[n];
        x[n] = mc2fmu_x_mean[n] + s * Z[0][n];
        for (j = 0; j < MC2FMU_NQ; j++) J[n * MC2FMU_NQ + j] = s * Z[1 + j][n];
        for (j = 0; j < MC2FMU_NQ2; j++) H[n * MC2FMU_NQ2 + j] = s * Z[1 + MC2FMU_NQ + j][n];
    }
    T.valid = 0;
    mc2fmu_eval_terms(q, u, &T);
    mc2fmu_acceleration(&T, qd, qdd);
#if MC2FMU_NS > 0
    mc2fmu_spring_force(&T, qd, spring);
#else
    (void)spring;
#endif
    mc2fmu_step_map(&T, q_prev, q, MC2FMU_DT, q_next);
    mc2fmu_decode(q, x_value);
    mc2fmu_poses(x_value, pose);
    for (i = 0; i < MC2FMU_NX; i++)
        if (x_value[i] != x_value[i]) return 1;
    return 0;
}

/* poses of arbitrary (not necessarily rigid) natural coordinates */
#if defined(__GNUC__)
__attribute__((visibility("default")))
#endif
void mc2fmu_selftest_poses(const double *x, double *pose) {
    mc2fmu_poses(x, pose);
}
#endif

#endif /* MC2FMU_NATIVE_H */
