/* mc2fmu_native.h: the reduced dynamics and the FMU runtime of an mc2fmu model, in C99.

   Shared by every model and both FMI versions; never edited per model (the model's data is
   in the generated mc2fmu_model.h).  It is included by exactly one translation unit
   (mc2fmu_fmi2.c or mc2fmu_fmi3.c), so everything here has internal linkage: two mc2fmu
   FMUs loaded in one process share no symbol but the FMI functions, which the importer
   resolves per library.

   The numerics replicate mc2fmu's Python side (mc2fmu/models/mlp.py, mc2fmu/models/manifold.py,
   mc2fmu/models/step_maps.py and templates/pythonfmu_slave.py.in) operation by operation where
   practical, in double
   precision:
   - decoder: z-scored inputs (cos/sin for angle coordinates), value, Jacobian and Hessian
     propagated through the layers: a = W z + b, Ja = W Jz, Ha = W Hz; then
     Hz = s''(a) Ja Ja^T + s'(a) Ha, Jz = s'(a) Ja, z = s(a); output de-normalised;
   - M_m = J^T M J, G_m = J^T M (H : v v), f_m = J^T f, f = f_g + f_B u + sum_i u_i f_C[i] x,
     plus the spring-dampers J^T f_spring(x, J v) with the velocity v of each acceleration
     and the identified terms Xi^T lambda(q, v, u) (train --identify; mc2fmu/models/terms.py),
     with the decoder's output layer folded into M, f_g, f_B, f_C and the springs at export
     (exact algebra, different rounding; see mc2fmu_terms): the step propagates the last
     hidden layer only;
     the M_m solve by the same unrolled Cholesky factorisation;
   - the step map (mc2fmu_step.h, printed per model from mc2fmu/models/step_maps.py);
   - co-simulation on the fixed internal grid t_k = t0 + k dt with the quadratic
     interpolation of the last three grid states at communication points;
   - poses from the decoded points: the polar factor of [(r1-r0),(r2-r0),(r3-r0)]/L by
     Newton's iteration R <- (R + R^-T)/2, the quaternion by Shepperd's method (w >= 0);
   - the envelope distance of mc2fmu/models/envelope.py;
   - model exchange's getDirectionalDerivative: the accelerations and poses by the complex step
     through a complex twin of the same code (the numerics live in mc2fmu_dynamics.h, included
     once for double and once for double _Complex), exact to rounding. */
#ifndef MC2FMU_NATIVE_H
#define MC2FMU_NATIVE_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GLIBC__) && (defined(__x86_64__) || defined(__aarch64__))
/* Binding the original versions of the three symbols a build would take from a newer glibc
   (memcpy@GLIBC_2.14, exp and log @GLIBC_2.29, the last two for sigmoid and softplus layers and
   learned spring laws) lets the library load on every glibc of its architecture: 2.2.5 on
   x86-64, 2.17 (the first) on aarch64 (docs/fmus.md).  The export checks the floor. */
#if defined(__x86_64__)
#define MC2FMU_GLIBC_BASE "GLIBC_2.2.5"
__asm__(".symver memcpy, memcpy@GLIBC_2.2.5");
#else
#define MC2FMU_GLIBC_BASE "GLIBC_2.17"
#endif
__asm__(".symver exp, exp@" MC2FMU_GLIBC_BASE);
__asm__(".symver log, log@" MC2FMU_GLIBC_BASE);
#endif

enum { MC2FMU_ROLE_INPUT, MC2FMU_ROLE_POSE, MC2FMU_ROLE_Q, MC2FMU_ROLE_QD, MC2FMU_ROLE_ENVELOPE,
       MC2FMU_ROLE_Q_START, MC2FMU_ROLE_QD_START, MC2FMU_ROLE_DER_Q, MC2FMU_ROLE_DER_QD, MC2FMU_ROLE_TIME,
       MC2FMU_ROLE_PHYSICS, MC2FMU_ROLE_MOTION };

typedef struct {
    const char *name;
    int role;
    int index;
    double start;
} mc2fmu_variable;

#include "mc2fmu_model.h"

#ifndef MC2FMU_NMOTION
#define MC2FMU_NMOTION 0 /* the motion outputs (mc2fmu/models/motion.py): velocities, energies */
#endif
#ifndef MC2FMU_NODE
#define MC2FMU_NODE 0 /* 1: the dynamics are the node reducer's neural ODE, the decoder gives the poses */
#endif
#ifndef MC2FMU_LPCA
#define MC2FMU_LPCA 0 /* 1: the local-pca reducer's piecewise-linear ROM (mc2fmu_lpca.h), co-simulation only */
#endif
#define MC2FMU_ONE_STEP (MC2FMU_NODE || MC2FMU_LPCA) /* q, qd at two grid points, Hermite between */
#if MC2FMU_LPCA && MC2FMU_HAS_ME
#error "a local-PCA model is discrete-time (Algorithm 1 switches clusters between steps): co-simulation only"
#endif

#if defined(__GNUC__) || defined(__clang__) || defined(_MSC_VER)
#define MC2FMU_RESTRICT __restrict
#else
#define MC2FMU_RESTRICT
#endif

#define MC2FMU_NQ2 (MC2FMU_NQ * MC2FMU_NQ)
#define MC2FMU_NSYM (MC2FMU_NQ * (MC2FMU_NQ + 1) / 2)
/* packed rows: the value, the Jacobian's NQ rows, the Hessian's NSYM distinct rows (j <= k) */
#define MC2FMU_P (1 + MC2FMU_NQ + MC2FMU_NSYM)
/* the packed row of the Hessian's entry (j, k), j <= k */
#define MC2FMU_SYM(j, k) (1 + MC2FMU_NQ + (j) * (2 * MC2FMU_NQ - (j) - 1) / 2 + (k))
/* the dynamics' H : v v by one propagated row per velocity rather than the NSYM Hessian rows
   (mc2fmu_dynamics.h).  Measured (C host, 1 ms steps): 3-RRR (3 coordinates) 10.5 -> 9.1 us,
   five-bar (2) 7.7 -> 6.5 us; with one coordinate (NSYM = 1) it would add a row per step */
#ifndef MC2FMU_JV
#define MC2FMU_JV (MC2FMU_NQ >= 2 && MC2FMU_NL > 1)
#endif
#define MC2FMU_NE (2 * MC2FMU_NQ + MC2FMU_NU) /* envelope channels: q, qd, u */
#define MC2FMU_NU1 (MC2FMU_NU > 0 ? MC2FMU_NU : 1)
#define MC2FMU_GRID_TOL 1e-6 /* a communication point within 1e-6 dt of a grid point is that point */
/* the most grid steps one doStep may take (about 15 s of CPU at 1.5 us a step): a larger
   communication step is an error that says so, never a hang */
#define MC2FMU_MAX_GRID_STEPS 10000000.0

/* statuses, numerically equal in FMI 2 and FMI 3 */
enum { MC2FMU_OK = 0, MC2FMU_WARNING = 1, MC2FMU_DISCARD = 2, MC2FMU_ERROR = 3, MC2FMU_FATAL = 4 };
enum { MC2FMU_CS = 0, MC2FMU_ME = 1 };
/* the phases of an instance: the states of the FMI state machines (FMI 2 "stepComplete" is
   MC2FMU_STEP); an Error is kept apart, in mc2fmu_state.failed */
enum { MC2FMU_INSTANTIATED, MC2FMU_INITIALIZATION, MC2FMU_EVENT, MC2FMU_CONTINUOUS, MC2FMU_STEP, MC2FMU_TERMINATED,
       MC2FMU_PHASES };
/* sane magnitudes where values enter (as the CLI checks files: mc2fmu/data/poses.py) */
#define MC2FMU_MAX_TIME 1e9   /* s: start time, setTime */
#define MC2FMU_MAX_INPUT 1e12 /* N or N.m */
/* a start state further than this many training spans outside the envelope is refused at
   initialisation (closer, it is extrapolation, and the envelope output says how far) */
#define MC2FMU_MAX_START_EXCURSION 1e3

#if defined(__GNUC__) || defined(__clang__)
#define MC2FMU_INLINE static inline __attribute__((always_inline))
#define MC2FMU_UNUSED __attribute__((unused))
#else
#define MC2FMU_INLINE static inline
#define MC2FMU_UNUSED
#endif

/* ------------------------------------------------------------------ the physical parameters

   mc2fmu_phys_start (NPHYS): per body (MC2FMU_BODY_SLOTS) mass, com x y z (body frame),
   inertia xx yy zz xy xz yz (about the COM, body axes); gravity x y z; per spring stiffness,
   damping, rest length (mc2fmu.mechanics.variants.parameter_vector).  The NC mass matrix is
   linear in each body's mass, mass times COM offset and second moment
   (mc2fmu_body_mass of mc2fmu_mass.h, printed from mc2fmu.mechanics.parameters.body_mass_entries;
   the trained layout's points), gravity's force is
   f_g = M (g on every point), and the springs' constants enter the tension alone.  So new
   parameters are a new A = W_L^T S M S W_L = G^T G and g = W_L^T S f_g, formed once when they
   are set (pivoted Cholesky with the exported model's rank NK: the rows a step reads) and
   read by every step as the exported values were: a step costs the same with any parameters. */

#define MC2FMU_NS1 (MC2FMU_NS > 0 ? MC2FMU_NS : 1)
#define MC2FMU_PHYS_GRAVITY (MC2FMU_BODY_SLOTS * MC2FMU_NB)
#define MC2FMU_PHYS_SPRINGS (MC2FMU_PHYS_GRAVITY + 3)

#include "mc2fmu_mass.h" /* mc2fmu_body_mass: a body's point mass block, printed from the model's Python */

typedef struct {
    double GT[MC2FMU_NH * MC2FMU_NK];   /* A = G^T G, G (NK x NH) stored transposed: GT[n * NK + r] = G[r][n] */
    double g[MC2FMU_NH];                /* g = W_L^T S f_g */
    double spring[3 * MC2FMU_NS1];      /* per spring: k, c, L0 */
    double body_mass[MC2FMU_MASS_VALUES * MC2FMU_NB]; /* per body mc2fmu_body_mass: its point mass block */
} mc2fmu_physics;

/* what one parameter value must satisfy on its own: 0 if it does, else 1 with the reason in
   why; the limits are the mechanism file's (mc2fmu/mechanics/mechanism.py) */
static int mc2fmu_slot_problem(int slot, double v, char *why, size_t n) {
    if (!isfinite(v)) return snprintf(why, n, "it must be finite"), 1;
    if (slot < MC2FMU_PHYS_GRAVITY) {
        const int k = slot % MC2FMU_BODY_SLOTS;
        if (k == 0) {
            if (v >= MC2FMU_MIN_MASS && v <= MC2FMU_MAX_MASS) return 0;
            return snprintf(why, n, "a mass must lie in [%g, %g] kg", MC2FMU_MIN_MASS, MC2FMU_MAX_MASS), 1;
        }
        if (k < 4) {
            if (fabs(v) <= MC2FMU_MAX_LENGTH) return 0;
            return snprintf(why, n, "a centre of mass must lie within %g m of the body origin", MC2FMU_MAX_LENGTH), 1;
        }
        if (k < 7 && v < 0.0) return snprintf(why, n, "a principal moment of inertia must be >= 0"), 1;
        if (fabs(v) <= MC2FMU_MAX_INERTIA) return 0;
        return snprintf(why, n, "an inertia entry must be at most %g kg m^2 in magnitude", MC2FMU_MAX_INERTIA), 1;
    }
    if (slot < MC2FMU_PHYS_SPRINGS) {
        if (fabs(v) <= MC2FMU_MAX_GRAVITY) return 0;
        return snprintf(why, n, "gravity must be at most %g m/s^2 in magnitude", MC2FMU_MAX_GRAVITY), 1;
    }
    switch ((slot - MC2FMU_PHYS_SPRINGS) % 3) {
    case 0:
        if (v >= 0.0 && v <= MC2FMU_MAX_STIFFNESS) return 0;
        return snprintf(why, n, "a stiffness must lie in [0, %g] N/m", MC2FMU_MAX_STIFFNESS), 1;
    case 1:
        if (v >= 0.0 && v <= MC2FMU_MAX_DAMPING) return 0;
        return snprintf(why, n, "a damping must lie in [0, %g] N s/m", MC2FMU_MAX_DAMPING), 1;
    default:
        if (v > 0.0 && v <= MC2FMU_MAX_LENGTH) return 0;
        return snprintf(why, n, "a rest length must lie in (0, %g] m", MC2FMU_MAX_LENGTH), 1;
    }
}

