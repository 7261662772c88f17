/*
 * mrc_api_ver.h - version numbers of the MRC application API (mrc.h).
 *
 * Follows the OCP MRC 1.0 API (mrc_api_ver.h of the OCP Multipath Reliable
 * Connection specification); this is libmrc's own declaration of it, with the
 * same macro names and values. Pure preprocessor definitions, no threading.
 *
 * A version is one 32-bit number: major in bits 31..24, minor in bits
 * 23..16, subminor in bits 15..0. A new major breaks the API, a new minor
 * only adds to it, a new subminor changes nothing visible.
 *
 * An application may define MRC_API_VER_USED (and MRC_VENDOR_API_VER_USED)
 * before including mrc.h to compile against an older API; the layout of
 * some structures and the set of declared functions follow that choice.
 * Left undefined, or set to MRC_API_VER_LATEST, it means the current version.
 */
#ifndef LIBMRC_MRC_API_VER_H
#define LIBMRC_MRC_API_VER_H

/* Bit positions of the three parts of a version number. */
#define MRC_API_VER_MAJOR_OFFSET 24
#define MRC_API_VER_MINOR_OFFSET 16
#define MRC_API_VER_SUBMINOR_OFFSET 0

/* Packs (major, minor, subminor) into one version number. Usable in #if. */
#define MRC_API_VER(_major, _minor, _sub_minor)        \
	(((_major) << MRC_API_VER_MAJOR_OFFSET) |      \
	 ((_minor) << MRC_API_VER_MINOR_OFFSET) |      \
	 ((_sub_minor) << MRC_API_VER_SUBMINOR_OFFSET))

/* "Whatever this header calls current"; only meaningful in #if and as a
 * value of MRC_API_VER_USED (it does not fit a signed int in C code). */
#define MRC_API_VER_LATEST MRC_API_VER(0xFF, 0xFF, 0xFFFF)

/* The API this header declares (1.0.1) and the oldest one still accepted. */
#define MRC_API_CURRENT_VERSION MRC_API_VER(1, 0, 1)
#define MRC_API_LAST_SUPPORTED_VERSION MRC_API_VER(0, 0, 0)

#ifndef MRC_API_VER_USED
#define MRC_API_VER_USED MRC_API_CURRENT_VERSION
#elif MRC_API_VER_USED == MRC_API_VER_LATEST
#undef MRC_API_VER_USED
#define MRC_API_VER_USED MRC_API_CURRENT_VERSION
#endif

#if MRC_API_VER_USED > MRC_API_CURRENT_VERSION
#error "MRC_API_VER_USED is newer than MRC_API_CURRENT_VERSION"
#elif MRC_API_VER_USED < MRC_API_LAST_SUPPORTED_VERSION
#error "MRC_API_VER_USED is older than MRC_API_LAST_SUPPORTED_VERSION"
#elif MRC_API_VER_USED == MRC_API_LAST_SUPPORTED_VERSION
#warning "MRC_API_VER_USED is the oldest supported version and may be dropped"
#endif

/* Vendor (provider) extensions are versioned separately, same encoding.
 * libmrc has no vendor extensions; it reports 1.0.0. */
#define MRC_VENDOR_API_CURRENT_VERSION MRC_API_VER(1, 0, 0)
#define MRC_VENDOR_API_LAST_SUPPORTED_VERSION MRC_API_VER(0, 0, 0)

#ifndef MRC_VENDOR_API_VER_USED
#define MRC_VENDOR_API_VER_USED MRC_VENDOR_API_CURRENT_VERSION
#elif MRC_VENDOR_API_VER_USED == MRC_API_VER_LATEST
#undef MRC_VENDOR_API_VER_USED
#define MRC_VENDOR_API_VER_USED MRC_VENDOR_API_CURRENT_VERSION
#endif

#if MRC_VENDOR_API_VER_USED > MRC_VENDOR_API_CURRENT_VERSION
#error "MRC_VENDOR_API_VER_USED is newer than MRC_VENDOR_API_CURRENT_VERSION"
#elif MRC_VENDOR_API_VER_USED < MRC_VENDOR_API_LAST_SUPPORTED_VERSION
#error "MRC_VENDOR_API_VER_USED is older than MRC_VENDOR_API_LAST_SUPPORTED_VERSION"
#elif MRC_VENDOR_API_VER_USED == MRC_VENDOR_API_LAST_SUPPORTED_VERSION
#warning "MRC_VENDOR_API_VER_USED is the oldest supported version and may be dropped"
#endif

#endif /* LIBMRC_MRC_API_VER_H */
