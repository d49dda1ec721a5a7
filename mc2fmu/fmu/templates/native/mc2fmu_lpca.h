/* mc2fmu_lpca.h: the local-PCA piecewise-linear ROM (seed 002) of the local-pca reducer, in C99.

   Included once by mc2fmu_native.h when MC2FMU_LPCA is 1 (double precision only: the model is
   discrete-time, co-simulation only, no directional derivatives).  It replicates
   mc2fmu/models/local_linear.py (Algorithm 1 with the energy-preserving switch) and the
   chart's observation of mc2fmu/models/charted.py (LocalPcaModel.observe):

   - cluster i: centroid mu_i, orthonormal basis V_i (NX x R, row-major), x = V_i q + mu_i,
     M_i qdd + K_i q + c_i + D_i qd = V_i^T f(x, u), f = f_g + f_B u + sum_k u_k f_C[k] x;
   - the start from q_start, qd_start: in the cluster nearest decode(q_start), the state the
     chart reads as them (below: the outputs), so that an FMU reports its start values at its
     start and a run's first q, qd start the same run again (LocalLinearModel.chart_state);
   - a step: the nearest centroid picks the cluster; on a change the state is projected into
     the new basis keeping the potential (springs' local quadratic plus gravity) and kinetic
     energies and the part in the subspace common to both bases; then eqs. 35-38;
   - the switch's common subspace from one SVD of V_i^T V_j = Y S Z^T (Jacobi on its Gram
     matrix): V_c = V_i Y_d for the singular values above 1 - eps, so that C = V_c^T V_j =
     S_d Z_d^T exactly, its pseudo-inverse is Z_d S_d^-1 and its null space Z's other columns;
   - the nearest point of an energy level set: the secular equation of
     local_linear.nearest_on_level_set on the branch through lambda = 0, by Brent's method,
     polished by one Newton step along the gradient;
   - outputs: q = encode(x) (the chart's encoder, an MLP with atan2 pairs for angles or the
     linear E x + e0 of known coordinates), angles on the turn nearest the previous q; qd the
     least-squares solution of J(q) qd = xd (J from the decoder above);
   - the envelope: the distance of the q, qd, u box, or how far x lies beyond the active
     cluster's extent (in cluster radii), whichever is larger. */

#define MC2FMU_R MC2FMU_LPCA_R
#define MC2FMU_R2 (MC2FMU_R * MC2FMU_R)
/* sizes of the small work arrays: at least 2 (x 2), so that no compiler's bounds analysis of the
   general-n loops below flags a one-element array it cannot prove they never index past */
#define MC2FMU_RB (MC2FMU_R > 1 ? MC2FMU_R : 2)
#define MC2FMU_RB2 (MC2FMU_RB * MC2FMU_RB)
#define MC2FMU_TWO_PI 6.283185307179586

/* ------------------------------------------------------------------ small dense algebra */

/* eigenvalues w (ascending) and eigenvectors (columns of V, row-major n x n) of the symmetric
   n x n matrix A (row-major; destroyed), by cyclic Jacobi rotations */
static void mc2fmu_jacobi_eigh(double *A, int n, double *w, double *V) {
    int i, j, k, sweep;
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++) V[i * n + j] = i == j ? 1.0 : 0.0;
    for (sweep = 0; sweep < 100; sweep++) {
        double off = 0.0, diag = 0.0;
        for (i = 0; i < n; i++) {
            diag += A[i * n + i] * A[i * n + i];
            for (j = i + 1; j < n; j++) off += A[i * n + j] * A[i * n + j];
        }
        if (!(off > 1e-34 * diag) || !isfinite(off)) break; /* off-diagonal at rounding level */
        for (i = 0; i < n; i++)
            for (j = i + 1; j < n; j++) {
                const double apq = A[i * n + j];
                double theta, t, cs, sn;
                if (apq == 0.0) continue;
                theta = (A[j * n + j] - A[i * n + i]) / (2.0 * apq);
                t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1.0));
                cs = 1.0 / sqrt(t * t + 1.0);
                sn = t * cs;
                for (k = 0; k < n; k++) { /* A <- A G (columns i, j) */
                    const double a = A[k * n + i], b = A[k * n + j];
                    A[k * n + i] = cs * a - sn * b;
                    A[k * n + j] = sn * a + cs * b;
                }
                for (k = 0; k < n; k++) { /* A <- G^T A (rows i, j) */
                    const double a = A[i * n + k], b = A[j * n + k];
                    A[i * n + k] = cs * a - sn * b;
                    A[j * n + k] = sn * a + cs * b;
                }
                A[i * n + j] = A[j * n + i] = 0.0;
                for (k = 0; k < n; k++) { /* V <- V G */
                    const double a = V[k * n + i], b = V[k * n + j];
                    V[k * n + i] = cs * a - sn * b;
                    V[k * n + j] = sn * a + cs * b;
                }
            }
    }
    for (i = 0; i < n; i++) w[i] = A[i * n + i];
    for (i = 0; i < n; i++) { /* selection sort, ascending, columns of V along */
        int m = i;
        for (j = i + 1; j < n; j++)
            if (w[j] < w[m]) m = j;
        if (m != i) {
            const double t = w[i];
            w[i] = w[m];
            w[m] = t;
            for (k = 0; k < n; k++) {
                const double v = V[k * n + i];
                V[k * n + i] = V[k * n + m];
                V[k * n + m] = v;
            }
        }
    }
}

