/* mc2fmu_fmi3.c: the FMI 3.0 interface (co-simulation and model exchange) of an mc2fmu
   reduced model.  Shared by every model, never edited per model.

   Build (the FMI 3 headers come from the importer, e.g. fmpy's c-code folder):
       cc -O3 -fPIC -shared -fvisibility=hidden -I<fmi3 headers> mc2fmu_fmi3.c -o <modelIdentifier>.so -lm
   Only the fmi3 functions are exported; everything else is static.  The functions FMI 2 shares
   are in mc2fmu_fmi.h; the state machine and the argument checks in mc2fmu_native.h. */
#include "fmi3Functions.h"
#include "mc2fmu_native.h"

typedef struct {
    mc2fmu_core core;
    fmi3LogMessageCallback log_message;
    fmi3InstanceEnvironment env;
} mc2fmu_fmi3;

static void mc2fmu_fmi3_log(mc2fmu_core *c, int status, const char *category, const char *message) {
    mc2fmu_fmi3 *inst = (mc2fmu_fmi3 *)c->glue;
    if (inst->log_message) /* the core sent only enabled categories */
        inst->log_message(inst->env, (fmi3Status)status, category, message);
}

#define MC2FMU_FN(fmi2name, fmi3name) fmi3name
typedef fmi3Instance mc2fmu_instance;
typedef fmi3Status mc2fmu_status;
typedef fmi3FMUState mc2fmu_fmu_state;
typedef fmi3Byte mc2fmu_byte;
typedef fmi3Boolean mc2fmu_boolean;
#define MC2FMU_FALSE fmi3False
#define MC2FMU_CORE(c) (&((mc2fmu_fmi3 *)(c))->core)

static void mc2fmu_glue_free(mc2fmu_instance c) { free(c); }

#include "mc2fmu_fmi.h"

/* a call on nvr variables of a kind the model has none of (clocks): nothing to do for none */
static fmi3Status mc2fmu_fmi3_none(fmi3Instance c, const char *fn, size_t nvr, const char *type) {
    MC2FMU_CHECK(c);
    return (fmi3Status)mc2fmu_no_type(MC2FMU_CORE(c), fn, MC2FMU_CALL_SET, nvr, type); /* not after terminate */
}

const char *fmi3GetVersion(void) { return fmi3Version; }

static fmi3Instance mc2fmu_fmi3_instantiate(int interface, fmi3String instantiationToken, fmi3Boolean loggingOn,
                                            fmi3InstanceEnvironment env, fmi3LogMessageCallback logMessage,
                                            const char *refusal) {
    mc2fmu_fmi3 *inst;
    if (!refusal && (!instantiationToken || strcmp(instantiationToken, MC2FMU_INSTANTIATION_TOKEN) != 0))
        refusal = "mc2fmu: the instantiationToken does not match this FMU's modelDescription.xml";
    if (!refusal && ((interface == MC2FMU_CS && !MC2FMU_HAS_CS) || (interface == MC2FMU_ME && !MC2FMU_HAS_ME)))
        refusal = "mc2fmu: this FMU was not exported for the requested interface (see mc2fmu export --interface)";
    if (refusal) {
        if (logMessage) logMessage(env, fmi3Error, "logStatusError", refusal);
        return NULL;
    }
    inst = (mc2fmu_fmi3 *)calloc(1, sizeof *inst);
    if (!inst) return NULL;
    inst->log_message = logMessage;
    inst->env = env;
    mc2fmu_init(&inst->core, 3, interface, loggingOn != fmi3False, mc2fmu_fmi3_log, inst);
    return inst;
}

fmi3Instance fmi3InstantiateModelExchange(fmi3String instanceName, fmi3String instantiationToken,
                                          fmi3String resourcePath, fmi3Boolean visible, fmi3Boolean loggingOn,
                                          fmi3InstanceEnvironment instanceEnvironment, fmi3LogMessageCallback logMessage) {
    (void)instanceName;
    (void)resourcePath;
    (void)visible;
    return mc2fmu_fmi3_instantiate(MC2FMU_ME, instantiationToken, loggingOn, instanceEnvironment, logMessage, NULL);
}

