/* mc2fmu_fmi3.c: the FMI 3.0 interface (co-simulation and model exchange) of an mc2fmu
   reduced model.  Shared by every model, never edited per model.

   Build (the FMI 3 headers come from the importer, e.g. fmpy's c-code folder):
       cc -O3 -fPIC -shared -fvisibility=hidden -I<fmi3 headers> mc2fmu_fmi3.c -o <modelIdentifier>.so -lm
   Only the fmi3 functions are exported; everything else is static. */
#include "fmi3Functions.h"
#include "mc2fmu_native.h"

typedef struct {
    mc2fmu_core core;
    fmi3LogMessageCallback log_message;
    fmi3InstanceEnvironment env;
    fmi3Boolean logging_on;
} mc2fmu_fmi3;

static void mc2fmu_fmi3_log(mc2fmu_core *c, int status, const char *category, const char *message) {
    mc2fmu_fmi3 *inst = (mc2fmu_fmi3 *)c->glue;
    if (inst->log_message && (status != MC2FMU_OK || inst->logging_on))
        inst->log_message(inst->env, (fmi3Status)status, category, message);
}

#define MC2FMU_INST(c) ((mc2fmu_fmi3 *)(c))
#define MC2FMU_CORE(c) (&((mc2fmu_fmi3 *)(c))->core)
#define MC2FMU_CHECK(c)              \
    do {                             \
        if (!(c)) return fmi3Error;  \
    } while (0)

static fmi3Status mc2fmu_fmi3_fail(fmi3Instance c, const char *message) {
    return (fmi3Status)mc2fmu_fail(MC2FMU_CORE(c), message);
}

/* a call on nvr variables of a kind the model has none of: nothing to do for none */
static fmi3Status mc2fmu_fmi3_none(fmi3Instance c, size_t nvr, const char *message) {
    MC2FMU_CHECK(c);
    return nvr == 0 ? fmi3OK : mc2fmu_fmi3_fail(c, message);
}

const char *fmi3GetVersion(void) { return fmi3Version; }

fmi3Status fmi3SetDebugLogging(fmi3Instance c, fmi3Boolean loggingOn, size_t nCategories, const fmi3String categories[]) {
    (void)nCategories;
    (void)categories;
    MC2FMU_CHECK(c);
    MC2FMU_INST(c)->logging_on = loggingOn;
    return fmi3OK;
}

static fmi3Instance mc2fmu_fmi3_instantiate(int interface, fmi3String instanceName, fmi3String instantiationToken,
                                            fmi3Boolean loggingOn, fmi3InstanceEnvironment env,
                                            fmi3LogMessageCallback logMessage) {
    mc2fmu_fmi3 *inst;
    (void)instanceName;
    if (!instantiationToken || strcmp(instantiationToken, MC2FMU_INSTANTIATION_TOKEN) != 0) {
        if (logMessage)
            logMessage(env, fmi3Error, "logStatusError",
                       "mc2fmu: the instantiationToken does not match this FMU's modelDescription.xml");
        return NULL;
    }
    if ((interface == MC2FMU_CS && !MC2FMU_HAS_CS) || (interface == MC2FMU_ME && !MC2FMU_HAS_ME)) {
        if (logMessage)
            logMessage(env, fmi3Error, "logStatusError",
                       "mc2fmu: this FMU was not exported for the requested interface (see mc2fmu export --interface)");
        return NULL;
    }
    inst = (mc2fmu_fmi3 *)calloc(1, sizeof *inst);
    if (!inst) return NULL;
    inst->log_message = logMessage;
    inst->env = env;
    inst->logging_on = loggingOn;
    mc2fmu_init(&inst->core, interface, mc2fmu_fmi3_log, inst);
    return inst;
}