/* y = A^-1 b for a cluster's R x R symmetric positive definite A (row-major): Cholesky (the
   dynamics' mc2fmu_cholesky_solve is the same for the NQ x NQ systems) */
static void mc2fmu_spd_solve(const double *A, const double *b, double *y, int n) {
    double L[MC2FMU_RB2], z[MC2FMU_RB];
    int i, j, k;
    for (j = 0; j < n; j++) {
        double s = A[j * n + j];
        for (k = 0; k < j; k++) s -= L[j * n + k] * L[j * n + k];
        L[j * n + j] = sqrt(s);
        for (i = j + 1; i < n; i++) {
            double t = A[i * n + j];
            for (k = 0; k < j; k++) t -= L[i * n + k] * L[j * n + k];
            L[i * n + j] = t / L[j * n + j];
        }
    }
    for (i = 0; i < n; i++) {
        double s = b[i];
        for (k = 0; k < i; k++) s -= L[i * n + k] * z[k];
        z[i] = s / L[i * n + i];
    }
    for (i = n - 1; i >= 0; i--) {
        double s = z[i];
        for (k = i + 1; k < n; k++) s -= L[k * n + i] * y[k];
        y[i] = s / L[i * n + i];
    }
}

/* ------------------------------------------------------------------ the clusters' linear models */

static const double *mc2fmu_lpca_V(int i) { return mc2fmu_lpca_bases + (size_t)i * MC2FMU_NX * MC2FMU_R; }

/* x = V_i q + mu_i */
static void mc2fmu_lpca_decode(int i, const double *q, double *x) {
    const double *V = mc2fmu_lpca_V(i), *mu = mc2fmu_lpca_centroids + (size_t)i * MC2FMU_NX;
    int n, r;
    for (n = 0; n < MC2FMU_NX; n++) {
        double s = 0.0;
        for (r = 0; r < MC2FMU_R; r++) s += V[n * MC2FMU_R + r] * q[r];
        x[n] = s + mu[n];
    }
}

/* xd = V_i qd */
static void mc2fmu_lpca_velocity(int i, const double *qd, double *xd) {
    const double *V = mc2fmu_lpca_V(i);
    int n, r;
    for (n = 0; n < MC2FMU_NX; n++) {
        double s = 0.0;
        for (r = 0; r < MC2FMU_R; r++) s += V[n * MC2FMU_R + r] * qd[r];
        xd[n] = s;
    }
}

/* out = V_i^T v */
static void mc2fmu_lpca_project_vec(int i, const double *v, double *out) {
    const double *V = mc2fmu_lpca_V(i);
    int n, r;
    for (r = 0; r < MC2FMU_R; r++) out[r] = 0.0;
    for (n = 0; n < MC2FMU_NX; n++)
        for (r = 0; r < MC2FMU_R; r++) out[r] += V[n * MC2FMU_R + r] * v[n];
}

/* the cluster whose centroid is nearest x (eq. 22; the first of equals, as numpy's argmin) */
static int mc2fmu_lpca_nearest(const double *x) {
    int i, n, best = 0;
    double dmin = INFINITY;
    for (i = 0; i < MC2FMU_LPCA_K; i++) {
        const double *mu = mc2fmu_lpca_centroids + (size_t)i * MC2FMU_NX;
        double d = 0.0;
        for (n = 0; n < MC2FMU_NX; n++) d += (mu[n] - x[n]) * (mu[n] - x[n]);
        if (d < dmin) {
            dmin = d;
            best = i;
        }
    }
    return best;
}

/* how far x lies beyond cluster i's extent, in units of its radius (0 within; LocalLinearModel.extent) */
static double mc2fmu_lpca_extent(int i, const double *x) {
    const double *mu = mc2fmu_lpca_centroids + (size_t)i * MC2FMU_NX, R = fmax(mc2fmu_lpca_radius[i], 1e-12);
    double d = 0.0;
    int n;
    for (n = 0; n < MC2FMU_NX; n++) d += (x[n] - mu[n]) * (x[n] - mu[n]);
    d = sqrt(d);
    return isfinite(d) ? fmax(0.0, d - R) / R : INFINITY;
}

/* qdd of eq. 37 in cluster i */
static void mc2fmu_lpca_acceleration(int i, const double *q, const double *qd, const double *u, double *qdd) {
    const double *K = mc2fmu_lpca_K + (size_t)i * MC2FMU_R2, *D = mc2fmu_lpca_D + (size_t)i * MC2FMU_R2;
    const double *c = mc2fmu_lpca_c + (size_t)i * MC2FMU_R;
    double x[MC2FMU_NX], f[MC2FMU_NX], rhs[MC2FMU_RB];
    int n, k, e, r, s;
    mc2fmu_lpca_decode(i, q, x);
    for (n = 0; n < MC2FMU_NX; n++) {
        double v = mc2fmu_f_g[n];
        for (k = 0; k < MC2FMU_NU; k++) v += mc2fmu_f_B[n * MC2FMU_NU1 + k] * u[k];
        f[n] = v;
    }
    for (k = 0; k < MC2FMU_NU; k++) {
        const int *row = mc2fmu_C_row + (size_t)k * (MC2FMU_NX + 1);
        for (n = 0; n < MC2FMU_NX; n++)
            for (e = row[n]; e < row[n + 1]; e++) f[n] += u[k] * mc2fmu_C_val[e] * x[mc2fmu_C_col[e]];
    }
    mc2fmu_lpca_project_vec(i, f, rhs);
    for (r = 0; r < MC2FMU_R; r++) {
        double v = rhs[r] - c[r];
        for (s = 0; s < MC2FMU_R; s++) v -= K[r * MC2FMU_R + s] * q[s] + D[r * MC2FMU_R + s] * qd[s];
        rhs[r] = v;
    }
    mc2fmu_spd_solve(mc2fmu_lpca_M + (size_t)i * MC2FMU_R2, rhs, qdd, MC2FMU_R);
}

