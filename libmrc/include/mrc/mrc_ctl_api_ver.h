/*
 * mrc_ctl_api_ver.h - version numbers of the MRC controller API (mrc_ctl.h).
 *
 * Follows the OCP MRC 1.0 API (mrc_ctl_api_ver.h of the OCP Multipath
 * Reliable Connection specification); this is libmrc's own declaration of
 * it, with the same macro names and values. Pure preprocessor definitions.
 *
 * Same encoding as mrc_api_ver.h (major 31..24, minor 23..16, subminor
 * 15..0), versioned independently of the application API. A controller may
 * define MRC_CTL_API_VER_USED before including mrc_ctl.h; it selects which
 * functions are declared and the layout of struct mrc_ctl_ev_event.
 */
#ifndef LIBMRC_MRC_CTL_API_VER_H
#define LIBMRC_MRC_CTL_API_VER_H

/* Bit positions of the three parts of a version number. */
#define MRC_CTL_API_VER_MAJOR_OFFSET 24
#define MRC_CTL_API_VER_MINOR_OFFSET 16
#define MRC_CTL_API_VER_SUBMINOR_OFFSET 0

/* Packs (major, minor, subminor) into one version number. Usable in #if. */
#define MRC_CTL_API_VER(_major, _minor, _sub_minor)        \
	(((_major) << MRC_CTL_API_VER_MAJOR_OFFSET) |      \
	 ((_minor) << MRC_CTL_API_VER_MINOR_OFFSET) |      \
	 ((_sub_minor) << MRC_CTL_API_VER_SUBMINOR_OFFSET))

/* "Whatever this header calls current"; for #if and MRC_CTL_API_VER_USED. */
#define MRC_CTL_API_VER_LATEST MRC_CTL_API_VER(0xFF, 0xFF, 0xFFFF)

/* The controller API this header declares (1.0.1) and the oldest accepted. */
#define MRC_CTL_API_CURRENT_VERSION MRC_CTL_API_VER(1, 0, 1)
#define MRC_CTL_API_LAST_SUPPORTED_VERSION MRC_CTL_API_VER(0, 0, 0)

#ifndef MRC_CTL_API_VER_USED
#define MRC_CTL_API_VER_USED MRC_CTL_API_CURRENT_VERSION
#elif MRC_CTL_API_VER_USED == MRC_CTL_API_VER_LATEST
#undef MRC_CTL_API_VER_USED
#define MRC_CTL_API_VER_USED MRC_CTL_API_CURRENT_VERSION
#endif

#if MRC_CTL_API_VER_USED > MRC_CTL_API_CURRENT_VERSION
#error "MRC_CTL_API_VER_USED is newer than MRC_CTL_API_CURRENT_VERSION"
#elif MRC_CTL_API_VER_USED < MRC_CTL_API_LAST_SUPPORTED_VERSION
#error "MRC_CTL_API_VER_USED is older than MRC_CTL_API_LAST_SUPPORTED_VERSION"
#elif MRC_CTL_API_VER_USED == MRC_CTL_API_LAST_SUPPORTED_VERSION
#warning "MRC_CTL_API_VER_USED is the oldest supported version and may be dropped"
#endif

/* Vendor controller extensions; libmrc has none and reports 1.0.0. */
#define MRC_CTL_VENDOR_API_CURRENT_VERSION MRC_CTL_API_VER(1, 0, 0)
#define MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION MRC_CTL_API_VER(0, 0, 0)

#ifndef MRC_CTL_VENDOR_API_VER_USED
#define MRC_CTL_VENDOR_API_VER_USED MRC_CTL_VENDOR_API_CURRENT_VERSION
#elif MRC_CTL_VENDOR_API_VER_USED == MRC_CTL_API_VER_LATEST
#undef MRC_CTL_VENDOR_API_VER_USED
#define MRC_CTL_VENDOR_API_VER_USED MRC_CTL_VENDOR_API_CURRENT_VERSION
#endif

#if MRC_CTL_VENDOR_API_VER_USED > MRC_CTL_VENDOR_API_CURRENT_VERSION
#error "MRC_CTL_VENDOR_API_VER_USED is newer than MRC_CTL_VENDOR_API_CURRENT_VERSION"
#elif MRC_CTL_VENDOR_API_VER_USED < MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION
#error "MRC_CTL_VENDOR_API_VER_USED is older than MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION"
#elif MRC_CTL_VENDOR_API_VER_USED == MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION
#warning "MRC_CTL_VENDOR_API_VER_USED is the oldest supported version and may be dropped"
#endif

#endif /* LIBMRC_MRC_CTL_API_VER_H */