fmi3Instance fmi3InstantiateCoSimulation(fmi3String instanceName, fmi3String instantiationToken,
                                         fmi3String resourcePath, fmi3Boolean visible, fmi3Boolean loggingOn,
                                         fmi3Boolean eventModeUsed, fmi3Boolean earlyReturnAllowed,
                                         const fmi3ValueReference requiredIntermediateVariables[],
                                         size_t nRequiredIntermediateVariables,
                                         fmi3InstanceEnvironment instanceEnvironment, fmi3LogMessageCallback logMessage,
                                         fmi3IntermediateUpdateCallback intermediateUpdate) {
    const char *refusal = NULL;
    (void)instanceName;
    (void)resourcePath;
    (void)visible;
    (void)earlyReturnAllowed; /* the FMU never returns early */
    (void)requiredIntermediateVariables;
    (void)intermediateUpdate;
    if (eventModeUsed)
        refusal = "mc2fmu: fmi3InstantiateCoSimulation refused: eventModeUsed = true, but this FMU has no Event Mode "
                  "in co-simulation (hasEventMode = false)";
    else if (nRequiredIntermediateVariables > 0)
        refusal = "mc2fmu: fmi3InstantiateCoSimulation refused: no variable of this FMU is available in intermediate "
                  "updates (providesIntermediateUpdate = false)";
    return mc2fmu_fmi3_instantiate(MC2FMU_CS, instantiationToken, loggingOn, instanceEnvironment, logMessage, refusal);
}

fmi3Instance fmi3InstantiateScheduledExecution(fmi3String instanceName, fmi3String instantiationToken,
                                               fmi3String resourcePath, fmi3Boolean visible, fmi3Boolean loggingOn,
                                               fmi3InstanceEnvironment instanceEnvironment,
                                               fmi3LogMessageCallback logMessage, fmi3ClockUpdateCallback clockUpdate,
                                               fmi3LockPreemptionCallback lockPreemption,
                                               fmi3UnlockPreemptionCallback unlockPreemption) {
    (void)instanceName;
    (void)instantiationToken;
    (void)resourcePath;
    (void)visible;
    (void)loggingOn;
    (void)clockUpdate;
    (void)lockPreemption;
    (void)unlockPreemption;
    if (logMessage)
        logMessage(instanceEnvironment, fmi3Error, "logStatusError", "mc2fmu: scheduled execution is not supported");
    return NULL;
}

fmi3Status fmi3EnterInitializationMode(fmi3Instance c, fmi3Boolean toleranceDefined, fmi3Float64 tolerance,
                                       fmi3Float64 startTime, fmi3Boolean stopTimeDefined, fmi3Float64 stopTime) {
    (void)toleranceDefined;
    (void)tolerance;
    (void)stopTimeDefined;
    (void)stopTime;
    MC2FMU_CHECK(c);
    return (fmi3Status)mc2fmu_enter_initialization(MC2FMU_CORE(c), __func__, 1, startTime);
}

/* Float64 values: scalar variables only, so nValues must equal nValueReferences */
static int mc2fmu_fmi3_scalars(fmi3Instance c, const char *fn, size_t nvr, size_t nValues) {
    char msg[MC2FMU_MESSAGE];
    if (nValues == nvr) return MC2FMU_OK;
    snprintf(msg, sizeof msg, "%s: nValues = %llu differs from nValueReferences = %llu (the model has no arrays)", fn,
             (unsigned long long)nValues, (unsigned long long)nvr);
    return mc2fmu_fail(MC2FMU_CORE(c), msg);
}

fmi3Status fmi3GetFloat64(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, fmi3Float64 values[],
                          size_t nValues) {
    MC2FMU_CHECK(c);
    if (mc2fmu_begin(MC2FMU_CORE(c), MC2FMU_CALL_GET, __func__) || mc2fmu_fmi3_scalars(c, __func__, nvr, nValues))
        return fmi3Error;
    return (fmi3Status)mc2fmu_get_reals(MC2FMU_CORE(c), __func__, vr, nvr, values);
}