/* e(q) = p + b^T q + q^T A q / 2 */
typedef struct {
    const double *A;
    double b[MC2FMU_RB];
    double p;
} mc2fmu_quadratic;

static double mc2fmu_quad(const mc2fmu_quadratic *e, const double *q) {
    double s = e->p;
    int r, t;
    for (r = 0; r < MC2FMU_R; r++) {
        double a = 0.0;
        for (t = 0; t < MC2FMU_R; t++) a += e->A[r * MC2FMU_R + t] * q[t];
        s += e->b[r] * q[r] + 0.5 * q[r] * a;
    }
    return s;
}

/* potential energy of cluster i: springs' local quadratic plus gravity, exactly linear in x */
static void mc2fmu_lpca_potential(int i, mc2fmu_quadratic *e) {
    const double *mu = mc2fmu_lpca_centroids + (size_t)i * MC2FMU_NX, *c = mc2fmu_lpca_c + (size_t)i * MC2FMU_R;
    double vg[MC2FMU_RB], fm = 0.0;
    int r, n;
    mc2fmu_lpca_project_vec(i, mc2fmu_f_g, vg);
    for (r = 0; r < MC2FMU_R; r++) e->b[r] = c[r] - vg[r];
    for (n = 0; n < MC2FMU_NX; n++) fm += mc2fmu_f_g[n] * mu[n];
    e->A = mc2fmu_lpca_K + (size_t)i * MC2FMU_R2;
    e->p = mc2fmu_lpca_P[i] - fm;
}

static void mc2fmu_lpca_kinetic(int i, mc2fmu_quadratic *e) {
    int r;
    for (r = 0; r < MC2FMU_R; r++) e->b[r] = 0.0;
    e->A = mc2fmu_lpca_M + (size_t)i * MC2FMU_R2;
    e->p = 0.0;
}

/* ------------------------------------------------------------------ the nearest point on a level set */

typedef struct {
    double phi0, gt[MC2FMU_RB], h[MC2FMU_RB];
    int nn;
} mc2fmu_secular;

static double mc2fmu_secular_phi(const mc2fmu_secular *S, double lam) {
    double s = S->phi0;
    int k;
    for (k = 0; k < S->nn; k++) {
        const double d = 1.0 + lam * S->h[k];
        s -= S->gt[k] * S->gt[k] * lam * (1.0 + 0.5 * S->h[k] * lam) / (d * d);
    }
    return s;
}

/* a root of phi in [a, b] by Brent's method (local_linear.brent, operation for operation) */
static double mc2fmu_brent(const mc2fmu_secular *S, double a, double b) {
    const double xtol = 1e-300, rtol = 4.0 * 2.220446049250313e-16;
    double fa = mc2fmu_secular_phi(S, a), fb = mc2fmu_secular_phi(S, b), c, fc, d, e;
    int it;
    if (fa == 0.0) return a;
    if (fb == 0.0) return b;
    c = a;
    fc = fa;
    d = e = b - a;
    for (it = 0; it < 500; it++) {
        double tol, half;
        if ((fb > 0.0) == (fc > 0.0)) {
            c = a;
            fc = fa;
            d = e = b - a;
        }
        if (fabs(fc) < fabs(fb)) {
            a = b; b = c; c = a;
            fa = fb; fb = fc; fc = fa;
        }
        tol = 2.0 * rtol * fabs(b) + 0.5 * xtol;
        half = 0.5 * (c - b);
        if (fabs(half) <= tol || fb == 0.0) return b;
        if (fabs(e) >= tol && fabs(fa) > fabs(fb)) {
            const double s = fb / fa;
            double p, q;
            if (a == c) {
                p = 2.0 * half * s;
                q = 1.0 - s;
            } else {
                const double qa = fa / fc, r = fb / fc;
                p = s * (2.0 * half * qa * (qa - r) - (b - a) * (r - 1.0));
                q = (qa - 1.0) * (r - 1.0) * (s - 1.0);
            }
            if (p > 0.0) q = -q;
            p = fabs(p);
            if (2.0 * p < fmin(3.0 * half * q - fabs(tol * q), fabs(e * q))) {
                e = d;
                d = p / q;
            } else {
                d = e = half;
            }
        } else {
            d = e = half;
        }
        a = b;
        fa = fb;
        b += fabs(d) > tol ? d : copysign(tol, half);
        fb = mc2fmu_secular_phi(S, b);
    }
    return b;
}

