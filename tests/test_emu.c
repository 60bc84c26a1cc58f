/*
 * test_emu.c - Check tests for the zoned-device emulator (fs/zdev_emu*.c) and the zlfs-emu
 * command: one program, a test case per concern, each in its own file (test_emu_rules.c,
 * test_emu_durability.c, test_emu_hostcrash.c, test_emu_log.c, test_emu_misc.c,
 * test_emu_timing.c).
 * May call: emu_testutil.h.
 */
#include "emu_testutil.h"

int main(void)
{
	Suite *s = suite_create("emu");

	emu_rules_tests(s);
	emu_durability_tests(s);
	emu_hostcrash_tests(s);
	emu_log_tests(s);
	emu_misc_tests(s);
	emu_timing_tests(s);
	return tu_run_suite(s);
}