fmi3Status fmi3SetFloat64(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, const fmi3Float64 values[],
                          size_t nValues) {
    MC2FMU_CHECK(c);
    if (mc2fmu_begin(MC2FMU_CORE(c), MC2FMU_CALL_SET, __func__) || mc2fmu_fmi3_scalars(c, __func__, nvr, nValues))
        return fmi3Error;
    return (fmi3Status)mc2fmu_set_reals(MC2FMU_CORE(c), __func__, vr, nvr, values);
}

/* the model has Float64 variables only */
#define MC2FMU_NO_TYPE(fn, ctype, call, type)                                                                  \
    fmi3Status fn(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, ctype values[], size_t nValues) { \
        (void)vr;                                                                                              \
        (void)values;                                                                                          \
        (void)nValues;                                                                                         \
        MC2FMU_CHECK(c);                                                                                       \
        return (fmi3Status)mc2fmu_no_type(MC2FMU_CORE(c), __func__, call, nvr, type);                          \
    }

MC2FMU_NO_TYPE(fmi3GetFloat32, fmi3Float32, MC2FMU_CALL_GET, "Float32")
MC2FMU_NO_TYPE(fmi3GetInt8, fmi3Int8, MC2FMU_CALL_GET, "Int8")
MC2FMU_NO_TYPE(fmi3GetUInt8, fmi3UInt8, MC2FMU_CALL_GET, "UInt8")
MC2FMU_NO_TYPE(fmi3GetInt16, fmi3Int16, MC2FMU_CALL_GET, "Int16")
MC2FMU_NO_TYPE(fmi3GetUInt16, fmi3UInt16, MC2FMU_CALL_GET, "UInt16")
MC2FMU_NO_TYPE(fmi3GetInt32, fmi3Int32, MC2FMU_CALL_GET, "Int32")
MC2FMU_NO_TYPE(fmi3GetUInt32, fmi3UInt32, MC2FMU_CALL_GET, "UInt32")
MC2FMU_NO_TYPE(fmi3GetInt64, fmi3Int64, MC2FMU_CALL_GET, "Int64")
MC2FMU_NO_TYPE(fmi3GetUInt64, fmi3UInt64, MC2FMU_CALL_GET, "UInt64")
MC2FMU_NO_TYPE(fmi3GetBoolean, fmi3Boolean, MC2FMU_CALL_GET, "Boolean")
MC2FMU_NO_TYPE(fmi3GetString, fmi3String, MC2FMU_CALL_GET, "String")
MC2FMU_NO_TYPE(fmi3SetFloat32, const fmi3Float32, MC2FMU_CALL_SET, "Float32")
MC2FMU_NO_TYPE(fmi3SetInt8, const fmi3Int8, MC2FMU_CALL_SET, "Int8")
MC2FMU_NO_TYPE(fmi3SetUInt8, const fmi3UInt8, MC2FMU_CALL_SET, "UInt8")
MC2FMU_NO_TYPE(fmi3SetInt16, const fmi3Int16, MC2FMU_CALL_SET, "Int16")
MC2FMU_NO_TYPE(fmi3SetUInt16, const fmi3UInt16, MC2FMU_CALL_SET, "UInt16")
MC2FMU_NO_TYPE(fmi3SetInt32, const fmi3Int32, MC2FMU_CALL_SET, "Int32")
MC2FMU_NO_TYPE(fmi3SetUInt32, const fmi3UInt32, MC2FMU_CALL_SET, "UInt32")
MC2FMU_NO_TYPE(fmi3SetInt64, const fmi3Int64, MC2FMU_CALL_SET, "Int64")
MC2FMU_NO_TYPE(fmi3SetUInt64, const fmi3UInt64, MC2FMU_CALL_SET, "UInt64")
MC2FMU_NO_TYPE(fmi3SetBoolean, const fmi3Boolean, MC2FMU_CALL_SET, "Boolean")
MC2FMU_NO_TYPE(fmi3SetString, const fmi3String, MC2FMU_CALL_SET, "String")

