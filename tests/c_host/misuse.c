/* An adversarial FMI host in plain C: one misuse case of an FMU's library, in this process.

   misuse LIBRARY TOKEN FMI IFACE VRS CASE        (cc -O0 -g misuse.c -o misuse -ldl -I<fmpy c-code>)

   FMI 2|3, IFACE cs|me; VRS = "q,qd,q_start,input,der_qd,nx" value references (input -1 if the
   model has none; der_qd 0, no variable, in co-simulation) and the number of continuous states.
   CASE is either
     PHASE:CALL   reach PHASE by legal calls, then make CALL once with valid arguments, then
                  read q[1]; PHASE: instantiated init event continuous step terminated failed
     NAME         a named case (NULL pointers, non-finite values, times, FMU states; see CASES)
   Every call prints one line, tab-separated: label, status (-1 for a NULL instance from
   instantiate), expectation (ok | refuse | any | probe), and 1 if every value it returned is
   finite (else 0).  "probe" marks the PHASE:CALL call, whose expectation the caller knows from
   the standard's tables.  The last line is "done"; a crash or hang never prints it.
   `misuse --list` prints the named cases. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmi2Functions.h"
#include "fmi3Functions.h"

enum { OK_, REFUSE, ANY, PROBE };
static const char *const EXPECT[] = {"ok", "refuse", "any", "probe"};

static void *lib;
static int V, ME;             /* FMI version, model exchange */
static void *inst;            /* the instance under test */
static const char *token;
static unsigned vr_q, vr_qd, vr_qstart, vr_der;
static long vr_in;
static size_t nx;
static double now_t;          /* the time the host believes the FMU is at */

static void *sym(const char *name) {
    void *f = dlsym(lib, name);
    if (!f) {
        fprintf(stderr, "missing symbol %s\n", name);
        exit(3);
    }
    return f;
}
#define F2(name) ((name##TYPE *)sym(#name))
#define F3(name) ((name##TYPE *)sym(#name))

static void logger2(fmi2ComponentEnvironment env, fmi2String name, fmi2Status status, fmi2String category,
                 fmi2String message, ...) {
    (void)env;
    (void)name;
    fprintf(stderr, "[%d %s] %s\n", (int)status, category ? category : "", message ? message : "(null)");
}

static void logger3(fmi3InstanceEnvironment env, fmi3Status status, fmi3String category, fmi3String message) {
    (void)env;
    fprintf(stderr, "[%d %s] %s\n", (int)status, category ? category : "", message ? message : "(null)");
}

static int all_finite(const double *v, size_t n) {
    size_t i;
    for (i = 0; i < n; i++)
        if (!isfinite(v[i])) return 0;
    return 1;
}

static int record(const char *label, int status, int expect, int finite) {
    printf("%s\t%d\t%s\t%d\n", label, status, EXPECT[expect], finite);
    fflush(stdout);
    return status;
}

/* ---------------------------------------------------------------- one API over FMI 2 and 3 */

static fmi2CallbackFunctions cb2 = {logger2, calloc, free, NULL, NULL};

static void *instantiate_as(int type) { /* type: 0 ME, 1 CS (FMI 2 fmuType), or anything for FMI 2 */
    if (V == 2) return F2(fmi2Instantiate)("probe", (fmi2Type)type, token, "file:///tmp", &cb2, fmi2False, fmi2False);
    if (type == 0) return F3(fmi3InstantiateModelExchange)("probe", token, "/tmp/", fmi3False, fmi3False, NULL, logger3);
    return F3(fmi3InstantiateCoSimulation)("probe", token, "/tmp/", fmi3False, fmi3False, fmi3False, fmi3False, NULL, 0,
                                           NULL, logger3, NULL);
}

static int instantiate(void) {
    inst = instantiate_as(ME ? 0 : 1);
    now_t = 0.0;
    return record("instantiate", inst ? 0 : -1, OK_, 1);
}