/* q = q_c + N Q z (N: R x nn with row stride R, Q: nn x nn) */
static void mc2fmu_level_combine(const double *qc, const double *N, const double *Q, int nn, const double *z,
                                 double *q) {
    double y[MC2FMU_RB] = {0.0};
    int r, k, l;
    for (l = 0; l < nn; l++) {
        y[l] = 0.0;
        for (k = 0; k < nn; k++) y[l] += Q[l * nn + k] * z[k];
    }
    for (r = 0; r < MC2FMU_R; r++) {
        double s = qc[r];
        for (l = 0; l < nn; l++) s += N[r * MC2FMU_R + l] * y[l];
        q[r] = s;
    }
}

/* the point of the secular equation's branch at lam: z_k = -lam gt_k / (1 + lam h_k) */
static void mc2fmu_level_point(const double *qc, const double *N, const double *Q, const mc2fmu_secular *S,
                               double lam, double *q) {
    double z[MC2FMU_RB] = {0.0};
    int k;
    for (k = 0; k < S->nn; k++) z[k] = -lam * S->gt[k] / (1.0 + lam * S->h[k]);
    mc2fmu_level_combine(qc, N, Q, S->nn, z, q);
}

/* the q nearest `target` with e(q) = level on the affine set q = q_c + N w (N: R x nn, row-major
   with row stride R, orthonormal columns): local_linear.nearest_on_level_set; returns 1 when
   the level was reached, 0 when it is out of reach (q is then the nearest reachable point) */
static int mc2fmu_nearest_on_level_set(const mc2fmu_quadratic *e, double level, const double *qc, const double *N,
                                       int nn, double *q) {
    mc2fmu_secular S;
    double H[MC2FMU_RB2] = {0.0}, Q[MC2FMU_RB2] = {0.0}, g[MC2FMU_RB] = {0.0}, grad[MC2FMU_RB] = {0.0}, lo, hi, a, b, lam, pmax = 0.0, nmin = 0.0;
    int r, t, k, l, any = 0, all_pos = 1, has_pos = 0, has_neg = 0, it;
    memcpy(q, qc, sizeof(double) * MC2FMU_R);
    S.phi0 = mc2fmu_quad(e, qc) - level;
    S.nn = nn;
    if (nn == 0) return fabs(S.phi0) <= 1e-12 * fmax(1.0, fabs(level));
    /* H = N^T A N, g = N^T (b + A q_c) */
    for (r = 0; r < MC2FMU_R; r++) {
        double s = e->b[r];
        for (t = 0; t < MC2FMU_R; t++) s += e->A[r * MC2FMU_R + t] * qc[t];
        grad[r] = s;
    }
    for (k = 0; k < nn; k++) {
        g[k] = 0.0;
        for (r = 0; r < MC2FMU_R; r++) g[k] += N[r * MC2FMU_R + k] * grad[r];
        for (l = 0; l < nn; l++) {
            double s = 0.0;
            for (r = 0; r < MC2FMU_R; r++)
                for (t = 0; t < MC2FMU_R; t++) s += N[r * MC2FMU_R + k] * e->A[r * MC2FMU_R + t] * N[t * MC2FMU_R + l];
            H[k * nn + l] = s;
        }
    }
    for (k = 0; k < nn; k++) /* symmetrised, as 0.5 (H + H^T) */
        for (l = 0; l < k; l++) H[k * nn + l] = H[l * nn + k] = 0.5 * (H[k * nn + l] + H[l * nn + k]);
    mc2fmu_jacobi_eigh(H, nn, S.h, Q);
    for (k = 0; k < nn; k++) {
        S.gt[k] = 0.0;
        for (l = 0; l < nn; l++) S.gt[k] += Q[l * nn + k] * g[l];
        if (S.gt[k] != 0.0) {
            any = 1;
            if (S.h[k] > 0.0) {
                pmax = has_pos ? fmax(pmax, S.h[k]) : S.h[k];
                has_pos = 1;
            } else {
                all_pos = 0;
                if (S.h[k] < 0.0) {
                    nmin = has_neg ? fmin(nmin, S.h[k]) : S.h[k];
                    has_neg = 1;
                }
            }
        }
    }
    if (!any) return fabs(S.phi0) <= 1e-12 * fmax(1.0, fabs(level));
    if (S.phi0 == 0.0) return 1;
    lo = has_pos ? -1.0 / pmax : -INFINITY;
    hi = has_neg ? -1.0 / nmin : INFINITY;
    if (S.phi0 > 0.0) { /* phi falls with lambda: the root is at lambda > 0 */
        if (!isfinite(hi) && all_pos) {
            double m = S.phi0;
            for (k = 0; k < nn; k++)
                if (S.gt[k] != 0.0) m -= S.gt[k] * S.gt[k] / (2.0 * S.h[k]);
            if (m >= 0.0) { /* below the minimum: out of reach, the minimiser */
                double zt[MC2FMU_RB] = {0.0};
                for (k = 0; k < nn; k++) zt[k] = S.gt[k] != 0.0 ? -S.gt[k] / S.h[k] : 0.0;
                mc2fmu_level_combine(qc, N, Q, nn, zt, q);
                return 0;
            }
        }
        a = 0.0;
        b = isfinite(hi) ? 0.5 * hi : 1.0;
        for (it = 0; it < 2100; it++) {
            if (mc2fmu_secular_phi(&S, b) <= 0.0) break;
            b = isfinite(hi) ? 0.5 * (b + hi) : 4.0 * b;
        }
        if (it == 2100) {
            mc2fmu_level_point(qc, N, Q, &S, b, q);
            return 0;
        }
    } else { /* the root is at lambda < 0, where phi rises to +inf */
        a = isfinite(lo) ? 0.5 * lo : -1.0;
        b = 0.0;
        for (it = 0; it < 2100; it++) {
            if (mc2fmu_secular_phi(&S, a) >= 0.0) break;
            a = isfinite(lo) ? 0.5 * (a + lo) : 4.0 * a;
        }
        if (it == 2100) {
            mc2fmu_level_point(qc, N, Q, &S, a, q);
            return 0;
        }
    }
    lam = mc2fmu_brent(&S, a, b);
    mc2fmu_level_point(qc, N, Q, &S, lam, q);
    { /* one Newton step along the gradient polishes the level to rounding */
        double gn = 0.0, fn = 0.0, free_[MC2FMU_RB], w[MC2FMU_RB], el;
        for (r = 0; r < MC2FMU_R; r++) {
            double s = e->b[r];
            for (t = 0; t < MC2FMU_R; t++) s += e->A[r * MC2FMU_R + t] * q[t];
            grad[r] = s;
            gn += s * s;
        }
        if (gn > 0.0) {
            for (l = 0; l < nn; l++) {
                w[l] = 0.0;
                for (r = 0; r < MC2FMU_R; r++) w[l] += N[r * MC2FMU_R + l] * grad[r];
            }
            for (r = 0; r < MC2FMU_R; r++) {
                free_[r] = 0.0;
                for (l = 0; l < nn; l++) free_[r] += N[r * MC2FMU_R + l] * w[l];
                fn += grad[r] * free_[r];
            }
            if (fn > 0.0) {
                el = (mc2fmu_quad(e, q) - level) / fn;
                for (r = 0; r < MC2FMU_R; r++) q[r] -= el * free_[r];
            }
        }
    }
    return 1;
}

