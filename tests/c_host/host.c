/* A minimal FMI 2.0 co-simulation host in plain C: dlopen + the fmi2 calls, no Python.

   host LIBRARY GUID SPEC            (cc -O2 host.c -o host -ldl -I<fmi2 headers>)

   SPEC is a whitespace-separated text file:
       mode h n_steps repeats        mode: run | bench | cycles
       n_start (vr value)*           parameters set before initialisation
       n_in vr*                      input value references
       n_out vr*                     output value references
       n_rows (n_in values)*         input row k is set before step k (the last row is held)

   run:    prints "t,y1,y2,..." per communication point, %.17g
   bench:  runs the whole experiment `repeats` times, prints "us_per_step <best>"
   cycles: `repeats` times instantiate, initialise, take n_steps steps, get/set/serialise the
           FMU state, free; prints "cycles <n>" (run under valgrind for the leak check) */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fmi2Functions.h"

static void logger(fmi2ComponentEnvironment env, fmi2String name, fmi2Status status, fmi2String category,
                   fmi2String message, ...) {
    (void)env;
    fprintf(stderr, "[%s] %d %s: %s\n", name, (int)status, category, message);
}

#define LOAD(f)                                                              \
    f##TYPE *f = (f##TYPE *)dlsym(lib, #f);                                  \
    if (!f) {                                                                \
        fprintf(stderr, "missing symbol %s\n", #f);                          \
        return 2;                                                            \
    }

#define CHECK(call)                                                          \
    do {                                                                     \
        fmi2Status st_ = (call);                                             \
        if (st_ > fmi2Warning) {                                             \
            fprintf(stderr, "%s failed with status %d\n", #call, (int)st_);  \
            return 1;                                                        \
        }                                                                    \
    } while (0)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: the machine may be shared */
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv) {
    char mode[16];
    double h, *start_val, *rows, *y;
    int n_steps, repeats, n_start, n_in, n_out, n_rows, i, k, r;
    unsigned *start_vr, *in_vr, *out_vr;
    FILE *spec;
    void *lib;
    fmi2CallbackFunctions cb = {logger, calloc, free, NULL, NULL};
    if (argc != 4) {
        fprintf(stderr, "usage: host LIBRARY GUID SPEC\n");
        return 2;
    }
    spec = fopen(argv[3], "r");
    if (!spec || fscanf(spec, "%15s %lf %d %d %d", mode, &h, &n_steps, &repeats, &n_start) != 5) return 2;
    start_vr = malloc(sizeof(unsigned) * (n_start + 1));
    start_val = malloc(sizeof(double) * (n_start + 1));
    for (i = 0; i < n_start; i++)
        if (fscanf(spec, "%u %lf", &start_vr[i], &start_val[i]) != 2) return 2;
    if (fscanf(spec, "%d", &n_in) != 1) return 2;
    in_vr = malloc(sizeof(unsigned) * (n_in + 1));
    for (i = 0; i < n_in; i++)
        if (fscanf(spec, "%u", &in_vr[i]) != 1) return 2;
    if (fscanf(spec, "%d", &n_out) != 1) return 2;
    out_vr = malloc(sizeof(unsigned) * (n_out + 1));
    y = malloc(sizeof(double) * (n_out + 1));
    for (i = 0; i < n_out; i++)
        if (fscanf(spec, "%u", &out_vr[i]) != 1) return 2;
    if (fscanf(spec, "%d", &n_rows) != 1) return 2;
    rows = malloc(sizeof(double) * ((size_t)n_rows * n_in + 1));
    for (i = 0; i < n_rows * n_in; i++)
        if (fscanf(spec, "%lf", &rows[i]) != 1) return 2;
    fclose(spec);

    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    {
        LOAD(fmi2Instantiate)
        LOAD(fmi2FreeInstance)
        LOAD(fmi2SetupExperiment)
        LOAD(fmi2EnterInitializationMode)
        LOAD(fmi2ExitInitializationMode)
        LOAD(fmi2Terminate)
        LOAD(fmi2SetReal)
        LOAD(fmi2GetReal)
        LOAD(fmi2DoStep)
        LOAD(fmi2GetFMUstate)
        LOAD(fmi2SetFMUstate)
        LOAD(fmi2FreeFMUstate)
        LOAD(fmi2SerializedFMUstateSize)
        LOAD(fmi2SerializeFMUstate)
        LOAD(fmi2DeSerializeFMUstate)
        double best = 1e300;
        int runs = strcmp(mode, "run") == 0 ? 1 : repeats;
        for (r = 0; r < runs; r++) {
            fmi2Component c = fmi2Instantiate("host", fmi2CoSimulation, argv[2], "", &cb, fmi2False, fmi2False);
            double t0;
            if (!c) {
                fprintf(stderr, "fmi2Instantiate failed\n");
                return 1;
            }
            CHECK(fmi2SetupExperiment(c, fmi2False, 0.0, 0.0, fmi2False, 0.0));
            CHECK(fmi2SetReal(c, start_vr, n_start, start_val));
            if (n_rows) CHECK(fmi2SetReal(c, in_vr, n_in, rows));
            CHECK(fmi2EnterInitializationMode(c));
            CHECK(fmi2ExitInitializationMode(c));
            t0 = now();
            for (k = 0; k < n_steps; k++) {
                const double *u = rows + (size_t)(k < n_rows ? k : n_rows - 1) * n_in;
                if (n_rows) CHECK(fmi2SetReal(c, in_vr, n_in, u));
                CHECK(fmi2DoStep(c, k * h, h, fmi2True));
                CHECK(fmi2GetReal(c, out_vr, n_out, y));
                if (strcmp(mode, "run") == 0) {
                    printf("%.17g", (k + 1) * h);
                    for (i = 0; i < n_out; i++) printf(",%.17g", y[i]);
                    printf("\n");
                }
            }
            t0 = now() - t0;
            if (t0 < best) best = t0;
            if (strcmp(mode, "cycles") == 0) {
                fmi2FMUstate s = NULL, s2 = NULL;
                size_t size;
                char *blob;
                CHECK(fmi2GetFMUstate(c, &s));
                CHECK(fmi2SerializedFMUstateSize(c, s, &size));
                blob = malloc(size);
                CHECK(fmi2SerializeFMUstate(c, s, blob, size));
                CHECK(fmi2DeSerializeFMUstate(c, blob, size, &s2));
                CHECK(fmi2SetFMUstate(c, s2));
                CHECK(fmi2FreeFMUstate(c, &s));
                CHECK(fmi2FreeFMUstate(c, &s2));
                free(blob);
            }
            CHECK(fmi2Terminate(c));
            fmi2FreeInstance(c);
        }
        if (strcmp(mode, "bench") == 0) printf("us_per_step %.6g\n", 1e6 * best / n_steps);
        if (strcmp(mode, "cycles") == 0) printf("cycles %d\n", runs);
    }
    dlclose(lib);
    free(start_vr);
    free(start_val);
    free(in_vr);
    free(out_vr);
    free(y);
    free(rows);
    return 0;
}
