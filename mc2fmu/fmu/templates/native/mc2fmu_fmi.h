/* mc2fmu_fmi.h: the FMI functions that FMI 2.0 and FMI 3.0 share in shape, written once.

   Included by mc2fmu_fmi2.c and mc2fmu_fmi3.c after they define:
     MC2FMU_FN(fmi2name, fmi3name)  the function's name in this FMI version
     mc2fmu_instance, mc2fmu_status, mc2fmu_fmu_state, mc2fmu_byte, mc2fmu_boolean, MC2FMU_FALSE
     MC2FMU_CORE(c)                 the instance's mc2fmu_core
     mc2fmu_glue_free(c)            frees the glue's own instance data (the core is inside it)
   Every function checks the instance, then forwards to the core (mc2fmu_native.h), which
   checks the state machine and the pointer arguments and logs why it refuses a call.  Its
   name in the messages is the function's own (__func__). */

#define MC2FMU_CHECK(c)                               \
    do {                                              \
        if (!(c)) return (mc2fmu_status)MC2FMU_ERROR; \
    } while (0)
#define MC2FMU_STATUS(x) ((mc2fmu_status)(x))

/* a capability the model does not have: Error, with what the model description says */
static mc2fmu_status mc2fmu_never(mc2fmu_instance c, const char *fn, const char *what) {
    char msg[MC2FMU_MESSAGE];
    MC2FMU_CHECK(c);
    if (mc2fmu_begin(MC2FMU_CORE(c), MC2FMU_CALL_ANY, fn)) return MC2FMU_STATUS(MC2FMU_ERROR);
    snprintf(msg, sizeof msg, "%s refused: %s", fn, what);
    return MC2FMU_STATUS(mc2fmu_fail(MC2FMU_CORE(c), msg));
}

void MC2FMU_FN(fmi2FreeInstance, fmi3FreeInstance)(mc2fmu_instance c) {
    if (!c) return; /* the standard: a NULL instance is ignored */
    mc2fmu_free_all_states(MC2FMU_CORE(c));
    mc2fmu_glue_free(c);
}

mc2fmu_status MC2FMU_FN(fmi2SetDebugLogging, fmi3SetDebugLogging)(mc2fmu_instance c, mc2fmu_boolean loggingOn,
                                                                size_t nCategories, const char *const categories[]) {
    MC2FMU_CHECK(c);
    return MC2FMU_STATUS(mc2fmu_debug_logging(MC2FMU_CORE(c), __func__, loggingOn != 0, nCategories, categories));
}

mc2fmu_status MC2FMU_FN(fmi2ExitInitializationMode, fmi3ExitInitializationMode)(mc2fmu_instance c) {
    MC2FMU_CHECK(c);
    return MC2FMU_STATUS(mc2fmu_exit_initialization(MC2FMU_CORE(c), __func__));
}

mc2fmu_status MC2FMU_FN(fmi2Terminate, fmi3Terminate)(mc2fmu_instance c) {
    MC2FMU_CHECK(c);
    return MC2FMU_STATUS(mc2fmu_terminate(MC2FMU_CORE(c), __func__));
}

mc2fmu_status MC2FMU_FN(fmi2Reset, fmi3Reset)(mc2fmu_instance c) {
    MC2FMU_CHECK(c);
    return MC2FMU_STATUS(mc2fmu_reset_call(MC2FMU_CORE(c), __func__));
}

/* FMU state */
mc2fmu_status MC2FMU_FN(fmi2GetFMUstate, fmi3GetFMUState)(mc2fmu_instance c, mc2fmu_fmu_state *state) {
    MC2FMU_CHECK(c);
    return MC2FMU_STATUS(mc2fmu_get_fmu_state(MC2FMU_CORE(c), __func__, (void **)state));
}

mc2fmu_status MC2FMU_FN(fmi2SetFMUstate, fmi3SetFMUState)(mc2fmu_instance c, mc2fmu_fmu_state state) {
    MC2FMU_CHECK(c);
    return MC2FMU_STATUS(mc2fmu_set_fmu_state(MC2FMU_CORE(c), __func__, state));
}

mc2fmu_status MC2FMU_FN(fmi2FreeFMUstate, fmi3FreeFMUState)(mc2fmu_instance c, mc2fmu_fmu_state *state) {
    MC2FMU_CHECK(c);
    return MC2FMU_STATUS(mc2fmu_free_fmu_state(MC2FMU_CORE(c), __func__, (void **)state));
}

mc2fmu_status MC2FMU_FN(fmi2SerializedFMUstateSize, fmi3SerializedFMUStateSize)(mc2fmu_instance c,
                                                                              mc2fmu_fmu_state state, size_t *size) {
    MC2FMU_CHECK(c);
    return MC2FMU_STATUS(mc2fmu_serialized_size(MC2FMU_CORE(c), __func__, state, size));
}