/* ------------------------------------------------------------------ Algorithm 1 */

typedef struct {
    int32_t cluster, pad;
    double q[MC2FMU_R], qd[MC2FMU_R], qdd[MC2FMU_R];
} mc2fmu_lstate;

/* s projected into cluster j (eqs. 23-31) */
static void mc2fmu_lpca_switch(mc2fmu_lstate *s, int j) {
    const int i = s->cluster;
    const double *Vi = mc2fmu_lpca_V(i), *Vj = mc2fmu_lpca_V(j);
    const double *mu_j = mc2fmu_lpca_centroids + (size_t)j * MC2FMU_NX;
    double G[MC2FMU_RB2], Am[MC2FMU_RB2], w[MC2FMU_RB], Zr[MC2FMU_RB2], Z[MC2FMU_RB2], sv[MC2FMU_RB], Yd[MC2FMU_RB2] = {0.0};
    double N[MC2FMU_RB2] = {0.0}, x[MC2FMU_NX], v[MC2FMU_NX], t1[MC2FMU_RB], t2[MC2FMU_RB], tq[MC2FMU_RB], tv[MC2FMU_RB];
    double dq[MC2FMU_RB] = {0.0}, dv[MC2FMU_RB] = {0.0}, qc[MC2FMU_RB], vc[MC2FMU_RB], a[MC2FMU_NX];
    mc2fmu_quadratic ei, ej;
    double level_q, level_v;
    int r, t, k, n, nd = 0;
    if (i == j) return;
    /* A = V_i^T V_j = Y S Z^T: Z and S^2 from A^T A (descending), Y_d = A Z_d / S_d */
    for (r = 0; r < MC2FMU_R; r++)
        for (t = 0; t < MC2FMU_R; t++) {
            double acc = 0.0;
            for (n = 0; n < MC2FMU_NX; n++) acc += Vi[n * MC2FMU_R + r] * Vj[n * MC2FMU_R + t];
            Am[r * MC2FMU_R + t] = acc;
        }
    for (r = 0; r < MC2FMU_R; r++)
        for (t = 0; t < MC2FMU_R; t++) {
            double acc = 0.0;
            for (k = 0; k < MC2FMU_R; k++) acc += Am[k * MC2FMU_R + r] * Am[k * MC2FMU_R + t];
            G[r * MC2FMU_R + t] = acc;
        }
    mc2fmu_jacobi_eigh(G, MC2FMU_R, w, Zr);
    for (k = 0; k < MC2FMU_R; k++) { /* descending */
        sv[k] = sqrt(fmax(w[MC2FMU_R - 1 - k], 0.0));
        for (r = 0; r < MC2FMU_R; r++) Z[r * MC2FMU_R + k] = Zr[r * MC2FMU_R + (MC2FMU_R - 1 - k)];
        if (sv[k] > 1.0 - MC2FMU_LPCA_EPS) nd = k + 1;
    }
    for (k = 0; k < nd; k++)
        for (r = 0; r < MC2FMU_R; r++) {
            double acc = 0.0;
            for (t = 0; t < MC2FMU_R; t++) acc += Am[r * MC2FMU_R + t] * Z[t * MC2FMU_R + k];
            Yd[r * MC2FMU_R + k] = acc / sv[k];
        }
    for (r = 0; r < MC2FMU_R; r++) /* N = Z[:, nd:], row stride R */
        for (k = 0; k < MC2FMU_R - nd; k++) N[r * MC2FMU_R + k] = Z[r * MC2FMU_R + nd + k];
    /* the previous position and velocity in natural coordinates */
    mc2fmu_lpca_decode(i, s->q, x);
    mc2fmu_lpca_velocity(i, s->qd, v);
    for (n = 0; n < MC2FMU_NX; n++) a[n] = x[n] - mu_j[n];
    mc2fmu_lpca_project_vec(j, a, tq);     /* target of the position: V_j^T (x - mu_j) */
    mc2fmu_lpca_project_vec(i, a, t1);     /* V_i^T (x - mu_j), for d = Y_d^T V_i^T (x - mu_j) */
    mc2fmu_lpca_project_vec(j, v, tv);     /* target of the velocity: V_j^T v */
    mc2fmu_lpca_project_vec(i, v, t2);     /* V_i^T v = qd */
    for (k = 0; k < nd; k++) {
        dq[k] = dv[k] = 0.0;
        for (r = 0; r < MC2FMU_R; r++) {
            dq[k] += Yd[r * MC2FMU_R + k] * t1[r];
            dv[k] += Yd[r * MC2FMU_R + k] * t2[r];
        }
    }
    /* q_c = target + C^+ (d - C target) with C = S_d Z_d^T: target - Z_d Z_d^T target + Z_d d / S_d */
    for (r = 0; r < MC2FMU_R; r++) {
        qc[r] = tq[r];
        vc[r] = tv[r];
    }
    for (k = 0; k < nd; k++) {
        double pq = 0.0, pv = 0.0;
        for (r = 0; r < MC2FMU_R; r++) {
            pq += Z[r * MC2FMU_R + k] * tq[r];
            pv += Z[r * MC2FMU_R + k] * tv[r];
        }
        for (r = 0; r < MC2FMU_R; r++) {
            qc[r] += Z[r * MC2FMU_R + k] * (dq[k] / sv[k] - pq);
            vc[r] += Z[r * MC2FMU_R + k] * (dv[k] / sv[k] - pv);
        }
    }
    mc2fmu_lpca_potential(i, &ei);
    mc2fmu_lpca_potential(j, &ej);
    level_q = mc2fmu_quad(&ei, s->q);
    mc2fmu_lpca_kinetic(i, &ei);
    level_v = mc2fmu_quad(&ei, s->qd);
    {
        double qn[MC2FMU_RB], vn[MC2FMU_RB], an[MC2FMU_NX];
        mc2fmu_nearest_on_level_set(&ej, level_q, qc, N, MC2FMU_R - nd, qn);
        mc2fmu_lpca_kinetic(j, &ej);
        mc2fmu_nearest_on_level_set(&ej, level_v, vc, N, MC2FMU_R - nd, vn);
        mc2fmu_lpca_velocity(i, s->qdd, an); /* V_i qdd, projected: qdd = V_j^T V_i qdd */
        mc2fmu_lpca_project_vec(j, an, s->qdd);
        memcpy(s->q, qn, sizeof s->q);
        memcpy(s->qd, vn, sizeof s->qd);
    }
    s->cluster = j;
}

