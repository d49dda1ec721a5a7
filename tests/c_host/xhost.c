/* A portable FMI host in plain C99 for every platform a native FMU carries a binary for:
   FMI 2 and 3, co-simulation and model exchange, loaded with dlopen (Linux) or LoadLibrary
   (Windows).  Built for each platform and run under its emulator (wine, qemu-user), so a
   platform's binary runs the same experiment as the Linux x86-64 one, in a host of its own.

       xhost LIBRARY TOKEN SPEC OUT

   SPEC (binary, little-endian): int32 fmi (2 or 3), int32 me (0: co-simulation: doStep h;
   1: model exchange: classic RK4 at step h through setTime / setContinuousStates / the
   derivatives, completedIntegratorStep after each step), int32 nx (continuous states),
   int32 n_steps, double h, int32 n_in, uint32 vr[n_in], int32 n_out, uint32 vr[n_out],
   int32 n_rows, double rows[n_rows][n_in] (row k is set before step k, the last row held).
   OUT (binary): per step the time and the n_out outputs after it, as doubles.
   Exit 0 on success, 1 when an FMI call fails (its status on stderr), 2 on bad arguments. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmi2Functions.h"
#include "fmi3Functions.h"

#ifdef _WIN32
#include <windows.h>
#define LOAD_LIBRARY(path) ((void *)LoadLibraryA(path))
#define LOAD_SYMBOL(lib, name) ((void *)GetProcAddress((HMODULE)(lib), name))
#else
#include <dlfcn.h>
#define LOAD_LIBRARY(path) dlopen(path, RTLD_NOW | RTLD_LOCAL)
#define LOAD_SYMBOL(lib, name) dlsym(lib, name)
#endif

static void *lib;

static void *sym(const char *name) {
    void *f = LOAD_SYMBOL(lib, name);
    if (!f) {
        fprintf(stderr, "missing symbol %s\n", name);
        exit(2);
    }
    return f;
}

#define FN(type, name) type *name = (type *)sym(#name)
#define CHECK(call)                                                                      \
    do {                                                                                 \
        int st_ = (int)(call);                                                           \
        if (st_ > 1) {                                                                   \
            fprintf(stderr, "%s failed with status %d\n", #call, st_);                   \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

static void logger2(fmi2ComponentEnvironment env, fmi2String name, fmi2Status status, fmi2String category,
                 fmi2String message, ...) {
    (void)env;
    fprintf(stderr, "[%s] %d %s: %s\n", name, (int)status, category, message);
}

static void logger3(fmi3InstanceEnvironment env, fmi3Status status, fmi3String category, fmi3String message) {
    (void)env;
    fprintf(stderr, "%d %s: %s\n", (int)status, category, message);
}

static int32_t get_i(FILE *f) {
    int32_t v;
    if (fread(&v, sizeof v, 1, f) != 1) exit(2);
    return v;
}

static void get_d(FILE *f, void *v, size_t size, size_t n) {
    if (n && fread(v, size, n, f) != n) exit(2);
}

/* one RK4 step of the model-exchange states x over [t, t + h]; deriv(t, x, dx) */
typedef int (*deriv_fn)(double t, const double *x, double *dx);

static int rk4(deriv_fn f, double t, double h, double *x, int nx, double *k, double *tmp) {
    int i, s;
    static const double c[4] = {0.0, 0.5, 0.5, 1.0}, w[4] = {1.0, 2.0, 2.0, 1.0};
    double *acc = tmp + nx;
    for (i = 0; i < nx; i++) acc[i] = 0.0;
    for (s = 0; s < 4; s++) {
        for (i = 0; i < nx; i++) tmp[i] = s ? x[i] + c[s] * h * k[i] : x[i];
        if (f(t + c[s] * h, tmp, k)) return 1;
        for (i = 0; i < nx; i++) acc[i] += w[s] * k[i];
    }
    for (i = 0; i < nx; i++) x[i] += h / 6.0 * acc[i];
    return 0;
}

static fmi2Component c2;
static fmi3Instance c3;
static int nx_g;

static int deriv2(double t, const double *x, double *dx) {
    FN(fmi2SetTimeTYPE, fmi2SetTime);
    FN(fmi2SetContinuousStatesTYPE, fmi2SetContinuousStates);
    FN(fmi2GetDerivativesTYPE, fmi2GetDerivatives);
    return fmi2SetTime(c2, t) > fmi2Warning || fmi2SetContinuousStates(c2, x, (size_t)nx_g) > fmi2Warning
           || fmi2GetDerivatives(c2, dx, (size_t)nx_g) > fmi2Warning;
}

