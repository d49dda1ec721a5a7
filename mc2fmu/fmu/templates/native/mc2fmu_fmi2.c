/* mc2fmu_fmi2.c: the FMI 2.0 interface (co-simulation and model exchange) of an mc2fmu
   reduced model.  Shared by every model, never edited per model.

   Build (the FMI 2 headers come from the importer, e.g. fmpy's c-code folder):
       cc -O3 -fPIC -shared -fvisibility=hidden -I<fmi2 headers> mc2fmu_fmi2.c -o <modelIdentifier>.so -lm
   Only the fmi2 functions are exported; everything else is static, so several mc2fmu FMUs
   can be loaded into one process. */
#include "fmi2Functions.h"
#include "mc2fmu_native.h"

typedef struct {
    mc2fmu_core core;
    fmi2CallbackLogger logger;
    fmi2ComponentEnvironment env;
    fmi2Boolean logging_on;
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
    if (!inst->logger || (status == MC2FMU_OK && !inst->logging_on)) return;
    for (p = message; *p && i + 2 < sizeof safe; p++) {
        if (*p == '%') safe[i++] = '%';
        safe[i++] = *p;
    }
    safe[i] = 0;
    inst->logger(inst->env, inst->name, (fmi2Status)status, category, safe);
}

static fmi2Status mc2fmu_fmi2_status(int s) { return (fmi2Status)s; }

#define MC2FMU_INST(c) ((mc2fmu_fmi2 *)(c))
#define MC2FMU_CHECK(c)              \
    do {                             \
        if (!(c)) return fmi2Error;  \
    } while (0)

const char *fmi2GetTypesPlatform(void) { return fmi2TypesPlatform; }
const char *fmi2GetVersion(void) { return fmi2Version; }

fmi2Status fmi2SetDebugLogging(fmi2Component c, fmi2Boolean loggingOn, size_t nCategories,
                               const fmi2String categories[]) {
    (void)nCategories;
    (void)categories;
    MC2FMU_CHECK(c);
    MC2FMU_INST(c)->logging_on = loggingOn;
    return fmi2OK;
}

fmi2Component fmi2Instantiate(fmi2String instanceName, fmi2Type fmuType, fmi2String fmuGUID,
                              fmi2String fmuResourceLocation, const fmi2CallbackFunctions *functions,
                              fmi2Boolean visible, fmi2Boolean loggingOn) {
    mc2fmu_fmi2 *inst;
    (void)fmuResourceLocation;
    (void)visible;
    if (!functions || !functions->logger) return NULL;
    if (!instanceName) instanceName = "";
    if (!fmuGUID || strcmp(fmuGUID, MC2FMU_INSTANTIATION_TOKEN) != 0) {
        functions->logger(functions->componentEnvironment, instanceName, fmi2Error, "logStatusError",
                          "mc2fmu: the GUID passed to fmi2Instantiate does not match this FMU's modelDescription.xml");
        return NULL;
    }
    if ((fmuType == fmi2CoSimulation && !MC2FMU_HAS_CS) || (fmuType == fmi2ModelExchange && !MC2FMU_HAS_ME)) {
        functions->logger(functions->componentEnvironment, instanceName, fmi2Error, "logStatusError",
                          "mc2fmu: this FMU was not exported for the requested interface (see mc2fmu export --interface)");
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
    inst->logging_on = loggingOn;
    mc2fmu_init(&inst->core, fmuType == fmi2ModelExchange ? MC2FMU_ME : MC2FMU_CS, mc2fmu_fmi2_log, inst);
    return inst;
}

void fmi2FreeInstance(fmi2Component c) {
    if (!c) return;
    free(MC2FMU_INST(c)->name);
    free(c);
}

fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean toleranceDefined, fmi2Real tolerance,
                               fmi2Real startTime, fmi2Boolean stopTimeDefined, fmi2Real stopTime) {
    (void)toleranceDefined;
    (void)tolerance;
    (void)stopTimeDefined;
    (void)stopTime;
    MC2FMU_CHECK(c);
    return mc2fmu_fmi2_status(mc2fmu_set_start(&MC2FMU_INST(c)->core, startTime,
                                               "setupExperiment refused: it belongs before enterInitializationMode"));
}

fmi2Status fmi2EnterInitializationMode(fmi2Component c) {
    MC2FMU_CHECK(c);
    return mc2fmu_fmi2_status(mc2fmu_enter_initialization(&MC2FMU_INST(c)->core, MC2FMU_INST(c)->core.s.t0));
}

fmi2Status fmi2ExitInitializationMode(fmi2Component c) {
    MC2FMU_CHECK(c);
    return mc2fmu_fmi2_status(mc2fmu_exit_initialization(&MC2FMU_INST(c)->core));
}

fmi2Status fmi2Terminate(fmi2Component c) {
    MC2FMU_CHECK(c);
    MC2FMU_INST(c)->core.s.phase = MC2FMU_TERMINATED;
    return fmi2OK;
}

