/* mc2fmu_dynamics.h: the reduced model's numerics (decoder, reduced dynamics, poses), written
   once for a scalar type and included twice by mc2fmu_native.h:

   - mc2fmu_real = double, names mc2fmu_<name>: the values every FMI call returns;
   - mc2fmu_real = double _Complex, names mc2fmu_cs_<name>: the same operations on complex
     numbers, for the directional derivatives by the complex step (Squire & Trapp 1998): with
     the knowns moved by i h s, Im f(x + i h s) / h = f'(x) s + O(h^2) with no subtraction, so
     h = 1e-20 gives the derivative to rounding.  Branches and convergence tests look at real
     parts (MC2FMU_RE), |.| is sign(Re z) z (MC2FMU_ABS), so both variants take the same path.

   No include guard: that is the point.  The includer defines mc2fmu_real, MC2FMU_(name),
   MC2FMU_STATIC, MC2FMU_RE, MC2FMU_ABS and the elementary functions MC2FMU_COS, _SIN, _TANH,
   _EXP, _SQRT, _LOG1P; the end of this file undefines them all, ready for the next inclusion. */

/* torch's softplus (beta 1, threshold 20), its branch taken on the real part: the printed
   expressions' softplus (mc2fmu/models/expr.py) */
MC2FMU_INLINE mc2fmu_real MC2FMU_(softplus)(mc2fmu_real a) {
    return MC2FMU_RE(a) > 20.0 ? a : MC2FMU_LOG1P(MC2FMU_EXP(a));
}

/* the larger of a and b by the real parts, a at a tie: the printed expressions' max
   (mc2fmu/models/expr.py), whose complex-step derivative is the chosen side's */
MC2FMU_INLINE mc2fmu_real MC2FMU_(max)(mc2fmu_real a, mc2fmu_real b) {
    return MC2FMU_RE(a) >= MC2FMU_RE(b) ? a : b;
}

/* the training envelope's distance, MC2FMU_(envelope)(v), and its channels' excursions,
   printed into mc2fmu_envelope.h from mc2fmu/models/envelope.py */
#include "mc2fmu_envelope.h"

/* ------------------------------------------------------------------ the decoder */

typedef mc2fmu_real MC2FMU_(layer_buf)[MC2FMU_P][MC2FMU_WMAX]; /* packed rows (MC2FMU_P) */
typedef mc2fmu_real (*MC2FMU_(rows))[MC2FMU_WMAX];