/* one step of Algorithm 1 with u held */
static void mc2fmu_lpca_step(mc2fmu_lstate *s, const double *u, double dt) {
    double x[MC2FMU_NX], q[MC2FMU_RB], qdd[MC2FMU_RB];
    int r, j;
    mc2fmu_lpca_decode(s->cluster, s->q, x);
    j = mc2fmu_lpca_nearest(x);
    mc2fmu_lpca_switch(s, j);
    for (r = 0; r < MC2FMU_R; r++) q[r] = s->q[r] + dt * s->qd[r] + 0.5 * dt * dt * s->qdd[r]; /* eq. 35 */
    mc2fmu_lpca_acceleration(j, q, s->qd, u, qdd);                                            /* eqs. 36-37 */
    for (r = 0; r < MC2FMU_R; r++) {
        s->qd[r] = s->qd[r] + 0.5 * dt * (s->qdd[r] + qdd[r]); /* eq. 38 */
        s->q[r] = q[r];
        s->qdd[r] = qdd[r];
    }
}

/* ------------------------------------------------------------------ the chart's reading */

#if !MC2FMU_ENC_LINEAR
static double mc2fmu_enc_activate(double a) {
#if MC2FMU_ENC_ACTIVATION == 0 /* tanh */
    return tanh(a);
#elif MC2FMU_ENC_ACTIVATION == 1 /* sigmoid */
    return 1.0 / (1.0 + exp(-a));
#else /* softplus (torch: beta 1, threshold 20) */
    return a > 20.0 ? a : log1p(exp(a));
#endif
}
#endif