static int setup_experiment(void) {
    return V == 2 ? (int)F2(fmi2SetupExperiment)(inst, fmi2False, 0.0, 0.0, fmi2False, 0.0) : 3;
}
static int enter_init(void) {
    if (V == 2) return (int)F2(fmi2EnterInitializationMode)(inst);
    return (int)F3(fmi3EnterInitializationMode)(inst, fmi3False, 0.0, 0.0, fmi3False, 0.0);
}
static int exit_init(void) {
    return V == 2 ? (int)F2(fmi2ExitInitializationMode)(inst) : (int)F3(fmi3ExitInitializationMode)(inst);
}
static int enter_event(void) {
    return V == 2 ? (int)F2(fmi2EnterEventMode)(inst) : (int)F3(fmi3EnterEventMode)(inst);
}
static int discrete(void) {
    if (V == 2) {
        fmi2EventInfo info;
        return (int)F2(fmi2NewDiscreteStates)(inst, &info);
    } else {
        fmi3Boolean a, b, c, d, e;
        fmi3Float64 t;
        return (int)F3(fmi3UpdateDiscreteStates)(inst, &a, &b, &c, &d, &e, &t);
    }
}
static int enter_ct(void) {
    return V == 2 ? (int)F2(fmi2EnterContinuousTimeMode)(inst) : (int)F3(fmi3EnterContinuousTimeMode)(inst);
}
static int completed(void) {
    if (V == 2) {
        fmi2Boolean a, b;
        return (int)F2(fmi2CompletedIntegratorStep)(inst, fmi2True, &a, &b);
    } else {
        fmi3Boolean a, b;
        return (int)F3(fmi3CompletedIntegratorStep)(inst, fmi3True, &a, &b);
    }
}
static int set_time(double t) {
    return V == 2 ? (int)F2(fmi2SetTime)(inst, t) : (int)F3(fmi3SetTime)(inst, t);
}
static int set_states(const double *x, size_t n) {
    return V == 2 ? (int)F2(fmi2SetContinuousStates)(inst, x, n) : (int)F3(fmi3SetContinuousStates)(inst, x, n);
}
static int get_states(double *x, size_t n) {
    return V == 2 ? (int)F2(fmi2GetContinuousStates)(inst, x, n) : (int)F3(fmi3GetContinuousStates)(inst, x, n);
}
static int get_ders(double *x, size_t n) {
    return V == 2 ? (int)F2(fmi2GetDerivatives)(inst, x, n) : (int)F3(fmi3GetContinuousStateDerivatives)(inst, x, n);
}
static int get_nominals(double *x, size_t n) {
    return V == 2 ? (int)F2(fmi2GetNominalsOfContinuousStates)(inst, x, n)
                  : (int)F3(fmi3GetNominalsOfContinuousStates)(inst, x, n);
}
static int get_indicators(double *x, size_t n) {
    return V == 2 ? (int)F2(fmi2GetEventIndicators)(inst, x, n) : (int)F3(fmi3GetEventIndicators)(inst, x, n);
}
static int get_reals(const unsigned *vr, size_t n, double *v) {
    return V == 2 ? (int)F2(fmi2GetReal)(inst, vr, n, v) : (int)F3(fmi3GetFloat64)(inst, vr, n, v, n);
}
static int set_reals(const unsigned *vr, size_t n, const double *v) {
    return V == 2 ? (int)F2(fmi2SetReal)(inst, vr, n, v) : (int)F3(fmi3SetFloat64)(inst, vr, n, v, n);
}
static int get1(unsigned vr, double *v) { return get_reals(&vr, 1, v); }
static int set1(unsigned vr, double v) { return set_reals(&vr, 1, &v); }
static int do_step(double t, double h) {
    if (V == 2) return (int)F2(fmi2DoStep)(inst, t, h, fmi2True);
    {
        fmi3Boolean a, b, c;
        fmi3Float64 last;
        return (int)F3(fmi3DoStep)(inst, t, h, fmi3True, &a, &b, &c, &last);
    }
}
static int enter_step(void) { return V == 3 ? (int)F3(fmi3EnterStepMode)(inst) : 3; }
static int terminate(void) { return V == 2 ? (int)F2(fmi2Terminate)(inst) : (int)F3(fmi3Terminate)(inst); }
static int reset(void) { return V == 2 ? (int)F2(fmi2Reset)(inst) : (int)F3(fmi3Reset)(inst); }
static void free_instance(void) {
    if (V == 2) F2(fmi2FreeInstance)(inst);
    else F3(fmi3FreeInstance)(inst);
    inst = NULL;
}
static int get_state(void **s) {
    return V == 2 ? (int)F2(fmi2GetFMUstate)(inst, s) : (int)F3(fmi3GetFMUState)(inst, s);
}
static int set_state(void *s) { return V == 2 ? (int)F2(fmi2SetFMUstate)(inst, s) : (int)F3(fmi3SetFMUState)(inst, s); }
static int free_state(void **s) {
    return V == 2 ? (int)F2(fmi2FreeFMUstate)(inst, s) : (int)F3(fmi3FreeFMUState)(inst, s);
}
static int state_size(void *s, size_t *n) {
    return V == 2 ? (int)F2(fmi2SerializedFMUstateSize)(inst, s, n) : (int)F3(fmi3SerializedFMUStateSize)(inst, s, n);
}
static int serialize(void *s, void *buf, size_t n) {
    return V == 2 ? (int)F2(fmi2SerializeFMUstate)(inst, s, buf, n) : (int)F3(fmi3SerializeFMUState)(inst, s, buf, n);
}
static int deserialize(const void *buf, size_t n, void **s) {
    return V == 2 ? (int)F2(fmi2DeSerializeFMUstate)(inst, buf, n, s)
                  : (int)F3(fmi3DeserializeFMUState)(inst, buf, n, s);
}
static int directional(const unsigned *unk, size_t nu, const unsigned *kn, size_t nk, const double *seed, double *out) {
    if (V == 2) return (int)F2(fmi2GetDirectionalDerivative)(inst, unk, nu, kn, nk, seed, out);
    return (int)F3(fmi3GetDirectionalDerivative)(inst, unk, nu, kn, nk, seed, nk, out, nu);
}
static int debug_logging(int on, size_t n, const char *const *cats) {
    if (V == 2) return (int)F2(fmi2SetDebugLogging)(inst, on, n, cats);
    return (int)F3(fmi3SetDebugLogging)(inst, on, n, cats);
}

