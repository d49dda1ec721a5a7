/* A minimal FMI 2.0 co-simulation host in plain C: dlopen + the fmi2 calls, no Python.

   host LIBRARY GUID SPEC            (cc -O2 host.c -o host -ldl -I<fmi2 headers>)

   SPEC is a whitespace-separated text file:
       mode h n_steps repeats        mode: run | bench | cycles | states
       n_start (vr value)*           parameters set before initialisation
       n_in vr*                      input value references
       n_out vr*                     output value references
       n_rows (n_in values)*         input row k is set before step k (the last row is held)

   run:    prints "t,y1,y2,..." per communication point, %.17g
   bench:  runs the whole experiment `repeats` times, prints "us_per_step <best>"
   cycles: `repeats` times instantiate, initialise, take n_steps steps, get/set/serialise the
           FMU state, free; prints "cycles <n>" (run under valgrind for the leak check)
   states: after the run, serializes the FMU state and loads `repeats` corrupted copies of it
           into the instance (random bytes, bit flips, truncations/extensions, and forged fields
           with a recomputed checksum: the mc2fmu native blob layout, see fmpy_sim.py); each one
           deserialized, set, stepped once and read; then the intact state is set again.  Prints
           "states <n> refused <r> accepted <a> stepped <s> nan_ok <b> restore_failed <f>":
           nan_ok counts accepted states that stepped with an OK status to non-finite outputs. */
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

static unsigned long long rng_state = 0x9E3779B97F4A7C15ULL;

static unsigned long long rng(void) { /* xorshift64*: deterministic corruption */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

static unsigned long long fnv(unsigned long long h, const unsigned char *p, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

/* one corrupted copy of blob (size n) into out (capacity 2n); returns its length */
static size_t corrupt(const unsigned char *blob, size_t n, unsigned char *out, int kind) {
    const size_t header = 40; /* magic 8, format 4, size 4, token 8, interface 4, pad 4, checksum 8 */
    size_t len = n, i;
    memcpy(out, blob, n);
    switch (kind) {
    case 0: /* random bytes */
        for (i = 0; i < n; i++) out[i] = (unsigned char)rng();
        break;
    case 1: { /* 1 to 8 bit flips */
        int flips = 1 + (int)(rng() % 8), f;
        for (f = 0; f < flips; f++) out[rng() % n] ^= (unsigned char)(1u << (rng() % 8));
        break;
    }
    case 2: /* truncated or extended */
        len = (size_t)(rng() % (2 * n));
        if (len == n) len = n - 1;
        for (i = n; i < len; i++) out[i] = (unsigned char)rng();
        break;
    default: { /* forged 8-byte field with a valid checksum: a random double, integer or special value */
        unsigned long long token, iface, sum, bits;
        double specials[6] = {0.0, -1.0, 1e308, -1e308, 0.0, 0.0};
        size_t off = header + 8 * (size_t)(rng() % ((n - header) / 8));
        specials[4] = 0.0 / 0.0;
        specials[5] = 1.0 / 0.0;
        switch (rng() % 4) {
        case 0: bits = rng(); break;
        case 1: bits = (unsigned long long)(long long)(rng() % 2000001) - 1000000ULL; break;
        case 2: bits = 0x8000000000000000ULL; break;
        default: memcpy(&bits, &specials[rng() % 6], 8);
        }
        memcpy(out + off, &bits, 8);
        token = 0;
        iface = 0;
        memcpy(&token, out + 16, 8);
        memcpy(&iface, out + 24, 4);
        sum = fnv(token ^ iface, out + header, n - header);
        memcpy(out + 32, &sum, 8);
    }
    }
    return len;
}

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
        int states = strcmp(mode, "states") == 0;
        int runs = strcmp(mode, "run") == 0 || states ? 1 : repeats;
        for (r = 0; r < runs; r++) {
            fmi2Component c = fmi2Instantiate("host", fmi2CoSimulation, argv[2], "", &cb, fmi2False, fmi2True);
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
            if (states) {
                fmi2FMUstate s0 = NULL, s1 = NULL;
                size_t size, len;
                unsigned char *blob, *bad;
                int refused = 0, accepted = 0, stepped = 0, nan_ok = 0, restore_failed = 0;
                double t_now;
                CHECK(fmi2GetFMUstate(c, &s0));
                CHECK(fmi2SerializedFMUstateSize(c, s0, &size));
                blob = malloc(size);
                bad = malloc(2 * size);
                CHECK(fmi2SerializeFMUstate(c, s0, (fmi2Byte *)blob, size));
                t_now = n_steps * h;
                for (i = 0; i < repeats; i++) {
                    len = corrupt(blob, size, bad, i % 4);
                    if (fmi2DeSerializeFMUstate(c, (const fmi2Byte *)bad, len, &s1) != fmi2OK || !s1) {
                        refused++;
                    } else if (fmi2SetFMUstate(c, s1) != fmi2OK) {
                        refused++;
                    } else {
                        accepted++;
                        if (fmi2DoStep(c, t_now, h, fmi2True) == fmi2OK) {
                            int finite = fmi2GetReal(c, out_vr, n_out, y) == fmi2OK;
                            for (k = 0; k < n_out && finite; k++) finite = y[k] == y[k] && y[k] - y[k] == 0.0;
                            stepped++;
                            nan_ok += !finite;
                        }
                    }
                    if (s1) fmi2FreeFMUstate(c, &s1);
                    if (fmi2SetFMUstate(c, s0) != fmi2OK) restore_failed++;
                }
                printf("states %d refused %d accepted %d stepped %d nan_ok %d restore_failed %d\n", repeats, refused,
                       accepted, stepped, nan_ok, restore_failed);
                fmi2FreeFMUstate(c, &s0);
                free(blob);
                free(bad);
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