MC2FMU_STATIC void MC2FMU_(features)(const mc2fmu_real *q, MC2FMU_(rows) Z, int np) {
    int f = 0, i, p, k;
    for (p = 0; p < np; p++)
        for (k = 0; k < MC2FMU_NF; k++) Z[p][k] = 0.0;
    for (i = 0; i < MC2FMU_NQ; i++) {
        if (mc2fmu_angle[i]) {
            const mc2fmu_real c = MC2FMU_COS(q[i]), s = MC2FMU_SIN(q[i]);
            Z[0][f] = c;
            Z[0][f + 1] = s;
            if (np > 1) {
                Z[1 + i][f] = -s;
                Z[1 + i][f + 1] = c;
                Z[MC2FMU_SYM(i, i)][f] = -c;
                Z[MC2FMU_SYM(i, i)][f + 1] = -s;
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

MC2FMU_INLINE void MC2FMU_(affine_np)(int l, MC2FMU_(rows) in, MC2FMU_(rows) out, int np) {
    const int ni = mc2fmu_layer_in[l], no = mc2fmu_layer_out[l];
    const double *MC2FMU_RESTRICT WT = mc2fmu_WT[l], *MC2FMU_RESTRICT b = mc2fmu_b[l];
    int p, i, o, r;
    for (o = 0; o + 4 <= no; o += 4) {
        mc2fmu_real acc[MC2FMU_P][4];
        for (p = 0; p < np; p++)
            for (r = 0; r < 4; r++) acc[p][r] = 0.0;
        for (i = 0; i < ni; i++) {
            const double *MC2FMU_RESTRICT w = WT + (size_t)i * no + o;
            for (p = 0; p < np; p++) {
                const mc2fmu_real z = in[p][i];
                for (r = 0; r < 4; r++) acc[p][r] += w[r] * z;
            }
        }
        for (p = 0; p < np; p++)
            for (r = 0; r < 4; r++) out[p][o + r] = acc[p][r];
        for (r = 0; r < 4; r++) out[0][o + r] += b[o + r];
    }
    for (; o < no; o++) {
        for (p = 0; p < np; p++) {
            mc2fmu_real s = 0.0;
            for (i = 0; i < ni; i++) s += WT[(size_t)i * no + o] * in[p][i];
            out[p][o] = s;
        }
        out[0][o] += b[o];
    }
}

/* np a compile-time constant in each branch: the tile's loops unroll at -O2 as at -O3 */
MC2FMU_STATIC void MC2FMU_(affine)(int l, MC2FMU_(rows) in, MC2FMU_(rows) out, int np) {
    if (np == MC2FMU_P) MC2FMU_(affine_np)(l, in, out, MC2FMU_P);
    else if (np == 1) MC2FMU_(affine_np)(l, in, out, 1);
    else if (np == 1 + MC2FMU_NQ) MC2FMU_(affine_np)(l, in, out, 1 + MC2FMU_NQ);
    else MC2FMU_(affine_np)(l, in, out, np);
}

/* the activation's value and its first two derivatives at a */
MC2FMU_INLINE mc2fmu_real MC2FMU_(act)(mc2fmu_real a, mc2fmu_real *d1, mc2fmu_real *d2) {
#if MC2FMU_ACTIVATION == 0 /* tanh */
    const mc2fmu_real t = MC2FMU_TANH(a);
    *d1 = 1.0 - t * t;
    *d2 = -2.0 * t * (1.0 - t * t);
    return t;
#elif MC2FMU_ACTIVATION == 1 /* sigmoid */
    const mc2fmu_real s = 1.0 / (1.0 + MC2FMU_EXP(-a));
    *d1 = s * (1.0 - s);
    *d2 = s * (1.0 - s) * (1.0 - 2.0 * s);
    return s;
#else /* softplus (torch: beta 1, threshold 20) */
    const mc2fmu_real s = 1.0 / (1.0 + MC2FMU_EXP(-a));
    *d1 = s;
    *d2 = s * (1.0 - s);
    return MC2FMU_RE(a) > 20.0 ? a : MC2FMU_LOG1P(MC2FMU_EXP(a));
#endif
}

MC2FMU_STATIC void MC2FMU_(activate)(int l, MC2FMU_(rows) Z, int np) {
    const int no = mc2fmu_layer_out[l];
    int o, j, k;
    for (o = 0; o < no; o++) {
        mc2fmu_real d1, d2;
        const mc2fmu_real f = MC2FMU_(act)(Z[0][o], &d1, &d2);
        if (np > 1) {
            for (j = 0; j < MC2FMU_NQ; j++)
                for (k = j; k < MC2FMU_NQ; k++) {
                    mc2fmu_real *h = &Z[MC2FMU_SYM(j, k)][o];
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
MC2FMU_STATIC MC2FMU_(rows) MC2FMU_(hidden)(const mc2fmu_real *q, MC2FMU_(rows) A, MC2FMU_(rows) B, int np) {
    MC2FMU_(rows) cur = A, nxt = B, tmp;
    int l;
    MC2FMU_(features)(q, cur, np);
    for (l = 0; l < MC2FMU_NL - 1; l++) {
        MC2FMU_(affine)(l, cur, nxt, np);
        MC2FMU_(activate)(l, nxt, np);
        tmp = cur; cur = nxt; nxt = tmp;
    }
    return cur;
}

/* x = x_mean + S (W_L h + b_L) from the last hidden activation h (row 0 of H): through the
   output layer's rank when it is cheaper, x = x0 + U (V h) with x0 = x_mean + S b_L and S W_L = U V
   (the data's hull: 3-10 directions instead of NX x NH products; native.py: velocity_factor).
   -DMC2FMU_FULL_OUTPUT_LAYER takes the NX x NH product instead (benchmarks/fmu_cost.py's baseline) */
#if MC2FMU_NXD > 0
/* out = x0 + U (V v) (x0 NULL: U (V v)), S W_L = U V the output layer through the data's hull:
   the poses' x of h and the motion outputs' xd of Jh qd */
MC2FMU_STATIC void MC2FMU_(hull_product)(const mc2fmu_real *v, const double *x0, mc2fmu_real *out) {
    mc2fmu_real y[MC2FMU_NXD];
    int n, i;
    for (i = 0; i < MC2FMU_NXD; i++) {
        const double *MC2FMU_RESTRICT w = mc2fmu_xd_V + (size_t)i * MC2FMU_NH;
        mc2fmu_real s = 0.0;
        for (n = 0; n < MC2FMU_NH; n++) s += w[n] * v[n];
        y[i] = s;
    }
    for (n = 0; n < MC2FMU_NX; n++) {
        const double *MC2FMU_RESTRICT u = mc2fmu_xd_U + (size_t)n * MC2FMU_NXD;
        mc2fmu_real s = x0 ? x0[n] : 0.0;
        for (i = 0; i < MC2FMU_NXD; i++) s += u[i] * y[i];
        out[n] = s;
    }
}
#endif

MC2FMU_STATIC void MC2FMU_(output_x)(MC2FMU_(rows) H, mc2fmu_real *x) {
#if MC2FMU_NXD > 0 && !defined(MC2FMU_FULL_OUTPUT_LAYER)
    MC2FMU_(hull_product)(H[0], mc2fmu_x0, x);
#else
    mc2fmu_real y[1][MC2FMU_WMAX];
    int n;
    MC2FMU_(affine)(MC2FMU_NL - 1, H, y, 1);
    for (n = 0; n < MC2FMU_NX; n++) x[n] = mc2fmu_x_mean[n] + mc2fmu_x_scale[n] * y[0][n];
#endif
}

/* x = h_d(q), the value alone (the poses' decoder) */
MC2FMU_STATIC void MC2FMU_(decode)(const mc2fmu_real *q, mc2fmu_real *x) {
    mc2fmu_real A[1][MC2FMU_WMAX], B[1][MC2FMU_WMAX];
    MC2FMU_(output_x)(MC2FMU_(hidden)(q, A, B, 1), x);
}

/* ------------------------------------------------------------------ the reduced dynamics

   The output layer is folded into the dynamics (exact algebra, different rounding): with
   x = x_mean + S (W_L h + b_L), J = S W_L Jh, H = S W_L Hh and the export's float64
   A = W_L^T S M S W_L, g = W_L^T S f_g, B = W_L^T S f_B, C_i = W_L^T S f_C[i] S W_L = L_i R_i (low rank),
   c_i = W_L^T S f_C[i] (x_mean + S b_L):
     M_m = Jh^T A Jh,  f_m = Jh^T (g + B u + sum_i u_i (C_i h + c_i)),  J^T M (H : v v) = (A Jh)^T (Hh : v v),
   with A = G^T G (G: NK x NH, NK the rank of the exported model's A, the decoder's output span; formed from the
   physical parameters by mc2fmu_physics_form in mc2fmu_native.h, as mass_factor in native.py at export),
   so a step never forms the NX-dimensional output; x (value only) is formed for the poses.
   Spring s (if MC2FMU_NS > 0) spans d_s = D_s x + e_s = P_s h + p_s with P_s = D_s S W_L and
   p_s = D_s (x_mean + S b_L) + e_s; with l = |d_s|, n = d_s / l and sg_s = Jh^T P_s^T n:
     ldot = sg_s . v,  T = k (l - L0) + c ldot,  J^T f_spring = -sum_s sg_s T.

   Hh : v v.  With MC2FMU_JV 0 the geometry propagates the Hessian's NSYM distinct rows and an
   acceleration sums them with weights v_j v_k.  With MC2FMU_JV 1 (two or more coordinates,
   where NSYM >= 3 rows cost more than a step's two velocities) the geometry propagates the
   value and Jh only, keeping each hidden layer's activation derivatives d1, d2 and
   pre-activation Jacobian rows Ja; an acceleration then propagates the one row S = H : v v,
   S_l = d2_l (Ja_l v)^2 + d1_l W_l S_(l-1) (S_0 the features' second derivative along v): the
   same quantity in another order of summation. */

typedef struct {
    const mc2fmu_physics *ph;                   /* G, g and the spring constants (the physical parameters) */
    mc2fmu_real GJ[MC2FMU_NQ][MC2FMU_NK];       /* G Jh, by column of Jh (A = G^T G) */
    mc2fmu_real Mm[MC2FMU_NQ2];                 /* Jh^T A Jh */
    mc2fmu_real fm[MC2FMU_NQ];                  /* J^T f */
#if MC2FMU_NS > 0
    mc2fmu_real sg[MC2FMU_NS][MC2FMU_NQ];       /* spring s: Jh^T P_s^T n_s, so ldot_s = sg_s . v */
    mc2fmu_real sk[MC2FMU_NS];                  /* spring s: k_s (l_s - L0_s), the elastic tension */
#endif
#if MC2FMU_NLAW > 0
    mc2fmu_real sl[MC2FMU_NS];                  /* spring s: its length l_s */
    mc2fmu_real sgl[MC2FMU_NS];                 /* spring s: its learned elastic tension g(l_s) (law springs) */
#endif
#if MC2FMU_NT > 0
    mc2fmu_real u[MC2FMU_NU1];                  /* the input the identified terms see */
#endif
    mc2fmu_real x[MC2FMU_NX];                   /* the decoded point, if x_valid */
    mc2fmu_real q[MC2FMU_NQ];                   /* where h, Jh, Hh, GJ, Mm (sg, sk) were evaluated */
    int valid;                                  /* ... if set */
    int x_valid;
    int zb;                                     /* h, Jh, Hh (packed rows) are in bufB if set, else bufA */
    MC2FMU_(layer_buf) bufA, bufB;             /* scratch of the network */
#if MC2FMU_JV
    mc2fmu_real phi[MC2FMU_NF];                 /* the features (cos, sin of angle coordinates) */
    mc2fmu_real d1[MC2FMU_NL - 1][MC2FMU_WMAX]; /* hidden layer l: the activation's derivatives */
    mc2fmu_real d2[MC2FMU_NL - 1][MC2FMU_WMAX];
    mc2fmu_real Ja[MC2FMU_NL - 1][MC2FMU_NQ][MC2FMU_WMAX]; /* ... and its pre-activation Jacobian rows */
#endif
} MC2FMU_(terms);

MC2FMU_STATIC MC2FMU_(rows) MC2FMU_(terms_rows)(MC2FMU_(terms) *T) {
    return T->zb ? T->bufB : T->bufA;
}

#if MC2FMU_NLAW > 0
/* the recorded springs' learned laws: law k's elastic tension g(l), MC2FMU_(law_elastic)(k, l),
   and its learned damping coefficient h(l, ldot) - c, MC2FMU_(law_damping)(k, l, ldot) (h >= 0,
   c the mechanism file's damping): printed into mc2fmu_laws.h from mc2fmu/models/spring_laws.py */
#include "mc2fmu_laws.h"
#endif

#if MC2FMU_NS > 0
/* the springs' velocity-independent part at h, Jh (the packed rows Z): sg_s and k_s (l_s - L0_s) */
MC2FMU_STATIC void MC2FMU_(eval_springs)(MC2FMU_(rows) Z, MC2FMU_(terms) *T) {
    mc2fmu_real d[3], w[MC2FMU_NH], l;
    int s, i, n, j;
    for (s = 0; s < MC2FMU_NS; s++) {
        const double *MC2FMU_RESTRICT P = mc2fmu_P_h + (size_t)s * 3 * MC2FMU_NH;
        mc2fmu_real acc[3] = {0.0, 0.0, 0.0}, sg[MC2FMU_NQ];
        for (n = 0; n < MC2FMU_NH; n++)  /* three independent sums, each over n in order */
            for (i = 0; i < 3; i++) acc[i] += P[i * MC2FMU_NH + n] * Z[0][n];
        for (i = 0; i < 3; i++) d[i] = acc[i] + mc2fmu_p_h[3 * s + i];
        l = MC2FMU_SQRT(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
        for (i = 0; i < 3; i++) d[i] /= l; /* now n */
        for (n = 0; n < MC2FMU_NH; n++) w[n] = P[n] * d[0] + P[MC2FMU_NH + n] * d[1] + P[2 * MC2FMU_NH + n] * d[2];
        for (j = 0; j < MC2FMU_NQ; j++) sg[j] = 0.0;
        for (n = 0; n < MC2FMU_NH; n++)
            for (j = 0; j < MC2FMU_NQ; j++) sg[j] += Z[1 + j][n] * w[n];
        for (j = 0; j < MC2FMU_NQ; j++) T->sg[s][j] = sg[j];
        T->sk[s] = T->ph->spring[3 * s] * (l - T->ph->spring[3 * s + 2]);
#if MC2FMU_NLAW > 0
        T->sl[s] = l;
        T->sgl[s] = mc2fmu_law_of_spring[s] >= 0 ? MC2FMU_(law_elastic)(mc2fmu_law_of_spring[s], l) : 0.0;
#endif
    }
}
#endif

#if MC2FMU_JV
/* the hidden layers with the value and Jh rows only (1 + NQ packed rows), each layer's d1, d2
   and Ja kept in T; returns the buffer that holds h, Jh */
MC2FMU_STATIC MC2FMU_(rows) MC2FMU_(hidden_jv)(const mc2fmu_real *q, MC2FMU_(terms) *T) {
    MC2FMU_(rows) cur = T->bufA, nxt = T->bufB, tmp;
    int l, o, j;
    MC2FMU_(features)(q, cur, 1 + MC2FMU_NQ);
    for (o = 0; o < MC2FMU_NF; o++) T->phi[o] = cur[0][o];
    for (l = 0; l < MC2FMU_NL - 1; l++) {
        const int no = mc2fmu_layer_out[l];
        MC2FMU_(affine)(l, cur, nxt, 1 + MC2FMU_NQ);
        for (o = 0; o < no; o++) {
            mc2fmu_real d1, d2;
            nxt[0][o] = MC2FMU_(act)(nxt[0][o], &d1, &d2);
            T->d1[l][o] = d1;
            T->d2[l][o] = d2;
            for (j = 0; j < MC2FMU_NQ; j++) {
                T->Ja[l][j][o] = nxt[1 + j][o];
                nxt[1 + j][o] = d1 * nxt[1 + j][o];
            }
        }
        tmp = cur; cur = nxt; nxt = tmp;
    }
    return cur;
}

/* hv = Hh : v v, the second derivative of h along v, from the kept d1, d2, Ja */
MC2FMU_STATIC void MC2FMU_(hidden_vv)(const MC2FMU_(terms) *T, const mc2fmu_real *v, mc2fmu_real *hv) {
    mc2fmu_real S[MC2FMU_WMAX], W[MC2FMU_WMAX];
    int f = 0, i, l, o, j;
    for (i = 0; i < MC2FMU_NQ; i++) {  /* the features': -(cos, sin) v_i^2 for an angle, else 0 */
        if (mc2fmu_angle[i]) {
            S[f] = -T->phi[f] * v[i] * v[i];
            S[f + 1] = -T->phi[f + 1] * v[i] * v[i];
            f += 2;
        } else {
            S[f] = 0.0;
            f += 1;
        }
    }
    for (l = 0; l < MC2FMU_NL - 1; l++) {
        const int ni = mc2fmu_layer_in[l], no = mc2fmu_layer_out[l];
        const double *MC2FMU_RESTRICT WT = mc2fmu_WT[l];
        for (o = 0; o < no; o++) W[o] = 0.0;
        for (i = 0; i < ni; i++) {  /* W_l S, a sum over the inputs in order */
            const double *MC2FMU_RESTRICT w = WT + (size_t)i * no;
            const mc2fmu_real z = S[i];
            for (o = 0; o < no; o++) W[o] += w[o] * z;
        }
        for (o = 0; o < no; o++) {
            mc2fmu_real jv = 0.0;
            for (j = 0; j < MC2FMU_NQ; j++) jv += T->Ja[l][j][o] * v[j];
            S[o] = T->d2[l][o] * jv * jv + T->d1[l][o] * W[o];
        }
    }
    for (o = 0; o < MC2FMU_NH; o++) hv[o] = S[o];
}
#endif

/* GJ[j][m] = sum_n G[m][n] Jh[j][n] (Jh[j] = Z[1 + j]; GT = G^T, NH x NK): tiles of 4 m x NQ j
   accumulated in registers over n (independent sums, vectorisable; each sum over n in order, as a
   dot product of a row of G with Jh[j] would add them) */
MC2FMU_STATIC void MC2FMU_(g_times_jh)(const double *MC2FMU_RESTRICT GT, MC2FMU_(rows) Z,
                                       mc2fmu_real GJ[MC2FMU_NQ][MC2FMU_NK]) {
    int m, n, j, r;
    for (m = 0; m + 4 <= MC2FMU_NK; m += 4) {
        mc2fmu_real acc[MC2FMU_NQ][4];
        for (j = 0; j < MC2FMU_NQ; j++)
            for (r = 0; r < 4; r++) acc[j][r] = 0.0;
        for (n = 0; n < MC2FMU_NH; n++) {
            const double *MC2FMU_RESTRICT w = GT + (size_t)n * MC2FMU_NK + m;
            for (j = 0; j < MC2FMU_NQ; j++) {
                const mc2fmu_real z = Z[1 + j][n];
                for (r = 0; r < 4; r++) acc[j][r] += w[r] * z;
            }
        }
        for (j = 0; j < MC2FMU_NQ; j++)
            for (r = 0; r < 4; r++) GJ[j][m + r] = acc[j][r];
    }
    for (; m < MC2FMU_NK; m++) {
        mc2fmu_real acc[MC2FMU_NQ];
        for (j = 0; j < MC2FMU_NQ; j++) acc[j] = 0.0;
        for (n = 0; n < MC2FMU_NH; n++) {
            const double w = GT[(size_t)n * MC2FMU_NK + m];
            for (j = 0; j < MC2FMU_NQ; j++) acc[j] += w * Z[1 + j][n];
        }
        for (j = 0; j < MC2FMU_NQ; j++) GJ[j][m] = acc[j];
    }
}

/* h, Jh, Hh, A Jh and M_m (and the springs' geometry) at q: the decoder's geometry, cached by
   the value of q (the output poses at a grid point and the next step's terms share one decoder
   evaluation) */
MC2FMU_STATIC void MC2FMU_(eval_geometry)(const mc2fmu_real *q, MC2FMU_(terms) *T) {
    int n, j, k;
    MC2FMU_(rows) Z;
    if (T->valid && memcmp(T->q, q, sizeof T->q) == 0) return;
#if MC2FMU_JV
    Z = MC2FMU_(hidden_jv)(q, T);
#else
    Z = MC2FMU_(hidden)(q, T->bufA, T->bufB, MC2FMU_P);
#endif
    T->zb = Z == T->bufB;
    MC2FMU_(g_times_jh)(T->ph->GT, Z, T->GJ);
    /* M_m = (G Jh)^T (G Jh): the lower triangle, mirrored (exactly symmetric) */
    for (j = 0; j < MC2FMU_NQ; j++)
        for (k = 0; k <= j; k++) {
            mc2fmu_real s = 0.0;
            for (n = 0; n < MC2FMU_NK; n++) s += T->GJ[j][n] * T->GJ[k][n];
            T->Mm[j * MC2FMU_NQ + k] = s;
            T->Mm[k * MC2FMU_NQ + j] = s;
        }
#if MC2FMU_NS > 0
    MC2FMU_(eval_springs)(Z, T);
#endif
    memcpy(T->q, q, sizeof T->q);
    T->valid = 1;
    T->x_valid = 0;
}

/* x at the cached geometry's q (value only): the output layer applied to h */
MC2FMU_STATIC const mc2fmu_real *MC2FMU_(terms_x)(MC2FMU_(terms) *T) {
    if (!T->x_valid) {
        MC2FMU_(output_x)(MC2FMU_(terms_rows)(T), T->x);
        T->x_valid = 1;
    }
    return T->x;
}

/* everything at q and u that does not depend on the velocity */
MC2FMU_STATIC void MC2FMU_(eval_terms)(const mc2fmu_real *q, const mc2fmu_real *u, MC2FMU_(terms) *T) {
    mc2fmu_real y[MC2FMU_NH], t[MC2FMU_NH];
    int n, m, j, k;
    MC2FMU_(rows) Z;
    MC2FMU_(eval_geometry)(q, T);
    Z = MC2FMU_(terms_rows)(T);
    /* y = g + B u + sum_i u_i (C_i h + c_i), i.e. W_L^T S f */
    for (n = 0; n < MC2FMU_NH; n++) {
        mc2fmu_real s = 0.0;
        for (k = 0; k < MC2FMU_NU; k++) s += u[k] * mc2fmu_B_h[n * MC2FMU_NU1 + k];
        y[n] = T->ph->g[n] + s;
    }
    for (k = 0; k < MC2FMU_NU; k++) {  /* C_k h = L_k (R_k h), rank k_k */
        const double *MC2FMU_RESTRICT c = mc2fmu_c_h + (size_t)k * MC2FMU_NH;
        if (mc2fmu_C_off[k + 1] == mc2fmu_C_off[k]) continue;
        for (n = 0; n < MC2FMU_NH; n++) t[n] = 0.0;
        for (m = mc2fmu_C_off[k]; m < mc2fmu_C_off[k + 1]; m++) {
            const double *MC2FMU_RESTRICT r = mc2fmu_CR_h + (size_t)m * MC2FMU_NH;
            const double *MC2FMU_RESTRICT l = mc2fmu_CL_h + (size_t)m * MC2FMU_NH;
            mc2fmu_real rh = 0.0;
            for (n = 0; n < MC2FMU_NH; n++) rh += r[n] * Z[0][n];
            for (n = 0; n < MC2FMU_NH; n++) t[n] += l[n] * rh;
        }
        for (n = 0; n < MC2FMU_NH; n++) y[n] += u[k] * (t[n] + c[n]);
    }
    for (j = 0; j < MC2FMU_NQ; j++) T->fm[j] = 0.0;
    for (n = 0; n < MC2FMU_NH; n++)  /* Jh^T y: NQ independent sums, each over n in order */
        for (j = 0; j < MC2FMU_NQ; j++) T->fm[j] += Z[1 + j][n] * y[n];
#if MC2FMU_NT > 0
    for (k = 0; k < MC2FMU_NU; k++) T->u[k] = u[k];
#endif
}

/* y = A^-1 b, A small SPD (NQ x NQ): MC2FMU_(cholesky_solve)(A, b, y), printed into mc2fmu_solve.h
   from mc2fmu/models/manifold.py's unrolled Cholesky (numpy's, torch's and CasADi's) */
#include "mc2fmu_solve.h"

#if MC2FMU_NS > 0
/* fs = J^T f_spring(x, J v) = -sum_s sg_s (k_s (l_s - L0_s) + c_s sg_s . v) */
MC2FMU_STATIC void MC2FMU_(spring_force)(const MC2FMU_(terms) *T, const mc2fmu_real *v, mc2fmu_real *fs) {
    int s, j;
    for (j = 0; j < MC2FMU_NQ; j++) fs[j] = 0.0;
    for (s = 0; s < MC2FMU_NS; s++) {
        mc2fmu_real ldot = 0.0, tension;
        for (j = 0; j < MC2FMU_NQ; j++) ldot += T->sg[s][j] * v[j];
        tension = T->sk[s] + T->ph->spring[3 * s + 1] * ldot;
#if MC2FMU_NLAW > 0
        if (mc2fmu_law_of_spring[s] >= 0) /* the learned law, added as numpy adds it */
            tension = tension + (T->sgl[s] + ldot * MC2FMU_(law_damping)(mc2fmu_law_of_spring[s], T->sl[s], ldot));
#endif
        for (j = 0; j < MC2FMU_NQ; j++) fs[j] -= T->sg[s][j] * tension;
    }
}
#endif

#if MC2FMU_NT > 0
/* rhs += Xi^T lambda(q, v, u): printed into mc2fmu_terms.h from mc2fmu/models/terms.py (the
   run-time model's identified_force, traced), as MC2FMU_(identified)(q, v, u, rhs) */
#include "mc2fmu_terms.h"
#endif

/* qdd = M_m^-1 (f_m - J^T M (H : v v) + J^T f_spring(x, J v) + Xi^T lambda), J^T M (H : v v) = (G Jh)^T G (Hh : v v) */
MC2FMU_STATIC void MC2FMU_(acceleration)(MC2FMU_(terms) *T, const mc2fmu_real *v, mc2fmu_real *a) {
    mc2fmu_real hv[MC2FMU_NH], ghv[MC2FMU_NK], rhs[MC2FMU_NQ];
    int n, j, k;
#if MC2FMU_JV
    MC2FMU_(hidden_vv)(T, v, hv);
#else
    MC2FMU_(rows) Z = MC2FMU_(terms_rows)(T);
    for (n = 0; n < MC2FMU_NH; n++) hv[n] = 0.0;
    for (j = 0; j < MC2FMU_NQ; j++)  /* the distinct entries, the off-diagonal ones twice */
        for (k = j; k < MC2FMU_NQ; k++) {
            const mc2fmu_real w = (k == j ? 1.0 : 2.0) * v[j] * v[k];
            const mc2fmu_real *MC2FMU_RESTRICT hk = Z[MC2FMU_SYM(j, k)];
            for (n = 0; n < MC2FMU_NH; n++) hv[n] += hk[n] * w;
        }
#endif
    for (k = 0; k < MC2FMU_NK; k++) ghv[k] = 0.0;
    for (n = 0; n < MC2FMU_NH; n++) {  /* G (Hh : v v), each row's sum over n in order */
        const double *MC2FMU_RESTRICT w = T->ph->GT + (size_t)n * MC2FMU_NK;
        const mc2fmu_real z = hv[n];
        for (k = 0; k < MC2FMU_NK; k++) ghv[k] += w[k] * z;
    }
    for (j = 0; j < MC2FMU_NQ; j++) {
        mc2fmu_real s = 0.0;
        for (k = 0; k < MC2FMU_NK; k++) s += T->GJ[j][k] * ghv[k];
        rhs[j] = T->fm[j] - s;
    }
#if MC2FMU_NS > 0
    {
        mc2fmu_real fs[MC2FMU_NQ];
        MC2FMU_(spring_force)(T, v, fs);
        for (j = 0; j < MC2FMU_NQ; j++) rhs[j] += fs[j];
    }
#endif
#if MC2FMU_NT > 0
    MC2FMU_(identified)(T->q, v, T->u, rhs);
#endif
    MC2FMU_(cholesky_solve)(T->Mm, rhs, a);
}

#if MC2FMU_NODE
/* ------------------------------------------------------------------ the MBD-NODE dynamics

   The node reducer's models (mc2fmu/models/node.py): qdd = f_theta(q, qd, u), an MLP of
   the features cos q, sin q (angle coordinates) or (q - mean) / scale, then (qd - mean) / scale
   and (u - mean) / scale; hidden layers with MC2FMU_NODE_ACTIVATION, a linear output layer,
   de-normalised by a_scale, a_mean.  The decoder above serves only the poses (the chart). */
MC2FMU_STATIC mc2fmu_real MC2FMU_(node_activate)(mc2fmu_real a) {
#if MC2FMU_NODE_ACTIVATION == 0 /* tanh */
    return MC2FMU_TANH(a);
#elif MC2FMU_NODE_ACTIVATION == 1 /* sigmoid */
    return 1.0 / (1.0 + MC2FMU_EXP(-a));
#else /* softplus (torch: beta 1, threshold 20) */
    return MC2FMU_RE(a) > 20.0 ? a : MC2FMU_LOG1P(MC2FMU_EXP(a));
#endif
}

MC2FMU_STATIC void MC2FMU_(node_acceleration)(const mc2fmu_real *q, const mc2fmu_real *qd, const mc2fmu_real *u,
                                              mc2fmu_real *a) {
    mc2fmu_real z[MC2FMU_NODE_WMAX], y[MC2FMU_NODE_WMAX];
    const double *W = mc2fmu_node_W, *b = mc2fmu_node_b;
    int i, j, l, n = 0;
    for (i = 0; i < MC2FMU_NQ; i++) {
        if (mc2fmu_angle[i]) {
            z[n++] = MC2FMU_COS(q[i]);
            z[n++] = MC2FMU_SIN(q[i]);
        } else {
            z[n++] = (q[i] - mc2fmu_node_q_mean[i]) / mc2fmu_node_q_scale[i];
        }
    }
    for (i = 0; i < MC2FMU_NQ; i++) z[n++] = (qd[i] - mc2fmu_node_qd_mean[i]) / mc2fmu_node_qd_scale[i];
    for (i = 0; i < MC2FMU_NU; i++) z[n++] = (u[i] - mc2fmu_node_u_mean[i]) / mc2fmu_node_u_scale[i];
    for (l = 0; l < MC2FMU_NODE_NL; l++) {
        /* y = W z + b with W^T stored row-major (in x out): the inner loop is an axpy over the
           outputs, independent operations the compiler vectorises (a dot product per output
           would be one dependent chain of additions) */
        const int ni = mc2fmu_node_width[l], no = mc2fmu_node_width[l + 1];
        for (j = 0; j < no; j++) y[j] = b[j];
        for (i = 0; i < ni; i++) {
            const mc2fmu_real zi = z[i];
            const double *MC2FMU_RESTRICT w = W + i * no;
            for (j = 0; j < no; j++) y[j] += w[j] * zi;
        }
        for (j = 0; j < no; j++) z[j] = l < MC2FMU_NODE_NL - 1 ? MC2FMU_(node_activate)(y[j]) : y[j];
        W += ni * no;
        b += no;
    }
    for (i = 0; i < MC2FMU_NQ; i++) a[i] = z[i] * mc2fmu_node_a_scale[i] + mc2fmu_node_a_mean[i];
}

#endif

/* the one-step map MC2FMU_(step_map): q_{i+1} from q_{i-1}, q_i (T evaluated at q_i, u_i), and for a
   node model MC2FMU_(node_step), its RK4 step: printed per model from mc2fmu/models/step_maps.py and
   mc2fmu/models/node.py */
#include "mc2fmu_step.h"

/* ------------------------------------------------------------------ poses and envelope */

/* one body's pose, MC2FMU_(pose_body)(p, g, pose): the polar factor of [(r1-r0),(r2-r0),(r3-r0)]/L
   by Newton's iteration, the origin r0 - R com and Shepperd's quaternion (w >= 0), printed into
   mc2fmu_poses.h from mc2fmu/models/poses.py (the python backend prints the same) */
#include "mc2fmu_poses.h"

/* body poses (origin x y z, quaternion w x y z per body) from decoded natural coordinates */
MC2FMU_STATIC void MC2FMU_(poses)(const mc2fmu_real *x, mc2fmu_real *pose) {
    int b, i;
    for (b = 0; b < MC2FMU_NB; b++) {
        double g[4];
        g[0] = mc2fmu_body_length[b];
        for (i = 0; i < 3; i++) g[1 + i] = mc2fmu_body_com[3 * b + i];
        MC2FMU_(pose_body)(x + mc2fmu_body_offset[b], g, pose + 7 * b);
    }
}

#if MC2FMU_NMOTION > 0
/* ------------------------------------------------------------------ the motion outputs

   Each body's velocity and angular velocity and the two energies, of x, xd and the physical
   parameters: printed into mc2fmu_motion.h from mc2fmu/models/motion.py (the text every target
   computes them from), as MC2FMU_(motion)(x, xd, theta, mass, out): each body's point mass block
   is the physics' (mc2fmu_physics.body_mass, formed when the parameters are set). */
#include "mc2fmu_motion.h"

/* xd = J qd at the geometry's q (eval_geometry): the last hidden layer's Jacobian rows times qd,
   through the output layer without its bias, de-normalised: S W_L vh.  S W_L has the rank of the
   data's hull (MC2FMU_NXD directions, far fewer than NX or NH), and U (V vh) is its product
   at k (NX + NH) multiply-adds (native.py: velocity_factor); without a hull, row by row */
MC2FMU_STATIC void MC2FMU_(terms_xd)(MC2FMU_(terms) *T, const mc2fmu_real *qd, mc2fmu_real *xd) {
    MC2FMU_(rows) Z = MC2FMU_(terms_rows)(T);
    mc2fmu_real vh[MC2FMU_NH];
    int n, i;
    for (n = 0; n < MC2FMU_NH; n++) {
        mc2fmu_real s = 0.0;
        for (i = 0; i < MC2FMU_NQ; i++) s += Z[1 + i][n] * qd[i];
        vh[n] = s;
    }
#if MC2FMU_NXD > 0
    MC2FMU_(hull_product)(vh, NULL, xd);
#else
    {
        int k;
        const double *MC2FMU_RESTRICT WT = mc2fmu_WT[MC2FMU_NL - 1]; /* NH x NX */
        /* row by row of WT (contiguous, vectorised); each xd[k] sums over n in the same order */
        for (k = 0; k < MC2FMU_NX; k++) xd[k] = 0.0;
        for (n = 0; n < MC2FMU_NH; n++) {
            const double *MC2FMU_RESTRICT w = WT + (size_t)n * MC2FMU_NX;
            const mc2fmu_real v = vh[n];
            for (k = 0; k < MC2FMU_NX; k++) xd[k] += w[k] * v;
        }
        for (k = 0; k < MC2FMU_NX; k++) xd[k] *= mc2fmu_x_scale[k];
    }
#endif
}

/* the motion outputs at (q, qd): x and xd = J qd from the decoder's geometry at q (cached in T:
   at a co-simulation grid point the poses and the next step evaluate it there anyway); xd: NX
   scratch */
MC2FMU_STATIC void MC2FMU_(motion_at)(MC2FMU_(terms) *T, const mc2fmu_real *q, const mc2fmu_real *qd,
                                     const double *theta, mc2fmu_real *xd, mc2fmu_real *out) {
    MC2FMU_(eval_geometry)(q, T);
    MC2FMU_(terms_xd)(T, qd, xd);
    MC2FMU_(motion)(MC2FMU_(terms_x)(T), xd, theta, T->ph->body_mass, out);
}
#endif

#undef mc2fmu_real
#undef MC2FMU_
#undef MC2FMU_STATIC
#undef MC2FMU_RE
#undef MC2FMU_ABS
#undef MC2FMU_COS
#undef MC2FMU_SIN
#undef MC2FMU_TANH
#undef MC2FMU_EXP
#undef MC2FMU_SQRT
#undef MC2FMU_LOG1P