fmi3Status fmi3GetBinary(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, size_t valueSizes[],
                         fmi3Binary values[], size_t nValues) {
    (void)vr;
    (void)valueSizes;
    (void)values;
    (void)nValues;
    MC2FMU_CHECK(c);
    return (fmi3Status)mc2fmu_no_type(MC2FMU_CORE(c), __func__, MC2FMU_CALL_GET, nvr, "Binary");
}

fmi3Status fmi3SetBinary(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, const size_t valueSizes[],
                         const fmi3Binary values[], size_t nValues) {
    (void)vr;
    (void)valueSizes;
    (void)values;
    (void)nValues;
    MC2FMU_CHECK(c);
    return (fmi3Status)mc2fmu_no_type(MC2FMU_CORE(c), __func__, MC2FMU_CALL_SET, nvr, "Binary");
}

fmi3Status fmi3GetClock(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, fmi3Clock values[]) {
    (void)vr;
    (void)values;
    return mc2fmu_fmi3_none(c, __func__, nvr, "clock");
}

fmi3Status fmi3SetClock(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, const fmi3Clock values[]) {
    (void)vr;
    (void)values;
    return mc2fmu_fmi3_none(c, __func__, nvr, "clock");
}

fmi3Status fmi3GetNumberOfVariableDependencies(fmi3Instance c, fmi3ValueReference valueReference,
                                               size_t *nDependencies) {
    (void)valueReference;
    (void)nDependencies;
    return mc2fmu_never(c, __func__, "variable dependencies are not provided at run time (see "
                                          "modelDescription.xml)");
}

fmi3Status fmi3GetVariableDependencies(fmi3Instance c, fmi3ValueReference dependent, size_t elementIndicesOfDependent[],
                                       fmi3ValueReference independents[], size_t elementIndicesOfIndependents[],
                                       fmi3DependencyKind dependencyKinds[], size_t nDependencies) {
    (void)dependent;
    (void)elementIndicesOfDependent;
    (void)independents;
    (void)elementIndicesOfIndependents;
    (void)dependencyKinds;
    (void)nDependencies;
    return mc2fmu_never(c, __func__, "variable dependencies are not provided at run time (see "
                                          "modelDescription.xml)");
}

fmi3Status fmi3GetDirectionalDerivative(fmi3Instance c, const fmi3ValueReference unknowns[], size_t nUnknowns,
                                        const fmi3ValueReference knowns[], size_t nKnowns, const fmi3Float64 seed[],
                                        size_t nSeed, fmi3Float64 sensitivity[], size_t nSensitivity) {
    MC2FMU_CHECK(c);
    if (nSeed != nKnowns || nSensitivity != nUnknowns) {
        if (mc2fmu_begin(MC2FMU_CORE(c), MC2FMU_CALL_DIRECTIONAL, __func__)) return fmi3Error;
        return (fmi3Status)mc2fmu_fail(MC2FMU_CORE(c), "fmi3GetDirectionalDerivative: nSeed must equal nKnowns and "
                                                        "nSensitivity nUnknowns (the model has scalar variables only)");
    }
    return (fmi3Status)mc2fmu_directional(MC2FMU_CORE(c), __func__, unknowns, nUnknowns, knowns, nKnowns, seed,
                                          sensitivity);
}

fmi3Status fmi3GetAdjointDerivative(fmi3Instance c, const fmi3ValueReference unknowns[], size_t nUnknowns,
                                    const fmi3ValueReference knowns[], size_t nKnowns, const fmi3Float64 seed[],
                                    size_t nSeed, fmi3Float64 sensitivity[], size_t nSensitivity) {
    (void)unknowns;
    (void)nUnknowns;
    (void)knowns;
    (void)nKnowns;
    (void)seed;
    (void)nSeed;
    (void)sensitivity;
    (void)nSensitivity;
    return mc2fmu_never(c, __func__, "adjoint derivatives are not provided (providesAdjointDerivatives = false)");
}

