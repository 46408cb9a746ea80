/* Protocol levels L1..L4 (docs/plugin-abi.md): the call shape a pager and allocator speak, modelled
 * on aimdo's protocol moves (docs/references.md, aimdo §3.2). Never derived from a version string.
 *
 * A caller states its level in orch_pager_config.level; a plugin refuses a level outside its
 * [min_level, max_level] with ORCH_UNSUPPORTED, and refuses any field or call the stated level
 * cannot express with ORCH_UNSUPPORTED too. What each level allows (docs/plugin-abi.md):
 *
 * L1 (aimdo P1, single device): ordinal must be 0, only one pager device open at a time;
 *    extra_headroom, pressure_source must be 0; set_simple_headroom, set_pressure_source and
 *    set_log_callback must not be called. Regions, fault, unpin and the eviction calls are allowed.
 * L2 (P2, multi-device): as L1, but any ordinal, several devices open at once, each an explicit
 *    handle.
 * L3 (P3, headroom): as L2, plus extra_headroom at open (per device, fixed) and
 *    set_simple_headroom / get_simple_headroom at run time (process-wide).
 * L4 (P4, pressure): as L3, plus pressure_source at open, set_pressure_source and
 *    set_log_callback.
 *
 * The process-wide calls (set/get_simple_headroom, set_log_callback) take no device: they are
 * refused with ORCH_UNSUPPORTED while any pager device of the plugin is open at a level that
 * cannot make them, and allowed while none is open. */
#ifndef ORCH_PLUGIN_LEVELS_H
#define ORCH_PLUGIN_LEVELS_H

#define ORCH_LEVEL_1 1u
#define ORCH_LEVEL_2 2u
#define ORCH_LEVEL_3 3u
#define ORCH_LEVEL_4 4u
#define ORCH_LEVEL_MIN ORCH_LEVEL_1
#define ORCH_LEVEL_MAX ORCH_LEVEL_4

/* The lowest level that can express each group of settings and calls above: the one place the
 * rules are written as code. The plugins refuse, the host drops (orchestrator plugin_selection)
 * and the worker applies and hashes (plugins/host applied_settings) by these. */
#define ORCH_LEVEL_MULTI_DEVICE ORCH_LEVEL_2 /* any ordinal, several devices open at once */
#define ORCH_LEVEL_HEADROOM ORCH_LEVEL_3     /* extra_headroom, set/get_simple_headroom */
#define ORCH_LEVEL_PRESSURE ORCH_LEVEL_4     /* pressure_source, set_log_callback */

#endif /* ORCH_PLUGIN_LEVELS_H */