fmi3Instance fmi3InstantiateModelExchange(fmi3String instanceName, fmi3String instantiationToken,
                                          fmi3String resourcePath, fmi3Boolean visible, fmi3Boolean loggingOn,
                                          fmi3InstanceEnvironment instanceEnvironment, fmi3LogMessageCallback logMessage) {
    (void)resourcePath;
    (void)visible;
    return mc2fmu_fmi3_instantiate(MC2FMU_ME, instanceName, instantiationToken, loggingOn, instanceEnvironment,
                                   logMessage);
}

fmi3Instance fmi3InstantiateCoSimulation(fmi3String instanceName, fmi3String instantiationToken,
                                         fmi3String resourcePath, fmi3Boolean visible, fmi3Boolean loggingOn,
                                         fmi3Boolean eventModeUsed, fmi3Boolean earlyReturnAllowed,
                                         const fmi3ValueReference requiredIntermediateVariables[],
                                         size_t nRequiredIntermediateVariables,
                                         fmi3InstanceEnvironment instanceEnvironment, fmi3LogMessageCallback logMessage,
                                         fmi3IntermediateUpdateCallback intermediateUpdate) {
    (void)resourcePath;
    (void)visible;
    (void)eventModeUsed;
    (void)earlyReturnAllowed;
    (void)requiredIntermediateVariables;
    (void)nRequiredIntermediateVariables;
    (void)intermediateUpdate;
    return mc2fmu_fmi3_instantiate(MC2FMU_CS, instanceName, instantiationToken, loggingOn, instanceEnvironment,
                                   logMessage);
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

void fmi3FreeInstance(fmi3Instance c) { free(c); }

fmi3Status fmi3EnterInitializationMode(fmi3Instance c, fmi3Boolean toleranceDefined, fmi3Float64 tolerance,
                                       fmi3Float64 startTime, fmi3Boolean stopTimeDefined, fmi3Float64 stopTime) {
    (void)toleranceDefined;
    (void)tolerance;
    (void)stopTimeDefined;
    (void)stopTime;
    MC2FMU_CHECK(c);
    return (fmi3Status)mc2fmu_enter_initialization(MC2FMU_CORE(c), startTime);
}

fmi3Status fmi3ExitInitializationMode(fmi3Instance c) {
    MC2FMU_CHECK(c);
    return (fmi3Status)mc2fmu_exit_initialization(MC2FMU_CORE(c));
}

fmi3Status fmi3EnterEventMode(fmi3Instance c) {
    MC2FMU_CHECK(c);
    return fmi3OK;
}

fmi3Status fmi3Terminate(fmi3Instance c) {
    MC2FMU_CHECK(c);
    MC2FMU_CORE(c)->s.phase = MC2FMU_TERMINATED;
    return fmi3OK;
}

fmi3Status fmi3Reset(fmi3Instance c) {
    MC2FMU_CHECK(c);
    mc2fmu_reset(MC2FMU_CORE(c));
    return fmi3OK;
}

fmi3Status fmi3GetFloat64(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, fmi3Float64 values[],
                          size_t nValues) {
    MC2FMU_CHECK(c);
    if (nValues != nvr) return mc2fmu_fmi3_fail(c, "fmi3GetFloat64: nValues differs from nValueReferences (no arrays)");
    return (fmi3Status)mc2fmu_get_reals(MC2FMU_CORE(c), vr, nvr, values);
}

fmi3Status fmi3SetFloat64(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, const fmi3Float64 values[],
                          size_t nValues) {
    MC2FMU_CHECK(c);
    if (nValues != nvr) return mc2fmu_fmi3_fail(c, "fmi3SetFloat64: nValues differs from nValueReferences (no arrays)");
    return (fmi3Status)mc2fmu_set_reals(MC2FMU_CORE(c), vr, nvr, values);
}

/* the model has Float64 variables only */
#define MC2FMU_NO_TYPE(fn, ctype, type)                                                                        \
    fmi3Status fn(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, ctype values[], size_t nValues) { \
        (void)vr;                                                                                              \
        (void)values;                                                                                          \
        (void)nValues;                                                                                         \
        return mc2fmu_fmi3_none(c, nvr, "the model has no " type " variables");                                \
    }

MC2FMU_NO_TYPE(fmi3GetFloat32, fmi3Float32, "Float32")
MC2FMU_NO_TYPE(fmi3GetInt8, fmi3Int8, "Int8")
MC2FMU_NO_TYPE(fmi3GetUInt8, fmi3UInt8, "UInt8")
MC2FMU_NO_TYPE(fmi3GetInt16, fmi3Int16, "Int16")
MC2FMU_NO_TYPE(fmi3GetUInt16, fmi3UInt16, "UInt16")
MC2FMU_NO_TYPE(fmi3GetInt32, fmi3Int32, "Int32")
MC2FMU_NO_TYPE(fmi3GetUInt32, fmi3UInt32, "UInt32")
MC2FMU_NO_TYPE(fmi3GetInt64, fmi3Int64, "Int64")
MC2FMU_NO_TYPE(fmi3GetUInt64, fmi3UInt64, "UInt64")
MC2FMU_NO_TYPE(fmi3GetBoolean, fmi3Boolean, "Boolean")
MC2FMU_NO_TYPE(fmi3GetString, fmi3String, "String")
MC2FMU_NO_TYPE(fmi3SetFloat32, const fmi3Float32, "Float32")
MC2FMU_NO_TYPE(fmi3SetInt8, const fmi3Int8, "Int8")
MC2FMU_NO_TYPE(fmi3SetUInt8, const fmi3UInt8, "UInt8")
MC2FMU_NO_TYPE(fmi3SetInt16, const fmi3Int16, "Int16")
MC2FMU_NO_TYPE(fmi3SetUInt16, const fmi3UInt16, "UInt16")
MC2FMU_NO_TYPE(fmi3SetInt32, const fmi3Int32, "Int32")
MC2FMU_NO_TYPE(fmi3SetUInt32, const fmi3UInt32, "UInt32")
MC2FMU_NO_TYPE(fmi3SetInt64, const fmi3Int64, "Int64")
MC2FMU_NO_TYPE(fmi3SetUInt64, const fmi3UInt64, "UInt64")
MC2FMU_NO_TYPE(fmi3SetBoolean, const fmi3Boolean, "Boolean")
MC2FMU_NO_TYPE(fmi3SetString, const fmi3String, "String")

fmi3Status fmi3GetBinary(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, size_t valueSizes[],
                         fmi3Binary values[], size_t nValues) {
    (void)vr;
    (void)valueSizes;
    (void)values;
    (void)nValues;
    return mc2fmu_fmi3_none(c, nvr, "the model has no Binary variables");
}

fmi3Status fmi3SetBinary(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, const size_t valueSizes[],
                         const fmi3Binary values[], size_t nValues) {
    (void)vr;
    (void)valueSizes;
    (void)values;
    (void)nValues;
    return mc2fmu_fmi3_none(c, nvr, "the model has no Binary variables");
}

fmi3Status fmi3GetClock(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, fmi3Clock values[]) {
    (void)vr;
    (void)values;
    return mc2fmu_fmi3_none(c, nvr, "the model has no clocks");
}

fmi3Status fmi3SetClock(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, const fmi3Clock values[]) {
    (void)vr;
    (void)values;
    return mc2fmu_fmi3_none(c, nvr, "the model has no clocks");
}

fmi3Status fmi3GetNumberOfVariableDependencies(fmi3Instance c, fmi3ValueReference valueReference,
                                               size_t *nDependencies) {
    (void)valueReference;
    (void)nDependencies;
    MC2FMU_CHECK(c);
    return mc2fmu_fmi3_fail(c, "variable dependencies are not provided at run time (see modelDescription.xml)");
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
    MC2FMU_CHECK(c);
    return mc2fmu_fmi3_fail(c, "variable dependencies are not provided at run time (see modelDescription.xml)");
}

/* FMU state */
fmi3Status fmi3GetFMUState(fmi3Instance c, fmi3FMUState *FMUState) {
    MC2FMU_CHECK(c);
    return (fmi3Status)mc2fmu_get_fmu_state(MC2FMU_CORE(c), FMUState);
}

fmi3Status fmi3SetFMUState(fmi3Instance c, fmi3FMUState FMUState) {
    MC2FMU_CHECK(c);
    return (fmi3Status)mc2fmu_set_fmu_state(MC2FMU_CORE(c), FMUState);
}

fmi3Status fmi3FreeFMUState(fmi3Instance c, fmi3FMUState *FMUState) {
    (void)c;
    mc2fmu_free_fmu_state(FMUState);
    return fmi3OK;
}

fmi3Status fmi3SerializedFMUStateSize(fmi3Instance c, fmi3FMUState FMUState, size_t *size) {
    (void)FMUState;
    MC2FMU_CHECK(c);
    *size = MC2FMU_BLOB_SIZE;
    return fmi3OK;
}

fmi3Status fmi3SerializeFMUState(fmi3Instance c, fmi3FMUState FMUState, fmi3Byte serializedState[], size_t size) {
    MC2FMU_CHECK(c);
    return (fmi3Status)mc2fmu_serialize_fmu_state(MC2FMU_CORE(c), FMUState, (unsigned char *)serializedState, size);
}

fmi3Status fmi3DeserializeFMUState(fmi3Instance c, const fmi3Byte serializedState[], size_t size,
                                   fmi3FMUState *FMUState) {
    MC2FMU_CHECK(c);
    return (fmi3Status)mc2fmu_deserialize_fmu_state(MC2FMU_CORE(c), (const unsigned char *)serializedState, size,
                                                    FMUState);
}

fmi3Status fmi3GetDirectionalDerivative(fmi3Instance c, const fmi3ValueReference unknowns[], size_t nUnknowns,
                                        const fmi3ValueReference knowns[], size_t nKnowns, const fmi3Float64 seed[],
                                        size_t nSeed, fmi3Float64 sensitivity[], size_t nSensitivity) {
    MC2FMU_CHECK(c);
    if (nSeed != nKnowns || nSensitivity != nUnknowns)
        return mc2fmu_fmi3_fail(c, "fmi3GetDirectionalDerivative: nSeed must equal nKnowns and nSensitivity nUnknowns "
                                   "(the model has scalar variables only)");
    if ((nUnknowns > 0 && (!unknowns || !sensitivity)) || (nKnowns > 0 && (!knowns || !seed)))
        return mc2fmu_fmi3_fail(c, "fmi3GetDirectionalDerivative: a NULL array");
    return (fmi3Status)mc2fmu_directional(MC2FMU_CORE(c), unknowns, nUnknowns, knowns, nKnowns, seed, sensitivity);
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
    MC2FMU_CHECK(c);
    return mc2fmu_fmi3_fail(c, "adjoint derivatives are not provided");
}

fmi3Status fmi3EnterConfigurationMode(fmi3Instance c) {
    MC2FMU_CHECK(c);
    return mc2fmu_fmi3_fail(c, "the model has no structural parameters");
}

fmi3Status fmi3ExitConfigurationMode(fmi3Instance c) {
    MC2FMU_CHECK(c);
    return mc2fmu_fmi3_fail(c, "the model has no structural parameters");
}

/* clocks: none */
fmi3Status fmi3GetIntervalDecimal(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, fmi3Float64 intervals[],
                                  fmi3IntervalQualifier qualifiers[]) {
    (void)vr;
    (void)intervals;
    (void)qualifiers;
    return mc2fmu_fmi3_none(c, nvr, "the model has no clocks");
}

fmi3Status fmi3GetIntervalFraction(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, fmi3UInt64 counters[],
                                   fmi3UInt64 resolutions[], fmi3IntervalQualifier qualifiers[]) {
    (void)vr;
    (void)counters;
    (void)resolutions;
    (void)qualifiers;
    return mc2fmu_fmi3_none(c, nvr, "the model has no clocks");
}

fmi3Status fmi3GetShiftDecimal(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, fmi3Float64 shifts[]) {
    (void)vr;
    (void)shifts;
    return mc2fmu_fmi3_none(c, nvr, "the model has no clocks");
}

fmi3Status fmi3GetShiftFraction(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, fmi3UInt64 counters[],
                                fmi3UInt64 resolutions[]) {
    (void)vr;
    (void)counters;
    (void)resolutions;
    return mc2fmu_fmi3_none(c, nvr, "the model has no clocks");
}

fmi3Status fmi3SetIntervalDecimal(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr,
                                  const fmi3Float64 intervals[]) {
    (void)vr;
    (void)intervals;
    return mc2fmu_fmi3_none(c, nvr, "the model has no clocks");
}

fmi3Status fmi3SetIntervalFraction(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr,
                                   const fmi3UInt64 counters[], const fmi3UInt64 resolutions[]) {
    (void)vr;
    (void)counters;
    (void)resolutions;
    return mc2fmu_fmi3_none(c, nvr, "the model has no clocks");
}

fmi3Status fmi3SetShiftDecimal(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, const fmi3Float64 shifts[]) {
    (void)vr;
    (void)shifts;
    return mc2fmu_fmi3_none(c, nvr, "the model has no clocks");
}

fmi3Status fmi3SetShiftFraction(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr,
                                const fmi3UInt64 counters[], const fmi3UInt64 resolutions[]) {
    (void)vr;
    (void)counters;
    (void)resolutions;
    return mc2fmu_fmi3_none(c, nvr, "the model has no clocks");
}

fmi3Status fmi3EvaluateDiscreteStates(fmi3Instance c) {
    MC2FMU_CHECK(c);
    return fmi3OK;
}

fmi3Status fmi3UpdateDiscreteStates(fmi3Instance c, fmi3Boolean *discreteStatesNeedUpdate,
                                    fmi3Boolean *terminateSimulation, fmi3Boolean *nominalsOfContinuousStatesChanged,
                                    fmi3Boolean *valuesOfContinuousStatesChanged, fmi3Boolean *nextEventTimeDefined,
                                    fmi3Float64 *nextEventTime) {
    MC2FMU_CHECK(c);
    if (discreteStatesNeedUpdate) *discreteStatesNeedUpdate = fmi3False;
    if (terminateSimulation) *terminateSimulation = fmi3False;
    if (nominalsOfContinuousStatesChanged) *nominalsOfContinuousStatesChanged = fmi3False;
    if (valuesOfContinuousStatesChanged) *valuesOfContinuousStatesChanged = fmi3False;
    if (nextEventTimeDefined) *nextEventTimeDefined = fmi3False;
    if (nextEventTime) *nextEventTime = 0.0;
    return fmi3OK;
}

/* model exchange */
fmi3Status fmi3EnterContinuousTimeMode(fmi3Instance c) {
    MC2FMU_CHECK(c);
    return fmi3OK;
}

fmi3Status fmi3CompletedIntegratorStep(fmi3Instance c, fmi3Boolean noSetFMUStatePriorToCurrentPoint,
                                       fmi3Boolean *enterEventMode, fmi3Boolean *terminateSimulation) {
    (void)noSetFMUStatePriorToCurrentPoint;
    MC2FMU_CHECK(c);
    if (enterEventMode) *enterEventMode = fmi3False;
    if (terminateSimulation) *terminateSimulation = fmi3False;
    return (fmi3Status)mc2fmu_completed_integrator_step(MC2FMU_CORE(c));
}

fmi3Status fmi3SetTime(fmi3Instance c, fmi3Float64 time) {
    MC2FMU_CHECK(c);
    MC2FMU_CORE(c)->s.time = time;
    return fmi3OK;
}

fmi3Status fmi3SetContinuousStates(fmi3Instance c, const fmi3Float64 continuousStates[], size_t nContinuousStates) {
    MC2FMU_CHECK(c);
    return (fmi3Status)mc2fmu_set_states(MC2FMU_CORE(c), continuousStates, nContinuousStates);
}

fmi3Status fmi3GetContinuousStateDerivatives(fmi3Instance c, fmi3Float64 derivatives[], size_t nContinuousStates) {
    MC2FMU_CHECK(c);
    return (fmi3Status)mc2fmu_derivatives(MC2FMU_CORE(c), derivatives, nContinuousStates);
}

fmi3Status fmi3GetEventIndicators(fmi3Instance c, fmi3Float64 eventIndicators[], size_t nEventIndicators) {
    (void)eventIndicators;
    MC2FMU_CHECK(c);
    return nEventIndicators == 0 ? fmi3OK : fmi3Error;
}

fmi3Status fmi3GetContinuousStates(fmi3Instance c, fmi3Float64 continuousStates[], size_t nContinuousStates) {
    MC2FMU_CHECK(c);
    return (fmi3Status)mc2fmu_get_states(MC2FMU_CORE(c), continuousStates, nContinuousStates);
}

fmi3Status fmi3GetNominalsOfContinuousStates(fmi3Instance c, fmi3Float64 nominals[], size_t nContinuousStates) {
    MC2FMU_CHECK(c);
    mc2fmu_nominals(nominals, nContinuousStates);
    return fmi3OK;
}

fmi3Status fmi3GetNumberOfEventIndicators(fmi3Instance c, size_t *nEventIndicators) {
    MC2FMU_CHECK(c);
    *nEventIndicators = 0;
    return fmi3OK;
}

fmi3Status fmi3GetNumberOfContinuousStates(fmi3Instance c, size_t *nContinuousStates) {
    MC2FMU_CHECK(c);
    *nContinuousStates = MC2FMU_CORE(c)->interface == MC2FMU_ME ? 2 * MC2FMU_NQ : 0;
    return fmi3OK;
}

/* co-simulation */
fmi3Status fmi3EnterStepMode(fmi3Instance c) {
    MC2FMU_CHECK(c);
    return fmi3OK;
}

fmi3Status fmi3GetOutputDerivatives(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr, const fmi3Int32 orders[],
                                    fmi3Float64 values[], size_t nValues) {
    (void)vr;
    (void)nvr;
    (void)orders;
    (void)values;
    (void)nValues;
    MC2FMU_CHECK(c);
    return mc2fmu_fmi3_fail(c, "output derivatives are not provided");
}

fmi3Status fmi3DoStep(fmi3Instance c, fmi3Float64 currentCommunicationPoint, fmi3Float64 communicationStepSize,
                      fmi3Boolean noSetFMUStatePriorToCurrentPoint, fmi3Boolean *eventHandlingNeeded,
                      fmi3Boolean *terminateSimulation, fmi3Boolean *earlyReturn, fmi3Float64 *lastSuccessfulTime) {
    int status;
    (void)noSetFMUStatePriorToCurrentPoint;
    MC2FMU_CHECK(c);
    status = mc2fmu_do_step(MC2FMU_CORE(c), currentCommunicationPoint, communicationStepSize);
    if (eventHandlingNeeded) *eventHandlingNeeded = fmi3False;
    if (terminateSimulation) *terminateSimulation = fmi3False;
    if (earlyReturn) *earlyReturn = fmi3False;
    if (lastSuccessfulTime) *lastSuccessfulTime = MC2FMU_CORE(c)->s.time;
    return (fmi3Status)status;
}

fmi3Status fmi3ActivateModelPartition(fmi3Instance c, fmi3ValueReference clockReference, fmi3Float64 activationTime) {
    (void)clockReference;
    (void)activationTime;
    MC2FMU_CHECK(c);
    return mc2fmu_fmi3_fail(c, "scheduled execution is not supported");
}