/* q = encode(x), angle coordinates in (-pi, pi] */
static void mc2fmu_encode(const double *x, double *q) {
#if MC2FMU_ENC_LINEAR
    int i, n;
    for (i = 0; i < MC2FMU_NQ; i++) {
        double s = 0.0;
        for (n = 0; n < MC2FMU_NX; n++) s += mc2fmu_enc_E[(size_t)i * MC2FMU_NX + n] * x[n];
        q[i] = s + mc2fmu_enc_e0[i];
    }
#else
    double z[MC2FMU_ENC_WMAX], y[MC2FMU_ENC_WMAX];
    const double *W = mc2fmu_enc_W, *b = mc2fmu_enc_b;
    int i, j, l, k = 0;
    for (i = 0; i < MC2FMU_NX; i++) z[i] = (x[i] - mc2fmu_enc_x_mean[i]) / mc2fmu_enc_x_scale[i];
    for (l = 0; l < MC2FMU_ENC_NL; l++) {
        const int ni = mc2fmu_enc_width[l], no = mc2fmu_enc_width[l + 1];
        for (j = 0; j < no; j++) y[j] = b[j];
        for (i = 0; i < ni; i++) {
            const double zi = z[i];
            const double *MC2FMU_RESTRICT w = W + (size_t)i * no;
            for (j = 0; j < no; j++) y[j] += w[j] * zi;
        }
        for (j = 0; j < no; j++) z[j] = l < MC2FMU_ENC_NL - 1 ? mc2fmu_enc_activate(y[j]) : y[j];
        W += (size_t)ni * no;
        b += no;
    }
    for (i = 0; i < MC2FMU_NQ; i++) {
        if (mc2fmu_angle[i]) {
            q[i] = atan2(z[k + 1], z[k]);
            k += 2;
        } else {
            q[i] = z[k++];
        }
    }
#endif
}

/* x and J (NX x NQ, row-major) of the decoder at q */
static void mc2fmu_decode_j(const double *q, double *x, double *J) {
    mc2fmu_layer_buf A, B; /* MC2FMU_P x WMAX each: value, J and H rows (H unused here) */
    mc2fmu_rows Z = mc2fmu_network(q, A, B, MC2FMU_P);
    int n, j;
    for (n = 0; n < MC2FMU_NX; n++) {
        const double s = mc2fmu_x_scale[n];
        if (x) x[n] = mc2fmu_x_mean[n] + s * Z[0][n];
        for (j = 0; j < MC2FMU_NQ; j++) J[n * MC2FMU_NQ + j] = s * Z[1 + j][n];
    }
}

/* the chart's q and qd of natural coordinates x, xd: q = encode(x) with angles on the turn
   nearest q_near (NULL: the encoder's own turn), qd the least-squares solution of J(q) qd = xd */
static void mc2fmu_chart_of(const double *x, const double *xd, const double *q_near, double *q, double *qd) {
    double J[MC2FMU_NX * MC2FMU_NQ], JTJ[MC2FMU_NQ2], JTx[MC2FMU_NQ];
    int i, j, n;
    mc2fmu_encode(x, q);
    for (i = 0; q_near && i < MC2FMU_NQ; i++)
        if (mc2fmu_angle[i]) {
            const double turns = nearbyint((q_near[i] - q[i]) / MC2FMU_TWO_PI);
            if (isfinite(turns)) q[i] += MC2FMU_TWO_PI * turns;
        }
    mc2fmu_decode_j(q, NULL, J);
    for (i = 0; i < MC2FMU_NQ; i++) {
        double s = 0.0;
        for (n = 0; n < MC2FMU_NX; n++) s += J[n * MC2FMU_NQ + i] * xd[n];
        JTx[i] = s;
        for (j = 0; j < MC2FMU_NQ; j++) {
            double t = 0.0;
            for (n = 0; n < MC2FMU_NX; n++) t += J[n * MC2FMU_NQ + i] * J[n * MC2FMU_NQ + j];
            JTJ[i * MC2FMU_NQ + j] = t;
        }
    }
    mc2fmu_cholesky_solve(JTJ, JTx, qd);
}

/* the outputs of a ROM state: x = V q_r + mu, xd = V qd_r, and the chart's q, qd of them */
static void mc2fmu_lpca_observe(const mc2fmu_lstate *s, const double *q_near, double *x, double *xd, double *q,
                                double *qd) {
    mc2fmu_lpca_decode(s->cluster, s->q, x);
    mc2fmu_lpca_velocity(s->cluster, s->qd, xd);
    mc2fmu_chart_of(x, xd, q_near, q, qd);
}

/* ------------------------------------------------------------------ the start */

/* e = encode(V_i z + mu_i) - q0, angle coordinates modulo a turn (as numpy: round half to even);
   returns sum e^2 */
static double mc2fmu_lpca_read_residual(int i, const double *z, const double *q0, double *e) {
    double x[MC2FMU_NX], f = 0.0;
    int k;
    mc2fmu_lpca_decode(i, z, x);
    mc2fmu_encode(x, e);
    for (k = 0; k < MC2FMU_NQ; k++) {
        e[k] -= q0[k];
        if (mc2fmu_angle[k]) e[k] -= MC2FMU_TWO_PI * nearbyint(e[k] / MC2FMU_TWO_PI);
        f += e[k] * e[k];
    }
    return f;
}

/* dz = A^T (A A^T)^-1 b: the least-change solution of A dz = b (A: NQ x R, row-major, R >= NQ) */
static void mc2fmu_lpca_least_change(const double *A, const double *b, double *dz) {
    double AA[MC2FMU_NQ2], y[MC2FMU_NQ];
    int k, l, r;
    for (k = 0; k < MC2FMU_NQ; k++)
        for (l = 0; l < MC2FMU_NQ; l++) {
            double t = 0.0;
            for (r = 0; r < MC2FMU_R; r++) t += A[k * MC2FMU_R + r] * A[l * MC2FMU_R + r];
            AA[k * MC2FMU_NQ + l] = t;
        }
    mc2fmu_cholesky_solve(AA, b, y);
    for (r = 0; r < MC2FMU_R; r++) {
        double t = 0.0;
        for (k = 0; k < MC2FMU_NQ; k++) t += A[k * MC2FMU_R + r] * y[k];
        dz[r] = t;
    }
}