mc2fmu_status MC2FMU_FN(fmi2SerializeFMUstate, fmi3SerializeFMUState)(mc2fmu_instance c, mc2fmu_fmu_state state,
                                                                    mc2fmu_byte serializedState[], size_t size) {
    MC2FMU_CHECK(c);
    return MC2FMU_STATUS(
        mc2fmu_serialize_fmu_state(MC2FMU_CORE(c), __func__, state, (unsigned char *)serializedState, size));
}

mc2fmu_status MC2FMU_FN(fmi2DeSerializeFMUstate, fmi3DeserializeFMUState)(mc2fmu_instance c,
                                                                        const mc2fmu_byte serializedState[],
                                                                        size_t size, mc2fmu_fmu_state *state) {
    MC2FMU_CHECK(c);
    return MC2FMU_STATUS(mc2fmu_deserialize_fmu_state(MC2FMU_CORE(c), __func__, (const unsigned char *)serializedState,
                                                      size, (void **)state));
}

/* model exchange */
mc2fmu_status MC2FMU_FN(fmi2EnterEventMode, fmi3EnterEventMode)(mc2fmu_instance c) {
    MC2FMU_CHECK(c);
    return MC2FMU_STATUS(mc2fmu_enter_event(MC2FMU_CORE(c), __func__));
}

mc2fmu_status MC2FMU_FN(fmi2EnterContinuousTimeMode, fmi3EnterContinuousTimeMode)(mc2fmu_instance c) {
    MC2FMU_CHECK(c);
    return MC2FMU_STATUS(mc2fmu_enter_continuous(MC2FMU_CORE(c), __func__));
}

mc2fmu_status MC2FMU_FN(fmi2CompletedIntegratorStep, fmi3CompletedIntegratorStep)(
    mc2fmu_instance c, mc2fmu_boolean noSetFMUStatePriorToCurrentPoint, mc2fmu_boolean *enterEventMode,
    mc2fmu_boolean *terminateSimulation) {
    int status;
    (void)noSetFMUStatePriorToCurrentPoint;
    MC2FMU_CHECK(c);
    status = mc2fmu_completed_integrator_step(MC2FMU_CORE(c), __func__, enterEventMode, terminateSimulation);
    if (status == MC2FMU_OK) *enterEventMode = *terminateSimulation = MC2FMU_FALSE;
    return MC2FMU_STATUS(status);
}

mc2fmu_status MC2FMU_FN(fmi2SetTime, fmi3SetTime)(mc2fmu_instance c, double time) {
    MC2FMU_CHECK(c);
    return MC2FMU_STATUS(mc2fmu_set_time(MC2FMU_CORE(c), __func__, time));
}

mc2fmu_status MC2FMU_FN(fmi2SetContinuousStates, fmi3SetContinuousStates)(mc2fmu_instance c, const double x[],
                                                                        size_t nx) {
    MC2FMU_CHECK(c);
    return MC2FMU_STATUS(mc2fmu_set_states(MC2FMU_CORE(c), __func__, x, nx));
}

mc2fmu_status MC2FMU_FN(fmi2GetDerivatives, fmi3GetContinuousStateDerivatives)(mc2fmu_instance c,
                                                                             double derivatives[], size_t nx) {
    MC2FMU_CHECK(c);
    return MC2FMU_STATUS(mc2fmu_derivatives(MC2FMU_CORE(c), __func__, derivatives, nx));
}

mc2fmu_status MC2FMU_FN(fmi2GetEventIndicators, fmi3GetEventIndicators)(mc2fmu_instance c, double indicators[],
                                                                      size_t ni) {
    (void)indicators; /* never written: the model has none */
    MC2FMU_CHECK(c);
    return MC2FMU_STATUS(mc2fmu_event_indicators(MC2FMU_CORE(c), __func__, ni));
}

mc2fmu_status MC2FMU_FN(fmi2GetContinuousStates, fmi3GetContinuousStates)(mc2fmu_instance c, double x[], size_t nx) {
    MC2FMU_CHECK(c);
    return MC2FMU_STATUS(mc2fmu_get_states(MC2FMU_CORE(c), __func__, x, nx));
}

mc2fmu_status MC2FMU_FN(fmi2GetNominalsOfContinuousStates, fmi3GetNominalsOfContinuousStates)(mc2fmu_instance c,
                                                                                            double nominals[],
                                                                                            size_t nx) {
    MC2FMU_CHECK(c);
    return MC2FMU_STATUS(mc2fmu_nominals(MC2FMU_CORE(c), __func__, nominals, nx));
}