/* ---------------------------------------------------------------- reaching a phase legally */

#define LEGAL(label, call) record(label, (call), OK_, 1)

static int reach(const char *phase) {
    if (instantiate() != 0) return 1;
    if (!strcmp(phase, "instantiated")) return 0;
    if (V == 2) LEGAL("setupExperiment", setup_experiment());
    LEGAL("enterInitializationMode", enter_init());
    if (!strcmp(phase, "init")) return 0;
    LEGAL("exitInitializationMode", exit_init());
    if (ME) {
        LEGAL("discrete states", discrete());
        if (!strcmp(phase, "event")) return 0;
        LEGAL("enterContinuousTimeMode", enter_ct());
        if (!strcmp(phase, "continuous") || !strcmp(phase, "failed")) goto failed;
    } else {
        if (!strcmp(phase, "step")) return 0;
        LEGAL("doStep", do_step(0.0, 1e-3));
        now_t = 1e-3;
        if (!strcmp(phase, "failed")) goto failed;
    }
    if (!strcmp(phase, "terminated")) {
        LEGAL("terminate", terminate());
        return 0;
    }
    return !!strcmp(phase, "continuous");
failed:
    if (!strcmp(phase, "failed")) record("setReal q_start after initialisation", set1(vr_qstart, 0.1), REFUSE, 1);
    return 0;
}

/* the current q[1], read after the probe: OK only with a finite value */
static void read_q(const char *label) {
    double v = NAN;
    int st = get1(vr_q, &v);
    record(label, st, ANY, st <= 1 ? isfinite(v) : 1);
}