/* the parameters taken together: each value, then each body's inertia, a rigid body's (the
   second moment S = tr(J)/2 I - J positive semi-definite: J >= 0 with the triangle inequalities
   J1 <= J2 + J3, all principal minors of S >= 0 to INERTIA_RTOL); 0 if they hold, else 1 with
   the message in msg */
static int mc2fmu_physics_problem(const double *th, char *msg, size_t n) {
    int b, k;
    for (k = 0; k < MC2FMU_NPHYS; k++) {
        char why[160];
        if (mc2fmu_slot_problem(k, th[k], why, sizeof why)) {
            snprintf(msg, n, "%s = %.17g: %s", mc2fmu_phys_names[k], th[k], why);
            return 1;
        }
    }
    for (b = 0; b < MC2FMU_NB; b++) {
        const double *J = th + MC2FMU_BODY_SLOTS * b + 4; /* xx yy zz xy xz yz */
        const double tr = J[0] + J[1] + J[2];
        const double S00 = 0.5 * tr - J[0], S11 = 0.5 * tr - J[1], S22 = 0.5 * tr - J[2];
        const double S01 = -J[3], S02 = -J[4], S12 = -J[5];
        double scale = 0.0, tol;
        for (k = 0; k < 6; k++) scale = fmax(scale, fabs(J[k]));
        tol = MC2FMU_INERTIA_RTOL * scale;
        if (S00 < -tol || S11 < -tol || S22 < -tol || S00 * S11 - S01 * S01 < -tol * scale ||
            S00 * S22 - S02 * S02 < -tol * scale || S11 * S22 - S12 * S12 < -tol * scale ||
            S00 * (S11 * S22 - S12 * S12) - S01 * (S01 * S22 - S12 * S02) + S02 * (S01 * S12 - S11 * S02) <
                -tol * scale * scale) {
            snprintf(msg, n, "%s.inertia [xx yy zz xy xz yz] = [%.6g %.6g %.6g %.6g %.6g %.6g] kg m^2 is no rigid "
                     "body's: its principal moments must be >= 0 and satisfy the triangle inequality J1 <= J2 + J3 "
                     "(check the values and the axes)", mc2fmu_body_names[b], J[0], J[1], J[2], J[3], J[4], J[5]);
            return 1;
        }
    }
    return 0;
}

/* G, g and the spring constants from the parameters th (already checked); work: NH x NH scratch.
   Returns the part of A the NK rows of G leave out, relative to A's largest diagonal entry
   (0 when the rank fits) */
static double mc2fmu_physics_form(const double *th, mc2fmu_physics *ph, double *work) {
    const double *WL = mc2fmu_WT[MC2FMU_NL - 1]; /* NH x NX */
    double *A = work, d0 = 0.0, rest = 0.0;
    double diag[MC2FMU_NH];
    int pivoted[MC2FMU_NH];
    int b, a, i, j, l, n, m, r, t;
    memset(A, 0, sizeof(double) * MC2FMU_NH * MC2FMU_NH);
    memset(ph, 0, sizeof *ph);
    for (b = 0; b < MC2FMU_NB; b++) {
        const int o = mc2fmu_body_offset[b];
        double *mv = ph->body_mass + MC2FMU_MASS_VALUES * b, geo[4], Ab[4][4];
        const double *rows = mv + MC2FMU_MASS_ROWSUMS;
        geo[0] = mc2fmu_body_length[b];
        for (i = 0; i < 3; i++) geo[1 + i] = mc2fmu_body_com[3 * b + i];
        mc2fmu_body_mass(th + MC2FMU_BODY_SLOTS * b, geo, mv);
        for (j = 0; j < 4; j++)
            for (l = 0; l < 4; l++) Ab[j][l] = mv[mc2fmu_mass_entry[j][l]];
        for (a = 0; a < 3; a++) {
            /* R_j = (S W_L) row of point j, axis a; A += R^T Ab R; g += R^T (rowsum(Ab) g_a) */
            double R[4][MC2FMU_NH], T[4][MC2FMU_NH];
            for (j = 0; j < 4; j++) {
                const int x = o + 3 * j + a;
                for (n = 0; n < MC2FMU_NH; n++) R[j][n] = mc2fmu_x_scale[x] * WL[(size_t)n * MC2FMU_NX + x];
            }
            for (j = 0; j < 4; j++)
                for (n = 0; n < MC2FMU_NH; n++) {
                    double acc = 0.0;
                    for (l = 0; l < 4; l++) acc += Ab[j][l] * R[l][n];
                    T[j][n] = acc;
                }
            for (n = 0; n < MC2FMU_NH; n++)
                for (m = n; m < MC2FMU_NH; m++) {
                    double acc = 0.0;
                    for (j = 0; j < 4; j++) acc += R[j][n] * T[j][m];
                    A[n * MC2FMU_NH + m] += acc;
                }
            for (n = 0; n < MC2FMU_NH; n++) {
                double acc = 0.0;
                for (j = 0; j < 4; j++) acc += R[j][n] * rows[j];
                ph->g[n] += acc * th[MC2FMU_PHYS_GRAVITY + a];
            }
        }
    }
    for (n = 0; n < MC2FMU_NH; n++) {
        for (m = 0; m < n; m++) A[n * MC2FMU_NH + m] = A[m * MC2FMU_NH + n];
        diag[n] = A[n * MC2FMU_NH + n];
        pivoted[n] = 0;
        d0 = fmax(d0, diag[n]);
    }
    /* A = G^T G by the pivoted (outer-product) Cholesky factorisation, NK rows at most: row r
       pivots on the largest remaining diagonal entry; entries below MASS_RANK_TOL of the
       largest are the rank deficiency mc2fmu.fmu.backends.native.mass_factor leaves out too */
    for (r = 0; r < MC2FMU_NK && d0 > 0.0; r++) {
        double *GT = ph->GT, piv; /* G[r][n] is GT[n * NK + r] */
        int p = -1;
        for (n = 0; n < MC2FMU_NH; n++)
            if (!pivoted[n] && (p < 0 || diag[n] > diag[p])) p = n;
        if (p < 0 || !(diag[p] > MC2FMU_MASS_RANK_TOL * d0)) break;
        piv = sqrt(diag[p]);
        pivoted[p] = 1;
        for (n = 0; n < MC2FMU_NH; n++) {
            double acc, *Gn = GT + (size_t)n * MC2FMU_NK;
            const double *Gp = GT + (size_t)p * MC2FMU_NK;
            if (pivoted[n] && n != p) continue; /* G[r][n] = 0 */
            if (n == p) { Gn[r] = piv; continue; }
            acc = A[p * MC2FMU_NH + n];
            for (t = 0; t < r; t++) acc -= Gp[t] * Gn[t];
            Gn[r] = acc / piv;
            diag[n] -= Gn[r] * Gn[r];
        }
    }
    if (d0 > 0.0)
        for (n = 0; n < MC2FMU_NH; n++)
            if (!pivoted[n]) rest = fmax(rest, diag[n] / d0);
#if MC2FMU_NS > 0
    for (i = 0; i < 3 * MC2FMU_NS; i++) ph->spring[i] = th[MC2FMU_PHYS_SPRINGS + i];
#endif
    return rest;
}

/* the numerics in double precision: mc2fmu_decode, mc2fmu_eval_terms, mc2fmu_acceleration, ... */
#define mc2fmu_real double
#define MC2FMU_(name) mc2fmu_##name
#if MC2FMU_ONE_STEP /* the decoder-manifold dynamics are compiled but not run */
#define MC2FMU_STATIC static MC2FMU_UNUSED
#else
#define MC2FMU_STATIC static
#endif
#define MC2FMU_RE(z) (z)
#define MC2FMU_ABS(z) fabs(z)
#define MC2FMU_COS cos
#define MC2FMU_SIN sin
#define MC2FMU_TANH tanh
#define MC2FMU_EXP exp
#define MC2FMU_SQRT sqrt
#define MC2FMU_LOG1P log1p
#include "mc2fmu_dynamics.h" /* which undefines them again */

#if MC2FMU_LPCA || defined(MC2FMU_SELFTEST)
/* the decoder's full output rows (x, J, H through the output layer), which the dynamics and the
   poses never form: for the local-PCA ROM's chart and the export's self-check; returns the
   buffer (A or B) that holds them */
static mc2fmu_rows mc2fmu_network(const double *q, mc2fmu_rows A, mc2fmu_rows B, int np) {
    mc2fmu_rows cur = mc2fmu_hidden(q, A, B, np);
    mc2fmu_rows nxt = cur == A ? B : A;
    mc2fmu_affine(MC2FMU_NL - 1, cur, nxt, np);
    return nxt;
}
#endif

#if MC2FMU_LPCA
#include "mc2fmu_lpca.h"
#endif

/* the same numerics on complex numbers (mc2fmu_cs_*), for the directional derivatives.  C99
   complex arithmetic is optional in C11 and absent from MSVC: there (or with
   -DMC2FMU_NO_DIRECTIONAL) getDirectionalDerivative reports that it was compiled out */
#if !defined(MC2FMU_NO_DIRECTIONAL) && !defined(__STDC_NO_COMPLEX__) && !defined(_MSC_VER)
#define MC2FMU_HAS_DIRECTIONAL 1
#include <complex.h>
#undef I
#undef complex
#define MC2FMU_CS_H 1e-20 /* the complex step, for seeds scaled to unit max-norm */
#define mc2fmu_real double _Complex
#define MC2FMU_(name) mc2fmu_cs_##name
#define MC2FMU_STATIC static MC2FMU_UNUSED
#define MC2FMU_RE(z) creal(z)
#define MC2FMU_ABS(z) (creal(z) < 0.0 ? -(z) : (z))
#define MC2FMU_COS ccos
#define MC2FMU_SIN csin
#define MC2FMU_TANH ctanh
#define MC2FMU_EXP cexp
#define MC2FMU_SQRT csqrt
#define MC2FMU_LOG1P(z) clog(1.0 + (z))
#include "mc2fmu_dynamics.h" /* which undefines them again */
#else
#define MC2FMU_HAS_DIRECTIONAL 0
#endif

static int mc2fmu_all_finite(const double *v, int n) {
    int i;
    for (i = 0; i < n; i++)
        if (!isfinite(v[i])) return 0;
    return 1;
}

/* the channels v = (q, qd, u) of the training envelope */
static void mc2fmu_envelope_point(const double *q, const double *qd, const double *u, double *v) {
    int c;
    for (c = 0; c < MC2FMU_NQ; c++) { v[c] = q[c]; v[MC2FMU_NQ + c] = qd[c]; }
    for (c = 0; c < MC2FMU_NU; c++) v[2 * MC2FMU_NQ + c] = u[c];
}

/* normalised distance outside the training envelope (0 inside; inf for a non-finite value):
   mc2fmu_envelope of mc2fmu_envelope.h */
static double mc2fmu_envelope_distance(const double *q, const double *qd, const double *u) {
    double v[MC2FMU_NE];
    mc2fmu_envelope_point(q, qd, u, v);
    if (!mc2fmu_all_finite(v, MC2FMU_NE)) return INFINITY;
    return mc2fmu_envelope(v);
}

/* ------------------------------------------------------------------ the runtime */

#define MC2FMU_MESSAGE 400

/* everything an FMU state holds: plain old data, copied and serialised as bytes */
typedef struct {
    double t0, time;
    int64_t k;                          /* grid index of the newest state (co-simulation) */
    double hist[3][MC2FMU_NQ];          /* q_{k-2}, q_{k-1}, q_k */
    double hqd[2][MC2FMU_NQ];           /* one-step models: qd_{k-1}, qd_k (a node model's RK4 state is q_k, qd_k) */
#if MC2FMU_LPCA
    mc2fmu_lstate rom;                  /* the ROM's state at grid point k: cluster, q_r, qd_r, qdd_r */
    double hx[2][MC2FMU_NX], hxd[2][MC2FMU_NX]; /* its natural coordinates x, xd at t_{k-1}, t_k */
    double x_out[MC2FMU_NX];            /* x at the communication time (the poses) */
#endif
    double u[MC2FMU_NU1];
    double q_start[MC2FMU_NQ], qd_start[MC2FMU_NQ];
    double phys[MC2FMU_NPHYS];          /* the physical parameters (mc2fmu_phys_start) */
    double q_out[MC2FMU_NQ], qd_out[MC2FMU_NQ]; /* co-simulation outputs at the communication time */
    double xs[2 * MC2FMU_NQ];           /* model exchange: the continuous states q, qd */
    double envelope;
    double t_completed[2];              /* model exchange: the times of the last two completedIntegratorStep */
    double t_event;                     /* model exchange: the time of the last event (initialisation included) */
    int32_t phase, warned, failed, pad;
    char failure[MC2FMU_MESSAGE];
} mc2fmu_state;

