/*
 * A program outside the tree built against an installed libmrc (tests/packaging): it includes
 * the OCP headers as OCP programs do (<mrc.h>, <mrc_ctl.h>) and checks that the library it
 * runs with is the one its headers describe. Prints "mrc <library version> api <major.minor.sub>".
 */
#include <mrc.h>
#include <mrc_ctl.h>
#include <mrc/version.h>

#include <stdio.h>
#include <string.h>

static unsigned part(uint32_t v, int offset, uint32_t mask) { return (v >> offset) & mask; }

int main(void)
{
	uint32_t current = 0, last = 0, vendor = 0, last_vendor = 0;
	mrc_query_version(&current, &last, &vendor, &last_vendor);
	if (current != MRC_API_CURRENT_VERSION || vendor != MRC_VENDOR_API_CURRENT_VERSION) {
		fprintf(stderr, "consumer: library API 0x%08x vendor 0x%08x, headers 0x%08x 0x%08x\n",
			current, vendor, (uint32_t)MRC_API_CURRENT_VERSION,
			(uint32_t)MRC_VENDOR_API_CURRENT_VERSION);
		return 1;
	}
	const char *lib = mrc_library_version();
	if (strcmp(lib, MRC_LIBRARY_VERSION) != 0) {
		fprintf(stderr, "consumer: library %s, headers %s\n", lib, MRC_LIBRARY_VERSION);
		return 1;
	}
	printf("mrc %s api %u.%u.%u\n", lib, part(current, MRC_API_VER_MAJOR_OFFSET, 0xff),
	       part(current, MRC_API_VER_MINOR_OFFSET, 0xff),
	       part(current, MRC_API_VER_SUBMINOR_OFFSET, 0xffff));
	return 0;
}