static int deriv3(double t, const double *x, double *dx) {
    FN(fmi3SetTimeTYPE, fmi3SetTime);
    FN(fmi3SetContinuousStatesTYPE, fmi3SetContinuousStates);
    FN(fmi3GetContinuousStateDerivativesTYPE, fmi3GetContinuousStateDerivatives);
    return fmi3SetTime(c3, t) > fmi3Warning || fmi3SetContinuousStates(c3, x, (size_t)nx_g) > fmi3Warning
           || fmi3GetContinuousStateDerivatives(c3, dx, (size_t)nx_g) > fmi3Warning;
}

int main(int argc, char **argv) {
    FILE *spec, *out;
    int32_t fmi, me, nx, n_steps, n_in, n_out, n_rows, k;
    double h, *rows, *y, *x, *kbuf, *tmp, t;
    unsigned *in_vr, *out_vr;
    if (argc != 5 || !(spec = fopen(argv[3], "rb"))) {
        fprintf(stderr, "usage: xhost LIBRARY TOKEN SPEC OUT\n");
        return 2;
    }
    fmi = get_i(spec);
    me = get_i(spec);
    nx = get_i(spec);
    n_steps = get_i(spec);
    get_d(spec, &h, sizeof h, 1);
    n_in = get_i(spec);
    in_vr = malloc(sizeof(unsigned) * (size_t)(n_in + 1));
    get_d(spec, in_vr, sizeof(unsigned), (size_t)n_in);
    n_out = get_i(spec);
    out_vr = malloc(sizeof(unsigned) * (size_t)(n_out + 1));
    get_d(spec, out_vr, sizeof(unsigned), (size_t)n_out);
    n_rows = get_i(spec);
    rows = malloc(sizeof(double) * ((size_t)n_rows * (size_t)n_in + 1));
    get_d(spec, rows, sizeof(double), (size_t)n_rows * (size_t)n_in);
    fclose(spec);
    nx_g = nx;
    y = malloc(sizeof(double) * (size_t)(n_out + 1));
    x = malloc(sizeof(double) * (size_t)(nx + 1));
    kbuf = malloc(sizeof(double) * (size_t)(nx + 1));
    tmp = malloc(sizeof(double) * (size_t)(2 * nx + 1));
    if (!(lib = LOAD_LIBRARY(argv[1]))) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 2;
    }
    if (!(out = fopen(argv[4], "wb"))) return 2;

    if (fmi == 2) {
        fmi2CallbackFunctions cb = {logger2, calloc, free, NULL, NULL};
        fmi2EventInfo ev;
        fmi2Boolean enter_event, terminate;
        FN(fmi2InstantiateTYPE, fmi2Instantiate);
        FN(fmi2SetupExperimentTYPE, fmi2SetupExperiment);
        FN(fmi2EnterInitializationModeTYPE, fmi2EnterInitializationMode);
        FN(fmi2ExitInitializationModeTYPE, fmi2ExitInitializationMode);
        FN(fmi2SetRealTYPE, fmi2SetReal);
        FN(fmi2GetRealTYPE, fmi2GetReal);
        FN(fmi2TerminateTYPE, fmi2Terminate);
        FN(fmi2FreeInstanceTYPE, fmi2FreeInstance);
        c2 = fmi2Instantiate("xhost", me ? fmi2ModelExchange : fmi2CoSimulation, argv[2], "", &cb, fmi2False,
                             fmi2False);
        if (!c2) return 1;
        CHECK(fmi2SetupExperiment(c2, fmi2False, 0.0, 0.0, fmi2False, 0.0));
        if (n_rows) CHECK(fmi2SetReal(c2, in_vr, (size_t)n_in, rows));
        CHECK(fmi2EnterInitializationMode(c2));
        CHECK(fmi2ExitInitializationMode(c2));
        if (me) {
            FN(fmi2NewDiscreteStatesTYPE, fmi2NewDiscreteStates);
            FN(fmi2EnterContinuousTimeModeTYPE, fmi2EnterContinuousTimeMode);
            FN(fmi2GetContinuousStatesTYPE, fmi2GetContinuousStates);
            ev.newDiscreteStatesNeeded = fmi2True;
            while (ev.newDiscreteStatesNeeded) CHECK(fmi2NewDiscreteStates(c2, &ev));
            CHECK(fmi2EnterContinuousTimeMode(c2));
            CHECK(fmi2GetContinuousStates(c2, x, (size_t)nx));
        }
        for (k = 0; k < n_steps; k++) {
            if (n_rows) CHECK(fmi2SetReal(c2, in_vr, (size_t)n_in, rows + (size_t)(k < n_rows ? k : n_rows - 1) * n_in));
            t = k * h;
            if (me) {
                FN(fmi2SetTimeTYPE, fmi2SetTime);
                FN(fmi2SetContinuousStatesTYPE, fmi2SetContinuousStates);
                FN(fmi2CompletedIntegratorStepTYPE, fmi2CompletedIntegratorStep);
                if (rk4(deriv2, t, h, x, nx, kbuf, tmp)) return 1;
                CHECK(fmi2SetTime(c2, t + h));
                CHECK(fmi2SetContinuousStates(c2, x, (size_t)nx));
                CHECK(fmi2CompletedIntegratorStep(c2, fmi2True, &enter_event, &terminate));
            } else {
                FN(fmi2DoStepTYPE, fmi2DoStep);
                CHECK(fmi2DoStep(c2, t, h, fmi2True));
            }
            CHECK(fmi2GetReal(c2, out_vr, (size_t)n_out, y));
            t = (k + 1) * h;
            fwrite(&t, sizeof t, 1, out);
            fwrite(y, sizeof(double), (size_t)n_out, out);
        }
        CHECK(fmi2Terminate(c2));
        fmi2FreeInstance(c2);
    } else {
        fmi3Boolean b1, b2, b3;
        fmi3Float64 last;
        FN(fmi3EnterInitializationModeTYPE, fmi3EnterInitializationMode);
        FN(fmi3ExitInitializationModeTYPE, fmi3ExitInitializationMode);
        FN(fmi3SetFloat64TYPE, fmi3SetFloat64);
        FN(fmi3GetFloat64TYPE, fmi3GetFloat64);
        FN(fmi3TerminateTYPE, fmi3Terminate);
        FN(fmi3FreeInstanceTYPE, fmi3FreeInstance);
        if (me) {
            FN(fmi3InstantiateModelExchangeTYPE, fmi3InstantiateModelExchange);
            c3 = fmi3InstantiateModelExchange("xhost", argv[2], "", fmi3False, fmi3False, NULL, logger3);
        } else {
            FN(fmi3InstantiateCoSimulationTYPE, fmi3InstantiateCoSimulation);
            c3 = fmi3InstantiateCoSimulation("xhost", argv[2], "", fmi3False, fmi3False, fmi3False, fmi3False, NULL, 0,
                                             NULL, logger3, NULL);
        }
        if (!c3) return 1;
        if (n_rows) CHECK(fmi3SetFloat64(c3, in_vr, (size_t)n_in, rows, (size_t)n_in));
        CHECK(fmi3EnterInitializationMode(c3, fmi3False, 0.0, 0.0, fmi3False, 0.0));
        CHECK(fmi3ExitInitializationMode(c3));
        if (me) {
            FN(fmi3UpdateDiscreteStatesTYPE, fmi3UpdateDiscreteStates);
            FN(fmi3EnterContinuousTimeModeTYPE, fmi3EnterContinuousTimeMode);
            FN(fmi3GetContinuousStatesTYPE, fmi3GetContinuousStates);
            fmi3Boolean needed = fmi3True, b4;
            fmi3Float64 next;
            while (needed) CHECK(fmi3UpdateDiscreteStates(c3, &needed, &b1, &b2, &b3, &b4, &next));
            CHECK(fmi3EnterContinuousTimeMode(c3));
            CHECK(fmi3GetContinuousStates(c3, x, (size_t)nx));
        }
        for (k = 0; k < n_steps; k++) {
            if (n_rows) {
                const double *u = rows + (size_t)(k < n_rows ? k : n_rows - 1) * n_in;
                CHECK(fmi3SetFloat64(c3, in_vr, (size_t)n_in, u, (size_t)n_in));
            }
            t = k * h;
            if (me) {
                FN(fmi3SetTimeTYPE, fmi3SetTime);
                FN(fmi3SetContinuousStatesTYPE, fmi3SetContinuousStates);
                FN(fmi3CompletedIntegratorStepTYPE, fmi3CompletedIntegratorStep);
                if (rk4(deriv3, t, h, x, nx, kbuf, tmp)) return 1;
                CHECK(fmi3SetTime(c3, t + h));
                CHECK(fmi3SetContinuousStates(c3, x, (size_t)nx));
                CHECK(fmi3CompletedIntegratorStep(c3, fmi3True, &b1, &b2));
            } else {
                FN(fmi3DoStepTYPE, fmi3DoStep);
                CHECK(fmi3DoStep(c3, t, h, fmi3True, &b1, &b2, &b3, &last));
            }
            CHECK(fmi3GetFloat64(c3, out_vr, (size_t)n_out, y, (size_t)n_out));
            t = (k + 1) * h;
            fwrite(&t, sizeof t, 1, out);
            fwrite(y, sizeof(double), (size_t)n_out, out);
        }
        CHECK(fmi3Terminate(c3));
        fmi3FreeInstance(c3);
    }
    free(rows);
    free(y);
    free(x);
    free(kbuf);
    free(tmp);
    free(in_vr);
    free(out_vr);
    return fclose(out) == 0 ? 0 : 1;
}