typedef struct mc2fmu_core mc2fmu_core;
typedef void (*mc2fmu_log_fn)(mc2fmu_core *c, int status, const char *category, const char *message);

/* an FMU state handed to the host: kept on its instance's list, so a pointer the instance did
   not hand out is refused (never dereferenced) and fmiFreeInstance frees what the host left */
typedef struct mc2fmu_saved {
    struct mc2fmu_saved *next;
    mc2fmu_state s;
} mc2fmu_saved;

struct mc2fmu_core {
    mc2fmu_state s;
    int interface;                      /* MC2FMU_CS or MC2FMU_ME */
    int fmi;                            /* 2 or 3: which state machine and function names */
    mc2fmu_saved *saved;                /* the FMU states handed out and not yet freed */
    mc2fmu_log_fn log;
    unsigned log_on;                    /* the enabled log categories (MC2FMU_LOG_*): errors are always sent */
    void *glue;                         /* the FMI glue's instance data (callbacks, name) */
    int pose_valid;
    double pose[7 * MC2FMU_NB];
    mc2fmu_terms T;
    mc2fmu_physics ph;                  /* formed from ph_theta (T.ph points here) */
    double ph_theta[MC2FMU_NPHYS];      /* the parameters ph was formed from, if ph_formed */
    int ph_formed, ph_ok;               /* ph_ok: s.phys are a rigid mechanism's, and ph is theirs */
    char ph_problem[MC2FMU_MESSAGE];    /* ... if not, why */
    double ph_work[MC2FMU_NH * MC2FMU_NH];
#if MC2FMU_HAS_DIRECTIONAL
    mc2fmu_cs_terms Tc;                 /* the complex-step twin of T (directional derivatives) */
#endif
    int motion_valid;
#if MC2FMU_NMOTION > 0
    double motion[MC2FMU_NMOTION];      /* the motion outputs at the current state, if motion_valid */
    double mxd[MC2FMU_NX];              /* their xd = J qd */
#if MC2FMU_HAS_DIRECTIONAL
    double _Complex cmxd[MC2FMU_NX];
#endif
#endif
};

/* the log categories of modelDescription.xml (mc2fmu/fmu/common.py), as bits */
static const char *const mc2fmu_log_names[] = {"logStatusWarning", "logStatusDiscard", "logStatusError",
                                               "logStatusFatal", "logAll"};
enum { MC2FMU_LOG_WARNING = 1, MC2FMU_LOG_DISCARD = 2, MC2FMU_LOG_ERROR = 4, MC2FMU_LOG_FATAL = 8, MC2FMU_LOG_ALL = 16,
       MC2FMU_LOG_EVERY = 31 };

