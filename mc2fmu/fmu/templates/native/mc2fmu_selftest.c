/* mc2fmu_selftest.c: the export's self-check as a program, for a platform whose library this
   machine cannot load (Windows under wine, Linux aarch64 under qemu-user).  Never in an FMU.

   Compiled with -DMC2FMU_SELFTEST -DMC2FMU_GLUE="mc2fmu_fmi2.c" (or fmi3), so the checked code
   is the FMU's own translation unit, built by the platform's compiler.

       selftest IN OUT

   IN:  records, each an int32 kind and its inputs as little-endian doubles, until the end:
          0  q[NQ] qd[NQ] u[NU1] q_prev[NQ]          -> mc2fmu_selftest
          1  q[NQ] qd[NQ] u[NU1]                     -> mc2fmu_selftest_node  (node models)
          2  q0[NQ] qd0[NQ] u[NU1] cluster q[R] qd[R] qdd[R]
                                                     -> mc2fmu_selftest_lpca  (local-PCA models)
          3  q[NQ] qd[NQ] u[NU1] value               -> mc2fmu_selftest_refusals
   OUT: per record its outputs as doubles, in the order of the function's arguments (kind 0:
        x, J, H, x_value, qdd, q_next, pose, spring, then its return value).
   Exit 0 when every record was read and written, 2 on a bad file or an unknown kind. */
#include MC2FMU_GLUE

static int mc2fmu_read(FILE *f, double *v, int n) { return (int)fread(v, sizeof(double), (size_t)n, f) == n; }
static int mc2fmu_write(FILE *f, const double *v, int n) { return (int)fwrite(v, sizeof(double), (size_t)n, f) == n; }

int main(int argc, char **argv) {
    static double q[MC2FMU_NQ], qd[MC2FMU_NQ], u[MC2FMU_NU1], qp[MC2FMU_NQ];
    static double x[MC2FMU_NX], J[MC2FMU_NX * MC2FMU_NQ], H[MC2FMU_NX * MC2FMU_NQ2], xv[MC2FMU_NX];
    static double qdd[MC2FMU_NQ], qn[MC2FMU_NQ], pose[7 * MC2FMU_NB], spring[MC2FMU_NQ], ret;
    FILE *in, *out;
    int32_t kind;
    if (argc != 3 || !(in = fopen(argv[1], "rb")) || !(out = fopen(argv[2], "wb"))) {
        fprintf(stderr, "usage: selftest IN OUT\n");
        return 2;
    }
    while (fread(&kind, sizeof kind, 1, in) == 1) {
        int ok = mc2fmu_read(in, q, MC2FMU_NQ) && mc2fmu_read(in, qd, MC2FMU_NQ) && mc2fmu_read(in, u, MC2FMU_NU1);
        if (!ok) return 2;
        if (kind == 0) {
            memset(spring, 0, sizeof spring);
            if (!mc2fmu_read(in, qp, MC2FMU_NQ)) return 2;
            ret = mc2fmu_selftest(q, qd, u, qp, x, J, H, xv, qdd, qn, pose, spring);
            ok = mc2fmu_write(out, x, MC2FMU_NX) && mc2fmu_write(out, J, MC2FMU_NX * MC2FMU_NQ)
                 && mc2fmu_write(out, H, MC2FMU_NX * MC2FMU_NQ2) && mc2fmu_write(out, xv, MC2FMU_NX)
                 && mc2fmu_write(out, qdd, MC2FMU_NQ) && mc2fmu_write(out, qn, MC2FMU_NQ)
                 && mc2fmu_write(out, pose, 7 * MC2FMU_NB) && mc2fmu_write(out, spring, MC2FMU_NQ)
                 && mc2fmu_write(out, &ret, 1);
#if MC2FMU_NODE
        } else if (kind == 1) {
            double a[MC2FMU_NQ], qn1[MC2FMU_NQ], qdn[MC2FMU_NQ];
            mc2fmu_selftest_node(q, qd, u, a, qn1, qdn);
            ok = mc2fmu_write(out, a, MC2FMU_NQ) && mc2fmu_write(out, qn1, MC2FMU_NQ) && mc2fmu_write(out, qdn, MC2FMU_NQ);
#endif
#if MC2FMU_LPCA
        } else if (kind == 2) {
            double cluster, lq[MC2FMU_R], lqd[MC2FMU_R], lqdd[MC2FMU_R];
            double start[1 + 3 * MC2FMU_R], next[1 + 3 * MC2FMU_R], observed[2 * MC2FMU_NQ];
            if (!(mc2fmu_read(in, &cluster, 1) && mc2fmu_read(in, lq, MC2FMU_R) && mc2fmu_read(in, lqd, MC2FMU_R)
                  && mc2fmu_read(in, lqdd, MC2FMU_R)))
                return 2;
            mc2fmu_selftest_lpca(q, qd, u, (int)cluster, lq, lqd, lqdd, start, next, observed);
            ok = mc2fmu_write(out, start, 1 + 3 * MC2FMU_R) && mc2fmu_write(out, next, 1 + 3 * MC2FMU_R)
                 && mc2fmu_write(out, observed, 2 * MC2FMU_NQ);
#endif
        } else if (kind == 3) {
            double value, refused[2];
            if (!mc2fmu_read(in, &value, 1)) return 2;
            mc2fmu_selftest_refusals(&value, refused);
            ok = mc2fmu_write(out, refused, 2);
        } else {
            fprintf(stderr, "selftest: unknown record kind %d\n", (int)kind);
            return 2;
        }
        if (!ok) return 2;
    }
    fclose(in);
    return fclose(out) == 0 ? 0 : 2;
}
