/* mc2fmu_fmi2.c: the FMI 2.0 interface (co-simulation and model exchange) of an mc2fmu
   reduced model.  Shared by every model, never edited per model.

   Build (the FMI 2 headers come from the importer, e.g. fmpy's c-code folder):
       cc -O3 -fPIC -shared -fvisibility=hidden -I<fmi2 headers> mc2fmu_fmi2.c -o <modelIdentifier>.so -lm
   Only the fmi2 functions are exported; everything else is static, so several mc2fmu FMUs
   can be loaded into one process.  The functions FMI 3 shares are in mc2fmu_fmi.h; the state
   machine and the argument checks in mc2fmu_native.h. */
#include "fmi2Functions.h"
#include "mc2fmu_native.h"

typedef struct {
    mc2fmu_core core;
    fmi2CallbackLogger logger;
    fmi2ComponentEnvironment env;
    char *name;
} mc2fmu_fmi2;

static void mc2fmu_fmi2_log(mc2fmu_core *c, int status, const char *category, const char *message) {
    mc2fmu_fmi2 *inst = (mc2fmu_fmi2 *)c->glue;
    /* warnings and errors always reach the importer; FMI 2 loggers treat the message as a
       printf format string: every '%' is doubled, so no text (e.g. a failure message restored
       from a serialized state) is ever read as a conversion */
    char safe[2 * 1024 + 1];
    size_t i = 0;
    const char *p;
    if (!inst->logger) return; /* the core sent only enabled categories */
    for (p = message; *p && i + 2 < sizeof safe; p++) {
        if (*p == '%') safe[i++] = '%';
        safe[i++] = *p;
    }
    safe[i] = 0;
    inst->logger(inst->env, inst->name, (fmi2Status)status, category, safe);
}

#define MC2FMU_FN(fmi2name, fmi3name) fmi2name
typedef fmi2Component mc2fmu_instance;
typedef fmi2Status mc2fmu_status;
typedef fmi2FMUstate mc2fmu_fmu_state;
typedef fmi2Byte mc2fmu_byte;
typedef fmi2Boolean mc2fmu_boolean;
#define MC2FMU_FALSE fmi2False
#define MC2FMU_CORE(c) (&((mc2fmu_fmi2 *)(c))->core)

static void mc2fmu_glue_free(mc2fmu_instance c) {
    free(((mc2fmu_fmi2 *)c)->name);
    free(c);
}

#include "mc2fmu_fmi.h"

const char *fmi2GetTypesPlatform(void) { return fmi2TypesPlatform; }
const char *fmi2GetVersion(void) { return fmi2Version; }

fmi2Component fmi2Instantiate(fmi2String instanceName, fmi2Type fmuType, fmi2String fmuGUID,
                              fmi2String fmuResourceLocation, const fmi2CallbackFunctions *functions,
                              fmi2Boolean visible, fmi2Boolean loggingOn) {
    mc2fmu_fmi2 *inst;
    const char *refusal = NULL;
    (void)fmuResourceLocation;
    (void)visible;
    if (!functions || !functions->logger) return NULL; /* the standard requires a logger: no way to say why */
    if (!instanceName) instanceName = "";
    if (!fmuGUID || strcmp(fmuGUID, MC2FMU_INSTANTIATION_TOKEN) != 0)
        refusal = "mc2fmu: the GUID passed to fmi2Instantiate does not match this FMU's modelDescription.xml";
    else if (fmuType != fmi2CoSimulation && fmuType != fmi2ModelExchange)
        refusal = "mc2fmu: fmi2Instantiate refused: fmuType must be fmi2ModelExchange (0) or fmi2CoSimulation (1)";
    else if ((fmuType == fmi2CoSimulation && !MC2FMU_HAS_CS) || (fmuType == fmi2ModelExchange && !MC2FMU_HAS_ME))
        refusal = "mc2fmu: this FMU was not exported for the requested interface (see mc2fmu export --interface)";
    if (refusal) {
        functions->logger(functions->componentEnvironment, instanceName, fmi2Error, "logStatusError", refusal);
        return NULL;
    }
    inst = (mc2fmu_fmi2 *)calloc(1, sizeof *inst);
    if (!inst) return NULL;
    inst->name = (char *)malloc(strlen(instanceName) + 1);
    if (!inst->name) {
        free(inst);
        return NULL;
    }
    strcpy(inst->name, instanceName);
    inst->logger = functions->logger;
    inst->env = functions->componentEnvironment;
    mc2fmu_init(&inst->core, 2, fmuType == fmi2ModelExchange ? MC2FMU_ME : MC2FMU_CS, loggingOn != fmi2False,
                mc2fmu_fmi2_log, inst);
    return inst;
}

fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean toleranceDefined, fmi2Real tolerance,
                               fmi2Real startTime, fmi2Boolean stopTimeDefined, fmi2Real stopTime) {
    (void)toleranceDefined;
    (void)tolerance;
    (void)stopTimeDefined;
    (void)stopTime;
    MC2FMU_CHECK(c);
    return (fmi2Status)mc2fmu_setup(MC2FMU_CORE(c), __func__, startTime);
}

fmi2Status fmi2EnterInitializationMode(fmi2Component c) {
    MC2FMU_CHECK(c);
    return (fmi2Status)mc2fmu_enter_initialization(MC2FMU_CORE(c), __func__, 0, 0.0);
}

fmi2Status fmi2GetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2Real value[]) {
    MC2FMU_CHECK(c);
    return (fmi2Status)mc2fmu_get_reals(MC2FMU_CORE(c), __func__, vr, nvr, value);
}

fmi2Status fmi2SetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Real value[]) {
    MC2FMU_CHECK(c);
    return (fmi2Status)mc2fmu_set_reals(MC2FMU_CORE(c), __func__, vr, nvr, value);
}

/* the model has Real variables only */
#define MC2FMU_NO_TYPE(fn, ctype, call, type)                                                       \
    fmi2Status fn(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, ctype value[]) {       \
        (void)vr;                                                                                   \
        (void)value;                                                                                \
        MC2FMU_CHECK(c);                                                                            \
        return (fmi2Status)mc2fmu_no_type(MC2FMU_CORE(c), __func__, call, nvr, type);               \
    }

MC2FMU_NO_TYPE(fmi2GetInteger, fmi2Integer, MC2FMU_CALL_GET, "Integer")
MC2FMU_NO_TYPE(fmi2GetBoolean, fmi2Boolean, MC2FMU_CALL_GET, "Boolean")
MC2FMU_NO_TYPE(fmi2GetString, fmi2String, MC2FMU_CALL_GET, "String")
MC2FMU_NO_TYPE(fmi2SetInteger, const fmi2Integer, MC2FMU_CALL_SET, "Integer")
MC2FMU_NO_TYPE(fmi2SetBoolean, const fmi2Boolean, MC2FMU_CALL_SET, "Boolean")
MC2FMU_NO_TYPE(fmi2SetString, const fmi2String, MC2FMU_CALL_SET, "String")

fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference vUnknown_ref[], size_t nUnknown,
                                        const fmi2ValueReference vKnown_ref[], size_t nKnown,
                                        const fmi2Real dvKnown[], fmi2Real dvUnknown[]) {
    MC2FMU_CHECK(c);
    return (fmi2Status)mc2fmu_directional(MC2FMU_CORE(c), __func__, vUnknown_ref, nUnknown, vKnown_ref, nKnown,
                                          dvKnown, dvUnknown);
}

/* model exchange (the rest is in mc2fmu_fmi.h) */
fmi2Status fmi2NewDiscreteStates(fmi2Component c, fmi2EventInfo *info) {
    MC2FMU_CHECK(c);
    if (mc2fmu_begin(MC2FMU_CORE(c), MC2FMU_CALL_DISCRETE, __func__) ||
        mc2fmu_null(MC2FMU_CORE(c), __func__, "the event info", info, 1))
        return fmi2Error;
    info->newDiscreteStatesNeeded = fmi2False;
    info->terminateSimulation = fmi2False;
    info->nominalsOfContinuousStatesChanged = fmi2False;
    info->valuesOfContinuousStatesChanged = fmi2False;
    info->nextEventTimeDefined = fmi2False;
    info->nextEventTime = 0.0;
    return fmi2OK;
}