static void mc2fmu_logf(mc2fmu_core *c, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void mc2fmu_logf(mc2fmu_core *c, int status, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    const int bit = status == MC2FMU_WARNING ? 0 : status == MC2FMU_DISCARD ? 1 : status == MC2FMU_ERROR ? 2
                    : status == MC2FMU_FATAL ? 3 : 4;
    /* the standard: only enabled categories, but errors always (FMI 3.0 section 2.3.1) */
    if (status < MC2FMU_ERROR && !(c->log_on & ((1u << bit) | MC2FMU_LOG_ALL))) return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (c->log) c->log(c, status, mc2fmu_log_names[bit], buf);
}

/* log an error and remember it: an FMU that failed refuses every call until reset or restored */
static int mc2fmu_fail(mc2fmu_core *c, const char *message) {
    if (!c->s.failed) snprintf(c->s.failure, sizeof c->s.failure, "%s", message); /* the first one is the cause */
    c->s.failed = 1;
    mc2fmu_logf(c, MC2FMU_ERROR, "mc2fmu: %s", message);
    return MC2FMU_ERROR;
}

static const char *mc2fmu_repr(double v, char *buf, size_t n) {
    if (isnan(v)) snprintf(buf, n, "nan");
    else if (isinf(v)) snprintf(buf, n, v > 0 ? "inf" : "-inf");
    else snprintf(buf, n, "%.17g", v);
    return buf;
}

/* the largest part of A (relative to its largest diagonal entry) that the NK rows of G may leave
   out: more means the parameters give mass to directions the exported model's mass matrix had
   none in (a rod or plate given inertia about its free axis) */
#define MC2FMU_RANK_EXCESS 1e-9

/* the reduced mass matrix J^T M J at the configurations mc2fmu_mass_check_q (spread over the
   training envelope, as mc2fmu.models.artifact._check_reduced_mass samples them) with the
   physics just formed: 1 if every Cholesky pivot is above 1e-10 of the largest diagonal entry */
static int mc2fmu_reduced_mass_regular(mc2fmu_core *c) {
#if MC2FMU_ONE_STEP
    (void)c;
    return 1; /* node and local-PCA models have no physical parameters */
#else
    int k, i, j, l, ok = 1;
    for (k = 0; k < MC2FMU_NCHECK && ok; k++) {
        double L[MC2FMU_NQ2], dmax = 0.0;
        c->T.valid = 0;
        mc2fmu_eval_geometry(mc2fmu_mass_check_q + (size_t)k * MC2FMU_NQ, &c->T);
        for (i = 0; i < MC2FMU_NQ; i++) dmax = fmax(dmax, c->T.Mm[i * MC2FMU_NQ + i]);
        for (j = 0; j < MC2FMU_NQ && ok; j++) {
            double d = c->T.Mm[j * MC2FMU_NQ + j];
            for (l = 0; l < j; l++) d -= L[j * MC2FMU_NQ + l] * L[j * MC2FMU_NQ + l];
            if (!(d > 1e-10 * dmax)) { ok = 0; break; }
            L[j * MC2FMU_NQ + j] = sqrt(d);
            for (i = j + 1; i < MC2FMU_NQ; i++) {
                double e = c->T.Mm[i * MC2FMU_NQ + j];
                for (l = 0; l < j; l++) e -= L[i * MC2FMU_NQ + l] * L[j * MC2FMU_NQ + l];
                L[i * MC2FMU_NQ + j] = e / L[j * MC2FMU_NQ + j];
            }
        }
    }
    c->T.valid = 0;
    return ok;
#endif
}

/* ph for the parameters s.phys, formed when they changed; ph_ok and ph_problem say whether
   they describe a rigid mechanism this build can run */
static void mc2fmu_physics_update(mc2fmu_core *c) {
    double rest;
    if (c->ph_formed && memcmp(c->ph_theta, c->s.phys, sizeof c->ph_theta) == 0) return;
    memcpy(c->ph_theta, c->s.phys, sizeof c->ph_theta);
    c->ph_formed = 1;
    c->T.valid = 0;
#if MC2FMU_HAS_DIRECTIONAL
    c->Tc.valid = 0;
#endif
    c->ph_ok = 0;
    if (mc2fmu_physics_problem(c->s.phys, c->ph_problem, sizeof c->ph_problem)) return;
    rest = mc2fmu_physics_form(c->s.phys, &c->ph, c->ph_work);
    if (!(rest <= MC2FMU_RANK_EXCESS)) {
        snprintf(c->ph_problem, sizeof c->ph_problem, "these masses and inertias put %.2g of the mass matrix in "
                 "directions the exported model's has none in (a rod or a plate given inertia about its free axis); "
                 "export the model for them with `mc2fmu export MODEL --mechanism VARIANT.toml`", rest);
        return;
    }
    if (memcmp(c->s.phys, mc2fmu_phys_start, sizeof c->s.phys) != 0 && !mc2fmu_reduced_mass_regular(c)) {
        snprintf(c->ph_problem, sizeof c->ph_problem, "with these masses and inertias the reduced mass matrix is "
                 "singular at configurations the model was trained on (a body without the inertia its motion needs); "
                 "give every moving body mass and inertia about the axes it turns about");
        return;
    }
    c->ph_ok = 1;
}

/* before an evaluation of the dynamics: an error with the reason if the parameters cannot run */
static int mc2fmu_physics_ready(mc2fmu_core *c, const char *fn) {
    char msg[MC2FMU_MESSAGE];
    mc2fmu_physics_update(c);
    if (c->ph_ok) return MC2FMU_OK;
    snprintf(msg, sizeof msg, "%s: the physical parameters are refused: %.300s", fn, c->ph_problem);
    return mc2fmu_fail(c, msg);
}

static void mc2fmu_reset(mc2fmu_core *c) {
    int i, v;
    memset(&c->s, 0, sizeof c->s);
    for (i = 0; i < 3; i++)
        for (v = 0; v < MC2FMU_NQ; v++) c->s.hist[i][v] = NAN;
    for (i = 0; i < 2; i++)
        for (v = 0; v < MC2FMU_NQ; v++) c->s.hqd[i][v] = NAN;
#if MC2FMU_LPCA
    for (i = 0; i < 2; i++)
        for (v = 0; v < MC2FMU_NX; v++) c->s.hx[i][v] = c->s.hxd[i][v] = NAN;
#endif
    for (v = 0; v < MC2FMU_NV; v++) {
        const mc2fmu_variable *var = &mc2fmu_variables[v];
        if (var->role == MC2FMU_ROLE_INPUT) c->s.u[var->index] = var->start;
        else if (var->role == MC2FMU_ROLE_Q_START) c->s.q_start[var->index] = var->start;
        else if (var->role == MC2FMU_ROLE_QD_START) c->s.qd_start[var->index] = var->start;
    }
    memcpy(c->s.phys, mc2fmu_phys_start, sizeof c->s.phys);
    c->s.phase = MC2FMU_INSTANTIATED;
    c->pose_valid = 0;
    c->motion_valid = 0;
    mc2fmu_physics_update(c);
}

/* a new instance's core (zeroed by the caller): its FMI version and interface, the FMI glue's
   logger and instance data, then the start values */
static void mc2fmu_init(mc2fmu_core *c, int fmi, int interface, int logging_on, mc2fmu_log_fn log, void *glue) {
    c->fmi = fmi;
    c->log_on = logging_on ? MC2FMU_LOG_EVERY : 0u;
    c->interface = interface;
    c->log = log;
    c->glue = glue;
    c->saved = NULL;
    c->T.ph = &c->ph;
#if MC2FMU_HAS_DIRECTIONAL
    c->Tc.ph = &c->ph;
#endif
    c->ph_formed = 0;
    mc2fmu_reset(c);
}

/* initialisation is over: the outputs are the model's, no longer the start values */
static int mc2fmu_running(const mc2fmu_core *c) {
    return c->s.phase >= MC2FMU_EVENT;
}

/* ------------------------------------------------------------------ the state machines */

/* what a call does, for the state machine (one entry per group of FMI functions that the
   standard allows in the same states) */
enum {
    MC2FMU_CALL_ANY,              /* setDebugLogging, reset, the FMU-state functions: every state */
    MC2FMU_CALL_SETUP,            /* fmi2SetupExperiment, enterInitializationMode */
    MC2FMU_CALL_EXIT_INIT,
    MC2FMU_CALL_ENTER_EVENT,
    MC2FMU_CALL_DISCRETE,         /* fmi2NewDiscreteStates, fmi3UpdateDiscreteStates */
    MC2FMU_CALL_ENTER_CONTINUOUS,
    MC2FMU_CALL_COMPLETED_STEP,
    MC2FMU_CALL_SET_TIME,
    MC2FMU_CALL_SET_STATES,
    MC2FMU_CALL_GET_STATES,       /* getContinuousStates, getEventIndicators */
    MC2FMU_CALL_GET_DERIVATIVES,
    MC2FMU_CALL_GET_NOMINALS,
    MC2FMU_CALL_COUNTS,           /* fmi3GetNumberOfContinuousStates / EventIndicators */
    MC2FMU_CALL_ENTER_STEP,
    MC2FMU_CALL_DO_STEP,
    MC2FMU_CALL_STATUS,           /* fmi2Get*Status */
    MC2FMU_CALL_GET,
    MC2FMU_CALL_SET,
    MC2FMU_CALL_DIRECTIONAL,
    MC2FMU_CALL_TERMINATE
};

#define MC2FMU_IN(p) (1u << (p))
#define MC2FMU_ALL_PHASES (MC2FMU_IN(MC2FMU_PHASES) - 1u)

/* the phases in which the standard allows a call: the state tables of FMI 2.0 (section 3.2.3
   model exchange, 4.2.4 co-simulation) and FMI 3.0 (sections 2.3, 3.2, 4.2) */
static unsigned mc2fmu_allowed(const mc2fmu_core *c, int call) {
    const int me = c->interface == MC2FMU_ME, fmi2 = c->fmi == 2;
    const unsigned inst = MC2FMU_IN(MC2FMU_INSTANTIATED), init = MC2FMU_IN(MC2FMU_INITIALIZATION),
                   event = MC2FMU_IN(MC2FMU_EVENT), cont = MC2FMU_IN(MC2FMU_CONTINUOUS), step = MC2FMU_IN(MC2FMU_STEP),
                   term = MC2FMU_IN(MC2FMU_TERMINATED);
    switch (call) {
    case MC2FMU_CALL_ANY: return MC2FMU_ALL_PHASES;
    case MC2FMU_CALL_SETUP: return inst;
    case MC2FMU_CALL_EXIT_INIT: return init;
    case MC2FMU_CALL_ENTER_EVENT: return me ? (fmi2 ? event | cont : cont) : 0u; /* CS: hasEventMode = false */
    case MC2FMU_CALL_DISCRETE: case MC2FMU_CALL_ENTER_CONTINUOUS: return me ? event : 0u;
    case MC2FMU_CALL_COMPLETED_STEP: case MC2FMU_CALL_SET_STATES: return me ? cont : 0u;
    case MC2FMU_CALL_SET_TIME: return me ? (fmi2 ? event : 0u) | cont : 0u; /* FMI 3: Continuous-Time Mode only */
    case MC2FMU_CALL_GET_STATES: return me ? init | event | cont | term : 0u;
    case MC2FMU_CALL_GET_DERIVATIVES: return me ? (fmi2 ? 0u : init) | event | cont | term : 0u;
    case MC2FMU_CALL_GET_NOMINALS: return me ? (fmi2 ? inst : init) | event | cont | term : 0u;
    case MC2FMU_CALL_COUNTS: return me ? inst | event : 0u;
    case MC2FMU_CALL_ENTER_STEP: return 0u; /* it leaves Event Mode, which co-simulation never enters here */
    case MC2FMU_CALL_DO_STEP: return me ? 0u : step;
    case MC2FMU_CALL_STATUS: return me ? 0u : step | term;
    case MC2FMU_CALL_GET: return (fmi2 ? 0u : inst) | init | event | cont | step | term;
    case MC2FMU_CALL_SET: return inst | init | event | cont | step;
    case MC2FMU_CALL_DIRECTIONAL: return init | event | cont | step | term;
    case MC2FMU_CALL_TERMINATE: return event | cont | step;
    default: return 0u;
    }
}

static const char *mc2fmu_phase_name(const mc2fmu_core *c, int phase) {
    static const char *const fmi2[] = {"instantiated", "initialization mode", "event mode", "continuous-time mode",
                                       "step complete", "terminated"};
    static const char *const fmi3[] = {"Instantiated", "Initialization Mode", "Event Mode", "Continuous-Time Mode",
                                       "Step Mode", "Terminated"};
    if (phase < 0 || phase >= MC2FMU_PHASES) return "an unknown state";
    return c->fmi == 2 ? fmi2[phase] : fmi3[phase];
}

/* the gate of every FMI function but instantiate and freeInstance: a call after an Error, or in
   a state where the standard does not allow it, answers Error with a message that says why.
   An Error is kept until the host resets the instance or restores an FMU state (FMI 2: the
   "error" state; FMI 3: Terminated), so no value computed after it is ever answered OK. */
static int mc2fmu_begin(mc2fmu_core *c, int call, const char *fn) {
    char msg[MC2FMU_MESSAGE];
    unsigned allowed;
    int p, n = 0;
    size_t len;
    if (c->s.failed && call != MC2FMU_CALL_ANY) {
        snprintf(msg, sizeof msg, "%s refused: the FMU failed earlier (%.280s); reset it or restore an FMU state", fn,
                 c->s.failure);
        return mc2fmu_fail(c, msg);
    }
    allowed = mc2fmu_allowed(c, call);
    if (allowed & MC2FMU_IN(c->s.phase)) return MC2FMU_OK;
    if (!allowed) {
        snprintf(msg, sizeof msg, "%s refused: this %s FMU does not provide it", fn,
                 c->interface == MC2FMU_ME ? "model-exchange" : "co-simulation");
        return mc2fmu_fail(c, msg);
    }
    snprintf(msg, sizeof msg, "%s refused in %s: the standard allows it in ", fn, mc2fmu_phase_name(c, c->s.phase));
    for (p = 0; p < MC2FMU_PHASES; p++)
        if (allowed & MC2FMU_IN(p)) {
            len = strlen(msg);
            snprintf(msg + len, sizeof msg - len, "%s%s", n++ ? ", " : "", mc2fmu_phase_name(c, p));
        }
    return mc2fmu_fail(c, msg);
}

/* an array argument that is NULL although the call has `n` elements to read or write, or a
   NULL output: Error with a message */
static int mc2fmu_null(mc2fmu_core *c, const char *fn, const char *what, const void *ptr, size_t n) {
    char msg[MC2FMU_MESSAGE];
    if (ptr || n == 0) return MC2FMU_OK;
    snprintf(msg, sizeof msg, "%s: %s is NULL", fn, what);
    return mc2fmu_fail(c, msg);
}

/* setDebugLogging: every category (n = 0) or the named ones on or off */
static int mc2fmu_debug_logging(mc2fmu_core *c, const char *fn, int on, size_t n, const char *const *categories) {
    unsigned bits = 0;
    size_t i;
    int k;
    char msg[MC2FMU_MESSAGE];
    if (mc2fmu_begin(c, MC2FMU_CALL_ANY, fn) || mc2fmu_null(c, fn, "the categories", categories, n))
        return MC2FMU_ERROR;
    for (i = 0; i < n; i++) {
        for (k = 0; k < 5; k++)
            if (categories[i] && !strcmp(categories[i], mc2fmu_log_names[k])) break;
        if (k == 5) {
            snprintf(msg, sizeof msg, "%s: unknown log category %.60s (the FMU's: logStatusWarning, logStatusDiscard, "
                     "logStatusError, logStatusFatal, logAll)", fn, categories[i] ? categories[i] : "NULL");
            return mc2fmu_fail(c, msg);
        }
        bits |= 1u << k;
    }
    if (n == 0) bits = MC2FMU_LOG_EVERY;
    c->log_on = on ? c->log_on | bits : c->log_on & ~bits;
    return MC2FMU_OK;
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

#if MC2FMU_ONE_STEP
/* the cubic Hermite polynomial of values p0, p1 and slopes v0, v1 (per unit of r) at r in
   [0, 1], and its slope (per unit of r): between the grid points of one-step models */
static void mc2fmu_hermite(double p0, double p1, double v0, double v1, double r, double *value, double *slope) {
    *value = p0 * (2.0 * r * r * r - 3.0 * r * r + 1.0) + v0 * (r * r * r - 2.0 * r * r + r) +
             p1 * (3.0 * r * r - 2.0 * r * r * r) + v1 * (r * r * r - r * r);
    *slope = p0 * (6.0 * r * r - 6.0 * r) + v0 * (3.0 * r * r - 4.0 * r + 1.0) + p1 * (6.0 * r - 6.0 * r * r) +
             v1 * (3.0 * r * r - 2.0 * r);
}
#endif

/* co-simulation: q and qd at time t in (t_{k-1}, t_k], the quadratic through the last three
   grid states (node models: the cubic Hermite polynomial of q_{k-1}, qd_{k-1}, q_k, qd_k;
   local-PCA models: that of their natural coordinates, read through the chart, since their q
   and qd, a least-squares velocity, are not each other's derivative); then the envelope
   (poses are decoded lazily, when an output asks for them) */
static void mc2fmu_outputs(mc2fmu_core *c, double t) {
    const double dt = MC2FMU_DT;
    double s = (t - (c->s.t0 + (double)c->s.k * dt)) / dt;
    int i;
    if (fabs(s) < MC2FMU_GRID_TOL) s = 0.0;
#if MC2FMU_LPCA
    if (c->s.k == 0 || s == 0.0) {
        memcpy(c->s.q_out, c->s.hist[2], sizeof c->s.q_out);
        memcpy(c->s.qd_out, c->s.hqd[1], sizeof c->s.qd_out);
        memcpy(c->s.x_out, c->s.hx[1], sizeof c->s.x_out);
    } else {
        const double r = s + 1.0;
        double xd[MC2FMU_NX];
        int n;
        for (n = 0; n < MC2FMU_NX; n++) {
            mc2fmu_hermite(c->s.hx[0][n], c->s.hx[1][n], dt * c->s.hxd[0][n], dt * c->s.hxd[1][n], r, &c->s.x_out[n],
                           &xd[n]);
            xd[n] /= dt;
        }
        mc2fmu_chart_of(c->s.x_out, xd, c->s.hist[2], c->s.q_out, c->s.qd_out);
    }
    (void)i;
#else
    for (i = 0; i < MC2FMU_NQ; i++) {
#if MC2FMU_NODE
        if (c->s.k == 0 || s == 0.0) {
            c->s.q_out[i] = c->s.hist[2][i];
            c->s.qd_out[i] = c->s.hqd[1][i];
        } else {
            mc2fmu_hermite(c->s.hist[1][i], c->s.hist[2][i], dt * c->s.hqd[0][i], dt * c->s.hqd[1][i], s + 1.0,
                           &c->s.q_out[i], &c->s.qd_out[i]);
            c->s.qd_out[i] /= dt;
        }
#else
        if (c->s.k == 0) {
            c->s.q_out[i] = c->s.hist[2][i];
            c->s.qd_out[i] = c->s.qd_start[i];
        } else {
            const double q0 = c->s.hist[2][i], q1 = c->s.hist[1][i], q2 = c->s.hist[0][i];
            c->s.q_out[i] = q0 * (s + 1.0) * (s + 2.0) / 2.0 - q1 * s * (s + 2.0) + q2 * s * (s + 1.0) / 2.0;
            c->s.qd_out[i] = (q0 * (2.0 * s + 3.0) / 2.0 - q1 * (2.0 * s + 2.0) + q2 * (2.0 * s + 1.0) / 2.0) / dt;
        }
#endif
    }
#endif
    c->pose_valid = 0;
    c->motion_valid = 0;
    c->s.envelope = mc2fmu_envelope_distance(c->s.q_out, c->s.qd_out, c->s.u);
#if MC2FMU_LPCA /* and the active cluster's extent */
    c->s.envelope = fmax(c->s.envelope, mc2fmu_lpca_extent(c->s.rom.cluster, c->s.x_out));
#endif
    mc2fmu_check_envelope(c, t);
}

static void mc2fmu_rhs(mc2fmu_core *c, const double *q, const double *qd, double *qdd) {
#if MC2FMU_NODE
    mc2fmu_node_acceleration(q, qd, c->s.u, qdd);
#elif MC2FMU_LPCA /* no continuous right-hand side (the FMU is co-simulation only) */
    int i;
    (void)c;
    (void)q;
    (void)qd;
    for (i = 0; i < MC2FMU_NQ; i++) qdd[i] = NAN;
#else
    mc2fmu_eval_terms(q, c->s.u, &c->T);
    mc2fmu_acceleration(&c->T, qd, qdd);
#endif
}

/* a time the host passes (start time, setTime): finite and of a sane magnitude */
static int mc2fmu_check_time(mc2fmu_core *c, const char *fn, const char *what, double t) {
    char msg[MC2FMU_MESSAGE], b[40];
    if (isfinite(t) && fabs(t) <= MC2FMU_MAX_TIME) return MC2FMU_OK;
    snprintf(msg, sizeof msg, "%s: %s %s refused: it must be finite and at most %g s in magnitude", fn, what,
             mc2fmu_repr(t, b, sizeof b), MC2FMU_MAX_TIME);
    return mc2fmu_fail(c, msg);
}

/* FMI 2 setupExperiment; FMI 3 enterInitializationMode (has_start: it carries the start time) */
static int mc2fmu_setup(mc2fmu_core *c, const char *fn, double start_time) {
    if (mc2fmu_begin(c, MC2FMU_CALL_SETUP, fn) || mc2fmu_check_time(c, fn, "start time", start_time))
        return MC2FMU_ERROR;
    c->s.t0 = start_time;
    c->s.time = start_time;
    return MC2FMU_OK;
}

static int mc2fmu_enter_initialization(mc2fmu_core *c, const char *fn, int has_start, double start_time) {
    if (has_start ? mc2fmu_setup(c, fn, start_time) : mc2fmu_begin(c, MC2FMU_CALL_SETUP, fn)) return MC2FMU_ERROR;
    c->s.phase = MC2FMU_INITIALIZATION;
    c->pose_valid = 0;
    c->motion_valid = 0;
    return MC2FMU_OK;
}

/* the grid history at k = 0: q_{-1} by a Taylor step backwards from (q_start, qd_start) with
   the current input.  Set at initialisation and again right before the first grid step, so
   the first step uses the input set before it is taken, whether the host set it before or
   after initialisation (as `mc2fmu simulate`: u_0 for both) */
static void mc2fmu_prime(mc2fmu_core *c) {
#if MC2FMU_NODE /* a one-step method: the state is (q_start, qd_start) itself */
    int i;
    for (i = 0; i < MC2FMU_NQ; i++) {
        c->s.hist[0][i] = NAN;
        c->s.hist[1][i] = c->s.hist[2][i] = c->s.q_start[i];
        c->s.hqd[0][i] = c->s.hqd[1][i] = c->s.qd_start[i];
    }
#elif MC2FMU_LPCA /* the state the chart reads as the start values, and that reading */
    int i;
    mc2fmu_lpca_start(c->s.q_start, c->s.qd_start, c->s.u, &c->s.rom);
    mc2fmu_lpca_observe(&c->s.rom, c->s.q_start, c->s.hx[1], c->s.hxd[1], c->s.hist[2], c->s.hqd[1]);
    memcpy(c->s.hx[0], c->s.hx[1], sizeof c->s.hx[0]);
    memcpy(c->s.hxd[0], c->s.hxd[1], sizeof c->s.hxd[0]);
    for (i = 0; i < MC2FMU_NQ; i++) {
        c->s.hist[0][i] = NAN;
        c->s.hist[1][i] = c->s.hist[2][i];
        c->s.hqd[0][i] = c->s.hqd[1][i];
    }
#else
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
#endif
}

/* the start values at initialisation: none further than MC2FMU_MAX_START_EXCURSION training
   spans outside the envelope (which would be no longer extrapolation but a wrong value) */
static int mc2fmu_check_start(mc2fmu_core *c, const char *fn) {
    char msg[MC2FMU_MESSAGE], b[40];
    double point[MC2FMU_NE], excursion[MC2FMU_NE];
    int ch;
    mc2fmu_envelope_point(c->s.q_start, c->s.qd_start, c->s.u, point);
    mc2fmu_envelope_channels(point, excursion); /* the inputs' channels are not read */
    for (ch = 0; ch < 2 * MC2FMU_NQ; ch++) {
        const double v = point[ch], lo = mc2fmu_env_lo[ch], hi = mc2fmu_env_hi[ch], ex = excursion[ch];
        if (ex > MC2FMU_MAX_START_EXCURSION) {
            snprintf(msg, sizeof msg, "%s: %s[%d] = %s refused: it lies %.3g training spans outside the range "
                     "[%.6g, %.6g] the model was trained on (at most %g are accepted)", fn,
                     ch < MC2FMU_NQ ? "q_start" : "qd_start", ch % MC2FMU_NQ + 1, mc2fmu_repr(v, b, sizeof b), ex, lo,
                     hi, MC2FMU_MAX_START_EXCURSION);
            return mc2fmu_fail(c, msg);
        }
    }
    return MC2FMU_OK;
}

static int mc2fmu_exit_initialization(mc2fmu_core *c, const char *fn) {
    char msg[MC2FMU_MESSAGE];
    int i, finite = 1;
    if (mc2fmu_begin(c, MC2FMU_CALL_EXIT_INIT, fn) || mc2fmu_physics_ready(c, fn) || mc2fmu_check_start(c, fn))
        return MC2FMU_ERROR;
    c->s.time = c->s.t0;
    c->pose_valid = 0;
    c->motion_valid = 0;
    if (c->interface == MC2FMU_ME) {
        double a[MC2FMU_NQ];
        for (i = 0; i < MC2FMU_NQ; i++) {
            c->s.xs[i] = c->s.q_start[i];
            c->s.xs[MC2FMU_NQ + i] = c->s.qd_start[i];
        }
        mc2fmu_rhs(c, c->s.xs, c->s.xs + MC2FMU_NQ, a);
        finite = mc2fmu_all_finite(a, MC2FMU_NQ);
        c->s.t_completed[0] = c->s.t_completed[1] = c->s.t_event = c->s.t0;
        c->s.phase = MC2FMU_EVENT;
    } else {
        mc2fmu_prime(c);
        c->s.k = 0;
        finite = mc2fmu_all_finite(c->s.hist[1], MC2FMU_NQ) && mc2fmu_all_finite(c->s.hist[2], MC2FMU_NQ);
        c->s.phase = MC2FMU_STEP;
    }
    if (!finite) {
        snprintf(msg, sizeof msg, "%s: the model is not finite at the start state (envelope distance %.3g); set "
                 "q_start and qd_start within the range the model was trained on", fn,
                 mc2fmu_envelope_distance(c->s.q_start, c->s.qd_start, c->s.u));
        c->s.phase = MC2FMU_INITIALIZATION;
        return mc2fmu_fail(c, msg);
    }
    if (c->interface == MC2FMU_ME) {
        c->s.envelope = mc2fmu_envelope_distance(c->s.xs, c->s.xs + MC2FMU_NQ, c->s.u);
        mc2fmu_check_envelope(c, c->s.t0);
    } else {
        mc2fmu_outputs(c, c->s.t0);
    }
    return MC2FMU_OK;
}

static int mc2fmu_do_step(mc2fmu_core *c, const char *fn, double current_time, double step_size) {
    char msg[MC2FMU_MESSAGE];
    double target, n, r;
    int64_t k_target;
    int i;
    if (mc2fmu_begin(c, MC2FMU_CALL_DO_STEP, fn)) return MC2FMU_ERROR;
    /* FMI 3 requires h > 0; FMI 2 allows h = 0 */
    if (!((c->fmi == 2 ? step_size >= 0 : step_size > 0) && isfinite(step_size))) {
        char b[40];
        snprintf(msg, sizeof msg, "%s: invalid communication step size %s (it must be finite and %s)", fn,
                 mc2fmu_repr(step_size, b, sizeof b), c->fmi == 2 ? ">= 0" : "> 0");
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
#if MC2FMU_LPCA
        {
            mc2fmu_lstate next = c->s.rom;
            double qd_next[MC2FMU_NQ], x[MC2FMU_NX], xd[MC2FMU_NX];
            mc2fmu_lpca_step(&next, c->s.u, MC2FMU_DT);
            finite = mc2fmu_all_finite(next.q, MC2FMU_R) && mc2fmu_all_finite(next.qd, MC2FMU_R) &&
                     mc2fmu_all_finite(next.qdd, MC2FMU_R);
            if (finite) {
                mc2fmu_lpca_observe(&next, c->s.hist[2], x, xd, q_next, qd_next);
                for (i = 0; i < MC2FMU_NQ; i++) finite = finite && isfinite(q_next[i]) && isfinite(qd_next[i]);
            } else {
                for (i = 0; i < MC2FMU_NQ; i++) q_next[i] = NAN;
            }
            if (finite) { /* a failed step leaves the state as it was */
                c->s.rom = next;
                memcpy(c->s.hx[0], c->s.hx[1], sizeof c->s.hx[0]);
                memcpy(c->s.hx[1], x, sizeof x);
                memcpy(c->s.hxd[0], c->s.hxd[1], sizeof c->s.hxd[0]);
                memcpy(c->s.hxd[1], xd, sizeof xd);
                for (i = 0; i < MC2FMU_NQ; i++) {
                    c->s.hqd[0][i] = c->s.hqd[1][i];
                    c->s.hqd[1][i] = qd_next[i];
                }
            }
        }
#elif MC2FMU_NODE
        {
            double qd_next[MC2FMU_NQ];
            mc2fmu_node_step(c->s.hist[2], c->s.hqd[1], c->s.u, MC2FMU_DT, q_next, qd_next);
            for (i = 0; i < MC2FMU_NQ; i++) finite = finite && isfinite(q_next[i]) && isfinite(qd_next[i]);
            if (finite) /* a failed step leaves the history as it was */
                for (i = 0; i < MC2FMU_NQ; i++) {
                    c->s.hqd[0][i] = c->s.hqd[1][i];
                    c->s.hqd[1][i] = qd_next[i];
                }
        }
#else
        mc2fmu_eval_terms(c->s.hist[2], c->s.u, &c->T);
        mc2fmu_step_map(&c->T, c->s.hist[1], c->s.hist[2], MC2FMU_DT, q_next);
#endif
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

static int mc2fmu_terminate(mc2fmu_core *c, const char *fn) {
    if (mc2fmu_begin(c, MC2FMU_CALL_TERMINATE, fn)) return MC2FMU_ERROR;
    c->s.phase = MC2FMU_TERMINATED;
    return MC2FMU_OK;
}

static int mc2fmu_reset_call(mc2fmu_core *c, const char *fn) {
    if (mc2fmu_begin(c, MC2FMU_CALL_ANY, fn)) return MC2FMU_ERROR;
    mc2fmu_reset(c);
    return MC2FMU_OK;
}

/* model exchange */

/* the number of continuous states `n` a call passes: the model's 2 NQ, or Error */
static int mc2fmu_check_nx(mc2fmu_core *c, const char *fn, size_t n) {
    char msg[MC2FMU_MESSAGE];
    if (n == 2 * MC2FMU_NQ) return MC2FMU_OK;
    snprintf(msg, sizeof msg, "%s: %llu continuous states passed, the model has %d", fn, (unsigned long long)n,
             2 * MC2FMU_NQ);
    return mc2fmu_fail(c, msg);
}

static int mc2fmu_enter_event(mc2fmu_core *c, const char *fn) {
    if (mc2fmu_begin(c, MC2FMU_CALL_ENTER_EVENT, fn)) return MC2FMU_ERROR;
    c->s.phase = MC2FMU_EVENT;
    c->s.t_event = c->s.time;
    return MC2FMU_OK;
}

static int mc2fmu_enter_continuous(mc2fmu_core *c, const char *fn) {
    if (mc2fmu_begin(c, MC2FMU_CALL_ENTER_CONTINUOUS, fn)) return MC2FMU_ERROR;
    c->s.phase = MC2FMU_CONTINUOUS;
    return MC2FMU_OK;
}

/* setTime: at or after the start time, the time of the second last completedIntegratorStep and
   that of the last event (FMI 3.0, section 3.2.1; the same rule for FMI 2) */
static int mc2fmu_set_time(mc2fmu_core *c, const char *fn, double t) {
    char msg[MC2FMU_MESSAGE];
    double floor_t;
    if (mc2fmu_begin(c, MC2FMU_CALL_SET_TIME, fn) || mc2fmu_check_time(c, fn, "time", t)) return MC2FMU_ERROR;
    floor_t = fmax(c->s.t0, fmax(c->s.t_completed[0], c->s.t_event));
    if (t < floor_t - 1e-12 * fmax(1.0, fabs(floor_t))) {
        snprintf(msg, sizeof msg, "%s: time %.17g refused: it is before %.17g (the start time, the second last "
                 "completed integrator step or the last event, whichever is latest)", fn, t, floor_t);
        return mc2fmu_fail(c, msg);
    }
    c->s.time = t;
    return MC2FMU_OK;
}

static int mc2fmu_set_states(mc2fmu_core *c, const char *fn, const double *x, size_t nx) {
    size_t i;
    char msg[MC2FMU_MESSAGE], b[40];
    if (mc2fmu_begin(c, MC2FMU_CALL_SET_STATES, fn) || mc2fmu_null(c, fn, "the states", x, nx) ||
        mc2fmu_check_nx(c, fn, nx))
        return MC2FMU_ERROR;
    for (i = 0; i < nx; i++)
        if (!isfinite(x[i])) {
            snprintf(msg, sizeof msg, "%s: non-finite continuous state %s = %s at t = %.6g s; the model has left the "
                     "range it was trained on", fn, i < MC2FMU_NQ ? "q" : "qd", mc2fmu_repr(x[i], b, sizeof b),
                     c->s.time);
            return mc2fmu_fail(c, msg);
        }
    memcpy(c->s.xs, x, sizeof c->s.xs);
    c->pose_valid = 0;
    c->motion_valid = 0;
    return MC2FMU_OK;
}

static int mc2fmu_derivatives(mc2fmu_core *c, const char *fn, double *dx, size_t nx) {
    double qdd[MC2FMU_NQ];
    char msg[MC2FMU_MESSAGE];
    int i;
    if (mc2fmu_begin(c, MC2FMU_CALL_GET_DERIVATIVES, fn) || mc2fmu_null(c, fn, "the derivatives", dx, nx) ||
        mc2fmu_check_nx(c, fn, nx) || mc2fmu_physics_ready(c, fn))
        return MC2FMU_ERROR;
    mc2fmu_rhs(c, mc2fmu_cur_q(c), mc2fmu_cur_qd(c), qdd);
    for (i = 0; i < MC2FMU_NQ; i++) {
        if (!isfinite(qdd[i])) {
            snprintf(msg, sizeof msg, "%s: the reduced model produced a non-finite acceleration at t = %.6g s "
                     "(envelope distance %.3g); the model has left the range it was trained on", fn, c->s.time,
                     mc2fmu_envelope_distance(mc2fmu_cur_q(c), mc2fmu_cur_qd(c), c->s.u));
            return mc2fmu_fail(c, msg);
        }
        dx[i] = mc2fmu_cur_qd(c)[i];
        dx[MC2FMU_NQ + i] = qdd[i];
    }
    return MC2FMU_OK;
}

static int mc2fmu_get_states(mc2fmu_core *c, const char *fn, double *x, size_t nx) {
    int i;
    if (mc2fmu_begin(c, MC2FMU_CALL_GET_STATES, fn) || mc2fmu_null(c, fn, "the states", x, nx) ||
        mc2fmu_check_nx(c, fn, nx))
        return MC2FMU_ERROR;
    for (i = 0; i < MC2FMU_NQ; i++) {
        x[i] = mc2fmu_cur_q(c)[i];
        x[MC2FMU_NQ + i] = mc2fmu_cur_qd(c)[i];
    }
    return MC2FMU_OK;
}

static int mc2fmu_nominals(mc2fmu_core *c, const char *fn, double *x, size_t nx) {
    size_t i;
    if (mc2fmu_begin(c, MC2FMU_CALL_GET_NOMINALS, fn) || mc2fmu_null(c, fn, "the nominals", x, nx) ||
        mc2fmu_check_nx(c, fn, nx))
        return MC2FMU_ERROR;
    for (i = 0; i < nx; i++) x[i] = 1.0;
    return MC2FMU_OK;
}

/* the model has no event indicators: a call for none is fine where the standard allows it */
static int mc2fmu_event_indicators(mc2fmu_core *c, const char *fn, size_t n) {
    char msg[MC2FMU_MESSAGE];
    if (mc2fmu_begin(c, MC2FMU_CALL_GET_STATES, fn)) return MC2FMU_ERROR;
    if (n == 0) return MC2FMU_OK;
    snprintf(msg, sizeof msg, "%s: %llu event indicators asked for, the model has none", fn, (unsigned long long)n);
    return mc2fmu_fail(c, msg);
}

static int mc2fmu_completed_integrator_step(mc2fmu_core *c, const char *fn, const void *enter_event,
                                            const void *terminate) {
    if (mc2fmu_begin(c, MC2FMU_CALL_COMPLETED_STEP, fn) || mc2fmu_null(c, fn, "enterEventMode", enter_event, 1) ||
        mc2fmu_null(c, fn, "terminateSimulation", terminate, 1))
        return MC2FMU_ERROR;
    c->s.t_completed[0] = c->s.t_completed[1];
    c->s.t_completed[1] = c->s.time;
    c->s.envelope = mc2fmu_envelope_distance(c->s.xs, c->s.xs + MC2FMU_NQ, c->s.u);
    mc2fmu_check_envelope(c, c->s.time);
    return MC2FMU_OK;
}

/* variables: a variable's value reference is its position in mc2fmu_variables[] counted from 1
   (in every FMI version, so an FMI 3 dependencies list never names value reference 0) */
static const mc2fmu_variable *mc2fmu_variable_at(mc2fmu_core *c, unsigned vr) {
    if (vr < 1 || vr > MC2FMU_NV) {
        char msg[MC2FMU_MESSAGE];
        snprintf(msg, sizeof msg, "unknown value reference %u (the model's value references are 1 to %d)", vr,
                 MC2FMU_NV);
        mc2fmu_fail(c, msg);
        return NULL;
    }
    return &mc2fmu_variables[vr - 1];
}

static int mc2fmu_get_real(mc2fmu_core *c, unsigned vr, double *value) {
    const mc2fmu_variable *var;
    if (!(var = mc2fmu_variable_at(c, vr))) return MC2FMU_ERROR;
    switch (var->role) {
    case MC2FMU_ROLE_INPUT: *value = c->s.u[var->index]; break;
    case MC2FMU_ROLE_Q_START: *value = c->s.q_start[var->index]; break;
    case MC2FMU_ROLE_QD_START: *value = c->s.qd_start[var->index]; break;
    case MC2FMU_ROLE_PHYSICS: *value = c->s.phys[var->index]; break;
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
            if (!MC2FMU_ONE_STEP && c->interface == MC2FMU_CS && mc2fmu_running(c) &&
                memcmp(q, c->s.hist[2], sizeof c->s.hist[2]) == 0) {
                /* at a grid point: the next step evaluates its terms here anyway */
                mc2fmu_eval_geometry(q, &c->T);
                mc2fmu_poses(mc2fmu_terms_x(&c->T), c->pose);
            } else if (MC2FMU_LPCA && mc2fmu_running(c)) {
#if MC2FMU_LPCA
                mc2fmu_poses(c->s.x_out, c->pose); /* the ROM's own natural coordinates */
#endif
            } else {
                double x[MC2FMU_NX];
                mc2fmu_decode(q, x);
                mc2fmu_poses(x, c->pose);
            }
            c->pose_valid = 1;
        }
        *value = c->pose[var->index];
        break;
#if MC2FMU_NMOTION > 0
    case MC2FMU_ROLE_MOTION:
        if (!c->motion_valid) { /* invalidated wherever the state or the parameters change */
            if (mc2fmu_physics_ready(c, var->name)) return MC2FMU_ERROR;
            mc2fmu_motion_at(&c->T, mc2fmu_cur_q(c), mc2fmu_cur_qd(c), c->s.phys, c->mxd, c->motion);
            c->motion_valid = 1;
        }
        *value = c->motion[var->index];
        break;
#endif
    case MC2FMU_ROLE_DER_QD: {
        double qdd[MC2FMU_NQ];
        if (mc2fmu_physics_ready(c, var->name)) return MC2FMU_ERROR;
        mc2fmu_rhs(c, mc2fmu_cur_q(c), mc2fmu_cur_qd(c), qdd);
        *value = qdd[var->index];
        break;
    }
    default: *value = NAN;
    }
    if (!isfinite(*value)) {
        char msg[MC2FMU_MESSAGE];
        snprintf(msg, sizeof msg, "%s is not finite at t = %.6g s (envelope distance %.3g); the model has left the "
                 "range it was trained on", var->name, c->s.time,
                 mc2fmu_envelope_distance(mc2fmu_cur_q(c), mc2fmu_cur_qd(c), c->s.u));
        return mc2fmu_fail(c, msg);
    }
    return MC2FMU_OK;
}

/* getDirectionalDerivative (model exchange): sens = d unknowns / d knowns . seed at the current
   states and inputs.  Knowns: the states q[i], qd[i] (before initialisation ends, their start
   parameters) and the inputs; unknowns: der(q), der(qd), the outputs.  The accelerations, the
   poses, the motion outputs and the envelope's distance by the complex step through the twin of
   the code that computes their values, so the derivatives are exact to rounding, springs,
   learned laws and identified terms included (the envelope's: its active channel's slope). */
static int mc2fmu_directional(mc2fmu_core *c, const char *fn, const unsigned *unknowns, size_t n_unknown,
                              const unsigned *knowns, size_t n_known, const double *seed, double *sens) {
    char msg[MC2FMU_MESSAGE];
    size_t k;
    if (mc2fmu_begin(c, MC2FMU_CALL_DIRECTIONAL, fn) || mc2fmu_null(c, fn, "the unknowns", unknowns, n_unknown) ||
        mc2fmu_null(c, fn, "the sensitivities", sens, n_unknown) || mc2fmu_null(c, fn, "the knowns", knowns, n_known) ||
        mc2fmu_null(c, fn, "the seed", seed, n_known) || mc2fmu_physics_ready(c, fn))
        return MC2FMU_ERROR;
#if MC2FMU_HAS_DIRECTIONAL
    double dq[MC2FMU_NQ] = {0}, dqd[MC2FMU_NQ] = {0}, du[MC2FMU_NU1] = {0}, scale = 0.0;
    double _Complex qc[MC2FMU_NQ], qdc[MC2FMU_NQ], uc[MC2FMU_NU1], ac[MC2FMU_NQ];
    double acc[MC2FMU_NQ] = {0}, pose[7 * MC2FMU_NB], envelope = 0.0;
#if MC2FMU_NMOTION > 0
    double motion[MC2FMU_NMOTION];
#endif
    const double *q = mc2fmu_cur_q(c), *qd = mc2fmu_cur_qd(c);
    int need_acc = 0, need_pose = 0, need_motion = 0, need_envelope = 0, i;
    if (c->interface != MC2FMU_ME)
        return mc2fmu_fail(c, "getDirectionalDerivative is provided in model exchange only (in co-simulation the "
                              "outputs do not depend on the inputs directly)");
    for (k = 0; k < n_known; k++) {
        const mc2fmu_variable *var;
        if (!(var = mc2fmu_variable_at(c, knowns[k]))) return MC2FMU_ERROR;
        if (!isfinite(seed[k])) {
            snprintf(msg, sizeof msg, "getDirectionalDerivative: the seed of %s is not finite", var->name);
            return mc2fmu_fail(c, msg);
        }
        switch (var->role) {
        case MC2FMU_ROLE_Q: case MC2FMU_ROLE_Q_START: dq[var->index] += seed[k]; break;
        case MC2FMU_ROLE_QD: case MC2FMU_ROLE_QD_START: dqd[var->index] += seed[k]; break;
        case MC2FMU_ROLE_INPUT: du[var->index] += seed[k]; break;
        default:
            snprintf(msg, sizeof msg, "getDirectionalDerivative: %s is not a known (the knowns are the states q[i], "
                     "qd[i] and the inputs)", var->name);
            return mc2fmu_fail(c, msg);
        }
        scale = fmax(scale, fabs(seed[k]));
    }
    for (k = 0; k < n_unknown; k++) {
        const mc2fmu_variable *var;
        if (!(var = mc2fmu_variable_at(c, unknowns[k]))) return MC2FMU_ERROR;
        switch (var->role) {
        case MC2FMU_ROLE_DER_QD: need_acc = 1; break;
        case MC2FMU_ROLE_POSE: need_pose = 1; break;
        case MC2FMU_ROLE_MOTION: need_motion = 1; break;
        case MC2FMU_ROLE_ENVELOPE: need_envelope = 1; break;
        case MC2FMU_ROLE_Q: case MC2FMU_ROLE_QD: case MC2FMU_ROLE_DER_Q: break;
        default:
            snprintf(msg, sizeof msg, "getDirectionalDerivative: %s is not an unknown (the unknowns are the state "
                     "derivatives and the outputs)", var->name);
            return mc2fmu_fail(c, msg);
        }
    }
    for (i = 0; i < 7 * MC2FMU_NB; i++) pose[i] = 0.0;
#if MC2FMU_NMOTION > 0
    for (i = 0; i < MC2FMU_NMOTION; i++) motion[i] = 0.0;
#else
    (void)need_motion;
#endif
    if (scale > 0.0 && (need_acc || need_pose || need_motion || need_envelope)) {
        const double h = MC2FMU_CS_H / scale; /* the seed scaled to unit max-norm, stepped by MC2FMU_CS_H */
        for (i = 0; i < MC2FMU_NQ; i++) {
            qc[i] = q[i] + h * dq[i] * _Complex_I;
            qdc[i] = qd[i] + h * dqd[i] * _Complex_I;
        }
        for (i = 0; i < MC2FMU_NU1; i++) uc[i] = (i < MC2FMU_NU ? c->s.u[i] : 0.0) + h * du[i] * _Complex_I;
        if (need_acc) {
#if MC2FMU_NODE
            mc2fmu_cs_node_acceleration(qc, qdc, uc, ac);
#else
            c->Tc.valid = 0;
            mc2fmu_cs_eval_terms(qc, uc, &c->Tc);
            mc2fmu_cs_acceleration(&c->Tc, qdc, ac);
#endif
            for (i = 0; i < MC2FMU_NQ; i++) acc[i] = cimag(ac[i]) / h;
        }
        if (need_pose) {
            double _Complex xc[MC2FMU_NX], pc[7 * MC2FMU_NB];
            mc2fmu_cs_decode(qc, xc);
            mc2fmu_cs_poses(xc, pc);
            for (i = 0; i < 7 * MC2FMU_NB; i++) pose[i] = cimag(pc[i]) / h;
        }
        if (need_envelope) { /* the envelope's distance by its complex-step twin: the active channel's slope */
            double _Complex vc[MC2FMU_NE];
            for (i = 0; i < MC2FMU_NQ; i++) { vc[i] = qc[i]; vc[MC2FMU_NQ + i] = qdc[i]; }
            for (i = 0; i < MC2FMU_NU; i++) vc[2 * MC2FMU_NQ + i] = uc[i];
            envelope = cimag(mc2fmu_cs_envelope(vc)) / h;
        }
#if MC2FMU_NMOTION > 0
        if (need_motion) {
            double _Complex mc[MC2FMU_NMOTION];
            c->Tc.valid = 0;
            mc2fmu_cs_motion_at(&c->Tc, qc, qdc, c->s.phys, c->cmxd, mc);
            for (i = 0; i < MC2FMU_NMOTION; i++) motion[i] = cimag(mc[i]) / h;
        }
#endif
    }
    for (k = 0; k < n_unknown; k++) {
        const mc2fmu_variable *var = mc2fmu_variable_at(c, unknowns[k]); /* checked above: never NULL */
        switch (var->role) {
        case MC2FMU_ROLE_Q: sens[k] = dq[var->index]; break;
        case MC2FMU_ROLE_QD: case MC2FMU_ROLE_DER_Q: sens[k] = dqd[var->index]; break;
        case MC2FMU_ROLE_DER_QD: sens[k] = acc[var->index]; break;
        case MC2FMU_ROLE_POSE: sens[k] = pose[var->index]; break;
#if MC2FMU_NMOTION > 0
        case MC2FMU_ROLE_MOTION: sens[k] = motion[var->index]; break;
#endif
        default: sens[k] = envelope; break;
        }
        if (!isfinite(sens[k])) {
            snprintf(msg, sizeof msg, "getDirectionalDerivative: the derivative of %s is not finite at t = %.6g s "
                     "(envelope distance %.3g); the model has left the range it was trained on", var->name,
                     c->s.time, mc2fmu_envelope_distance(q, qd, c->s.u));
            return mc2fmu_fail(c, msg);
        }
    }
    return MC2FMU_OK;
#else
    (void)unknowns; (void)n_unknown; (void)knowns; (void)n_known; (void)seed; (void)sens; (void)k;
    snprintf(msg, sizeof msg, "getDirectionalDerivative: this build has no directional derivatives (compiled "
             "without C99 complex arithmetic); compile the sources with gcc or clang");
    return mc2fmu_fail(c, msg);
#endif
}

/* which variables a host may set, and when: inputs until termination; the start parameters
   (fixed, initial = exact) before initialisation ends; in FMI 3 model exchange the continuous
   states q[i], qd[i] in Event and Continuous-Time Mode (FMI 3.0, sections 2.3.4 and 3.2.1) */
static int mc2fmu_set_real(mc2fmu_core *c, unsigned vr, double value) {
    const mc2fmu_variable *var;
    char msg[MC2FMU_MESSAGE], b[40];
    const int before_init = c->s.phase == MC2FMU_INSTANTIATED || c->s.phase == MC2FMU_INITIALIZATION;
    if (!(var = mc2fmu_variable_at(c, vr))) return MC2FMU_ERROR;
    if (!isfinite(value)) {
        snprintf(msg, sizeof msg, "%s = %s refused: inputs, parameters and states must be finite", var->name,
                 mc2fmu_repr(value, b, sizeof b));
        return mc2fmu_fail(c, msg);
    }
    switch (var->role) {
    case MC2FMU_ROLE_INPUT:
        if (fabs(value) > MC2FMU_MAX_INPUT) {
            snprintf(msg, sizeof msg, "%s = %s refused: inputs must be at most %g (N or N.m) in magnitude", var->name,
                     mc2fmu_repr(value, b, sizeof b), MC2FMU_MAX_INPUT);
            return mc2fmu_fail(c, msg);
        }
        c->s.u[var->index] = value;
        break;
    case MC2FMU_ROLE_Q_START: case MC2FMU_ROLE_QD_START: case MC2FMU_ROLE_PHYSICS:
        if (!before_init) {
            snprintf(msg, sizeof msg, "%s cannot be changed after initialisation: it is a fixed parameter (set it "
                     "before exitInitializationMode, or reset the FMU)", var->name);
            return mc2fmu_fail(c, msg);
        }
        if (var->role == MC2FMU_ROLE_Q_START) c->s.q_start[var->index] = value;
        else if (var->role == MC2FMU_ROLE_QD_START) c->s.qd_start[var->index] = value;
        else {
            char why[160];
            if (mc2fmu_slot_problem(var->index, value, why, sizeof why)) {
                snprintf(msg, sizeof msg, "%s = %s refused: %s", var->name, mc2fmu_repr(value, b, sizeof b), why);
                return mc2fmu_fail(c, msg);
            }
            /* formed (and the body's inertia checked as a whole) by mc2fmu_physics_ready before the
               next evaluation: not once per value set */
            c->s.phys[var->index] = value;
        }
        break;
    case MC2FMU_ROLE_Q: case MC2FMU_ROLE_QD:
        if (c->fmi == 3 && c->interface == MC2FMU_ME &&
            (c->s.phase == MC2FMU_EVENT || c->s.phase == MC2FMU_CONTINUOUS)) {
            c->s.xs[(var->role == MC2FMU_ROLE_QD ? MC2FMU_NQ : 0) + var->index] = value;
            break;
        }
        snprintf(msg, sizeof msg, "%s cannot be set in %s: it is %s (set q_start and qd_start before initialisation)",
                 var->name, mc2fmu_phase_name(c, c->s.phase),
                 c->interface == MC2FMU_ME ? (c->fmi == 3 ? "a continuous state, settable in Event and Continuous-Time "
                 "Mode" : "a continuous state (fmi2SetContinuousStates sets it)") : "an output");
        return mc2fmu_fail(c, msg);
    default:
        snprintf(msg, sizeof msg, "%s cannot be set: only inputs and parameters can", var->name);
        return mc2fmu_fail(c, msg);
    }
    c->pose_valid = 0;
    c->motion_valid = 0;
    return MC2FMU_OK;
}

/* get/set the values of nvr scalar variables (getReal/setReal, getFloat64/setFloat64) */
static int mc2fmu_get_reals(mc2fmu_core *c, const char *fn, const unsigned *vr, size_t nvr, double *value) {
    size_t i;
    if (mc2fmu_begin(c, MC2FMU_CALL_GET, fn) || mc2fmu_null(c, fn, "the value references", vr, nvr) ||
        mc2fmu_null(c, fn, "the values", value, nvr))
        return MC2FMU_ERROR;
    for (i = 0; i < nvr; i++)
        if (mc2fmu_get_real(c, vr[i], &value[i])) return MC2FMU_ERROR;
    return MC2FMU_OK;
}

static int mc2fmu_set_reals(mc2fmu_core *c, const char *fn, const unsigned *vr, size_t nvr, const double *value) {
    size_t i;
    if (mc2fmu_begin(c, MC2FMU_CALL_SET, fn) || mc2fmu_null(c, fn, "the value references", vr, nvr) ||
        mc2fmu_null(c, fn, "the values", value, nvr))
        return MC2FMU_ERROR;
    for (i = 0; i < nvr; i++)
        if (mc2fmu_set_real(c, vr[i], value[i])) return MC2FMU_ERROR;
    return MC2FMU_OK;
}

/* get/set on a type the model has no variables of: nothing to do for none */
static int mc2fmu_no_type(mc2fmu_core *c, const char *fn, int call, size_t nvr, const char *type) {
    char msg[MC2FMU_MESSAGE];
    if (mc2fmu_begin(c, call, fn)) return MC2FMU_ERROR;
    if (nvr == 0) return MC2FMU_OK;
    snprintf(msg, sizeof msg, "%s: the model has no %s variables", fn, type);
    return mc2fmu_fail(c, msg);
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

/* what must hold of a state for this build to run on it; NULL if it does */
static const char *mc2fmu_state_problem(const mc2fmu_core *c, const mc2fmu_state *s) {
    const int running = s->phase >= MC2FMU_EVENT;
    if (s->phase < MC2FMU_INSTANTIATED || s->phase >= MC2FMU_PHASES) return "an unknown phase";
    if ((c->interface == MC2FMU_ME && s->phase == MC2FMU_STEP) ||
        (c->interface == MC2FMU_CS && (s->phase == MC2FMU_EVENT || s->phase == MC2FMU_CONTINUOUS)))
        return "a phase of the other interface";
    if (!(fabs(s->t0) <= MC2FMU_MAX_TIME && fabs(s->time) <= MC2FMU_MAX_TIME &&
          fabs(s->t_completed[0]) <= MC2FMU_MAX_TIME && fabs(s->t_completed[1]) <= MC2FMU_MAX_TIME &&
          fabs(s->t_event) <= MC2FMU_MAX_TIME))
        return "a non-finite time or one above 1e9 s";
    if ((double)s->k > 2.0 * MC2FMU_MAX_TIME / MC2FMU_DT) return "a grid index out of range";
    if ((s->warned != 0 && s->warned != 1) || (s->failed != 0 && s->failed != 1)) return "corrupt flags";
    if (memchr(s->failure, 0, sizeof s->failure) == NULL) return "an unterminated message";
    if (!mc2fmu_all_finite(s->u, MC2FMU_NU1) || !mc2fmu_all_finite(s->q_start, MC2FMU_NQ) ||
        !mc2fmu_all_finite(s->qd_start, MC2FMU_NQ) || !mc2fmu_all_finite(s->phys, MC2FMU_NPHYS))
        return "non-finite inputs or parameters";
    if (running) {
        char why[MC2FMU_MESSAGE];
        if (mc2fmu_physics_problem(s->phys, why, sizeof why)) return "physical parameters no rigid mechanism has";
    }
    if (!(s->envelope >= 0.0)) return "a negative or NaN envelope distance";
    if (running && c->interface == MC2FMU_ME && !mc2fmu_all_finite(s->xs, 2 * MC2FMU_NQ)) return "non-finite states";
    if (running && c->interface == MC2FMU_CS) {
        const double n = (s->time - s->t0) / MC2FMU_DT;
        if (s->k < 0 || !(fabs((double)s->k - n) <= 1.0 + MC2FMU_GRID_TOL)) return "a grid index that does not match its time";
        if (!mc2fmu_all_finite(s->hist[1], MC2FMU_NQ) || !mc2fmu_all_finite(s->hist[2], MC2FMU_NQ) ||
            (s->k > 0 && !mc2fmu_all_finite(s->hist[0], MC2FMU_NQ)))
            return "a non-finite history";
        if (MC2FMU_ONE_STEP && (!mc2fmu_all_finite(s->hqd[1], MC2FMU_NQ) || (s->k > 0 && !mc2fmu_all_finite(s->hqd[0], MC2FMU_NQ))))
            return "a non-finite velocity history";
#if MC2FMU_LPCA
        if (s->rom.cluster < 0 || s->rom.cluster >= MC2FMU_LPCA_K) return "a cluster the model does not have";
        if (!mc2fmu_all_finite(s->rom.q, MC2FMU_R) || !mc2fmu_all_finite(s->rom.qd, MC2FMU_R) ||
            !mc2fmu_all_finite(s->rom.qdd, MC2FMU_R))
            return "a non-finite local-PCA state";
        if (!mc2fmu_all_finite(s->hx[1], MC2FMU_NX) || !mc2fmu_all_finite(s->hxd[1], MC2FMU_NX) ||
            (s->k > 0 && (!mc2fmu_all_finite(s->hx[0], MC2FMU_NX) || !mc2fmu_all_finite(s->hxd[0], MC2FMU_NX))) ||
            !mc2fmu_all_finite(s->x_out, MC2FMU_NX))
            return "a non-finite natural-coordinate history";
#endif
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
    h.format = 3;
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
        snprintf(msg, sizeof msg, "serialized FMU state of %llu bytes refused: this FMU writes %llu", (unsigned long long)size,
                 (unsigned long long)MC2FMU_BLOB_SIZE);
        return mc2fmu_fail(c, msg);
    }
    memcpy(&h, in, sizeof h);
    if (memcmp(h.magic, "mc2fmu\x01", 8) || h.format != 3 || h.size != sizeof(mc2fmu_state) || h.token != mc2fmu_token_hash())
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

/* the FMU-state calls of both FMI versions.  A state is an mc2fmu_saved on the instance's
   list; a pointer not on it is refused, never dereferenced. */
static mc2fmu_saved **mc2fmu_find_saved(mc2fmu_core *c, const void *state) {
    mc2fmu_saved **link;
    for (link = &c->saved; *link; link = &(*link)->next)
        if ((const void *)*link == state) return link;
    return NULL;
}

static int mc2fmu_unknown_state(mc2fmu_core *c, const char *fn) {
    char msg[MC2FMU_MESSAGE];
    snprintf(msg, sizeof msg, "%s: the FMU state passed is not one this instance handed out (or it was freed)", fn);
    return mc2fmu_fail(c, msg);
}

/* *state: NULL for a new state, or one of this instance's to overwrite; the buffer to write */
static mc2fmu_saved *mc2fmu_state_slot(mc2fmu_core *c, const char *fn, void **state) {
    mc2fmu_saved *saved;
    if (mc2fmu_null(c, fn, "the FMU state pointer", state, 1)) return NULL;
    if (*state) {
        if (!mc2fmu_find_saved(c, *state)) {
            mc2fmu_unknown_state(c, fn);
            return NULL;
        }
        return (mc2fmu_saved *)*state;
    }
    saved = (mc2fmu_saved *)calloc(1, sizeof *saved);
    if (!saved) {
        mc2fmu_fail(c, "out of memory for an FMU state");
        return NULL;
    }
    saved->next = c->saved;
    c->saved = saved;
    return saved;
}

static int mc2fmu_get_fmu_state(mc2fmu_core *c, const char *fn, void **state) {
    mc2fmu_saved *saved;
    if (mc2fmu_begin(c, MC2FMU_CALL_ANY, fn) || !(saved = mc2fmu_state_slot(c, fn, state))) return MC2FMU_ERROR;
    memcpy(&saved->s, &c->s, sizeof c->s);
    *state = saved;
    return MC2FMU_OK;
}

static int mc2fmu_set_fmu_state(mc2fmu_core *c, const char *fn, const void *state) {
    mc2fmu_saved **link;
    if (mc2fmu_begin(c, MC2FMU_CALL_ANY, fn) || mc2fmu_null(c, fn, "the FMU state", state, 1)) return MC2FMU_ERROR;
    if (!(link = mc2fmu_find_saved(c, state))) return mc2fmu_unknown_state(c, fn);
    memcpy(&c->s, &(*link)->s, sizeof c->s);
    c->pose_valid = 0;
    c->motion_valid = 0;
    mc2fmu_physics_update(c);
    if (mc2fmu_running(c) && !c->ph_ok) return mc2fmu_physics_ready(c, fn);
    return MC2FMU_OK;
}

static int mc2fmu_free_fmu_state(mc2fmu_core *c, const char *fn, void **state) {
    mc2fmu_saved **link, *saved;
    if (mc2fmu_begin(c, MC2FMU_CALL_ANY, fn) || mc2fmu_null(c, fn, "the FMU state pointer", state, 1))
        return MC2FMU_ERROR;
    if (!*state) return MC2FMU_OK; /* nothing to free */
    if (!(link = mc2fmu_find_saved(c, *state))) return mc2fmu_unknown_state(c, fn);
    saved = *link;
    *link = saved->next;
    free(saved);
    *state = NULL;
    return MC2FMU_OK;
}

/* freeInstance: the states the host did not free */
static void mc2fmu_free_all_states(mc2fmu_core *c) {
    while (c->saved) {
        mc2fmu_saved *next = c->saved->next;
        free(c->saved);
        c->saved = next;
    }
}

static int mc2fmu_serialized_size(mc2fmu_core *c, const char *fn, const void *state, size_t *size) {
    if (mc2fmu_begin(c, MC2FMU_CALL_ANY, fn) || mc2fmu_null(c, fn, "the size", size, 1)) return MC2FMU_ERROR;
    if (!mc2fmu_find_saved(c, state)) return mc2fmu_unknown_state(c, fn);
    *size = MC2FMU_BLOB_SIZE;
    return MC2FMU_OK;
}

static int mc2fmu_serialize_fmu_state(mc2fmu_core *c, const char *fn, const void *state, unsigned char *out,
                                      size_t size) {
    mc2fmu_saved **link;
    if (mc2fmu_begin(c, MC2FMU_CALL_ANY, fn) || mc2fmu_null(c, fn, "the buffer", out, size)) return MC2FMU_ERROR;
    if (!(link = mc2fmu_find_saved(c, state))) return mc2fmu_unknown_state(c, fn);
    if (size < MC2FMU_BLOB_SIZE) {
        char msg[MC2FMU_MESSAGE];
        snprintf(msg, sizeof msg, "%s: a buffer of %llu bytes is too small: the state takes %llu (see the serialized "
                 "size call)", fn, (unsigned long long)size, (unsigned long long)MC2FMU_BLOB_SIZE);
        return mc2fmu_fail(c, msg);
    }
    mc2fmu_serialize(c, &(*link)->s, out);
    return MC2FMU_OK;
}

static int mc2fmu_deserialize_fmu_state(mc2fmu_core *c, const char *fn, const unsigned char *in, size_t size,
                                        void **state) {
    mc2fmu_state tmp;
    mc2fmu_saved *saved;
    if (mc2fmu_begin(c, MC2FMU_CALL_ANY, fn) || mc2fmu_null(c, fn, "the serialized state", in, size) ||
        mc2fmu_null(c, fn, "the FMU state pointer", state, 1))
        return MC2FMU_ERROR;
    if (*state && !mc2fmu_find_saved(c, *state)) return mc2fmu_unknown_state(c, fn);
    if (mc2fmu_deserialize(c, in, size, &tmp) || !(saved = mc2fmu_state_slot(c, fn, state))) return MC2FMU_ERROR;
    memcpy(&saved->s, &tmp, sizeof tmp);
    *state = saved;
    return MC2FMU_OK;
}

#ifdef MC2FMU_SELFTEST
/* the export's self-check (never in an FMU binary): decoder, rhs (and its spring part J^T f_spring
   at qd, NQ values, untouched without springs) and step map at one point */
#if defined(__GNUC__) && !defined(_WIN32)
__attribute__((visibility("default")))
#endif
int mc2fmu_selftest(const double *q, const double *qd, const double *u, const double *q_prev, double *x, double *J,
                    double *H, double *x_value, double *qdd, double *q_next, double *pose, double *spring) {
    static mc2fmu_terms T;
    static mc2fmu_layer_buf A, B;
    static mc2fmu_physics P;
    static double work[MC2FMU_NH * MC2FMU_NH];
    mc2fmu_rows Z;
    int i, n, j;
    if (!T.ph) { /* the exported parameters */
        mc2fmu_physics_form(mc2fmu_phys_start, &P, work);
        T.ph = &P;
    }
    /* the decoder's full output (x, J, H) through its output layer, which the dynamics never form */
    Z = mc2fmu_network(q, A, B, MC2FMU_P);
    for (n = 0; n < MC2FMU_NX; n++) {
        const double s = mc2fmu_x_scale[n];
        x[n] = mc2fmu_x_mean[n] + s * Z[0][n];
        for (j = 0; j < MC2FMU_NQ; j++) J[n * MC2FMU_NQ + j] = s * Z[1 + j][n];
        for (j = 0; j < MC2FMU_NQ2; j++) {
            const int a = j / MC2FMU_NQ, b = j % MC2FMU_NQ;
            H[n * MC2FMU_NQ2 + j] = s * Z[a <= b ? MC2FMU_SYM(a, b) : MC2FMU_SYM(b, a)][n];
        }
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

#if MC2FMU_NODE
/* the node dynamics at one point: qdd = f(q, qd, u) and one RK4 step */
#if defined(__GNUC__) && !defined(_WIN32)
__attribute__((visibility("default")))
#endif
void mc2fmu_selftest_node(const double *q, const double *qd, const double *u, double *qdd, double *q_next,
                          double *qd_next) {
    mc2fmu_node_acceleration(q, qd, u, qdd);
    mc2fmu_node_step(q, qd, u, MC2FMU_DT, q_next, qd_next);
}
#endif

#if MC2FMU_LPCA
/* the local-PCA ROM from one state: the start from (q0, qd0), one step of Algorithm 1 (a switch
   when `cluster` is not the nearest) and the chart's reading of the result */
#if defined(__GNUC__) && !defined(_WIN32)
__attribute__((visibility("default")))
#endif
void mc2fmu_selftest_lpca(const double *q0, const double *qd0, const double *u, int cluster, const double *q,
                          const double *qd, const double *qdd, double *start, double *next, double *observed) {
    mc2fmu_lstate s;
    double x[MC2FMU_NX], xd[MC2FMU_NX];
    mc2fmu_lpca_start(q0, qd0, u, &s);
    start[0] = s.cluster;
    memcpy(start + 1, s.q, sizeof s.q);
    memcpy(start + 1 + MC2FMU_R, s.qd, sizeof s.qd);
    memcpy(start + 1 + 2 * MC2FMU_R, s.qdd, sizeof s.qdd);
    s.cluster = cluster;
    memcpy(s.q, q, sizeof s.q);
    memcpy(s.qd, qd, sizeof s.qd);
    memcpy(s.qdd, qdd, sizeof s.qdd);
    mc2fmu_lpca_step(&s, u, MC2FMU_DT);
    next[0] = s.cluster;
    memcpy(next + 1, s.q, sizeof s.q);
    memcpy(next + 1 + MC2FMU_R, s.qd, sizeof s.qd);
    memcpy(next + 1 + 2 * MC2FMU_R, s.qdd, sizeof s.qdd);
    mc2fmu_lpca_observe(&s, NULL, x, xd, observed, observed + MC2FMU_NQ); /* angles on the encoder's own turn */
}
#endif

/* the FMU's finite-value checks survived the build: refused[0] = 1 when setting the first input
   to value[0] (a NaN the caller passes, so no compiler can fold it) is refused (1 as well for a
   model without inputs), refused[1] the same for q_start[1].  A compiler that assumes finite
   maths removes isnan/isfinite, and its FMU would then accept NaN and run on it with OK */
#if defined(__GNUC__) && !defined(_WIN32)
__attribute__((visibility("default")))
#endif
void mc2fmu_selftest_refusals(const double *value, double *refused) {
    static mc2fmu_core c;
    unsigned vr;
    int k;
    for (k = 0; k < 2; k++) {
        const int role = k == 0 ? MC2FMU_ROLE_INPUT : MC2FMU_ROLE_Q_START;
        refused[k] = k == 0 && MC2FMU_NU == 0;
        for (vr = 1; vr <= MC2FMU_NV; vr++)
            if (mc2fmu_variables[vr - 1].role == role) {
                memset(&c, 0, sizeof c);
                mc2fmu_init(&c, 2, MC2FMU_CS, 0, NULL, NULL);
                refused[k] = mc2fmu_set_real(&c, vr, value[0]) == MC2FMU_ERROR && c.s.failed;
                break;
            }
    }
}

/* poses of arbitrary (not necessarily rigid) natural coordinates */
#if defined(__GNUC__) && !defined(_WIN32)
__attribute__((visibility("default")))
#endif
void mc2fmu_selftest_poses(const double *x, double *pose) {
    mc2fmu_poses(x, pose);
}
#endif

#endif /* MC2FMU_NATIVE_H */