fmi3Status fmi3EnterConfigurationMode(fmi3Instance c) {
    return mc2fmu_never(c, __func__, "the model has no structural parameters");
}

fmi3Status fmi3ExitConfigurationMode(fmi3Instance c) {
    return mc2fmu_never(c, __func__, "the model has no structural parameters");
}

/* clocks: none */
fmi3Status fmi3GetIntervalDecimal(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, fmi3Float64 intervals[],
                                  fmi3IntervalQualifier qualifiers[]) {
    (void)vr;
    (void)intervals;
    (void)qualifiers;
    return mc2fmu_fmi3_none(c, __func__, nvr, "clock");
}

fmi3Status fmi3GetIntervalFraction(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, fmi3UInt64 counters[],
                                   fmi3UInt64 resolutions[], fmi3IntervalQualifier qualifiers[]) {
    (void)vr;
    (void)counters;
    (void)resolutions;
    (void)qualifiers;
    return mc2fmu_fmi3_none(c, __func__, nvr, "clock");
}

fmi3Status fmi3GetShiftDecimal(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, fmi3Float64 shifts[]) {
    (void)vr;
    (void)shifts;
    return mc2fmu_fmi3_none(c, __func__, nvr, "clock");
}

fmi3Status fmi3GetShiftFraction(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, fmi3UInt64 counters[],
                                fmi3UInt64 resolutions[]) {
    (void)vr;
    (void)counters;
    (void)resolutions;
    return mc2fmu_fmi3_none(c, __func__, nvr, "clock");
}

fmi3Status fmi3SetIntervalDecimal(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr,
                                  const fmi3Float64 intervals[]) {
    (void)vr;
    (void)intervals;
    return mc2fmu_fmi3_none(c, __func__, nvr, "clock");
}

fmi3Status fmi3SetIntervalFraction(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr,
                                   const fmi3UInt64 counters[], const fmi3UInt64 resolutions[]) {
    (void)vr;
    (void)counters;
    (void)resolutions;
    return mc2fmu_fmi3_none(c, __func__, nvr, "clock");
}

fmi3Status fmi3SetShiftDecimal(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, const fmi3Float64 shifts[]) {
    (void)vr;
    (void)shifts;
    return mc2fmu_fmi3_none(c, __func__, nvr, "clock");
}

fmi3Status fmi3SetShiftFraction(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr,
                                const fmi3UInt64 counters[], const fmi3UInt64 resolutions[]) {
    (void)vr;
    (void)counters;
    (void)resolutions;
    return mc2fmu_fmi3_none(c, __func__, nvr, "clock");
}

fmi3Status fmi3EvaluateDiscreteStates(fmi3Instance c) {
    return mc2fmu_never(c, __func__, "the model has no discrete states (providesEvaluateDiscreteStates = false)");
}

fmi3Status fmi3UpdateDiscreteStates(fmi3Instance c, fmi3Boolean *discreteStatesNeedUpdate,
                                    fmi3Boolean *terminateSimulation, fmi3Boolean *nominalsOfContinuousStatesChanged,
                                    fmi3Boolean *valuesOfContinuousStatesChanged, fmi3Boolean *nextEventTimeDefined,
                                    fmi3Float64 *nextEventTime) {
    mc2fmu_core *core;
    MC2FMU_CHECK(c);
    core = MC2FMU_CORE(c);
    if (mc2fmu_begin(core, MC2FMU_CALL_DISCRETE, __func__) ||
        mc2fmu_null(core, __func__, "discreteStatesNeedUpdate", discreteStatesNeedUpdate, 1) ||
        mc2fmu_null(core, __func__, "terminateSimulation", terminateSimulation, 1) ||
        mc2fmu_null(core, __func__, "nominalsOfContinuousStatesChanged", nominalsOfContinuousStatesChanged, 1) ||
        mc2fmu_null(core, __func__, "valuesOfContinuousStatesChanged", valuesOfContinuousStatesChanged, 1) ||
        mc2fmu_null(core, __func__, "nextEventTimeDefined", nextEventTimeDefined, 1) ||
        mc2fmu_null(core, __func__, "nextEventTime", nextEventTime, 1))
        return fmi3Error;
    *discreteStatesNeedUpdate = *terminateSimulation = *nominalsOfContinuousStatesChanged = fmi3False;
    *valuesOfContinuousStatesChanged = *nextEventTimeDefined = fmi3False;
    *nextEventTime = 0.0;
    return fmi3OK;
}