static int probe_call(const char *call) {
    double x[64], v = 0.0;
    int st;
    size_t i;
    for (i = 0; i < 64; i++) x[i] = 0.0;
    if (!strcmp(call, "setupExperiment")) return record(call, setup_experiment(), PROBE, 1);
    if (!strcmp(call, "enterInitializationMode")) return record(call, enter_init(), PROBE, 1);
    if (!strcmp(call, "exitInitializationMode")) return record(call, exit_init(), PROBE, 1);
    if (!strcmp(call, "enterEventMode")) return record(call, enter_event(), PROBE, 1);
    if (!strcmp(call, "discreteStates")) return record(call, discrete(), PROBE, 1);
    if (!strcmp(call, "enterContinuousTimeMode")) return record(call, enter_ct(), PROBE, 1);
    if (!strcmp(call, "completedIntegratorStep")) return record(call, completed(), PROBE, 1);
    if (!strcmp(call, "setTime")) return record(call, set_time(now_t), PROBE, 1);
    if (!strcmp(call, "getContinuousStates")) {
        st = get_states(x, nx);
        return record(call, st, PROBE, st <= 1 ? all_finite(x, nx) : 1);
    }
    if (!strcmp(call, "setContinuousStates")) return record(call, set_states(x, nx), PROBE, 1);
    if (!strcmp(call, "getDerivatives")) {
        st = get_ders(x, nx);
        return record(call, st, PROBE, st <= 1 ? all_finite(x, nx) : 1);
    }
    if (!strcmp(call, "getNominals")) {
        st = get_nominals(x, nx);
        return record(call, st, PROBE, st <= 1 ? all_finite(x, nx) : 1);
    }
    if (!strcmp(call, "getEventIndicators")) return record(call, get_indicators(x, 0), PROBE, 1);
    if (!strcmp(call, "getNumberOfContinuousStates")) {
        size_t n = 0;
        return record(call, V == 3 ? (int)F3(fmi3GetNumberOfContinuousStates)(inst, &n) : 3, PROBE, 1);
    }
    if (!strcmp(call, "get q")) {
        st = get1(vr_q, &v);
        return record(call, st, PROBE, st <= 1 ? isfinite(v) : 1);
    }
    if (!strcmp(call, "set input")) return record(call, vr_in < 0 ? 3 : set1((unsigned)vr_in, 0.0), PROBE, 1);
    if (!strcmp(call, "set q_start")) return record(call, set1(vr_qstart, 0.1), PROBE, 1);
    if (!strcmp(call, "set q")) return record(call, set1(vr_q, 0.1), PROBE, 1);
    if (!strcmp(call, "doStep")) return record(call, do_step(now_t, 1e-3), PROBE, 1);
    if (!strcmp(call, "enterStepMode")) return record(call, enter_step(), PROBE, 1);
    if (!strcmp(call, "evaluateDiscreteStates")) return record(call, (int)F3(fmi3EvaluateDiscreteStates)(inst), PROBE, 1);
    if (!strcmp(call, "terminate")) return record(call, terminate(), PROBE, 1);
    if (!strcmp(call, "reset")) return record(call, reset(), PROBE, 1);
    if (!strcmp(call, "getFMUState")) {
        void *s = NULL;
        st = get_state(&s);
        if (s) free_state(&s);
        return record(call, st, PROBE, 1);
    }
    if (!strcmp(call, "directionalDerivative")) {
        const unsigned unk = ME ? vr_der : vr_q;
        const double seed = 1.0;
        st = directional(&unk, 1, &vr_qd, 1, &seed, &v);
        return record(call, st, PROBE, st <= 1 ? isfinite(v) : 1);
    }
    fprintf(stderr, "unknown call %s\n", call);
    exit(2);
}

/* ---------------------------------------------------------------- named cases */

typedef void (*case_fn)(void);

static void started(void) { /* running: co-simulation in step mode, model exchange in continuous-time mode */
    reach(ME ? "continuous" : "step");
}