fmi2Status fmi2Reset(fmi2Component c) {
    MC2FMU_CHECK(c);
    mc2fmu_reset(&MC2FMU_INST(c)->core);
    return fmi2OK;
}

fmi2Status fmi2GetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2Real value[]) {
    MC2FMU_CHECK(c);
    if (nvr > 0 && (!vr || !value)) return fmi2Error;
    return mc2fmu_fmi2_status(mc2fmu_get_reals(&MC2FMU_INST(c)->core, vr, nvr, value));
}

fmi2Status fmi2SetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Real value[]) {
    MC2FMU_CHECK(c);
    if (nvr > 0 && (!vr || !value)) return fmi2Error;
    return mc2fmu_fmi2_status(mc2fmu_set_reals(&MC2FMU_INST(c)->core, vr, nvr, value));
}

/* the model has Real variables only */
#define MC2FMU_NO_TYPE(fn, ctype, type)                                                                       \
    fmi2Status fn(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, ctype value[]) {                \
        (void)vr;                                                                                             \
        (void)value;                                                                                          \
        MC2FMU_CHECK(c);                                                                                      \
        if (nvr == 0) return fmi2OK;                                                                          \
        return mc2fmu_fmi2_status(mc2fmu_fail(&MC2FMU_INST(c)->core, "the model has no " type " variables")); \
    }

MC2FMU_NO_TYPE(fmi2GetInteger, fmi2Integer, "Integer")
MC2FMU_NO_TYPE(fmi2GetBoolean, fmi2Boolean, "Boolean")
MC2FMU_NO_TYPE(fmi2GetString, fmi2String, "String")
MC2FMU_NO_TYPE(fmi2SetInteger, const fmi2Integer, "Integer")
MC2FMU_NO_TYPE(fmi2SetBoolean, const fmi2Boolean, "Boolean")
MC2FMU_NO_TYPE(fmi2SetString, const fmi2String, "String")

/* FMU state */
fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *FMUstate) {
    MC2FMU_CHECK(c);
    return mc2fmu_fmi2_status(mc2fmu_get_fmu_state(&MC2FMU_INST(c)->core, FMUstate));
}

fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate FMUstate) {
    MC2FMU_CHECK(c);
    return mc2fmu_fmi2_status(mc2fmu_set_fmu_state(&MC2FMU_INST(c)->core, FMUstate));
}

fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *FMUstate) {
    (void)c;
    mc2fmu_free_fmu_state(FMUstate);
    return fmi2OK;
}

fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate FMUstate, size_t *size) {
    (void)FMUstate;
    MC2FMU_CHECK(c);
    *size = MC2FMU_BLOB_SIZE;
    return fmi2OK;
}

fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate FMUstate, fmi2Byte serializedState[], size_t size) {
    MC2FMU_CHECK(c);
    return mc2fmu_fmi2_status(
        mc2fmu_serialize_fmu_state(&MC2FMU_INST(c)->core, FMUstate, (unsigned char *)serializedState, size));
}

fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte serializedState[], size_t size,
                                   fmi2FMUstate *FMUstate) {
    MC2FMU_CHECK(c);
    return mc2fmu_fmi2_status(
        mc2fmu_deserialize_fmu_state(&MC2FMU_INST(c)->core, (const unsigned char *)serializedState, size, FMUstate));
}

fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference vUnknown_ref[], size_t nUnknown,
                                        const fmi2ValueReference vKnown_ref[], size_t nKnown,
                                        const fmi2Real dvKnown[], fmi2Real dvUnknown[]) {
    MC2FMU_CHECK(c);
    if ((nUnknown > 0 && (!vUnknown_ref || !dvUnknown)) || (nKnown > 0 && (!vKnown_ref || !dvKnown)))
        return mc2fmu_fmi2_status(mc2fmu_fail(&MC2FMU_INST(c)->core, "fmi2GetDirectionalDerivative: a NULL array"));
    return mc2fmu_fmi2_status(mc2fmu_directional(&MC2FMU_INST(c)->core, vUnknown_ref, nUnknown, vKnown_ref, nKnown,
                                                 dvKnown, dvUnknown));
}

/* model exchange */
fmi2Status fmi2EnterEventMode(fmi2Component c) {
    MC2FMU_CHECK(c);
    return fmi2OK;
}

fmi2Status fmi2NewDiscreteStates(fmi2Component c, fmi2EventInfo *info) {
    MC2FMU_CHECK(c);
    info->newDiscreteStatesNeeded = fmi2False;
    info->terminateSimulation = fmi2False;
    info->nominalsOfContinuousStatesChanged = fmi2False;
    info->valuesOfContinuousStatesChanged = fmi2False;
    info->nextEventTimeDefined = fmi2False;
    info->nextEventTime = 0.0;
    return fmi2OK;
}

fmi2Status fmi2EnterContinuousTimeMode(fmi2Component c) {
    MC2FMU_CHECK(c);
    return fmi2OK;
}