/* model exchange (the rest is in mc2fmu_fmi.h) */
static fmi3Status mc2fmu_fmi3_count(fmi3Instance c, const char *fn, size_t *n, size_t value) {
    MC2FMU_CHECK(c);
    if (mc2fmu_begin(MC2FMU_CORE(c), MC2FMU_CALL_COUNTS, fn) || mc2fmu_null(MC2FMU_CORE(c), fn, "the count", n, 1))
        return fmi3Error;
    *n = value;
    return fmi3OK;
}

fmi3Status fmi3GetNumberOfEventIndicators(fmi3Instance c, size_t *nEventIndicators) {
    return mc2fmu_fmi3_count(c, __func__, nEventIndicators, 0);
}

fmi3Status fmi3GetNumberOfContinuousStates(fmi3Instance c, size_t *nContinuousStates) {
    return mc2fmu_fmi3_count(c, __func__, nContinuousStates, 2 * MC2FMU_NQ);
}

/* co-simulation */
fmi3Status fmi3EnterStepMode(fmi3Instance c) {
    MC2FMU_CHECK(c);
    return (fmi3Status)mc2fmu_begin(MC2FMU_CORE(c), MC2FMU_CALL_ENTER_STEP, __func__);
}

fmi3Status fmi3GetOutputDerivatives(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, const fmi3Int32 orders[],
                                    fmi3Float64 values[], size_t nValues) {
    (void)vr;
    (void)nvr;
    (void)orders;
    (void)values;
    (void)nValues;
    return mc2fmu_never(c, __func__, "output derivatives are not provided (maxOutputDerivativeOrder = 0)");
}

fmi3Status fmi3DoStep(fmi3Instance c, fmi3Float64 currentCommunicationPoint, fmi3Float64 communicationStepSize,
                      fmi3Boolean noSetFMUStatePriorToCurrentPoint, fmi3Boolean *eventHandlingNeeded,
                      fmi3Boolean *terminateSimulation, fmi3Boolean *earlyReturn, fmi3Float64 *lastSuccessfulTime) {
    mc2fmu_core *core;
    int status;
    (void)noSetFMUStatePriorToCurrentPoint;
    MC2FMU_CHECK(c);
    core = MC2FMU_CORE(c);
    if (mc2fmu_null(core, __func__, "eventHandlingNeeded", eventHandlingNeeded, 1) ||
        mc2fmu_null(core, __func__, "terminateSimulation", terminateSimulation, 1) ||
        mc2fmu_null(core, __func__, "earlyReturn", earlyReturn, 1) ||
        mc2fmu_null(core, __func__, "lastSuccessfulTime", lastSuccessfulTime, 1))
        return fmi3Error;
    status = mc2fmu_do_step(core, __func__, currentCommunicationPoint, communicationStepSize);
    *eventHandlingNeeded = *terminateSimulation = *earlyReturn = fmi3False;
    *lastSuccessfulTime = core->s.time;
    return (fmi3Status)status;
}

fmi3Status fmi3ActivateModelPartition(fmi3Instance c, fmi3ValueReference clockReference, fmi3Float64 activationTime) {
    (void)clockReference;
    (void)activationTime;
    return mc2fmu_never(c, __func__, "scheduled execution is not supported");
}