static void null_get(void) {
    started();
    record("get: values NULL", get_reals(&vr_q, 1, NULL), REFUSE, 1);
}
static void null_get_vr(void) {
    double v;
    started();
    record("get: value references NULL", get_reals(NULL, 1, &v), REFUSE, 1);
}
static void null_set(void) {
    started();
    record("set: values NULL", set_reals(&vr_qstart, 1, NULL), REFUSE, 1);
}
static void null_set_vr(void) {
    double v = 0.0;
    started();
    record("set: value references NULL", set_reals(NULL, 1, &v), REFUSE, 1);
}
static void null_get_states(void) {
    started();
    record("getContinuousStates NULL", get_states(NULL, nx), REFUSE, 1);
}
static void null_set_states(void) {
    started();
    record("setContinuousStates NULL", set_states(NULL, nx), REFUSE, 1);
}
static void null_derivatives(void) {
    started();
    record("getDerivatives NULL", get_ders(NULL, nx), REFUSE, 1);
}
static void null_nominals(void) {
    started();
    record("getNominals NULL", get_nominals(NULL, nx), REFUSE, 1);
}
static void null_counts(void) {
    started();
    if (V != 3) return;
    record("getNumberOfContinuousStates NULL", (int)F3(fmi3GetNumberOfContinuousStates)(inst, NULL), REFUSE, 1);
}
static void null_count_indicators(void) {
    started();
    if (V != 3) return;
    record("getNumberOfEventIndicators NULL", (int)F3(fmi3GetNumberOfEventIndicators)(inst, NULL), REFUSE, 1);
}
static void null_state_size(void) {
    void *s = NULL;
    started();
    LEGAL("getFMUState", get_state(&s));
    record("serializedFMUStateSize NULL", state_size(s, NULL), REFUSE, 1);
}
static void null_serialize(void) {
    void *s = NULL;
    size_t n = 0;
    started();
    LEGAL("getFMUState", get_state(&s));
    LEGAL("serializedFMUStateSize", state_size(s, &n));
    record("serializeFMUState NULL", serialize(s, NULL, n), REFUSE, 1);
}
static void null_deserialize(void) {
    void *s = NULL;
    started();
    record("deserializeFMUState NULL buffer", deserialize(NULL, 4096, &s), REFUSE, 1);
}
static void null_deserialize_out(void) {
    void *s = NULL;
    size_t n = 0;
    char *buf;
    started();
    LEGAL("getFMUState", get_state(&s));
    LEGAL("serializedFMUStateSize", state_size(s, &n));
    buf = malloc(n);
    LEGAL("serializeFMUState", serialize(s, buf, n));
    record("deserializeFMUState NULL state", deserialize(buf, n, NULL), REFUSE, 1);
    free(buf);
}
static void null_get_state(void) {
    started();
    record("getFMUState NULL", get_state(NULL), REFUSE, 1);
}
static void null_free_state(void) {
    started();
    record("freeFMUState NULL", free_state(NULL), REFUSE, 1);
}
static void null_set_state(void) {
    started();
    record("setFMUState NULL", set_state(NULL), REFUSE, 1);
}
static void null_discrete(void) {
    reach(ME ? "event" : "step");
    if (V == 2) record("newDiscreteStates NULL", (int)F2(fmi2NewDiscreteStates)(inst, NULL), REFUSE, 1);
    else record("updateDiscreteStates NULL", (int)F3(fmi3UpdateDiscreteStates)(inst, NULL, NULL, NULL, NULL, NULL, NULL),
                REFUSE, 1);
}
static void null_completed(void) {
    started();
    if (V == 2) record("completedIntegratorStep NULL", (int)F2(fmi2CompletedIntegratorStep)(inst, fmi2True, NULL, NULL),
                       REFUSE, 1);
    else record("completedIntegratorStep NULL", (int)F3(fmi3CompletedIntegratorStep)(inst, fmi3True, NULL, NULL),
                REFUSE, 1);
}
static void null_directional(void) {
    double seed = 1.0;
    started();
    record("directionalDerivative NULL", directional(&vr_der, 1, &vr_qd, 1, &seed, NULL), REFUSE, 1);
}
static void null_status(void) {
    started();
    if (V == 2) {
        record("fmi2GetStatus NULL", (int)F2(fmi2GetStatus)(inst, fmi2DoStepStatus, NULL), REFUSE, 1);
    } else {
        record("fmi3DoStep NULL outputs", (int)F3(fmi3DoStep)(inst, now_t, 1e-3, fmi3True, NULL, NULL, NULL, NULL),
               REFUSE, 1);
    }
}
static void null_real_status(void) {
    started();
    if (V == 2) record("fmi2GetRealStatus NULL", (int)F2(fmi2GetRealStatus)(inst, fmi2LastSuccessfulTime, NULL), REFUSE, 1);
}
static void null_boolean_status(void) {
    started();
    if (V == 2) record("fmi2GetBooleanStatus NULL", (int)F2(fmi2GetBooleanStatus)(inst, fmi2Terminated, NULL), REFUSE, 1);
}
static void null_categories(void) {
    started();
    record("setDebugLogging NULL categories", debug_logging(1, 2, NULL), REFUSE, 1);
}
static void null_instance(void) { /* every call with a NULL instance: Error, and freeInstance(NULL) is ignored */
    double v;
    void *s = NULL;
    inst = NULL;
    record("get, NULL instance", get_reals(&vr_q, 1, &v), REFUSE, 1);
    record("doStep/setTime, NULL instance", ME ? set_time(0.0) : do_step(0.0, 1e-3), REFUSE, 1);
    record("getFMUState, NULL instance", get_state(&s), REFUSE, 1);
    record("terminate, NULL instance", terminate(), REFUSE, 1);
    free_instance();
    record("freeInstance(NULL)", 0, ANY, 1);
}
static void foreign_state(void) { /* a pointer the FMU never handed out */
    double junk[512];
    void *s = junk;
    memset(junk, 0x5a, sizeof junk);
    started();
    record("setFMUState foreign pointer", set_state(junk), REFUSE, 1);
    reset();
    record("freeFMUState foreign pointer", free_state(&s), REFUSE, 1);
}
static void freed_state(void) { /* a state used after it was freed */
    void *s = NULL, *kept;
    started();
    LEGAL("getFMUState", get_state(&s));
    kept = s;
    LEGAL("freeFMUState", free_state(&s));
    record("setFMUState freed state", set_state(kept), REFUSE, 1);
}
/* a serialized state with forged fields and a valid checksum (the mc2fmu blob: a 40-byte header,
   magic 8, format 4, size 4, token 8, interface 4, pad 4, checksum 8; the state starts t0, time, k) */