/* the state the chart reads as (q0, qd0) in the cluster nearest x0 = decode(q0), and the
   acceleration of eq. 37 (local_linear.LocalLinearModel.chart_state): the velocity solves
   A qd = qd0 (A = (J0^T J0)^-1 J0^T V_i), the position encode(V_i z + mu_i) = q0 by Broyden's
   method from the projection V_i^T (x0 - mu_i), while the residual falls; the projection when
   that reading is out of reach */
static void mc2fmu_lpca_start(const double *q0, const double *qd0, const double *u, mc2fmu_lstate *s) {
    double x0[MC2FMU_NX], J[MC2FMU_NX * MC2FMU_NQ], a[MC2FMU_NX];
    const double *V, *mu;
    int i, n, k, r;
    mc2fmu_decode_j(q0, x0, J);
    i = mc2fmu_lpca_nearest(x0);
    V = mc2fmu_lpca_V(i);
    mu = mc2fmu_lpca_centroids + (size_t)i * MC2FMU_NX;
    memset(s, 0, sizeof *s);
    s->cluster = i;
    for (n = 0; n < MC2FMU_NX; n++) {
        double v = 0.0;
        for (k = 0; k < MC2FMU_NQ; k++) v += J[n * MC2FMU_NQ + k] * qd0[k];
        a[n] = v;
    }
    mc2fmu_lpca_project_vec(i, a, s->qd); /* V^T J0 qd0 */
    for (n = 0; n < MC2FMU_NX; n++) a[n] = x0[n] - mu[n];
    mc2fmu_lpca_project_vec(i, a, s->q); /* V^T (x0 - mu) */
    if (MC2FMU_R >= MC2FMU_NQ) {
        double JTJ[MC2FMU_NQ2], A[MC2FMU_NQ * MC2FMU_RB], col[MC2FMU_NQ], y[MC2FMU_NQ], b[MC2FMU_NQ];
        double z[MC2FMU_RB], dz[MC2FMU_RB], zn[MC2FMU_RB], e[MC2FMU_NQ], en[MC2FMU_NQ], f, tol = 1.0;
        int l, it;
        for (k = 0; k < MC2FMU_NQ; k++)
            for (l = 0; l < MC2FMU_NQ; l++) {
                double t = 0.0;
                for (n = 0; n < MC2FMU_NX; n++) t += J[n * MC2FMU_NQ + k] * J[n * MC2FMU_NQ + l];
                JTJ[k * MC2FMU_NQ + l] = t;
            }
        for (r = 0; r < MC2FMU_R; r++) { /* A's column r: (J0^T J0)^-1 J0^T V e_r */
            for (k = 0; k < MC2FMU_NQ; k++) {
                double t = 0.0;
                for (n = 0; n < MC2FMU_NX; n++) t += J[n * MC2FMU_NQ + k] * V[n * MC2FMU_R + r];
                col[k] = t;
            }
            mc2fmu_cholesky_solve(JTJ, col, y);
            for (k = 0; k < MC2FMU_NQ; k++) A[k * MC2FMU_R + r] = y[k];
        }
        /* the velocity: qd = qd_p + A^T (A A^T)^-1 (qd0 - A qd_p) */
        for (k = 0; k < MC2FMU_NQ; k++) {
            double t = 0.0;
            for (r = 0; r < MC2FMU_R; r++) t += A[k * MC2FMU_R + r] * s->qd[r];
            b[k] = qd0[k] - t;
        }
        mc2fmu_lpca_least_change(A, b, dz);
        for (r = 0; r < MC2FMU_R; r++) s->qd[r] += dz[r];
        /* the position: Broyden from the projection */
        for (r = 0; r < MC2FMU_R; r++) z[r] = s->q[r];
        f = mc2fmu_lpca_read_residual(i, z, q0, e);
        for (it = 0; it < MC2FMU_LPCA_START_ITERATIONS; it++) {
            double fn, dd = 0.0;
            if (!(f > 0.0)) break;
            mc2fmu_lpca_least_change(A, e, dz);
            for (r = 0; r < MC2FMU_R; r++) {
                dz[r] = -dz[r];
                zn[r] = z[r] + dz[r];
                dd += dz[r] * dz[r];
            }
            fn = mc2fmu_lpca_read_residual(i, zn, q0, en);
            if (!(fn < f && dd > 0.0)) break;
            for (k = 0; k < MC2FMU_NQ; k++) { /* A += (en - e - A dz) dz^T / dd */
                double t = en[k] - e[k];
                for (r = 0; r < MC2FMU_R; r++) t -= A[k * MC2FMU_R + r] * dz[r];
                for (r = 0; r < MC2FMU_R; r++) A[k * MC2FMU_R + r] += t * dz[r] / dd;
            }
            memcpy(z, zn, sizeof z);
            memcpy(e, en, sizeof e);
            f = fn;
        }
        for (k = 0; k < MC2FMU_NQ; k++) tol = fmax(tol, fabs(q0[k]));
        if (sqrt(f) <= MC2FMU_LPCA_START_TOLERANCE * tol) memcpy(s->q, z, sizeof s->q);
    }
    mc2fmu_lpca_acceleration(i, s->q, s->qd, u, s->qdd);
}