/* co-simulation */
fmi2Status fmi2SetRealInputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                       const fmi2Integer order[], const fmi2Real value[]) {
    (void)vr;
    (void)order;
    (void)value;
    (void)nvr;
    return mc2fmu_never(c, __func__, "input derivatives are not supported (canInterpolateInputs = false)");
}

fmi2Status fmi2GetRealOutputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                        const fmi2Integer order[], fmi2Real value[]) {
    (void)vr;
    (void)order;
    (void)value;
    (void)nvr;
    return mc2fmu_never(c, __func__, "output derivatives are not provided (maxOutputDerivativeOrder = 0)");
}

fmi2Status fmi2DoStep(fmi2Component c, fmi2Real currentCommunicationPoint, fmi2Real communicationStepSize,
                      fmi2Boolean noSetFMUStatePriorToCurrentPoint) {
    (void)noSetFMUStatePriorToCurrentPoint;
    MC2FMU_CHECK(c);
    return (fmi2Status)mc2fmu_do_step(MC2FMU_CORE(c), __func__, currentCommunicationPoint, communicationStepSize);
}

fmi2Status fmi2CancelStep(fmi2Component c) {
    return mc2fmu_never(c, __func__, "doStep never runs asynchronously, there is no step to cancel");
}

/* the status queries (co-simulation): the last doStep's status and the last successful time;
   nothing is ever pending */
static fmi2Status mc2fmu_fmi2_status(fmi2Component c, const char *fn, const void *value) {
    MC2FMU_CHECK(c);
    if (mc2fmu_begin(MC2FMU_CORE(c), MC2FMU_CALL_STATUS, fn) || mc2fmu_null(MC2FMU_CORE(c), fn, "the value", value, 1))
        return fmi2Error;
    return fmi2OK;
}

/* a status kind this query does not answer: Discard, with the reason */
static fmi2Status mc2fmu_fmi2_discard(fmi2Component c, const char *fn, int kind) {
    mc2fmu_logf(MC2FMU_CORE(c), MC2FMU_DISCARD, "mc2fmu: %s: status kind %d is not provided by this query", fn, kind);
    return fmi2Discard;
}

fmi2Status fmi2GetStatus(fmi2Component c, const fmi2StatusKind s, fmi2Status *value) {
    if (mc2fmu_fmi2_status(c, __func__, value)) return fmi2Error;
    if (s != fmi2DoStepStatus) return mc2fmu_fmi2_discard(c, __func__, (int)s);
    *value = fmi2OK; /* a failed step left the FMU failed: this call would have been refused */
    return fmi2OK;
}

fmi2Status fmi2GetRealStatus(fmi2Component c, const fmi2StatusKind s, fmi2Real *value) {
    if (mc2fmu_fmi2_status(c, __func__, value)) return fmi2Error;
    if (s != fmi2LastSuccessfulTime) return mc2fmu_fmi2_discard(c, __func__, (int)s);
    *value = MC2FMU_CORE(c)->s.time;
    return fmi2OK;
}

fmi2Status fmi2GetIntegerStatus(fmi2Component c, const fmi2StatusKind s, fmi2Integer *value) {
    return mc2fmu_fmi2_status(c, __func__, value) ? fmi2Error : mc2fmu_fmi2_discard(c, __func__, (int)s);
}

fmi2Status fmi2GetBooleanStatus(fmi2Component c, const fmi2StatusKind s, fmi2Boolean *value) {
    if (mc2fmu_fmi2_status(c, __func__, value)) return fmi2Error;
    if (s != fmi2Terminated) return mc2fmu_fmi2_discard(c, __func__, (int)s);
    *value = fmi2False; /* the FMU never asks to terminate */
    return fmi2OK;
}

fmi2Status fmi2GetStringStatus(fmi2Component c, const fmi2StatusKind s, fmi2String *value) {
    return mc2fmu_fmi2_status(c, __func__, value) ? fmi2Error : mc2fmu_fmi2_discard(c, __func__, (int)s);
}