static void forged_grid(void) {
    void *s = NULL, *t = NULL;
    size_t n = 0, i;
    unsigned char *buf;
    unsigned long long token_hash = 0, iface = 0, sum = 1469598103934665603ULL;
    long long k = 0x7fffffffffffffffLL;
    double time = 9.2e15;
    started();
    LEGAL("getFMUState", get_state(&s));
    LEGAL("serializedFMUStateSize", state_size(s, &n));
    buf = malloc(n);
    LEGAL("serializeFMUState", serialize(s, buf, n));
    memcpy(buf + 40 + 8, &time, 8);
    memcpy(buf + 40 + 16, &k, 8);
    memcpy(&token_hash, buf + 16, 8);
    memcpy(&iface, buf + 24, 4);
    sum = token_hash ^ iface;
    for (i = 40; i < n; i++) sum = (sum ^ buf[i]) * 1099511628211ULL;
    memcpy(buf + 32, &sum, 8);
    record("deserializeFMUState k = INT64_MAX, t = 9.2e15", deserialize(buf, n, &t), REFUSE, 1);
    free(buf);
    if (t) {
        record("setFMUState forged", set_state(t), ANY, 1);
        record("doStep 100 s", ME ? set_time(9.2e15) : do_step(9.2e15, 100.0), ANY, 1);
        read_q("get q[1]");
    }
}

/* the envelope warning: not sent while its category is off (FMI 3.0 section 2.3.1: only errors
   always are); sent once it is on */
static void leave_envelope(void) {
    if (vr_in < 0) return;
    LEGAL("set input 1e6", set1((unsigned)vr_in, 1e6));
    if (ME) LEGAL("completedIntegratorStep", completed());
    else LEGAL("doStep", do_step(now_t, 1e-3));
}
static void warning_silent(void) {
    started();
    leave_envelope();
}
static void warning_enabled(void) {
    const char *cats[1] = {"logStatusWarning"};
    started();
    LEGAL("setDebugLogging logStatusWarning", debug_logging(1, 1, cats));
    leave_envelope();
}
static void unknown_category(void) {
    const char *cats[1] = {"logEverything"};
    started();
    record("setDebugLogging logEverything", debug_logging(1, 1, cats), REFUSE, 1);
}