fmi2Status fmi2CompletedIntegratorStep(fmi2Component c, fmi2Boolean noSetFMUStatePriorToCurrentPoint,
                                       fmi2Boolean *enterEventMode, fmi2Boolean *terminateSimulation) {
    (void)noSetFMUStatePriorToCurrentPoint;
    MC2FMU_CHECK(c);
    if (enterEventMode) *enterEventMode = fmi2False;
    if (terminateSimulation) *terminateSimulation = fmi2False;
    return mc2fmu_fmi2_status(mc2fmu_completed_integrator_step(&MC2FMU_INST(c)->core));
}

fmi2Status fmi2SetTime(fmi2Component c, fmi2Real time) {
    MC2FMU_CHECK(c);
    MC2FMU_INST(c)->core.s.time = time;
    return fmi2OK;
}

fmi2Status fmi2SetContinuousStates(fmi2Component c, const fmi2Real x[], size_t nx) {
    MC2FMU_CHECK(c);
    return mc2fmu_fmi2_status(mc2fmu_set_states(&MC2FMU_INST(c)->core, x, nx));
}

fmi2Status fmi2GetDerivatives(fmi2Component c, fmi2Real derivatives[], size_t nx) {
    MC2FMU_CHECK(c);
    return mc2fmu_fmi2_status(mc2fmu_derivatives(&MC2FMU_INST(c)->core, derivatives, nx));
}

fmi2Status fmi2GetEventIndicators(fmi2Component c, fmi2Real eventIndicators[], size_t ni) {
    (void)eventIndicators;
    MC2FMU_CHECK(c);
    return ni == 0 ? fmi2OK : fmi2Error;
}

fmi2Status fmi2GetContinuousStates(fmi2Component c, fmi2Real x[], size_t nx) {
    MC2FMU_CHECK(c);
    return mc2fmu_fmi2_status(mc2fmu_get_states(&MC2FMU_INST(c)->core, x, nx));
}

fmi2Status fmi2GetNominalsOfContinuousStates(fmi2Component c, fmi2Real x_nominal[], size_t nx) {
    MC2FMU_CHECK(c);
    mc2fmu_nominals(x_nominal, nx);
    return fmi2OK;
}

/* co-simulation */
fmi2Status fmi2SetRealInputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                       const fmi2Integer order[], const fmi2Real value[]) {
    (void)vr;
    (void)order;
    (void)value;
    (void)nvr;
    MC2FMU_CHECK(c);
    return mc2fmu_fmi2_status(mc2fmu_fail(&MC2FMU_INST(c)->core, "input derivatives are not supported"));
}

fmi2Status fmi2GetRealOutputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                        const fmi2Integer order[], fmi2Real value[]) {
    (void)vr;
    (void)order;
    (void)value;
    (void)nvr;
    MC2FMU_CHECK(c);
    return mc2fmu_fmi2_status(mc2fmu_fail(&MC2FMU_INST(c)->core, "output derivatives are not provided"));
}

fmi2Status fmi2DoStep(fmi2Component c, fmi2Real currentCommunicationPoint, fmi2Real communicationStepSize,
                      fmi2Boolean noSetFMUStatePriorToCurrentPoint) {
    (void)noSetFMUStatePriorToCurrentPoint;
    MC2FMU_CHECK(c);
    return mc2fmu_fmi2_status(mc2fmu_do_step(&MC2FMU_INST(c)->core, currentCommunicationPoint, communicationStepSize));
}

fmi2Status fmi2CancelStep(fmi2Component c) {
    MC2FMU_CHECK(c);
    return fmi2Error; /* doStep never runs asynchronously */
}

fmi2Status fmi2GetStatus(fmi2Component c, const fmi2StatusKind s, fmi2Status *value) {
    (void)s;
    MC2FMU_CHECK(c);
    *value = MC2FMU_INST(c)->core.s.failed ? fmi2Error : fmi2OK;
    return fmi2OK;
}

fmi2Status fmi2GetRealStatus(fmi2Component c, const fmi2StatusKind s, fmi2Real *value) {
    MC2FMU_CHECK(c);
    if (s == fmi2LastSuccessfulTime) {
        *value = MC2FMU_INST(c)->core.s.time;
        return fmi2OK;
    }
    return fmi2Discard;
}

fmi2Status fmi2GetIntegerStatus(fmi2Component c, const fmi2StatusKind s, fmi2Integer *value) {
    (void)s;
    (void)value;
    MC2FMU_CHECK(c);
    return fmi2Discard;
}

fmi2Status fmi2GetBooleanStatus(fmi2Component c, const fmi2StatusKind s, fmi2Boolean *value) {
    (void)s;
    MC2FMU_CHECK(c);
    *value = fmi2False;
    return fmi2Discard;
}

fmi2Status fmi2GetStringStatus(fmi2Component c, const fmi2StatusKind s, fmi2String *value) {
    (void)s;
    (void)value;
    MC2FMU_CHECK(c);
    return fmi2Discard;
}