static void serialize_small(void) {
    void *s = NULL;
    char buf[8];
    started();
    LEGAL("getFMUState", get_state(&s));
    record("serializeFMUState 8-byte buffer", serialize(s, buf, sizeof buf), REFUSE, 1);
}
static void wrong_nx(void) {
    double x[64];
    started();
    record("getNominals wrong size", get_nominals(x, nx + 1), REFUSE, 1);
}
static void derivative_fails(void) { /* states the model cannot evaluate: no OK with NaN afterwards */
    double x[64], v = NAN;
    size_t i;
    int st;
    started();
    for (i = 0; i < nx; i++) x[i] = (i % 2 ? -1e300 : 1e300);
    record("setContinuousStates 1e300", set_states(x, nx), ANY, 1);
    st = get_ders(x, nx);
    record("getDerivatives", st, ANY, st <= 1 ? all_finite(x, nx) : 1);
    st = get1(vr_der, &v);
    record("get der(qd[1])", st, ANY, st <= 1 ? isfinite(v) : 1);
    read_q("get q[1]");
}
static void huge_start(void) {
    double x[64], v = NAN;
    int st;
    record("instantiate", (inst = instantiate_as(ME ? 0 : 1)) ? 0 : -1, OK_, 1);
    if (V == 2) LEGAL("setupExperiment", setup_experiment());
    record("set q_start[1] = 1e300", set1(vr_qstart, 1e300), ANY, 1);
    record("enterInitializationMode", enter_init(), ANY, 1);
    record("exitInitializationMode", exit_init(), REFUSE, 1);
    if (ME) {
        st = get_ders(x, nx);
        record("getDerivatives", st, ANY, st <= 1 ? all_finite(x, nx) : 1);
        st = get1(vr_der, &v);
        record("get der(qd[1])", st, ANY, st <= 1 ? isfinite(v) : 1);
    } else {
        record("doStep", do_step(0.0, 1e-3), ANY, 1);
    }
    read_q("get q[1]");
}
static void nan_time(void) {
    double v = NAN;
    int st;
    started();
    record("setTime NaN", set_time(NAN), REFUSE, 1);
    st = get1(vr_q, &v);
    record("get q[1]", st, ANY, st <= 1 ? isfinite(v) : 1);
}
static void inf_time(void) {
    started();
    record("setTime inf", set_time(INFINITY), REFUSE, 1);
}
static void nan_input(void) {
    started();
    if (vr_in < 0) return;
    record("set input NaN", set1((unsigned)vr_in, NAN), REFUSE, 1);
    read_q("get q[1]");
}
static void huge_input(void) {
    started();
    if (vr_in < 0) return;
    record("set input 1e300", set1((unsigned)vr_in, 1e300), REFUSE, 1);
    read_q("get q[1]");
}
static void nan_step(void) {
    started();
    record("doStep h = NaN", do_step(now_t, NAN), REFUSE, 1);
    read_q("get q[1]");
}
static void zero_step(void) { /* FMI 3 requires h > 0; FMI 2 allows h = 0 */
    if (ME) return; /* co-simulation only */
    started();
    record("doStep h = 0", do_step(now_t, 0.0), V == 3 ? REFUSE : OK_, 1);
}
static void time_backwards(void) { /* setTime before the second last completed step */
    if (!ME) return; /* model exchange only */
    started();
    LEGAL("setTime 0.1", set_time(0.1));
    LEGAL("completedIntegratorStep at 0.1", completed());
    LEGAL("setTime 0.2", set_time(0.2));
    LEGAL("completedIntegratorStep at 0.2", completed());
    LEGAL("setTime 0.15 (after the second last step)", set_time(0.15));
    record("setTime 0.05", set_time(0.05), REFUSE, 1);
}
static void time_before_event(void) { /* setTime before the last event */
    if (!ME) return; /* model exchange only */
    started();
    LEGAL("setTime 0.3", set_time(0.3));
    LEGAL("enterEventMode", enter_event());
    record("setTime 0.2", set_time(0.2), REFUSE, 1);
}
static void event_mode_thrice(void) {
    if (!ME) return; /* model exchange only */
    reach("event");
    record("enterEventMode in Event Mode", enter_event(), V == 3 ? REFUSE : OK_, 1);
}
static void unknown_type(void) { /* FMI 2 fmuType 7; FMI 3 co-simulation with eventModeUsed (hasEventMode = false) */
    if (V == 2) {
        inst = instantiate_as(7);
        record("fmi2Instantiate fmuType 7", inst ? 0 : 3, REFUSE, 1);
    } else {
        inst = F3(fmi3InstantiateCoSimulation)("probe", token, "/tmp/", fmi3False, fmi3False, fmi3True, fmi3False, NULL,
                                               0, NULL, logger3, NULL);
        record("fmi3InstantiateCoSimulation eventModeUsed", inst ? 0 : 3, REFUSE, 1);
    }
    if (inst) free_instance();
}
static void restore_after_failure(void) { /* an Error is kept until a state is restored, then the FMU runs on */
    void *s = NULL;
    started();
    LEGAL("getFMUState", get_state(&s));
    record("set q_start after initialisation", set1(vr_qstart, 0.1), REFUSE, 1);
    read_q("get q[1] after the error");
    LEGAL("setFMUState", set_state(s));
    if (ME) LEGAL("setTime", set_time(0.01));
    else LEGAL("doStep", do_step(now_t, 1e-3));
    LEGAL("freeFMUState", free_state(&s));
}
static void reset_after_failure(void) {
    started();
    record("set q_start after initialisation", set1(vr_qstart, 0.1), REFUSE, 1);
    LEGAL("reset", reset());
    if (V == 2) LEGAL("setupExperiment", setup_experiment());
    LEGAL("enterInitializationMode", enter_init());
    LEGAL("exitInitializationMode", exit_init());
}
static void set_state_while_running(void) { /* FMI 3 model exchange: a continuous state set by setFloat64 */
    double x[64];
    started();
    if (V == 3 && ME) {
        LEGAL("setFloat64 q[1] in Continuous-Time Mode", set1(vr_q, 0.25));
        LEGAL("getContinuousStates", get_states(x, nx));
        record("q[1] reads back", x[0] == 0.25 ? 0 : 3, OK_, 1);
    } else {
        record("set q[1]", set1(vr_q, 0.25), REFUSE, 1);
    }
}
static long rss_bytes(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        fclose(f);
    }
    return resident * 4096;
}

/* the resident memory per instantiate / 2 unreleased states / freeInstance cycle, over 20000
   cycles after 2000 warm-up ones (printed as a line of its own) */
static void leak_cycles(void) {
    int k, bad = 0;
    long before = 0;
    for (k = 0; k < 22000; k++) {
        void *s = NULL, *t = NULL;
        if (k == 2000) before = rss_bytes();
        inst = instantiate_as(ME ? 0 : 1);
        if (!inst) { bad++; continue; }
        if (V == 2) bad += setup_experiment() != 0;
        bad += enter_init() != 0;
        bad += exit_init() != 0;
        bad += get_state(&s) != 0;
        bad += get_state(&t) != 0;
        free_instance();
    }
    record("cycles", bad ? 3 : 0, OK_, 1);
    printf("rss_per_cycle\t%.3f\n", (double)(rss_bytes() - before) / 20000.0);
}

static void unreleased_states(void) { /* states never freed: freeInstance frees them (valgrind, RSS) */
    int k;
    for (k = 0; k < 3; k++) {
        void *s = NULL, *t = NULL;
        size_t n = 0;
        char *buf;
        started();
        LEGAL("getFMUState", get_state(&s));
        LEGAL("serializedFMUStateSize", state_size(s, &n));
        buf = malloc(n);
        LEGAL("serializeFMUState", serialize(s, buf, n));
        LEGAL("deserializeFMUState", deserialize(buf, n, &t));
        free(buf);
        free_instance();
    }
}

static const struct {
    const char *name;
    case_fn fn;
} CASES[] = {
    {"null_get", null_get}, {"null_get_vr", null_get_vr}, {"null_set", null_set}, {"null_set_vr", null_set_vr},
    {"null_get_states", null_get_states}, {"null_set_states", null_set_states},
    {"null_derivatives", null_derivatives}, {"null_nominals", null_nominals}, {"null_counts", null_counts},
    {"null_count_indicators", null_count_indicators}, {"null_state_size", null_state_size},
    {"null_serialize", null_serialize}, {"null_deserialize", null_deserialize},
    {"null_deserialize_out", null_deserialize_out}, {"null_get_state", null_get_state},
    {"null_free_state", null_free_state}, {"null_set_state", null_set_state}, {"null_discrete", null_discrete},
    {"null_completed", null_completed}, {"null_directional", null_directional}, {"null_status", null_status},
    {"null_real_status", null_real_status}, {"null_boolean_status", null_boolean_status},
    {"null_categories", null_categories}, {"null_instance", null_instance}, {"foreign_state", foreign_state},
    {"freed_state", freed_state}, {"serialize_small", serialize_small}, {"forged_grid", forged_grid},
    {"warning_silent", warning_silent}, {"warning_enabled", warning_enabled}, {"unknown_category", unknown_category}, {"wrong_nx", wrong_nx},
    {"derivative_fails", derivative_fails}, {"huge_start", huge_start}, {"nan_time", nan_time},
    {"inf_time", inf_time}, {"nan_input", nan_input}, {"huge_input", huge_input}, {"nan_step", nan_step},
    {"zero_step", zero_step}, {"time_backwards", time_backwards}, {"time_before_event", time_before_event},
    {"event_mode_thrice", event_mode_thrice}, {"unknown_type", unknown_type},
    {"restore_after_failure", restore_after_failure}, {"reset_after_failure", reset_after_failure},
    {"set_state_while_running", set_state_while_running}, {"unreleased_states", unreleased_states},
    {"leak_cycles", leak_cycles},
};

int main(int argc, char **argv) {
    size_t k;
    char *colon;
    if (argc == 2 && !strcmp(argv[1], "--list")) {
        for (k = 0; k < sizeof CASES / sizeof CASES[0]; k++) printf("%s\n", CASES[k].name);
        return 0;
    }
    if (argc != 7) {
        fprintf(stderr, "usage: misuse LIBRARY TOKEN FMI IFACE VRS CASE | misuse --list\n");
        return 2;
    }
    token = argv[2];
    V = atoi(argv[3]);
    ME = !strcmp(argv[4], "me");
    if (sscanf(argv[5], "%u,%u,%u,%ld,%u,%zu", &vr_q, &vr_qd, &vr_qstart, &vr_in, &vr_der, &nx) != 6 || nx > 64) {
        fprintf(stderr, "bad VRS %s\n", argv[5]);
        return 2;
    }
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    colon = strchr(argv[6], ':');
    if (colon) { /* PHASE:CALL */
        *colon = 0;
        if (reach(argv[6]) == 0) {
            probe_call(colon + 1);
            read_q("get q[1] after");
        }
    } else {
        for (k = 0; k < sizeof CASES / sizeof CASES[0]; k++)
            if (!strcmp(CASES[k].name, argv[6])) break;
        if (k == sizeof CASES / sizeof CASES[0]) {
            fprintf(stderr, "unknown case %s\n", argv[6]);
            return 2;
        }
        CASES[k].fn();
    }
    if (inst) free_instance();
    dlclose(lib);
    printf("done\n");
    return 0;
}
